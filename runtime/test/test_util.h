//===- test_util.h - helpers for the runtime tests --------------*- C++ -*-===//

#ifndef BT_RUNTIME_TEST_TEST_UTIL_H
#define BT_RUNTIME_TEST_TEST_UTIL_H

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bt/runtime/base/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace bt::rt::testing {

/// The official fixtures directory: $BT_FIXTURES_DIR, else the CMake cache
/// variable BT_FIXTURES_DIR compiled in.
std::string FixturesDir();

/// The case folders under FixturesDir() (sorted full paths). Adds a fatal
/// test failure (not a skip) when the directory is missing or has no cases.
std::vector<std::string> FixtureCases();

/// Base name of a path ("/a/b/c" -> "c").
std::string BaseName(const std::string &path);

/// A fresh temporary directory, removed (recursively) on destruction.
class TempDir {
public:
  TempDir();
  ~TempDir();
  const std::string &path() const { return path_; }
  std::string File(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

/// Writes raw bytes to a file (not atomic; for building bad inputs).
void WriteRaw(const std::string &path, const std::string &bytes);
std::string ReadRaw(const std::string &path);

/// An owning F32 tensor with the given values.
Tensor MakeF32(std::vector<int64_t> shape, const std::vector<float> &values);
/// An owning I64 tensor with the given values.
Tensor MakeI64(std::vector<int64_t> shape, const std::vector<int64_t> &values);

/// Values of an F32 / I64 tensor.
std::vector<float> F32Values(const Tensor &t);
std::vector<int64_t> I64Values(const Tensor &t);

/// Writes a small CPU artifact whose kernels section is test_kernels.c's
/// shared object (BT_TEST_KERNELS), with weight `w` = F32[5] {1..5}, the
/// config of the first fixture case, and entry points
///   eval:      params [w]; input_ids, attention_mask I64[?, ?] -> logits F32[?, ?, 5]
///   eval_loss: as eval + labels I64[?, ?] -> logits, loss F32[]
///   add:       a, b F32[?, 3] -> sum F32[?, 3]
///   wrong_shape: x F32[N, M] -> y F32[N, M] (the kernel returns N + 1 rows)
/// (eval dims are named B, T, V in TensorSpec.dim_names)
/// (toy semantics in test_kernels.c). With `prefix` (a launcher binary) the
/// result is an executable.
absl::Status WriteToyArtifact(const std::string &path, const std::string &prefix = "",
                              const std::string &target = "cpu");

/// Which fake model WriteGenArtifact writes (gen_test_kernels.c).
struct GenArtifactOptions {
  bool vanilla = false;
  /// decode_tokens is the broken kernel that calls the sampler once.
  bool short_decode_tokens = false;
  /// Leave out decode_block (block) / decode_step (vanilla).
  bool without_decode = false;
  /// kv_cache's Ly, H and hd dims dynamic (-1) in the manifest: a layout
  /// the runtime cannot size (it reads the layout from the artifact only).
  bool dynamic_kv_layout = false;
  /// cache_length in-out (the CUDA target's device-resident length) in the
  /// manifest; the fake kernels do not update it, so only argument checks
  /// can use such an artifact.
  bool inout_length = false;
  /// Tokenizer section (a SentencePiece model proto), or none.
  std::string tokenizer;
  /// A launcher binary to prefix (an executable), or none.
  std::string prefix;
};

/// Vocabulary, block length and prefix length of the fake models.
inline constexpr int64_t kFakeVocab = 16;
inline constexpr int64_t kFakeBlock = 4;
inline constexpr int64_t kFakePrefix = 2;
inline constexpr float kFakePeak = 3.0f;
/// max_position_embeddings of the fake models' stacks (blocks; vanilla: tokens).
inline constexpr int64_t kFakePositions = 256;

/// Writes an artifact whose kernels are gen_test_kernels.c's shared object
/// (BT_TEST_GEN_KERNELS): the fake Block Transformer (V 16, L_B 4, P 2;
/// entry points prefill, decode_tokens, decode_block of docs/generation.md,
/// pad 0, eos 0, generation pad 1) or the fake vanilla model (prefill,
/// decode_step; generation pad 0), with param `peak` = F32[1] {3}.
/// Writes an artifact whose kernels are train_test_kernels.c's shared
/// object (BT_TEST_TRAIN_KERNELS): a bigram model with the entry points
/// train_step (docs/training.md's inputs and in-out state) and eval_loss,
/// the configuration of the first fixture case with vocabulary `vocab`,
/// weights `bigram` F32[V, V] (zeros) and `untrained` F32[2, 3] (read by no
/// entry), and `tokenizer` as its tokenizer section. With `prefix` (a
/// launcher binary) the result is an executable.
absl::Status WriteTrainArtifact(const std::string &path, int64_t vocab,
                                const std::string &tokenizer,
                                const std::string &prefix = "");

absl::Status WriteGenArtifact(const std::string &path,
                              const GenArtifactOptions &options = {});

/// Writes an artifact whose block entry points (prefill, decode_tokens,
/// decode_block) replay recorded next-token logits `logits` F32 [N, B, V]
/// (gen_test_kernels.c, "replay model") for a model with configuration
/// `config` (block length and vocabulary taken from it).
absl::Status WriteReplayArtifact(const std::string &path,
                                 const proto::ModelConfig &config,
                                 const Tensor &logits);

/// gtest matchers on absl::Status.
MATCHER(IsOk, "") {
  if (arg.ok())
    return true;
  *result_listener << "status: " << arg;
  return false;
}
MATCHER_P2(StatusIs, code, substr, "") {
  if (arg.code() == code && arg.message().find(substr) != std::string::npos)
    return true;
  *result_listener << "status: " << arg;
  return false;
}

} // namespace bt::rt::testing

#endif // BT_RUNTIME_TEST_TEST_UTIL_H
