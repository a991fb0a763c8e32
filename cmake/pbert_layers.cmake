# The layers of docs/architecture.md, checked when CMake configures: each
# library includes headers of, and links, only the libraries below it; so
# does each test folder (tests/<layer>/, with the test helpers of its own
# and lower layers) and each test target. A file that includes an upper
# layer (model/ including data/, say) stops the configure with its name.
set(_pbert_below_common "")
set(_pbert_below_formats common)
set(_pbert_below_data common)
set(_pbert_below_gpu common)
set(_pbert_below_kernels common)
set(_pbert_below_model common formats gpu kernels)
set(_pbert_below_optim common kernels)
set(_pbert_below_distributed common)
set(_pbert_below_tasks common formats data model gpu kernels)
set(_pbert_below_train common formats data model gpu kernels optim distributed tasks)
set(_pbert_below_app common formats data model gpu kernels optim distributed tasks train)
set(_pbert_layers common formats data gpu kernels model optim distributed tasks train app)

# Stops the configure if a source of `folder` (relative to the project)
# includes a layer that `layer` may not use; a test folder's sources may
# also include the test helpers (tests/<layer>/...) of the layers it may.
function(_pbert_check_includes folder layer)
  set(allowed ${layer} ${_pbert_below_${layer}})
  file(GLOB_RECURSE sources RELATIVE "${PROJECT_SOURCE_DIR}"
       "${PROJECT_SOURCE_DIR}/${folder}/*.h" "${PROJECT_SOURCE_DIR}/${folder}/*.cc"
       "${PROJECT_SOURCE_DIR}/${folder}/*.cu" "${PROJECT_SOURCE_DIR}/${folder}/*.cuh")
  foreach(source IN LISTS sources)
    file(STRINGS "${PROJECT_SOURCE_DIR}/${source}" includes REGEX "^#include \"[a-z_]+/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([a-z_]+)/.*" "\\1" included "${line}")
      if(included STREQUAL "tests")
        string(REGEX REPLACE "^#include \"tests/([a-z_]+)/.*" "\\1" included "${line}")
      endif()
      if(included IN_LIST _pbert_layers AND NOT included IN_LIST allowed)
        message(FATAL_ERROR "${source}: ${line}: ${folder}/ may not use ${included}/ "
                            "(docs/architecture.md, Layers)")
      endif()
    endforeach()
  endforeach()
endfunction()

# Stops the configure if `target` links a library its layer may not use.
function(_pbert_check_links target layer)
  set(allowed ${layer} ${_pbert_below_${layer}})
  get_target_property(links ${target} LINK_LIBRARIES)
  foreach(link IN LISTS links)
    if(link MATCHES "^pbert_(.+)$" AND CMAKE_MATCH_1 IN_LIST _pbert_layers
       AND NOT CMAKE_MATCH_1 IN_LIST allowed)
      message(FATAL_ERROR "${target} links ${link}, which ${layer}/ may not "
                          "(docs/architecture.md, Layers)")
    endif()
  endforeach()
endfunction()

# The test folders and targets: a test target's layer is the highest of
# its sources' folders (tests/<layer>/...).
function(pbert_check_test_layers)
  foreach(layer IN LISTS _pbert_layers)
    if(IS_DIRECTORY "${PROJECT_SOURCE_DIR}/tests/${layer}")
      _pbert_check_includes(tests/${layer} ${layer})
    endif()
  endforeach()
  get_property(targets DIRECTORY "${PROJECT_SOURCE_DIR}/tests" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(sources ${target} SOURCES)
    set(rank -1)
    set(top "")
    foreach(source IN LISTS sources)
      if(source MATCHES "^([a-z_]+)/")
        list(FIND _pbert_layers "${CMAKE_MATCH_1}" index)
        if(index GREATER rank)
          set(rank ${index})
          set(top ${CMAKE_MATCH_1})
        endif()
      endif()
    endforeach()
    if(top)
      _pbert_check_links(${target} ${top})
    endif()
  endforeach()
endfunction()

function(pbert_check_layers)
  foreach(layer IN LISTS _pbert_layers)
    _pbert_check_includes(${layer} ${layer})
    _pbert_check_links(pbert_${layer} ${layer})
  endforeach()
endfunction()
