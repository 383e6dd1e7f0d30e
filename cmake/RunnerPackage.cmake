# The Runner CMake package, for plugins built outside this tree (see
# cmake/RunnerConfig.cmake.in and examples/external_plugin):
#   build tree:  -DRunner_DIR=<this build directory>
#   install:     cmake --install build --prefix P, then -DRunner_DIR=P/lib/cmake/Runner
# (or CMAKE_PREFIX_PATH=P). Both bring runner::runner_api, LibTorch and runner_add_plugin().
set(RUNNER_TORCH_CUDA_ARCH_LIST "${TORCH_CUDA_ARCH_LIST}")
if(NOT RUNNER_TORCH_CUDA_ARCH_LIST)
  set(RUNNER_TORCH_CUDA_ARCH_LIST "$ENV{TORCH_CUDA_ARCH_LIST}")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/RunnerConfig.cmake.in ${CMAKE_BINARY_DIR}/RunnerConfig.cmake @ONLY)
export(TARGETS runner_api runner_records NAMESPACE runner:: FILE ${CMAKE_BINARY_DIR}/RunnerTargets.cmake)

target_include_directories(runner_api PUBLIC $<INSTALL_INTERFACE:include>)
target_include_directories(runner_records PUBLIC $<INSTALL_INTERFACE:include>)
install(TARGETS runner_api runner_records EXPORT RunnerTargets LIBRARY DESTINATION lib)
install(EXPORT RunnerTargets NAMESPACE runner:: DESTINATION lib/cmake/Runner)
install(FILES ${CMAKE_BINARY_DIR}/RunnerConfig.cmake DESTINATION lib/cmake/Runner)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/runner/api/include/runner DESTINATION include)
