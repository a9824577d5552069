//===- executable_fuzzer.cc - libFuzzer target: executable trailer ------===//
//
// What `./model info` does with the artifact appended to a standalone
// executable (bt-launcher + payload, docs/abi.md): the input is the part
// after a fixed 4096-byte launcher stand-in (an ELF magic, then filler), so
// every file the loader sees has a prefix to skip, as an executable has.
// Artifact::Open (trailer, payload_start past the prefix, manifest, sections,
// weights, entry points; this target links the same checksum-tolerant copy
// of the reader as artifact_fuzzer), then RunInfoCommand on the accepted
// artifact: the launcher's `info` without kernels (target, producer,
// section sizes, DescribeModelConfig of the manifest's configuration, every
// entry point's tensor specs, the KV plan).
//
// Seeds: the executable that artifact_seed writes, less its first 4096
// bytes (scripts/fuzz.sh).
//
//===----------------------------------------------------------------------===//

#include <sstream>
#include <string>

#include "bt/runtime/model/artifact.h"
#include "bt/runtime/tooling/commands.h"
#include "fuzz_input.h"

namespace {

/// The launcher stand-in: one page, as ArtifactWriter pads a prefix.
constexpr size_t kPrefixBytes = 4096;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string prefix = [] {
    std::string p(kPrefixBytes, 'L');
    p.replace(0, 4, "\x7f" "ELF");
    return p;
  }();
  std::string file = prefix;
  file.append(reinterpret_cast<const char *>(data), size);
  auto a = bt::rt::Artifact::Open(bt::fuzz::AsFile(
      reinterpret_cast<const uint8_t *>(file.data()), file.size()));
  if (!a.ok())
    return 0;
  std::ostringstream out;
  (void)bt::rt::RunInfoCommand(**a, out);
  return 0;
}
