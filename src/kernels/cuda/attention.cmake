# Ragged attention kernels (flash + reference) as the static library petal_attention_cuda, its
# GPU test (label gpu) and a micro-benchmark binary that CTest does not run. Included by
# src/kernels (via kernels_cuda.cmake) when PETAL_CUDA is ON.
set(PETAL_ATTN_DIR ${CMAKE_CURRENT_LIST_DIR})
# CMake 3.25 does not know nvcc's C++20 flag; nvcc 12+ accepts -std=c++20 (same workaround as
# kernels_cuda.cmake, repeated so this file also works on its own).
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
add_library(petal_attention_cuda STATIC
  ${PETAL_ATTN_DIR}/attention_plan.cu
  ${PETAL_ATTN_DIR}/attention_flash.cu
  ${PETAL_ATTN_DIR}/attention_reference.cu)
target_link_libraries(petal_attention_cuda PUBLIC petal_common CUDA::cudart)
target_include_directories(petal_attention_cuda PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_compile_options(petal_attention_cuda PRIVATE
                       $<$<COMPILE_LANGUAGE:CUDA>:-O3 -lineinfo -Xptxas=-warn-spills>)
# Consumers of the CUDA ops library get attention too.
if(TARGET petal_kernels_cuda)
  target_link_libraries(petal_kernels_cuda PUBLIC petal_attention_cuda)
endif()

petal_test(attention_gpu_test SOURCES ${CMAKE_SOURCE_DIR}/tests/ops/attention_gpu_test.cu
           LIBS petal_attention_cuda petal_kernels_cpu LABELS gpu)

# Not registered with CTest: run by hand on the GPU machine (see docs/attention.md).
add_executable(petal_attention_bench ${PETAL_ATTN_DIR}/attention_bench.cu)
target_link_libraries(petal_attention_bench PRIVATE petal_attention_cuda)
set_target_properties(petal_attention_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
