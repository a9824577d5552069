// Fixture of runtime.layers.include_back_edge: a device-layer header that
// includes the tooling layer (a back edge check_layers.cmake must report).
#include "bt/runtime/base/tensor.h"
#include "bt/runtime/tooling/bench.h"
