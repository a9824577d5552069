//===- roofline_test.cc ---------------------------------------------------===//
//
// The roofline's work model (tooling/roofline.h) on hand-sized models: the
// expected FLOPs and bytes are worked out by hand in the comments from the
// definitions in docs/bench.md "Roofline", and the report's structure. The
// measured bounds are only checked to be positive (no timing is asserted).
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/tooling/roofline.h"

#include "bt/runtime/tooling/efficiency.h"

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace bt::rt {
namespace {

using ::testing::HasSubstr;

void SetStack(proto::NeoXConfig *s, int64_t hidden, int64_t layers,
              int64_t intermediate) {
  s->set_hidden_size(hidden);
  s->set_num_layers(layers);
  s->set_intermediate_size(intermediate);
}

// V = 10, d = 4, 1 layer, I = 8. Stack parameters: 4 layer-norm vectors (16)
// + qkv 48 + 12 + dense 16 + 4 + h_to_4h 32 + 8 + 4h_to_h 32 + 4 = 172, final
// layer norm 8: 180 floats = 720 B; LM head 40 floats = 160 B.
proto::ModelConfig Vanilla() {
  proto::ModelConfig c;
  c.set_kind(proto::ModelConfig::VANILLA);
  c.set_vocab_size(10);
  c.set_block_length(1);
  SetStack(c.mutable_block_decoder(), 4, 1, 8);
  return c;
}

// V = 10, L_B = 2, P = 1 (prefix); block decoder as Vanilla's stack (720 B);
// token decoder T = 2, 1 layer, I = 4: 8 + 12 + 6 + 4 + 2 + 8 + 4 + 8 + 2 =
// 54, + 4 = 58 floats = 232 B; LM head 20 floats = 80 B; expansion
// (1 * 2 * 4 + 2) floats = 40 B.
proto::ModelConfig Block() {
  proto::ModelConfig c;
  c.set_kind(proto::ModelConfig::BLOCK_TRANSFORMER);
  c.set_vocab_size(10);
  c.set_block_length(2);
  c.set_prefix_length(1);
  c.set_strategy(proto::ModelConfig::PREFIX);
  SetStack(c.mutable_block_decoder(), 4, 1, 8);
  SetStack(c.mutable_token_decoder(), 2, 1, 4);
  return c;
}

BenchSetting Setting(const char *name, int64_t batch, int64_t prompt,
                     int64_t gen) {
  BenchSetting s;
  s.name = name;
  s.batch = batch;
  s.prompt_tokens = prompt;
  s.gen_tokens = gen;
  return s;
}

TEST(RooflineTest, VanillaForward) {
  // Per position: 2 (4*16 + 2*4*8) = 256 + LM head 2*10*4 = 80 -> 336; 3
  // positions 1008 + attention 4*4*(3*4/2) = 96 -> 1104 per row, batch 2.
  const SettingWork w = WorkOf(Vanilla(), Setting("forward", 2, 3, 0), 32);
  EXPECT_DOUBLE_EQ(w.flops, 2208);
  EXPECT_DOUBLE_EQ(w.bytes, 880);
  EXPECT_EQ(w.decode_steps, 0);
  EXPECT_DOUBLE_EQ(w.decode_bytes, 0);
}

TEST(RooflineTest, VanillaTrainStep) {
  // 3x the forward's FLOPs (backward: input and weight gradients), 10x its
  // weight bytes (forward and backward reads, gradient written and read,
  // weight and both moments read and written).
  const SettingWork w = WorkOf(Vanilla(), Setting("train", 2, 3, 0), 32);
  EXPECT_DOUBLE_EQ(w.flops, 3 * 2208);
  EXPECT_DOUBLE_EQ(w.bytes, 10 * 880);
  EXPECT_EQ(w.decode_steps, 0);
}

TEST(RooflineTest, VanillaGeneration) {
  // Prefill as the forward, + the cache written: 2 rows * 3 entries * 32 B.
  // Decode: 2 steps of 336 + attention 4*4*(2*3 + 3) = 144 -> 816 per row;
  // bytes 2 * 880 + 2 rows * 32 B * (2*3 + 3) entries read = 2336.
  const SettingWork w =
      WorkOf(Vanilla(), Setting("decode-heavy", 2, 3, 2), 32);
  EXPECT_DOUBLE_EQ(w.flops, 2208);
  EXPECT_DOUBLE_EQ(w.bytes, 1072);
  EXPECT_EQ(w.decode_steps, 2);
  EXPECT_DOUBLE_EQ(w.decode_flops, 1632);
  EXPECT_DOUBLE_EQ(w.decode_bytes, 2336);
}

TEST(RooflineTest, BlockForward) {
  // Per block: block decoder 256; token decoder: expansion 2*1*2*4 = 16,
  // C = P + L_B - 1 = 2 positions * 2 (4*4 + 2*2*4) = 128, attention
  // 4*2*3 = 24, LM head 2 * 2*10*2 = 80 -> 248. 4 tokens = 2 blocks:
  // 2*256 + block attention 4*4*3 = 48 + 2*248 = 1056.
  const SettingWork w = WorkOf(Block(), Setting("forward", 1, 4, 0), 16);
  EXPECT_DOUBLE_EQ(w.flops, 1056);
  EXPECT_DOUBLE_EQ(w.bytes, 720 + 232 + 80 + 40);
}

TEST(RooflineTest, BlockForwardWithBf16Matrices) {
  // matrix_bytes 2 (a --dtype bf16 CUDA artifact): the block decoder's 128
  // matrix elements at 2 B and its 52 vector elements at 4 B = 464; the
  // token decoder's 32 + 26 -> 168; the LM head 20 * 2 = 40; the expansion
  // stays f32 (40). FLOPs do not change.
  const SettingWork w = WorkOf(Block(), Setting("forward", 1, 4, 0), 16, 2);
  EXPECT_DOUBLE_EQ(w.flops, 1056);
  EXPECT_DOUBLE_EQ(w.bytes, 464 + 168 + 40 + 40);
}

TEST(RooflineTest, MatrixWeightBytesFromTheManifest) {
  proto::Manifest m;
  proto::EntryPoint *ep = m.add_entry_points();
  ep->add_params("w");
  EXPECT_DOUBLE_EQ(MatrixWeightBytes(m), 4);
  ep->add_param_dtypes(proto::F32);
  EXPECT_DOUBLE_EQ(MatrixWeightBytes(m), 4);
  m.add_entry_points()->add_param_dtypes(proto::BF16);
  EXPECT_DOUBLE_EQ(MatrixWeightBytes(m), 2);
}

TEST(RooflineTest, BlockGeneration) {
  // Prefill of 2 blocks: 2*256 + 48 = 560 FLOPs, 720 B + 2 entries * 16 B.
  // Decode of 4 tokens = 2 decode_tokens (2 * 248) + 1 decode_block (256 +
  // attention over 2 cached entries and itself, 4*4*3 = 48) = 800 FLOPs;
  // bytes 2 * (2 * (232 + 80) + 40) + 720 + 16 * 3 = 2096.
  const SettingWork w = WorkOf(Block(), Setting("prefill-heavy", 1, 4, 4), 16);
  EXPECT_DOUBLE_EQ(w.flops, 560);
  EXPECT_DOUBLE_EQ(w.bytes, 752);
  EXPECT_EQ(w.decode_steps, 4);
  EXPECT_DOUBLE_EQ(w.decode_flops, 800);
  EXPECT_DOUBLE_EQ(w.decode_bytes, 2096);
}

TEST(RooflineTest, ReportLinesPerPhase) {
  MachineBounds m;
  m.bandwidth = 1e3; // B/s
  m.gemm_peak = 1e3; // FLOP/s
  m.triad_bytes_per_array = 1024;
  m.gemm_n = 8;
  BenchResult fwd, gen;
  fwd.setting = Setting("forward", 1, 4, 0);
  fwd.seconds = 2.112; // bound max(1056, 1072) / 1e3 = 1.072 s: 50.8 %
  gen.setting = Setting("prefill-heavy", 1, 4, 4);
  gen.prefill_seconds = 0.752; // bound 0.752 s (memory): 100 %
  gen.decode_seconds = 4.192;  // bound 2.096 s (memory): 50 %
  const std::string s = FormatRoofline(m, Block(), 16, {fwd, gen});
  EXPECT_THAT(s, HasSubstr("memory bandwidth 0.00 GB/s"));
  EXPECT_THAT(s, HasSubstr("forward            1 call"));
  EXPECT_THAT(s, HasSubstr("50.8%"));
  EXPECT_THAT(s, HasSubstr("prefill-heavy      1 prefill"));
  EXPECT_THAT(s, HasSubstr("100.0%"));
  EXPECT_THAT(s, HasSubstr("prefill-heavy      1 decode"));
  EXPECT_THAT(s, HasSubstr(" memory "));
  EXPECT_THAT(s, HasSubstr("50.0%"));
}

// The emulator's planned-max-batch line (DerivedEfficiencyOf): a counted
// decode-heavy run of Block() at batch 2, 4/2, which read its minimum +
// 1000 B and wrote 200 B over its 4 generated tokens (excess 300 B per
// token), with 12 launches and 400 GEMM FLOPs; derived at batch 10, 8/4 (40
// generated tokens): that setting's minimum per token + 300 B, the 12 / 2
// = 6 launches per decode step over 10 rows = 0.6 per token, 100 FLOPs per
// token as counted.
BenchResult CountedDecode(int64_t batch, int64_t extra_read) {
  BenchResult r;
  r.setting = Setting("decode-heavy", batch, 4, 2);
  const SettingWork w = WorkOf(Block(), r.setting, 16);
  r.traffic.global_bytes_read =
      static_cast<int64_t>(w.decode_bytes) + extra_read;
  r.traffic.global_bytes_written = 200;
  r.traffic.kernel_launches = 12;
  r.traffic.gemm_flops = 400;
  return r;
}

TEST(RooflineTest, DerivedEfficiencyAddsTheCountedExcessPerRow) {
  const BenchResult counted = CountedDecode(2, 1000);
  BenchSetting target = Setting("decode-heavy", 10, 8, 4);
  target.max_batch = true;
  const TokenEfficiency e = DerivedEfficiencyOf(Block(), 16, counted, target);
  const double min = WorkOf(Block(), target, 16).decode_bytes / 40;
  EXPECT_DOUBLE_EQ(e.tokens, 40);
  EXPECT_DOUBLE_EQ(e.min_bytes, min);
  EXPECT_DOUBLE_EQ(e.bytes_read, min + 300);
  EXPECT_DOUBLE_EQ(e.bytes_written, 0);
  EXPECT_DOUBLE_EQ(e.launches, 0.6);
  EXPECT_DOUBLE_EQ(e.gemm_flops, 100);
  // Nothing to derive from: no emulator counts, or a forward.
  BenchResult uncounted = counted;
  uncounted.traffic = DeviceTraffic();
  EXPECT_EQ(DerivedEfficiencyOf(Block(), 16, uncounted, target).tokens, 0);
  BenchResult forward = counted;
  forward.setting = Setting("forward", 2, 4, 0);
  EXPECT_EQ(DerivedEfficiencyOf(Block(), 16, forward, target).tokens, 0);
}

TEST(RooflineTest, DerivedLineComesFromTheLargestCountedBatch) {
  // Batch 1 with a far larger excess: the line derives from batch 2.
  BenchSetting target = Setting("decode-heavy", 10, 8, 4);
  target.max_batch = true;
  const std::string s = FormatEfficiency(
      Block(), 16, {CountedDecode(1, 100000), CountedDecode(2, 1000)}, 4,
      {target});
  EXPECT_THAT(s, HasSubstr("derived per generated token, not run"));
  const TokenEfficiency e =
      DerivedEfficiencyOf(Block(), 16, CountedDecode(2, 1000), target);
  const size_t at = s.find("decode-heavy*");
  ASSERT_NE(at, std::string::npos) << s;
  const std::string line = s.substr(at, s.find('\n', at) - at);
  EXPECT_THAT(line, HasSubstr("decode-heavy*     10     8/4         2     4/2"))
      << line;
  EXPECT_THAT(line, HasSubstr(absl::StrFormat(
                        " 0.60 %11.3f %11.3f %7.3f ", e.min_bytes / 1e6,
                        e.bytes_read / 1e6, e.bytes_read / e.min_bytes)))
      << line;
}

TEST(RooflineTest, MeasuresPositiveBounds) {
  const MachineBounds m = MeasureMachineBounds(1);
  EXPECT_GT(m.bandwidth, 0);
  EXPECT_GT(m.gemm_peak, 0);
}

} // namespace
} // namespace bt::rt
