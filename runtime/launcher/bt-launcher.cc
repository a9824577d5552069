//===- bt-launcher.cc - runs the artifact appended to itself --------------===//
//
// `bt-run compile` writes a standalone executable: this program followed by
// an artifact (docs/abi.md). Running it reads the artifact from the end of
// /proc/self/exe:
//
//   ./model info
//   ./model eval --inputs inputs.safetensors -o outputs.safetensors
//   ./model bench --batch 1,8 --tokens 512 [--baseline none]
//
// The commands live in the runtime library (bt/runtime/commands.h).
//
//===----------------------------------------------------------------------===//

#include <iostream>

#include "bt/runtime/tooling/commands.h"

int main(int argc, char **argv) {
  return bt::rt::LauncherMain(argc, argv, std::cout, std::cerr);
}
