# petal_kernels_cuda: the bf16 CUDA ops (ops.h), the cuBLASLt GEMM (gemm.h) and, when present,
# the attention kernels (attention.cmake, owned separately, adds its sources to this target).
# Included from src/kernels/CMakeLists.txt when PETAL_CUDA is on. No --use_fast_math: the norms
# and softmax need IEEE expf/erff/division; kernels use fast intrinsics explicitly where safe.
add_library(petal_kernels_cuda STATIC
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/qk_norm_rope.cu
  ${CMAKE_CURRENT_LIST_DIR}/rms_fold.cu
  ${CMAKE_CURRENT_LIST_DIR}/pool.cu
  ${CMAKE_CURRENT_LIST_DIR}/token_norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/dense_rows.cu
  ${CMAKE_CURRENT_LIST_DIR}/sparse_pool.cu
  ${CMAKE_CURRENT_LIST_DIR}/sparse_compact.cu
  ${CMAKE_CURRENT_LIST_DIR}/gemm.cc
  ${CMAKE_CURRENT_LIST_DIR}/gemm_tune.cc
  ${CMAKE_CURRENT_LIST_DIR}/gemm_chain.cc
  ${CMAKE_CURRENT_LIST_DIR}/gemm_flush.cu
  ${CMAKE_CURRENT_LIST_DIR}/gemm_smallm.cu
  ${CMAKE_CURRENT_LIST_DIR}/gemm_cluster.cu
  ${CMAKE_CURRENT_LIST_DIR}/gemm_wgmma.cu
  ${CMAKE_CURRENT_LIST_DIR}/gemm_cutlass.cc
  ${CMAKE_CURRENT_LIST_DIR}/gemm_fused.cc
  ${CMAKE_CURRENT_LIST_DIR}/fp8_quant.cu)
target_include_directories(petal_kernels_cuda PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(petal_kernels_cuda PUBLIC petal_common CUDA::cudart CUDA::cublasLt)
target_compile_options(petal_kernels_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-O3 -lineinfo>)

# CUTLASS Hopper GEMM candidates (gemm_cutlass.h): only with the pinned headers (scripts/setup.sh
# step 2c; docs/dependencies.md) and an sm_90a target. Each tile width is its own translation
# unit, compiled for sm_90a alone (the kernels use wgmma and TMA), since each takes minutes.
find_path(PETAL_CUTLASS_INCLUDE cutlass/cutlass.h
          PATHS ${CMAKE_SOURCE_DIR}/.deps/cutlass-4.2.0.0/include NO_DEFAULT_PATH)
set(petal_sm90a OFF)
foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
  if(arch MATCHES "^90a")
    set(petal_sm90a ON)
  endif()
endforeach()
# The wgmma GEMM (gemm_wgmma.h) has a body only in its sm_90a image: the host side offers it only
# when that image is built.
if(petal_sm90a)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/gemm_wgmma.cu PROPERTIES
                              COMPILE_DEFINITIONS PETAL_HAVE_SM90A=1)
endif()
if(PETAL_CUTLASS_INCLUDE AND petal_sm90a)
  # Built with GDC (see below): the pingpong GEMMs and the fused GEMMs (persistent scheduler).
  set(petal_gdc_sources
    ${CMAKE_CURRENT_LIST_DIR}/gemm_cutlass_p64.cu
    ${CMAKE_CURRENT_LIST_DIR}/gemm_cutlass_p128.cu
    ${CMAKE_CURRENT_LIST_DIR}/gemm_fused_swiglu_c256x1.cu
    ${CMAKE_CURRENT_LIST_DIR}/gemm_fused_swiglu_c256x2.cu
    ${CMAKE_CURRENT_LIST_DIR}/gemm_fused_swiglu_p256x1.cu
    ${CMAKE_CURRENT_LIST_DIR}/gemm_fused_swiglu_p128x1.cu
    ${CMAKE_CURRENT_LIST_DIR}/gemm_fused_qkv_rope_c256x1.cu
    ${CMAKE_CURRENT_LIST_DIR}/gemm_fused_qkv_rope_c256x2.cu
    ${CMAKE_CURRENT_LIST_DIR}/gemm_fused_qkv_rope_p128x1.cu
    ${CMAKE_CURRENT_LIST_DIR}/gemm_fused_bias_gelu_c256x1.cu
    ${CMAKE_CURRENT_LIST_DIR}/gemm_fused_bias_gelu_p128x1.cu)
  add_library(petal_gemm_cutlass STATIC
    ${CMAKE_CURRENT_LIST_DIR}/gemm_cutlass_t64.cu
    ${CMAKE_CURRENT_LIST_DIR}/gemm_cutlass_t128.cu
    ${petal_gdc_sources})
  set_target_properties(petal_gemm_cutlass PROPERTIES CUDA_ARCHITECTURES 90a-real)
  target_include_directories(petal_gemm_cutlass PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_include_directories(petal_gemm_cutlass SYSTEM PRIVATE ${PETAL_CUTLASS_INCLUDE}
                             ${PETAL_CUTLASS_INCLUDE}/../util/include)
  target_link_libraries(petal_gemm_cutlass PRIVATE CUDA::cudart)
  target_compile_options(petal_gemm_cutlass PRIVATE -O3)
  # Programmatic dependent launch inside these kernels (a wait before the first load, a
  # release after the last main loop); no-ops unless a launch carries the attribute (PETAL_PDL=1).
  # Pingpong GEMMs and the fused GEMMs (persistent scheduler) only: CUTLASS 4.2's stream-K
  # scheduler (the cooperative t64/t128 kernels) does not compile with it, so gemm_cutlass.cc never
  # launches those with the attribute.
  set_source_files_properties(${petal_gdc_sources} PROPERTIES
                              COMPILE_DEFINITIONS CUTLASS_ENABLE_GDC_FOR_SM90=1)
  target_link_libraries(petal_kernels_cuda PRIVATE petal_gemm_cutlass)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/gemm_cutlass.cc
                              ${CMAKE_CURRENT_LIST_DIR}/gemm_fused.cc PROPERTIES
                              COMPILE_DEFINITIONS PETAL_HAVE_CUTLASS=1)
  message(STATUS "CUTLASS GEMM candidates: on (${PETAL_CUTLASS_INCLUDE})")
else()
  message(STATUS "CUTLASS GEMM candidates: off (headers: ${PETAL_CUTLASS_INCLUDE}, sm_90a: ${petal_sm90a})")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/attention.cmake OPTIONAL)

# GEMM micro-benchmark (model shapes, heuristic vs tuned, whole-model graphs). Not registered with
# CTest: run by hand on the GPU machine (see docs/kernels.md).
add_executable(petal_gemm_bench ${CMAKE_CURRENT_LIST_DIR}/gemm_bench.cc)
target_link_libraries(petal_gemm_bench PRIVATE petal_kernels_cuda)
set_target_properties(petal_gemm_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

if(PETAL_TESTS)
  add_subdirectory(${CMAKE_SOURCE_DIR}/tests/ops ${CMAKE_BINARY_DIR}/tests/ops)
endif()
