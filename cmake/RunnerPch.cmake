include_guard(GLOBAL)
# LibTorch's tensor headers precompiled once. <torch/types.h> (ATen with every operator,
# autograd) takes most of a translation unit's compile time here (about 10 of a plugin's
# 15-30 s), and most targets include it or more; with CI building everything on two
# cores, reading it once per kind of target instead of ~170 times is the biggest cut of
# the build. Not <torch/torch.h> for libraries and programs: its header (twice the size)
# costs more to load than it saves in files that use only tensors; measured per file,
# <torch/types.h> was never slower than no precompiled header, <torch/torch.h> up to twice
# as slow. Test files are the exception (runner_torch_pch_test, below).
#
# GCC accepts a precompiled header only when the code-model flags match, so there are
# two: -fPIC for libraries (shared, module, static and object, all position-independent
# here) and -fPIE for executables; a third, with more in it, serves test executables
# (below). runner_torch_pch() gives one of them to every target that links LibTorch
# (directly or through runner_api/runner_core/the kernels), reusing it (REUSE_FROM), so
# each target's translation units start from it already read. Sources
# that include no LibTorch skip it (below), CUDA sources too (nvcc compiles them; they
# include no LibTorch). -Winvalid-pch makes a rejected header a warning in the build log
# instead of a silent slow path. RUNNER_PCH=OFF builds as before.
option(RUNNER_PCH "precompile LibTorch's headers once for the targets that use them" ON)

function(runner_torch_pch_hosts)
  add_library(runner_torch_pch_lib OBJECT ${CMAKE_SOURCE_DIR}/cmake/pch/torch_pch.cpp)
  target_link_libraries(runner_torch_pch_lib PRIVATE ${TORCH_LIBRARIES})
  target_precompile_headers(runner_torch_pch_lib PRIVATE <torch/types.h>)
  set_target_properties(runner_torch_pch_lib PROPERTIES POSITION_INDEPENDENT_CODE ON)
  add_executable(runner_torch_pch_exe ${CMAKE_SOURCE_DIR}/cmake/pch/torch_pch.cpp)
  target_link_libraries(runner_torch_pch_exe PRIVATE ${TORCH_LIBRARIES})
  target_precompile_headers(runner_torch_pch_exe PRIVATE <torch/types.h>)
  # Test executables whose files read LibTorch's API (runner_torch_pch picks them):
  # GoogleTest and the whole <torch/torch.h> too. Measured per file at -O1
  # (RunnerTestFlags.cmake), it cuts such a file's compile by a third to a half
  # (transformer_lm_test.cpp 18 -> 11.5 s, bucketed_test.cpp 20.5 -> 10 s). Linking
  # GoogleTest gives the header its definitions (GTEST_HAS_PTHREAD), which GCC requires
  # to match the files that read it.
  add_executable(runner_torch_pch_test ${CMAKE_SOURCE_DIR}/cmake/pch/torch_pch.cpp)
  target_link_libraries(runner_torch_pch_test PRIVATE ${TORCH_LIBRARIES} GTest::gtest)
  target_precompile_headers(runner_torch_pch_test PRIVATE <torch/types.h> <torch/torch.h> <gtest/gtest.h>)
endfunction()

# Every target defined under DIR (recursively).
function(runner_targets_under dir out)
  get_property(found DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(d ${subdirs})
    runner_targets_under(${d} sub)
    list(APPEND found ${sub})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# Whether TARGET is a test executable (it links GoogleTest).
function(runner_is_test_executable target out)
  get_target_property(type ${target} TYPE)
  get_target_property(libs ${target} LINK_LIBRARIES)
  if(type STREQUAL "EXECUTABLE" AND libs MATCHES "GTest::")
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# Every target under DIR (recursively) that compiles C++ against LibTorch.
function(runner_torch_targets dir out)
  set(found)
  runner_targets_under(${dir} targets)
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY|STATIC_LIBRARY|OBJECT_LIBRARY)$"
       OR t MATCHES "^runner_torch_pch_")
      continue()
    endif()
    get_target_property(libs ${t} LINK_LIBRARIES)
    get_target_property(sources ${t} SOURCES)
    if(NOT libs OR NOT sources)
      continue()
    endif()
    set(cxx FALSE)
    foreach(s ${sources})
      if(s MATCHES "\\.(cpp|cc|cxx)$")
        set(cxx TRUE)
      endif()
    endforeach()
    # runner_records and runner_history stay free of LibTorch: they link none of these.
    if(cxx AND libs MATCHES "(^|;)(torch|runner_api|runner_core|runner_config|kernels_[a-z_]+|[a-z_]+_obj|runner_test_gloo)(;|$)")
      list(APPEND found ${t})
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# Whether FILE includes a header whose include line matches PATTERN (a regex), directly
# or through the project's own headers (quoted includes resolved beside the file, in the
# public headers, kernels/ and the host). KIND names the question in the cache.
function(runner_includes file kind pattern out)
  get_property(known GLOBAL PROPERTY "runner_${kind}_include:${file}" SET)
  if(known)
    get_property(answer GLOBAL PROPERTY "runner_${kind}_include:${file}")
    set(${out} ${answer} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL PROPERTY "runner_${kind}_include:${file}" FALSE)  # a cycle reads "no"
  set(answer FALSE)
  if(EXISTS ${file})
    file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include")
    get_filename_component(here ${file} DIRECTORY)
    foreach(line ${includes})
      if(line MATCHES "${pattern}")
        set(answer TRUE)
        break()
      endif()
      if(line MATCHES "\"([^\"]+)\"")
        set(name ${CMAKE_MATCH_1})
        foreach(base ${here} ${CMAKE_SOURCE_DIR}/runner/api/include ${CMAKE_SOURCE_DIR}/kernels
                ${CMAKE_SOURCE_DIR}/runner/host ${CMAKE_SOURCE_DIR}/tests/support)
          if(EXISTS ${base}/${name})
            runner_includes(${base}/${name} ${kind} "${pattern}" nested)
            if(nested)
              set(answer TRUE)
            endif()
            break()
          endif()
        endforeach()
        if(answer)
          break()
        endif()
      endif()
    endforeach()
  endif()
  set_property(GLOBAL PROPERTY "runner_${kind}_include:${file}" ${answer})
  set(${out} ${answer} PARENT_SCOPE)
endfunction()

# A translation unit without LibTorch compiles faster without the header than with it
# (loading it costs more than such a file's own parse), so those skip it.
function(runner_includes_torch file out)
  runner_includes(${file} torch "<(torch|ATen|c10)/" answer)
  set(${out} ${answer} PARENT_SCOPE)
endfunction()

# LibTorch beyond tensors (modules, optimizers, the whole API): what the test header adds.
function(runner_includes_torch_api file out)
  runner_includes(${file} torch_api "<torch/(torch|all|nn|optim|data|serialize|script|csrc/api)" answer)
  set(${out} ${answer} PARENT_SCOPE)
endfunction()

# Called once, after every target exists (the end of the top-level CMakeLists.txt).
function(runner_torch_pch)
  if(NOT RUNNER_PCH OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  runner_torch_pch_hosts()
  runner_torch_targets(${CMAKE_SOURCE_DIR} targets)
  set(n_tus 0)
  set(n_tests 0)
  foreach(t ${targets})
    get_target_property(sources ${t} SOURCES)
    get_target_property(source_dir ${t} SOURCE_DIR)
    set(torch_tus 0)
    set(api_tus 0)
    foreach(s ${sources})
      if(s MATCHES "^\\$<")
        continue()
      endif()
      cmake_path(ABSOLUTE_PATH s BASE_DIRECTORY ${source_dir})
      set(skip TRUE)
      if(s MATCHES "\\.(cpp|cc|cxx)$")
        runner_includes_torch(${s} torch_tu)
        if(torch_tu)
          set(skip FALSE)
          math(EXPR torch_tus "${torch_tus} + 1")
          runner_includes_torch_api(${s} api_tu)
          if(api_tu)
            math(EXPR api_tus "${api_tus} + 1")
          endif()
        endif()
      endif()
      if(skip)
        set_source_files_properties(${s} TARGET_DIRECTORY ${t} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endforeach()
    math(EXPR n_tus "${n_tus} + ${torch_tus}")
    get_target_property(type ${t} TYPE)
    runner_is_test_executable(${t} test)
    # The test header where at least half of a test executable's files read LibTorch's
    # API: measured over a clean build on two cores, those files compile in 44 % less
    # time with it, while files that use only tensors take 47 % more (its 740 MB load).
    math(EXPR api_share "2 * ${api_tus} - ${torch_tus}")
    if(test AND torch_tus GREATER 0 AND api_share GREATER_EQUAL 0)
      target_precompile_headers(${t} REUSE_FROM runner_torch_pch_test)
      math(EXPR n_tests "${n_tests} + 1")
    elseif(type STREQUAL "EXECUTABLE")
      target_precompile_headers(${t} REUSE_FROM runner_torch_pch_exe)
    else()
      target_precompile_headers(${t} REUSE_FROM runner_torch_pch_lib)
    endif()
    target_compile_options(${t} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Winvalid-pch>)
  endforeach()
  list(LENGTH targets n)
  message(STATUS "runner: LibTorch's headers precompiled for ${n_tus} translation units of ${n} targets, "
                 "${n_tests} of them test executables that read its whole API (RUNNER_PCH)")
endfunction()
