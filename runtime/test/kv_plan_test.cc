// Tests of bt/runtime/kv_plan.h (the manifest's KV-cache memory plan) and of
// BenchSettingsFor, which sizes `bench --batch max` with it.

#include "bt/runtime/model/kv_plan.h"

#include <limits>

#include "bt/runtime/tooling/bench.h"
#include "bt/runtime/model/config.h"
#include "test_util.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;
using ::testing::HasSubstr;

/// block_tiny's plan as `bt-run plan` prints it: L_B 4, global 2 layers x
/// 2 x 2 heads x 32 x 4 B = 1 KiB per block, local 2 x 2 x 2 x 5 x 32 x 4 B
/// = 5 KiB (P + L_B - 1 = 5 entries), 282,240 f32 parameters.
proto::Manifest TinyManifest() {
  proto::Manifest m;
  auto c = LoadModelConfig(testing::FixturesDir() + "/block_tiny");
  EXPECT_THAT(c.status(), IsOk());
  if (c.ok())
    *m.mutable_config() = *c;
  proto::KVMemoryPlan *p = m.mutable_kv_plan();
  p->set_block_length(4);
  p->set_global_bytes_per_entry(1024);
  p->set_local_bytes_per_sequence(5120);
  p->set_weight_bytes(282240 * 4);
  p->set_source("model ops");
  return m;
}

TEST(KVPlan, EvaluatesTheFormula) {
  // 10 prompt + 12 generated tokens: 3 + 3 blocks (prompt rounded up).
  auto p = PlanKV(TinyManifest(), 10, 12);
  ASSERT_THAT(p.status(), IsOk());
  EXPECT_EQ(p->entries, 6);
  EXPECT_EQ(p->global_bytes, 6 * 1024);
  EXPECT_EQ(p->local_bytes, 5120);
  EXPECT_EQ(p->bytes_per_sequence, 11 * 1024);
  EXPECT_EQ(p->weight_bytes, 1128960);
  // 1 MiB budget: (1048576 - 1128960) < 0: the weights alone do not fit.
  auto none = PlannedMaxBatch(*p, 1 << 20);
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_EQ(*none, 0);
  // 3 MiB: floor((3145728 - 1128960) / 11264) = 179.
  auto mb = PlannedMaxBatch(*p, 3 << 20);
  ASSERT_THAT(mb.status(), IsOk());
  EXPECT_EQ(*mb, 179);
  EXPECT_THAT(PlannedMaxBatch(*p, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "must be positive"));
}

TEST(KVPlan, Errors) {
  proto::Manifest m = TinyManifest();
  EXPECT_THAT(PlanKV(m, -1, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "negative lengths"));
  m.mutable_kv_plan()->set_block_length(0);
  EXPECT_THAT(PlanKV(m, 1, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "malformed"));
  m.clear_kv_plan();
  EXPECT_THAT(PlanKV(m, 1, 4).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "has no KV-cache memory plan"));
  PlannedKV empty;
  EXPECT_THAT(PlannedMaxBatch(empty, 1 << 30).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "nothing to plan"));
}

// issue 14: lengths near 2^63 are an error, not negative byte counts.
TEST(KVPlan, OverflowIsAnError) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  proto::Manifest m = TinyManifest();
  // ceil(2^63-1 / 4) blocks fit; times 1 KiB per block does not.
  EXPECT_THAT(PlanKV(m, kMax, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "overflow a 64-bit byte count"));
  EXPECT_THAT(PlanKV(m, kMax, kMax).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "overflow a 64-bit byte count"));
  // The largest length that fits still plans, with a positive size.
  m.mutable_kv_plan()->set_global_bytes_per_entry(1);
  m.mutable_kv_plan()->set_local_bytes_per_sequence(0);
  auto p = PlanKV(m, kMax, 0);
  ASSERT_THAT(p.status(), IsOk());
  EXPECT_EQ(p->entries, kMax / 4 + 1);
  EXPECT_GT(p->bytes_per_sequence, 0);
}

TEST(KVPlan, ParseByteSize) {
  EXPECT_EQ(*ParseByteSize("8GiB"), int64_t{8} << 30);
  EXPECT_EQ(*ParseByteSize("8G"), int64_t{8} << 30);
  EXPECT_EQ(*ParseByteSize(" 8 gib "), int64_t{8} << 30);
  EXPECT_EQ(*ParseByteSize("8GB"), int64_t{8000000000});
  EXPECT_EQ(*ParseByteSize("1.5KiB"), 1536);
  EXPECT_EQ(*ParseByteSize("4096"), 4096);
  for (const char *bad : {"", "lots", "8XB", "GiB", "-1", "8GiBs", "1e30"})
    EXPECT_THAT(ParseByteSize(bad).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, "expected a size"))
        << bad;
}

TEST(KVPlan, AvailableMemory) {
  auto m = AvailableMemoryBytes();
  ASSERT_THAT(m.status(), IsOk()); // Linux
  EXPECT_GT(*m, 0);
}

TEST(BenchSettingsFor, ForwardGenerationAndPlannedMaxBatch) {
  const proto::Manifest m = TinyManifest();
  auto specs = ParseBenchSettings("forward,prefill-heavy=10/12,decode-heavy=4/20");
  ASSERT_THAT(specs.status(), IsOk());
  std::vector<std::string> notes;
  auto s = BenchSettingsFor(m, *specs, {1, 2}, 8, /*with_max=*/true, 3 << 20,
                            "--memory 3MiB", &notes);
  ASSERT_THAT(s.status(), IsOk());
  ASSERT_EQ(s->size(), 2u + 3u + 3u);
  EXPECT_EQ((*s)[0].name, "forward");
  EXPECT_EQ((*s)[0].planned_kv_bytes_per_sample, 0);
  EXPECT_EQ((*s)[2].name, "prefill-heavy");
  EXPECT_EQ((*s)[2].planned_kv_bytes_per_sample, 11 * 1024);
  EXPECT_FALSE((*s)[3].max_batch);
  EXPECT_TRUE((*s)[4].max_batch);
  EXPECT_EQ((*s)[4].batch, 179);
  // decode-heavy 4 + 20 tokens: 1 + 5 blocks, the same 11 KiB.
  EXPECT_EQ((*s)[7].batch, 179);
  EXPECT_EQ((*s)[7].prompt_tokens, 4);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0],
            "planned max batch for prefill-heavy (10 + 12 tokens): floor((3.00 "
            "MiB --memory 3MiB - 1.08 MiB weights) / 11.00 KiB KV cache per "
            "sequence) = 179 (bt-plan-kv-memory: 6 global entries x 1.00 KiB + "
            "5.00 KiB local scratch)");

  // `--batch max` alone: no forward.
  s = BenchSettingsFor(m, *specs, {}, 8, true, 3 << 20, "m", nullptr);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->size(), 2u);

  // Without a plan: generation settings run, with no planned bytes; --batch
  // max is an error.
  proto::Manifest old = m;
  old.clear_kv_plan();
  s = BenchSettingsFor(old, *specs, {1}, 8, false, 0, "", nullptr);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ((*s)[1].planned_kv_bytes_per_sample, 0);
  EXPECT_THAT(BenchSettingsFor(old, *specs, {1}, 8, true, 3 << 20, "m", nullptr)
                  .status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "compile it again"));
  // A budget below one sequence.
  EXPECT_THAT(
      BenchSettingsFor(m, *specs, {1}, 8, true, 1 << 20, "--memory 1MiB", nullptr)
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "does not fit one sequence"));
  // max without a generation setting.
  auto fwd = ParseBenchSettings("forward");
  EXPECT_THAT(BenchSettingsFor(m, *fwd, {1}, 8, true, 3 << 20, "m", nullptr)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "applies to the generation settings"));
  // Forward lengths are checked (L_B = 4).
  EXPECT_THAT(BenchSettingsFor(m, *fwd, {1}, 6, false, 0, "", nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "multiple of the block"));
}

} // namespace
} // namespace bt::rt
