//===- safetensors_fuzzer.cc - libFuzzer target: safetensors reader ------===//
//
// SafetensorsFile::Open (header length, JSON header, dtypes, shapes,
// data_offsets, overlap checks) on arbitrary bytes, then Get() of every
// tensor it accepts and a full read of its bytes (ASan checks the ranges the
// validation promised). Covers checkpoints and `--inputs` files alike: both
// are read by this loader.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/base/safetensors.h"
#include "fuzz_input.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto f = bt::rt::SafetensorsFile::Open(bt::fuzz::AsFile(data, size));
  if (!f.ok())
    return 0;
  for (const std::string &name : f->names()) {
    auto t = f->Get(name);
    if (!t.ok())
      std::abort(); // a validated entry must be readable
    unsigned sum = 0;
    for (char c : t->bytes())
      sum += static_cast<unsigned char>(c);
    (void)sum;
  }
  return 0;
}
