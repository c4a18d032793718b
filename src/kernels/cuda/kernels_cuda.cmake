# petal_kernels_cuda: the bf16 CUDA ops (ops.h), the cuBLASLt GEMM (gemm.h) and, when present,
# the attention kernels (attention.cmake, owned separately, adds its sources to this target).
# Included from src/kernels/CMakeLists.txt when PETAL_CUDA is on. No --use_fast_math: the norms
# and softmax need IEEE expf/erff/division; kernels use fast intrinsics explicitly where safe.
add_library(petal_kernels_cuda STATIC
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/qk_norm_rope.cu
  ${CMAKE_CURRENT_LIST_DIR}/pool.cu
  ${CMAKE_CURRENT_LIST_DIR}/dense_rows.cu
  ${CMAKE_CURRENT_LIST_DIR}/gemm.cc
  ${CMAKE_CURRENT_LIST_DIR}/gemm_tune.cc
  ${CMAKE_CURRENT_LIST_DIR}/gemm_flush.cu
  ${CMAKE_CURRENT_LIST_DIR}/gemm_smallm.cu
  ${CMAKE_CURRENT_LIST_DIR}/gemm_cluster.cu
  ${CMAKE_CURRENT_LIST_DIR}/fp8_quant.cu
  ${CMAKE_CURRENT_LIST_DIR}/l2_prefetch.cu)
target_include_directories(petal_kernels_cuda PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(petal_kernels_cuda PUBLIC petal_common CUDA::cudart CUDA::cublasLt)
target_compile_options(petal_kernels_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-O3 -lineinfo>)

include(${CMAKE_CURRENT_LIST_DIR}/attention.cmake OPTIONAL)

# GEMM micro-benchmark (model shapes, heuristic vs tuned, whole-model graphs). Not registered with
# CTest: run by hand on the GPU machine (see docs/kernels.md).
add_executable(petal_gemm_bench ${CMAKE_CURRENT_LIST_DIR}/gemm_bench.cc)
target_link_libraries(petal_gemm_bench PRIVATE petal_kernels_cuda)
set_target_properties(petal_gemm_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

if(PETAL_TESTS)
  add_subdirectory(${CMAKE_SOURCE_DIR}/tests/ops ${CMAKE_BINARY_DIR}/tests/ops)
endif()
