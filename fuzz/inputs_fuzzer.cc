//===- inputs_fuzzer.cc - libFuzzer target: the `--inputs` loader --------===//
//
// What `eval --inputs FILE`, `grad --inputs FILE` and `generate --inputs
// FILE` do with a user's inputs file, on arbitrary bytes, against two loaded
// models (the runtime tests' hand-written kernel libraries behind real
// artifacts, written once at start-up into a temporary directory):
//
//  - RunEvalCommand on the toy model (runtime/test/test_kernels.c; entry
//    points eval: input_ids, attention_mask I64 [B, T] -> logits
//    F32 [B, T, 5], and eval_loss: + labels I64 [B, T] -> + loss F32 []):
//    safetensors reader, the choice of entry by `labels`, the per-input
//    dtype/rank/shape/named-dimension checks, empty dimensions, the kernel
//    call on what passes, outputs written to /dev/null (written in place);
//  - RunGenerateCommand on the fake Block Transformer
//    (runtime/test/gen_test_kernels.c; V 16, L_B 4): `prompt.input_ids` /
//    `input_ids` I64 [B, T] and the optional left-padded attention mask,
//    token ids checked against the vocabulary, the request checked against
//    positions and memory (CheckGenerationRequest), 3 new tokens greedily.
//
// Every error is a Status (a finding is a crash, a sanitizer report, a leak
// or a timeout).
//
//===----------------------------------------------------------------------===//

#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>

#include "bt/runtime/exec/model.h"
#include "bt/runtime/tooling/commands.h"
#include "fuzz_input.h"
#include "test_util.h" // WriteToyArtifact, WriteGenArtifact

namespace {

std::unique_ptr<bt::rt::Model> g_toy, g_gen;

std::unique_ptr<bt::rt::Model> OpenOrDie(const std::string &path) {
  auto m = bt::rt::Model::Open(path);
  if (!m.ok()) {
    std::fprintf(stderr, "inputs_fuzzer: %s\n", m.status().ToString().c_str());
    std::abort();
  }
  return std::move(m).value();
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // The artifacts live only until the models have mapped them.
  bt::rt::testing::TempDir dir;
  const std::string toy = dir.File("toy.btart"), gen = dir.File("gen.btart");
  absl::Status s = bt::rt::testing::WriteToyArtifact(toy);
  if (s.ok())
    s = bt::rt::testing::WriteGenArtifact(gen);
  if (!s.ok()) {
    std::fprintf(stderr, "inputs_fuzzer: %s\n", s.ToString().c_str());
    std::abort();
  }
  g_toy = OpenOrDie(toy);
  g_gen = OpenOrDie(gen);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = bt::fuzz::AsFile(data, size);
  std::ostringstream out, log;
  (void)bt::rt::RunEvalCommand(*g_toy, path, "/dev/null", log);
  bt::rt::GenerateCommandOptions g;
  g.inputs_path = path;
  g.output_path = "/dev/null";
  g.generate.max_new_tokens = 3;
  (void)bt::rt::RunGenerateCommand(*g_gen, g, out, log);
  return 0;
}
