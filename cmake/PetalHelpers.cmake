# petal_test(NAME SOURCES ... LIBS ... [LABELS ...]): one GoogleTest binary registered with CTest.
# Tests labelled `gpu` need a CUDA device; CI runs `ctest -LE gpu`.
function(petal_test name)
  if(NOT PETAL_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set(labels unit ${ARG_LABELS})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" ENVIRONMENT "PETAL_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endfunction()
