# Ragged attention kernels (flash + reference) as the static library petal_attention_cuda, its
# GPU tests (label gpu), CPU emulation / fragment-layout tests, and a micro-benchmark binary that
# CTest does not run. Included by kernels_cuda.cmake when PETAL_CUDA is ON.
set(PETAL_ATTN_DIR ${CMAKE_CURRENT_LIST_DIR})
add_library(petal_attention_cuda STATIC
  ${PETAL_ATTN_DIR}/attention_plan.cu
  ${PETAL_ATTN_DIR}/attention_flash.cu
  ${PETAL_ATTN_DIR}/attention_flash_d32.cu
  ${PETAL_ATTN_DIR}/attention_flash_d64.cu
  ${PETAL_ATTN_DIR}/attention_flash_d128.cu
  ${PETAL_ATTN_DIR}/attention_reference.cu
  ${PETAL_ATTN_DIR}/attention_cudnn.cc
  ${PETAL_ATTN_DIR}/attention_cudnn_meta.cu)
target_link_libraries(petal_attention_cuda PUBLIC petal_common CUDA::cudart)

# The cuDNN backend (attention_cudnn.h) needs the cuDNN frontend headers (scripts/setup.sh puts
# them in .deps/) and libcudnn with cudnn.h (shipped with the CUDA toolkit here). Without either
# the backend compiles as a stub that reports itself unavailable.
find_path(PETAL_CUDNN_FRONTEND_INCLUDE cudnn_frontend.h
          PATHS ${CMAKE_SOURCE_DIR}/.deps/cudnn_frontend-1.32.0/include NO_DEFAULT_PATH)
find_path(PETAL_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
find_library(PETAL_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
if(PETAL_CUDNN_FRONTEND_INCLUDE AND PETAL_CUDNN_INCLUDE AND PETAL_CUDNN_LIBRARY)
  message(STATUS "cuDNN attention backend: ON (${PETAL_CUDNN_LIBRARY})")
  target_compile_definitions(petal_attention_cuda PRIVATE PETAL_HAVE_CUDNN=1)
  target_include_directories(petal_attention_cuda SYSTEM PRIVATE ${PETAL_CUDNN_FRONTEND_INCLUDE}
                             ${PETAL_CUDNN_INCLUDE})
  # The frontend header also carries NVRTC-compiled experimental engines, hence nvrtc.
  target_link_libraries(petal_attention_cuda PUBLIC ${PETAL_CUDNN_LIBRARY} CUDA::nvrtc)
else()
  message(STATUS "cuDNN attention backend: OFF (frontend headers or libcudnn not found)")
endif()
target_include_directories(petal_attention_cuda PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_compile_options(petal_attention_cuda PRIVATE
                       $<$<COMPILE_LANGUAGE:CUDA>:-O3 -lineinfo>)
# Consumers of the CUDA ops library get attention too.
if(TARGET petal_kernels_cuda)
  target_link_libraries(petal_kernels_cuda PUBLIC petal_attention_cuda)
endif()

# CPU-only: emulates ldmatrix/mma to check the kernel's fragment layouts (runs in CI).
petal_test(attention_fragments_test
           SOURCES ${CMAKE_SOURCE_DIR}/tests/ops/attention_fragments_test.cc
           LIBS petal_common)
# CPU-only: the real kernels compiled as host code on an emulator (runs in CI). Deliberately not
# linked with petal_attention_cuda: its device-kernel stubs share the kernels' mangled names.
petal_test(attention_emulation_test
           SOURCES ${CMAKE_SOURCE_DIR}/tests/ops/attention_emulation_test.cc
           LIBS petal_kernels_cpu petal_common CUDA::cudart)
petal_test(attention_gpu_test SOURCES ${CMAKE_SOURCE_DIR}/tests/ops/attention_gpu_test.cu
           ${CMAKE_SOURCE_DIR}/tests/ops/attention_cudnn_gpu_test.cu
           ${CMAKE_SOURCE_DIR}/tests/ops/attention_ptx_gpu_test.cu
           ${CMAKE_SOURCE_DIR}/tests/ops/attention_strides_gpu_test.cu
           ${CMAKE_SOURCE_DIR}/tests/ops/attention_qknorm_gpu_test.cu
           LIBS petal_attention_cuda petal_kernels_cuda petal_kernels_cpu LABELS gpu)

# Not registered with CTest: run by hand on the GPU machine (see docs/attention.md).
add_executable(petal_attention_bench ${PETAL_ATTN_DIR}/attention_bench.cu)
target_link_libraries(petal_attention_bench PRIVATE petal_attention_cuda)
set_target_properties(petal_attention_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                      ${CMAKE_BINARY_DIR}/bin)
if(TARGET attention_emulation_test)
  # The kernels' `#pragma unroll` means nothing to the host compiler.
  target_compile_options(attention_emulation_test PRIVATE -Wno-unknown-pragmas -Wno-attributes)
endif()
