# The layers of docs/architecture.md, checked when CMake configures: each
# library includes headers of, and links, only the libraries below it. A
# file that includes an upper layer (model/ including data/, say) stops the
# configure with its name.
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

function(pbert_check_layers)
  foreach(layer IN LISTS _pbert_layers)
    set(allowed ${layer} ${_pbert_below_${layer}})
    file(GLOB_RECURSE sources RELATIVE "${PROJECT_SOURCE_DIR}"
         "${PROJECT_SOURCE_DIR}/${layer}/*.h" "${PROJECT_SOURCE_DIR}/${layer}/*.cc")
    foreach(source IN LISTS sources)
      file(STRINGS "${PROJECT_SOURCE_DIR}/${source}" includes REGEX "^#include \"[a-z_]+/")
      foreach(line IN LISTS includes)
        string(REGEX REPLACE "^#include \"([a-z_]+)/.*" "\\1" folder "${line}")
        if(folder IN_LIST _pbert_layers AND NOT folder IN_LIST allowed)
          message(FATAL_ERROR "${source} includes ${folder}/, which ${layer}/ may not use "
                              "(docs/architecture.md, Layers): ${line}")
        endif()
      endforeach()
    endforeach()
    get_target_property(links pbert_${layer} LINK_LIBRARIES)
    foreach(link IN LISTS links)
      if(link MATCHES "^pbert_(.+)$" AND CMAKE_MATCH_1 IN_LIST _pbert_layers
         AND NOT CMAKE_MATCH_1 IN_LIST allowed)
        message(FATAL_ERROR "pbert_${layer} links ${link}, which it may not "
                            "(docs/architecture.md, Layers)")
      endif()
    endforeach()
  endforeach()
endfunction()
