//===- model_test.cc ------------------------------------------------------===//

#include "bt/runtime/exec/model.h"

#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;

// logits[b,t,v] = w[v] * mask[b,t] + id[b,t] with w = 1..5 (test_kernels.c).
std::vector<float> ToyLogits(const std::vector<int64_t> &ids,
                             const std::vector<int64_t> &mask) {
  std::vector<float> out;
  for (size_t i = 0; i < ids.size(); ++i)
    for (int v = 1; v <= 5; ++v)
      out.push_back(static_cast<float>(v * mask[i] + ids[i]));
  return out;
}

class ModelTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteToyArtifact(dir_.File("toy.btart")), IsOk());
    auto m = Model::Open(dir_.File("toy.btart"));
    ASSERT_THAT(m.status(), IsOk());
    model_ = std::move(m).value();
  }
  TensorMap EvalInputs() {
    TensorMap in;
    in.emplace("input_ids", testing::MakeI64({2, 3}, {10, 11, 12, 20, 21, 22}));
    in.emplace("attention_mask", testing::MakeI64({2, 3}, {1, 1, 0, 0, 1, 1}));
    return in;
  }
  testing::TempDir dir_;
  std::unique_ptr<Model> model_;
};

TEST_F(ModelTest, OpensAndRunsEntryPointsByName) {
  EXPECT_EQ(model_->EntryPointNames(),
            std::vector<std::string>({"eval", "eval_loss", "add", "wrong_shape"}));
  EXPECT_EQ(model_->manifest().producer(), "btrt-tests");
  EXPECT_FALSE(model_->config().name().empty());
  auto out = model_->Run("eval", EvalInputs());
  ASSERT_THAT(out.status(), IsOk());
  ASSERT_EQ(out->size(), 1u);
  const Tensor &logits = out->at("logits");
  EXPECT_EQ(logits.shape(), std::vector<int64_t>({2, 3, 5}));
  EXPECT_EQ(testing::F32Values(logits),
            ToyLogits({10, 11, 12, 20, 21, 22}, {1, 1, 0, 0, 1, 1}));

  TensorMap in = EvalInputs();
  in.emplace("labels", testing::MakeI64({2, 3}, {1, 2, 3, 4, 5, -100}));
  auto out2 = model_->Run("eval_loss", in);
  ASSERT_THAT(out2.status(), IsOk());
  EXPECT_EQ(out2->at("loss").rank(), 0);
  EXPECT_EQ(testing::F32Values(out2->at("loss"))[0], -85.0f);
  EXPECT_EQ(out2->at("logits").shape(), std::vector<int64_t>({2, 3, 5}));
}

TEST_F(ModelTest, InputErrorsAreLocated) {
  EXPECT_THAT(model_->Run("train_step", {}).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "no entry point 'train_step' (available: eval, eval_loss, add, wrong_shape)"));
  TensorMap in = EvalInputs();
  in.erase("attention_mask");
  EXPECT_THAT(model_->Run("eval", in).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "entry point 'eval': missing input 'attention_mask' (I64[-1, -1])"));
  in = EvalInputs();
  in.emplace("labels", testing::MakeI64({2, 3}, {0, 0, 0, 0, 0, 0}));
  EXPECT_THAT(model_->Run("eval", in).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "entry point 'eval': unexpected input 'labels' (it takes input_ids, "
                       "attention_mask)"));
  in = EvalInputs();
  in.at("input_ids") = testing::MakeF32({2, 3}, {0, 0, 0, 0, 0, 0});
  EXPECT_THAT(model_->Run("eval", in).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "entry point 'eval': input 'input_ids' has dtype F32, expected I64"));
  in = EvalInputs();
  in.at("attention_mask") = testing::MakeI64({6}, {1, 1, 1, 1, 1, 1});
  EXPECT_THAT(model_->Run("eval", in).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "entry point 'eval': input 'attention_mask' has shape [6] of rank 1, "
                       "expected rank 2 [-1, -1]"));
  TensorMap add;
  add.emplace("a", testing::MakeF32({1, 3}, {1, 2, 3}));
  add.emplace("b", testing::MakeF32({1, 2}, {1, 2}));
  EXPECT_THAT(model_->Run("add", add).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "entry point 'add': input 'b' has shape [1, 2], expected [-1, 3] "
                       "(dim 1 must be 3)"));
  add.at("b") = testing::MakeF32({1, 3}, {10, 20, 30});
  auto sum = model_->Run("add", add);
  ASSERT_THAT(sum.status(), IsOk());
  EXPECT_EQ(testing::F32Values(sum->at("sum")), std::vector<float>({11, 22, 33}));
}

TEST_F(ModelTest, NamedDimsMustAgree) {
  TensorMap in = EvalInputs();
  in.at("attention_mask") = testing::MakeI64({2, 2}, {1, 1, 1, 1});
  EXPECT_THAT(model_->Run("eval", in).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "entry point 'eval': input 'attention_mask' dim 1 (T = 2) disagrees "
                       "with input 'input_ids' dim 1 (T = 3)"));
  // A kernel returning a size that contradicts the inputs is caught.
  TensorMap x;
  x.emplace("x", testing::MakeF32({2, 2}, {1, 2, 3, 4}));
  EXPECT_THAT(model_->Run("wrong_shape", x).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "entry point 'wrong_shape': output 'y' dim 0 (N = 3) disagrees with "
                       "input 'x' dim 0 (N = 2)"));
}

TEST_F(ModelTest, TokenValuesAreChecked) {
  const int64_t v = model_->config().vocab_size();
  ASSERT_GT(v, 0);
  TensorMap in = EvalInputs();
  in.at("input_ids") = testing::MakeI64({2, 3}, {1, 2, 3, v, 4, 5});
  EXPECT_THAT(model_->Run("eval", in).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "entry point 'eval': input 'input_ids' has value " + std::to_string(v) +
                           " at flat index 3, expected a token id in [0, " +
                           std::to_string(v) + ")"));
  in = EvalInputs();
  in.at("input_ids") = testing::MakeI64({2, 3}, {1, -1, 3, 4, 4, 5});
  EXPECT_THAT(model_->Run("eval", in).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "has value -1 at flat index 1"));
  in = EvalInputs();
  in.at("attention_mask") = testing::MakeI64({2, 3}, {1, 1, 2, 0, 0, 0});
  EXPECT_THAT(model_->Run("eval", in).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input 'attention_mask' has value 2 at flat index 2, expected 0 or 1"));
  in = EvalInputs();
  in.emplace("labels", testing::MakeI64({2, 3}, {-100, 0, v - 1, 5, -5, 1}));
  EXPECT_THAT(model_->Run("eval_loss", in).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input 'labels' has value -5 at flat index 4, expected a token id in "
                       "[0, " + std::to_string(v) + ") or -100"));
}

TEST(Model, RejectsOtherTargets) {
  testing::TempDir dir;
  ASSERT_THAT(testing::WriteToyArtifact(dir.File("rocm.btart"), "", "rocm"), IsOk());
  EXPECT_THAT(Model::Open(dir.File("rocm.btart")).status(),
              StatusIs(absl::StatusCode::kUnimplemented, "artifact target 'rocm'"));
}

// A cuda artifact needs its PTX (checked before the GPU is opened).
TEST(Model, CudaArtifactWithoutPtx) {
  testing::TempDir dir;
  ASSERT_THAT(testing::WriteToyArtifact(dir.File("cuda.btart"), "", "cuda"), IsOk());
  DeviceOptions no_driver;
  no_driver.cuda.driver_library = dir.File("none/libcuda.so.1");
  EXPECT_THAT(Model::Open(dir.File("cuda.btart"), no_driver).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "no ptx section"));
}

TEST(Model, MissingKernelSymbolFailsAtOpen) {
  testing::TempDir dir;
  ASSERT_THAT(testing::WriteToyArtifact(dir.File("a")), IsOk());
  auto a = Artifact::Open(dir.File("a"));
  ASSERT_THAT(a.status(), IsOk());
  proto::Manifest m = (*a)->manifest();
  m.mutable_entry_points(2)->set_symbol("bt_entry_absent");
  ArtifactWriter w(m);
  w.SetKernels(std::string((*a)->kernels()));
  ASSERT_THAT(w.AddWeight("w", *(*a)->GetWeight("w")), IsOk());
  ASSERT_THAT(w.Write(dir.File("b")), IsOk());
  EXPECT_THAT(Model::Open(dir.File("b")).status(),
              StatusIs(absl::StatusCode::kNotFound, "does not export 'bt_entry_absent'"));

  ArtifactWriter nokernels(m);
  ASSERT_THAT(nokernels.AddWeight("w", *(*a)->GetWeight("w")), IsOk());
  ASSERT_THAT(nokernels.Write(dir.File("c")), IsOk());
  EXPECT_THAT(Model::Open(dir.File("c")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "no kernels section"));
}

TEST(Model, SelfExeOfTheTestBinaryHasNoArtifact) {
  EXPECT_THAT(Model::OpenSelf().status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "no bt artifact"));
}

} // namespace
} // namespace bt::rt
