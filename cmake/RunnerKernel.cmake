include_guard(GLOBAL)
# runner_add_kernel: one kernel folder of kernels/ (adamw, rmsnorm, rope, swiglu,
# cross_entropy) laid out as: <name>.hpp (the op, autograd-capable where it has a
# backward, and its tensor-op reference, which is also the CPU path), <name>.cpp
# (dispatch and reference), <name>.cu + <name>_launch.hpp (the kernels, no LibTorch
# headers, built only with CUDA) and <name>_test.cpp (reference against the spec on
# the CPU; kernel against reference on the GPU, skipped without one).
#
# runner_add_kernel(<name> SOURCES a.cpp ... CUDA_SOURCES k.cu ... TESTS t.cpp ...
#                   [CUDA_FLAGS flag ...] [TEST_CUDA_SOURCES p.cu ...])
# makes the static library kernels_<name> (linked by plugins) and, with TESTS, the
# GoogleTest executable kernels_<name>_tests (ctest label "kernels"). CUDA_FLAGS are extra
# nvcc flags of the library's CUDA sources; TEST_CUDA_SOURCES are test-only kernels built
# into the test executable (with CUDA only).
include(GoogleTest)
function(runner_add_kernel name)
  cmake_parse_arguments(K "" "" "SOURCES;CUDA_SOURCES;TESTS;CUDA_FLAGS;TEST_CUDA_SOURCES" ${ARGN})
  set(target kernels_${name})
  set(sources ${K_SOURCES})
  if(RUNNER_WITH_CUDA)
    list(APPEND sources ${K_CUDA_SOURCES})
  endif()
  add_library(${target} STATIC ${sources})
  target_include_directories(${target} PUBLIC ${CMAKE_SOURCE_DIR}/kernels)
  target_link_libraries(${target} PUBLIC kernels_common)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(RUNNER_WITH_CUDA)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo ${K_CUDA_FLAGS}>)
    target_link_libraries(${target} PRIVATE CUDA::cudart)
  endif()
  if(K_TESTS)
    add_executable(${target}_tests ${K_TESTS})
    target_link_libraries(${target}_tests PRIVATE ${target} GTest::gtest_main)
    if(RUNNER_WITH_CUDA AND K_TEST_CUDA_SOURCES)
      target_sources(${target}_tests PRIVATE ${K_TEST_CUDA_SOURCES})
      target_compile_options(${target}_tests PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo ${K_CUDA_FLAGS}>)
      target_link_libraries(${target}_tests PRIVATE CUDA::cudart)
    endif()
    gtest_discover_tests(${target}_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "kernels")
  endif()
endfunction()

