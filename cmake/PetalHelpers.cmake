# petal_test(NAME SOURCES ... LIBS ... [LABELS ...] [ENV VAR=VALUE ...] [NEEDS_PETAL]): one
# GoogleTest binary registered with CTest. Tests labelled `gpu` need a CUDA device; CI runs
# `ctest -LE gpu`. NEEDS_PETAL: the test runs the `petal` binary, whose path it gets as the macro
# PETAL_BIN (and the binary is built first). ENV: more environment for the test.
function(petal_test name)
  if(NOT PETAL_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "NEEDS_PETAL" "" "SOURCES;LIBS;LABELS;ENV" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set(labels unit ${ARG_LABELS})
  set(env PETAL_SOURCE_DIR=${CMAKE_SOURCE_DIR} ${ARG_ENV})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" ENVIRONMENT "${env}")
  if(ARG_NEEDS_PETAL)
    target_compile_definitions(${name} PRIVATE PETAL_BIN="$<TARGET_FILE:petal>")
    add_dependencies(${name} petal)
  endif()
endfunction()

# petal_py_test(NAME SCRIPT [ARGS ...] [TIMEOUT S] [LABELS ...]): a Python test script run with
# PETAL_PYTHON_EXE (the checkout's .venv when it has one; see the top-level CMakeLists.txt) from
# the source root. Exit code 77 means skipped (a package or model it needs is missing). LABELS
# default to `unit;e2e`, TIMEOUT to 120 s. Nothing is registered without tests or a Python.
function(petal_py_test name)
  if(NOT PETAL_TESTS OR NOT PETAL_PYTHON_EXE)
    return()
  endif()
  cmake_parse_arguments(ARG "" "SCRIPT;TIMEOUT" "ARGS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit e2e)
  endif()
  add_test(NAME ${name} COMMAND ${PETAL_PYTHON_EXE} ${ARG_SCRIPT} ${ARG_ARGS}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" SKIP_RETURN_CODE 77
                       TIMEOUT ${ARG_TIMEOUT} ENVIRONMENT "PETAL_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endfunction()
