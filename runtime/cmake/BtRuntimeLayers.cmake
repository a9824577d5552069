# The runtime's layers (runtime/README.md): one static library per layer
# folder, declared bottom-up with bt_runtime_layer(). The dependency
# direction is enforced twice:
#  - at configure time: a layer may link only layers declared before it (so
#    the layers form a DAG by construction), and none of LLVM/MLIR;
#  - by the ctest runtime.layers (cmake/check_layers.cmake): every
#    `#include "bt/runtime/<folder>/..."` in a layer's folder names a folder of
#    that layer or of a layer it depends on (directly or not).
# The layer table is written to ${BT_RUNTIME_LAYERS_FILE} for that test, one
# line per layer: "<folder>=<allowed folder>;<allowed folder>;...".

set_property(GLOBAL PROPERTY BT_RUNTIME_LAYERS "")
set(BT_RUNTIME_LAYERS_FILE ${CMAKE_CURRENT_BINARY_DIR}/layers.txt)
file(WRITE ${BT_RUNTIME_LAYERS_FILE} "")

# bt_runtime_layer(<target> FOLDER <folder> SOURCES <src>...
#                  [LAYERS <layer target>...]   # public, lower layers
#                  [PUBLIC <lib>...] [PRIVATE <lib>...])  # external libraries
function(bt_runtime_layer name)
  cmake_parse_arguments(L "" "FOLDER" "SOURCES;LAYERS;PUBLIC;PRIVATE" ${ARGN})
  if(NOT L_FOLDER)
    message(FATAL_ERROR "bt_runtime_layer(${name}): FOLDER is required")
  endif()
  get_property(BT_RUNTIME_LAYERS GLOBAL PROPERTY BT_RUNTIME_LAYERS)
  set(allowed ${L_FOLDER})
  foreach(dep IN LISTS L_LAYERS)
    list(FIND BT_RUNTIME_LAYERS ${dep} i)
    if(i LESS 0)
      message(FATAL_ERROR "bt_runtime_layer(${name}): '${dep}' is not a lower "
        "layer (layers declared so far: ${BT_RUNTIME_LAYERS}); a layer may "
        "depend only on the layers below it (runtime/README.md)")
    endif()
    get_property(dep_allowed GLOBAL PROPERTY BT_LAYER_ALLOWED_${dep})
    list(APPEND allowed ${dep_allowed})
  endforeach()
  foreach(lib IN LISTS L_PUBLIC L_PRIVATE)
    if(lib MATCHES "^(LLVM|MLIR|mlir|llvm)")
      message(FATAL_ERROR "bt_runtime_layer(${name}): the runtime links nothing "
        "from LLVM/MLIR (got ${lib})")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES allowed)
  set_property(GLOBAL PROPERTY BT_LAYER_ALLOWED_${name} ${allowed})
  set_property(GLOBAL APPEND PROPERTY BT_RUNTIME_LAYERS ${name})
  list(JOIN allowed ";" allowed_line)
  string(REPLACE ";" "," allowed_line "${allowed_line}")
  file(APPEND ${BT_RUNTIME_LAYERS_FILE} "${L_FOLDER}=${allowed_line}\n")

  add_library(${name} STATIC ${L_SOURCES})
  target_include_directories(${name} PUBLIC ${BT_RUNTIME_INCLUDE_DIR})
  target_link_libraries(${name} PUBLIC ${L_LAYERS} ${L_PUBLIC}
                        PRIVATE ${L_PRIVATE})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()
