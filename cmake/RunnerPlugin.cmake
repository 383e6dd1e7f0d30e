# runner_add_plugin(<kind> <name> SOURCES ... [LIBS ...] [TESTS test.cpp ...] [TEST_FIXTURE f])
#
# Builds plugins/<kind>/<name> into ${RUNNER_PLUGIN_DIR}/<kind>_<name>.so, where
# the runner finds it. The sources also form an object library <kind>_<name>_obj
# so the plugin's tests can call its classes directly; TESTS become one GoogleTest
# executable registered with ctest; TEST_FIXTURE names a ctest fixture its tests require
# (e.g. a test that writes the files they read).
include(GoogleTest)

# tests/support/gloo_ranks.hpp: ranks as threads with their own Gloo process group,
# for the tests of DDP strategies, sharded optimizers and collective benchmarks.
add_library(runner_test_gloo STATIC ${CMAKE_SOURCE_DIR}/tests/support/gloo_ranks.cpp)
target_link_libraries(runner_test_gloo PUBLIC runner_api)
target_include_directories(runner_test_gloo PRIVATE ${RUNNER_GLOO_INCLUDE})
target_compile_definitions(runner_test_gloo PRIVATE USE_C10D_GLOO=1)

function(runner_add_plugin kind name)
  cmake_parse_arguments(P "" "TEST_FIXTURE" "SOURCES;LIBS;TESTS" ${ARGN})
  set(target ${kind}_${name})
  add_library(${target}_obj OBJECT ${P_SOURCES})
  # Plugins see the public API only (runner_api); the host's internals stay out of reach.
  target_link_libraries(${target}_obj PUBLIC runner_api ${P_LIBS})
  add_library(${target} MODULE $<TARGET_OBJECTS:${target}_obj>)
  target_link_libraries(${target} PRIVATE runner_api ${P_LIBS})
  set_target_properties(${target} PROPERTIES PREFIX "" OUTPUT_NAME ${target}
                        LIBRARY_OUTPUT_DIRECTORY ${RUNNER_PLUGIN_DIR})
  add_dependencies(runner_plugins ${target})
  if(P_TESTS)
    add_executable(${target}_tests ${P_TESTS})
    # Tests may use host internals (registry, option resolution: runner_core's headers)
    # and tests/support.
    target_include_directories(${target}_tests PRIVATE ${CMAKE_SOURCE_DIR}/tests/support)
    target_link_libraries(${target}_tests PRIVATE ${target}_obj runner_core runner_test_gloo yaml-cpp GTest::gtest_main)
    add_dependencies(${target}_tests runner_plugins)
    target_compile_definitions(${target}_tests PRIVATE
      RUNNER_TEST_PLUGIN_DIR="${RUNNER_PLUGIN_DIR}"
      RUNNER_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
      RUNNER_PYTHON="${RUNNER_PYTHON}")
    set(fixture)
    if(P_TEST_FIXTURE)
      set(fixture FIXTURES_REQUIRED ${P_TEST_FIXTURE})
    endif()
    # LABELS stays last and quoted: gtest_discover_tests flattens the property list.
    gtest_discover_tests(${target}_tests DISCOVERY_TIMEOUT 60
                         PROPERTIES ${fixture} LABELS "plugin;${kind}")
  endif()
endfunction()
