# Small helpers so that every folder declares its target the same way.

# pbert_warnings(target): the warnings every target of ours is built with,
# as errors with PBERT_WERROR (CI's builds).
function(pbert_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra $<$<BOOL:${PBERT_WERROR}>:-Werror>)
endfunction()

# pbert_cc_library(NAME name SRCS ... DEPS ... [TORCH])
# TORCH: the target includes LibTorch headers; it gets the shared
# precompiled header so each file does not re-parse <torch/torch.h>.
function(pbert_cc_library)
  cmake_parse_arguments(ARG "TORCH" "NAME" "SRCS;DEPS" ${ARGN})
  add_library(${ARG_NAME} STATIC ${ARG_SRCS})
  target_include_directories(${ARG_NAME} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${ARG_NAME} PUBLIC ${ARG_DEPS})
  pbert_warnings(${ARG_NAME})
  pbert_group_sources(${ARG_NAME} "${ARG_TORCH}")
endfunction()

# pbert_cc_binary(NAME name SRCS ... DEPS ... [TORCH])
function(pbert_cc_binary)
  cmake_parse_arguments(ARG "TORCH" "NAME;OUTPUT_NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  pbert_warnings(${ARG_NAME})
  if(ARG_OUTPUT_NAME)
    set_target_properties(${ARG_NAME} PROPERTIES OUTPUT_NAME ${ARG_OUTPUT_NAME})
  endif()
  pbert_group_sources(${ARG_NAME} "${ARG_TORCH}")
endfunction()

# pbert_cc_test(NAME name SRCS ... DEPS ... [TORCH])
function(pbert_cc_test)
  cmake_parse_arguments(ARG "TORCH" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} pbert_source_paths GTest::gtest
                        GTest::gtest_main)
  # Test files name their helpers freely (Fixture, Temp): only the suites
  # whose files parse LibTorch, where it pays, are compiled in groups.
  pbert_group_sources(${ARG_NAME} "${ARG_TORCH}" GROUP "${ARG_TORCH}")
  # Every test is bounded: one that hangs (a pipe never opened, a rank that
  # never answers) fails after 10 minutes instead of holding up the run.
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
endfunction()

# The sources of `target` compiled in groups (pbert_unity; GROUP OFF: each
# alone); with `torch`,
# LibTorch too, with one precompiled <torch/torch.h> shared by the files
# that include it. Loading that header (over 500 MB) costs about 10 s per
# file, more than files that include only parts of LibTorch (ATen,
# torch/nn/module.h) spend parsing them, so only the files that include
# <torch/torch.h> itself use it (read when CMake configures).
function(pbert_group_sources target torch)
  cmake_parse_arguments(ARG "" "GROUP" "" ${ARGN})
  if(NOT DEFINED ARG_GROUP)
    set(ARG_GROUP ON)
  endif()
  get_target_property(sources ${target} SOURCES)
  set(with_pch "")
  set(without_pch "")
  foreach(source IN LISTS sources)
    get_filename_component(path ${source} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    set(includes_all "")
    if(torch)
      file(STRINGS ${path} includes_all REGEX "^#include <torch/torch.h>")
    endif()
    if(includes_all)
      list(APPEND with_pch ${path})
    else()
      list(APPEND without_pch ${path})
    endif()
  endforeach()
  if(torch)
    target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
    target_compile_options(${target} PRIVATE ${TORCH_CXX_FLAGS})
  endif()
  # The header is built only for targets with a file that includes it (the
  # binary has none: its build never waits for the header's 50 s).
  if(with_pch)
    if(NOT TARGET pbert_torch_pch)
      add_library(pbert_torch_pch STATIC ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cc)
      target_link_libraries(pbert_torch_pch PUBLIC ${TORCH_LIBRARIES})
      target_precompile_headers(pbert_torch_pch PRIVATE <torch/torch.h>)
    endif()
    target_precompile_headers(${target} REUSE_FROM pbert_torch_pch)
    if(without_pch)
      set_source_files_properties(${without_pch} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endif()
  if(ARG_GROUP)
    pbert_unity(${target} pch "${with_pch}")
    pbert_unity(${target} plain "${without_pch}")
  endif()
endfunction()

# Most of the time a file takes to compile goes to the headers it includes
# (LibTorch's: about 27 s a file here, its own code a few seconds), so the
# sources of a target are compiled PBERT_UNITY_SIZE at a time, one
# translation unit that includes them (a unity build: 4 LibTorch files in
# 35 s instead of 108 s); 1 compiles each alone. The generated file names
# them relative to the checkout, so that ccache serves another clone too.
set(PBERT_UNITY_SIZE 8 CACHE STRING "sources compiled as one translation unit")
function(pbert_unity target kind paths)
  list(LENGTH paths count)
  if(PBERT_UNITY_SIZE LESS 2 OR count LESS 2)
    return()
  endif()
  set(batch "")
  set(index 0)
  list(APPEND paths "")  # flushes the last batch
  foreach(path IN LISTS paths)
    if(path)
      get_source_file_property(own_options ${path} COMPILE_OPTIONS)
      if(own_options)  # compiled alone, with its own options
        continue()
      endif()
      file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${path})
      string(APPEND batch "#include \"${relative}\"\n")
      set_source_files_properties(${path} PROPERTIES HEADER_FILE_ONLY ON)
      math(EXPR index "${index} + 1")
    endif()
    math(EXPR full "${index} % ${PBERT_UNITY_SIZE}")
    if(batch AND (full EQUAL 0 OR NOT path))
      math(EXPR number "(${index} - 1) / ${PBERT_UNITY_SIZE}")
      set(unity ${CMAKE_CURRENT_BINARY_DIR}/unity/${target}_${kind}_${number}.cc)
      file(CONFIGURE OUTPUT ${unity} CONTENT "${batch}" @ONLY)
      target_sources(${target} PRIVATE ${unity})
      if(kind STREQUAL "plain")
        set_source_files_properties(${unity} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      endif()
      set(batch "")
    endif()
  endforeach()
endfunction()
