# Small helpers so that every folder declares its target the same way.

# pbert_cc_library(NAME name SRCS ... DEPS ... [TORCH])
# TORCH: the target includes LibTorch headers; it gets the shared
# precompiled header so each file does not re-parse <torch/torch.h>.
function(pbert_cc_library)
  cmake_parse_arguments(ARG "TORCH" "NAME" "SRCS;DEPS" ${ARGN})
  add_library(${ARG_NAME} STATIC ${ARG_SRCS})
  target_include_directories(${ARG_NAME} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${ARG_NAME} PUBLIC ${ARG_DEPS})
  target_compile_options(${ARG_NAME} PRIVATE -Wall -Wextra)
  if(ARG_TORCH)
    pbert_use_torch(${ARG_NAME})
  endif()
endfunction()

# pbert_cc_binary(NAME name SRCS ... DEPS ... [TORCH])
function(pbert_cc_binary)
  cmake_parse_arguments(ARG "TORCH" "NAME;OUTPUT_NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  target_compile_options(${ARG_NAME} PRIVATE -Wall -Wextra)
  if(ARG_OUTPUT_NAME)
    set_target_properties(${ARG_NAME} PROPERTIES OUTPUT_NAME ${ARG_OUTPUT_NAME})
  endif()
  if(ARG_TORCH)
    pbert_use_torch(${ARG_NAME})
  endif()
endfunction()

# pbert_cc_test(NAME name SRCS ... DEPS ... [TORCH])
function(pbert_cc_test)
  cmake_parse_arguments(ARG "TORCH" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${ARG_NAME} PRIVATE
    PBERT_SHARED_DATA_DIR="${PROJECT_SOURCE_DIR}/../shared/data"
    PBERT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  if(ARG_TORCH)
    pbert_use_torch(${ARG_NAME})
  endif()
  # Every test is bounded: one that hangs (a pipe never opened, a rank that
  # never answers) fails after 10 minutes instead of holding up the run.
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
endfunction()

# LibTorch for a target, with one precompiled <torch/torch.h> shared by the
# files that include it. Loading that header (over 500 MB) costs about 10 s
# per file, more than files that include only parts of LibTorch (ATen,
# torch/nn/module.h) spend parsing them, so only the files that include
# <torch/torch.h> itself use it (read when CMake configures).
function(pbert_use_torch target)
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  target_compile_options(${target} PRIVATE ${TORCH_CXX_FLAGS})
  if(NOT TARGET pbert_torch_pch)
    add_library(pbert_torch_pch STATIC ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cc)
    target_link_libraries(pbert_torch_pch PUBLIC ${TORCH_LIBRARIES})
    target_precompile_headers(pbert_torch_pch PRIVATE <torch/torch.h>)
  endif()
  target_precompile_headers(${target} REUSE_FROM pbert_torch_pch)
  get_target_property(sources ${target} SOURCES)
  foreach(source IN LISTS sources)
    get_filename_component(path ${source} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    file(STRINGS ${path} includes_all REGEX "^#include <torch/torch.h>")
    if(NOT includes_all)
      set_source_files_properties(${source} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()
