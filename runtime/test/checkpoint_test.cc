//===- checkpoint_test.cc -------------------------------------------------===//

#include "bt/runtime/model/checkpoint.h"

#include <limits>

#include "bt/runtime/model/config.h"
#include "bt/runtime/base/safetensors.h"
#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;
using ::testing::HasSubstr;

// Every fixture checkpoint loads: all expected tensors, official shapes, the
// unused block-decoder embed_in ignored with a notice (and kept in `unused`),
// values untouched.
TEST(Checkpoint, LoadsEveryFixture) {
  for (const std::string &c : testing::FixtureCases()) {
    SCOPED_TRACE(c);
    auto ck = LoadCheckpoint(c);
    ASSERT_THAT(ck.status(), IsOk());
    const auto expected = ExpectedParams(ck->config);
    ASSERT_EQ(ck->param_names.size(), expected.size());
    ASSERT_EQ(ck->weights.size(), expected.size());
    EXPECT_EQ(ck->file_dtype, proto::F32);
    auto file = SafetensorsFile::Open(c + "/model.safetensors");
    ASSERT_THAT(file.status(), IsOk());
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(ck->param_names[i], expected[i].name);
      const Tensor &t = ck->weights.at(expected[i].name);
      EXPECT_EQ(t.dtype(), proto::F32);
      EXPECT_EQ(t.shape(), expected[i].shape);
      EXPECT_EQ(t.bytes(), file->Get(expected[i].name)->bytes());
    }
    if (ck->config.kind() == proto::ModelConfig::BLOCK_TRANSFORMER) {
      ASSERT_EQ(ck->notices.size(), 1u);
      EXPECT_THAT(ck->notices[0],
                  HasSubstr("ignored unused tensor 'block_decoder.gpt_neox.embed_in.weight'"));
      // Kept apart, unchanged, for checkpoints written back (Trainer).
      ASSERT_EQ(ck->unused.size(), 1u);
      const Tensor &u = ck->unused.at("block_decoder.gpt_neox.embed_in.weight");
      EXPECT_EQ(u.bytes(), file->Get("block_decoder.gpt_neox.embed_in.weight")->bytes());
      EXPECT_EQ(ck->weights.count("block_decoder.gpt_neox.embed_in.weight"), 0u);
    } else {
      EXPECT_TRUE(ck->notices.empty());
      EXPECT_TRUE(ck->unused.empty());
    }
  }
}

// Copies a fixture checkpoint into a temp dir with its tensors transformed.
class EditedCheckpoint {
public:
  explicit EditedCheckpoint(const std::string &kind) {
    for (const std::string &c : testing::FixtureCases()) {
      auto cfg = LoadModelConfig(c);
      if (cfg.ok() && (kind == "block") ==
                          (cfg->kind() == proto::ModelConfig::BLOCK_TRANSFORMER)) {
        src_ = c;
        break;
      }
    }
    if (src_.empty()) {
      ADD_FAILURE() << "no " << kind << " fixture";
      return;
    }
    testing::WriteRaw(dir_.File("config.yaml"), testing::ReadRaw(src_ + "/config.yaml"));
    auto f = SafetensorsFile::Open(src_ + "/model.safetensors");
    EXPECT_THAT(f.status(), IsOk());
    if (!f.ok())
      return;
    for (const std::string &n : f->names()) {
      auto t = f->Get(n);
      EXPECT_THAT(t.status(), IsOk());
      if (t.ok())
        tensors_.emplace(n, std::move(t).value());
    }
  }
  std::map<std::string, Tensor> &tensors() { return tensors_; }
  const std::string &dir() const { return dir_.path(); }
  std::string File(const std::string &n) const { return dir_.File(n); }
  void Write(const std::string &name = "model.safetensors") {
    ASSERT_THAT(WriteSafetensors(dir_.File(name), tensors_), IsOk());
  }

private:
  std::string src_;
  testing::TempDir dir_;
  std::map<std::string, Tensor> tensors_;
};

TEST(Checkpoint, Bf16AndF16AreConvertedToF32) {
  for (DType half : {proto::BF16, proto::F16}) {
    SCOPED_TRACE(DTypeName(half));
    EditedCheckpoint e("block");
    std::map<std::string, std::vector<float>> want;
    for (auto &[name, t] : e.tensors()) {
      auto h = Tensor::Allocate(half, t.shape());
      ASSERT_THAT(h.status(), IsOk());
      const float *src = t.data_as<float>();
      uint16_t *dst = h->data_as<uint16_t>();
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        // bf16: round-to-nearest-even; f16: a few exactly representable values.
        dst[i] = half == proto::BF16 ? F32ToBf16(src[i])
                                     : static_cast<uint16_t>(0x3c00 + (i % 7));
        want[name].push_back(half == proto::BF16 ? Bf16ToF32(dst[i]) : F16ToF32(dst[i]));
      }
      t = std::move(h).value();
    }
    e.Write();
    auto ck = LoadCheckpoint(e.dir());
    ASSERT_THAT(ck.status(), IsOk());
    EXPECT_EQ(ck->file_dtype, half);
    for (const auto &[name, t] : ck->weights) {
      ASSERT_EQ(t.dtype(), proto::F32) << name;
      EXPECT_EQ(testing::F32Values(t), want.at(name)) << name;
    }
    CheckpointOptions keep;
    keep.convert_to_f32 = false;
    auto raw = LoadCheckpoint(e.dir(), keep);
    ASSERT_THAT(raw.status(), IsOk());
    EXPECT_EQ(raw->weights.begin()->second.dtype(), half);
  }
}

// Issue 14: NaN/Inf weights were accepted without a word. The official code
// (torch load_state_dict) loads them too, so they are a warning naming the
// tensor, the counts and the first index, in every file dtype.
TEST(Checkpoint, NonFiniteWeightsAreWarnedAbout) {
  {
    EditedCheckpoint clean("block");
    clean.Write();
    auto ck = LoadCheckpoint(clean.dir());
    ASSERT_THAT(ck.status(), IsOk());
    EXPECT_THAT(ck->warnings, ::testing::IsEmpty());
  }
  const std::string name = "token_decoder.embed_out.weight";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (DType dtype : {proto::F32, proto::BF16, proto::F16}) {
    SCOPED_TRACE(DTypeName(dtype));
    EditedCheckpoint e("block");
    Tensor &t = e.tensors().at(name);
    auto copy = Tensor::Allocate(dtype, t.shape());
    ASSERT_THAT(copy.status(), IsOk());
    const float *src = t.data_as<float>();
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      const float v = i == 17 ? nan : i == 20 ? inf : i == 21 ? -inf : src[i];
      if (dtype == proto::F32)
        copy->data_as<float>()[i] = v;
      else if (dtype == proto::BF16)
        copy->data_as<uint16_t>()[i] = F32ToBf16(v);
      else // f16: exact small values; NaN 0x7e00, +Inf 0x7c00, -Inf 0xfc00
        copy->data_as<uint16_t>()[i] = i == 17   ? 0x7e00
                                       : i == 20 ? 0x7c00
                                       : i == 21 ? 0xfc00
                                                 : 0x3c00;
    }
    t = std::move(copy).value();
    e.Write();
    auto ck = LoadCheckpoint(e.dir());
    ASSERT_THAT(ck.status(), IsOk());
    ASSERT_EQ(ck->warnings.size(), 1u);
    EXPECT_EQ(ck->warnings[0],
              "tensor '" + name + "' " + ShapeToString(t.shape()) +
                  " holds 1 NaN and 2 infinite values (the first at flat index 17): outputs "
                  "computed from it will be NaN or infinite");
  }
}

TEST(Checkpoint, MissingTensorNamesItAndTheShape) {
  EditedCheckpoint e("block");
  const std::vector<int64_t> shape = e.tensors().at("token_decoder.embed_out.weight").shape();
  e.tensors().erase("token_decoder.embed_out.weight");
  e.Write();
  EXPECT_THAT(LoadCheckpoint(e.dir()).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "model.safetensors: missing tensor 'token_decoder.embed_out.weight' "
                       "(expected " + ShapeToString(shape) + ")"));
}

TEST(Checkpoint, WrongShape) {
  EditedCheckpoint e("block");
  Tensor &t = e.tensors().at("block_decoder.gpt_neox.layers.1.attention.dense.bias");
  const std::vector<int64_t> shape = t.shape();
  t = testing::MakeF32({shape[0] - 1}, std::vector<float>(shape[0] - 1, 0.0f));
  e.Write();
  EXPECT_THAT(LoadCheckpoint(e.dir()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       e.File("model.safetensors") +
                           ": tensor 'block_decoder.gpt_neox.layers.1.attention.dense.bias' "
                           "has shape [" +
                           std::to_string(shape[0] - 1) + "], expected " + ShapeToString(shape)));
}

TEST(Checkpoint, WrongDtype) {
  EditedCheckpoint e("vanilla");
  Tensor &t = e.tensors().at("gpt_neox.final_layer_norm.weight");
  auto i = Tensor::Allocate(proto::I64, t.shape());
  ASSERT_THAT(i.status(), IsOk());
  t = std::move(i).value();
  e.Write();
  EXPECT_THAT(LoadCheckpoint(e.dir()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       e.File("model.safetensors") +
                           ": tensor 'gpt_neox.final_layer_norm.weight' has dtype I64, "
                           "expected F32, BF16 or F16"));
}

TEST(Checkpoint, UnexpectedExtraTensor) {
  EditedCheckpoint e("vanilla");
  e.tensors().emplace("gpt_neox.layers.99.mlp.dense_h_to_4h.weight",
                      testing::MakeF32({2}, {1, 2}));
  e.Write();
  EXPECT_THAT(LoadCheckpoint(e.dir()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "unexpected tensor 'gpt_neox.layers.99.mlp.dense_h_to_4h.weight' [2]"));
}

TEST(Checkpoint, ReportsSeveralProblemsAtOnce) {
  EditedCheckpoint e("vanilla");
  e.tensors().erase("embed_out.weight");
  e.tensors().emplace("extra", testing::MakeF32({1}, {1}));
  e.Write();
  auto s = LoadCheckpoint(e.dir()).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("2 problems: "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing tensor 'embed_out.weight'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("unexpected tensor 'extra'"));
}

TEST(Checkpoint, ConfigOfAnotherModelIsRejected) {
  // Weights of one fixture against the config of another fixture.
  std::vector<std::string> cases = testing::FixtureCases();
  ASSERT_GE(cases.size(), 2u);
  auto other = LoadModelConfig(cases[1]);
  ASSERT_THAT(other.status(), IsOk());
  auto s = LoadCheckpoint(*other, {cases[0] + "/model.safetensors"}).status();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(cases[0] + "/model.safetensors: "));
}

TEST(Checkpoint, ShardedWithIndex) {
  EditedCheckpoint e("block");
  std::map<std::string, Tensor> a, b;
  std::string index = R"({"metadata": {}, "weight_map": {)";
  bool first = true;
  int i = 0;
  for (auto &[name, t] : e.tensors()) {
    const bool to_a = (i++ % 2) == 0;
    (to_a ? a : b).emplace(name, t.Share());
    index += std::string(first ? "" : ",") + "\"" + name + "\": \"" +
             (to_a ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors") +
             "\"";
    first = false;
  }
  index += "}}";
  ASSERT_THAT(WriteSafetensors(e.File("model-00001-of-00002.safetensors"), a), IsOk());
  ASSERT_THAT(WriteSafetensors(e.File("model-00002-of-00002.safetensors"), b), IsOk());
  testing::WriteRaw(e.File("model.safetensors.index.json"), index);
  {
    auto ck = LoadCheckpoint(e.dir());
    ASSERT_THAT(ck.status(), IsOk());
    EXPECT_EQ(ck->weights.size(), ExpectedParams(ck->config).size());
  } // closes the shards: a mapped input is never overwritten (AtomicFileWriter)

  // The same tensor in two shards is an error.
  b.emplace("embedder.embeddings.weight", e.tensors().at("embedder.embeddings.weight").Share());
  a.erase("embedder.embeddings.weight");
  a.emplace("embedder.embeddings.weight", e.tensors().at("embedder.embeddings.weight").Share());
  ASSERT_THAT(WriteSafetensors(e.File("model-00002-of-00002.safetensors"), b), IsOk());
  ASSERT_THAT(WriteSafetensors(e.File("model-00001-of-00002.safetensors"), a), IsOk());
  EXPECT_THAT(LoadCheckpoint(e.dir()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "tensor 'embedder.embeddings.weight' appears in both"));
}

TEST(Checkpoint, NoWeightsFile) {
  testing::TempDir dir;
  const std::string c = testing::FixtureCases().at(0);
  testing::WriteRaw(dir.File("config.yaml"), testing::ReadRaw(c + "/config.yaml"));
  EXPECT_THAT(LoadCheckpoint(dir.path()).status(),
              StatusIs(absl::StatusCode::kNotFound, "no model.safetensors"));
}

} // namespace
} // namespace bt::rt
