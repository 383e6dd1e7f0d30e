include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/RunnerPch.cmake)  # runner_targets_under, runner_is_test_executable
# Test executables compile at -O1, not the build type's -O3. Half of a clean build's
# compile time is the ~90 test translation units (GoogleTest and LibTorch templates,
# 20-30 s each on one core); their own code only sets up inputs and checks outputs,
# while the code under test sits in the libraries and plugins, which keep -O3. Measured
# per file with the precompiled header: 9-27 % less time at -O1 (-O0 saves little more).
# The test executables' precompiled header (runner_torch_pch_test, RunnerPch.cmake) links
# GoogleTest like them, so it is compiled at -O1 too, as GCC's check of it expects.
# RUNNER_TEST_OPT=OFF compiles them with the build type's flags.
option(RUNNER_TEST_OPT "compile test executables at -O1 (the code under test keeps the build type's flags)" ON)

# Called once, after every target exists (the end of the top-level CMakeLists.txt).
function(runner_test_flags)
  if(NOT RUNNER_TEST_OPT OR NOT CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$"
     OR NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    return()
  endif()
  runner_targets_under(${CMAKE_SOURCE_DIR} all)
  set(n 0)
  foreach(t ${all})
    runner_is_test_executable(${t} test)
    if(test)
      # After the build type's flags on the command line, so it is the -O that counts.
      target_compile_options(${t} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O1>)
      math(EXPR n "${n} + 1")
    endif()
  endforeach()
  message(STATUS "runner: ${n} test executables compile at -O1 (RUNNER_TEST_OPT)")
endfunction()
