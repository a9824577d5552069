//===- artifact_fuzzer.cc - libFuzzer target: artifact loader ------------===//
//
// Artifact::Open (the 32-byte trailer, the manifest checksum and proto, the
// section ranges and checksums, weights, entry points) on arbitrary bytes,
// then every accessor on an accepted artifact: section views, GetWeight of
// every weight with a full read of its bytes, FindEntryPoint. The same loader
// reads executables (launcher + payload), so this covers the executable
// trailer too.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/model/artifact.h"
#include "fuzz_input.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto a = bt::rt::Artifact::Open(bt::fuzz::AsFile(data, size));
  if (!a.ok())
    return 0;
  const bt::rt::Artifact &art = **a;
  unsigned sum = 0;
  for (absl::string_view s : {art.kernels(), art.tokenizer(), art.ptx()})
    for (char c : s)
      sum += static_cast<unsigned char>(c);
  for (const auto &w : art.manifest().weights()) {
    auto t = art.GetWeight(w.name());
    if (!t.ok())
      std::abort(); // a validated weight must be readable
    for (char c : t->bytes())
      sum += static_cast<unsigned char>(c);
  }
  for (const auto &ep : art.manifest().entry_points())
    if (art.FindEntryPoint(ep.name()) == nullptr)
      std::abort();
  (void)sum;
  return 0;
}
