//===- tensor_test.cc -----------------------------------------------------===//

#include "bt/runtime/base/tensor.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;

TEST(DType, SizesAndNames) {
  EXPECT_EQ(DTypeSize(proto::F32), 4u);
  EXPECT_EQ(DTypeSize(proto::BF16), 2u);
  EXPECT_EQ(DTypeSize(proto::F16), 2u);
  EXPECT_EQ(DTypeSize(proto::I64), 8u);
  EXPECT_EQ(DTypeSize(proto::I32), 4u);
  EXPECT_EQ(DTypeSize(proto::F64), 8u);
  EXPECT_EQ(DTypeSize(proto::BOOL), 1u);
  EXPECT_EQ(DTypeSize(proto::DTYPE_UNSPECIFIED), 0u);
  for (DType d : {proto::F32, proto::BF16, proto::F16, proto::I64, proto::I32,
                  proto::F64, proto::I8, proto::U8, proto::BOOL}) {
    auto parsed = ParseDTypeName(DTypeName(d));
    ASSERT_THAT(parsed.status(), IsOk());
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_THAT(ParseDTypeName("I16").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "'I16'"));
  EXPECT_THAT(ParseDTypeName("f32").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "unsupported dtype"));
}

TEST(Tensor, NumElementsChecksShapes) {
  EXPECT_EQ(*NumElements({}), 1);
  EXPECT_EQ(*NumElements({2, 3, 4}), 24);
  EXPECT_EQ(*NumElements({2, 0, 4}), 0);
  EXPECT_THAT(NumElements({2, -1}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "negative"));
  EXPECT_THAT(NumElements({1LL << 40, 1LL << 40}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "too large"));
  EXPECT_THAT(NumElements({1LL << 31, 1LL << 31}, 8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "too large"));
}

TEST(Tensor, AllocateIsAlignedAndZeroed) {
  auto t = Tensor::Allocate(proto::F32, {3, 5});
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_TRUE(t->valid());
  EXPECT_TRUE(t->has_owner());
  EXPECT_EQ(t->num_elements(), 15);
  EXPECT_EQ(t->nbytes(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()) % kTensorAlignment, 0u);
  for (float v : testing::F32Values(*t))
    EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(t->DebugString(), "F32[3, 5]");

  auto scalar = Tensor::Allocate(proto::I64, {});
  ASSERT_THAT(scalar.status(), IsOk());
  EXPECT_EQ(scalar->num_elements(), 1);
  EXPECT_EQ(scalar->rank(), 0);

  EXPECT_THAT(Tensor::Allocate(proto::DTYPE_UNSPECIFIED, {1}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "dtype"));
  EXPECT_THAT(Tensor::Allocate(proto::F32, {-2}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "negative"));
}

TEST(Tensor, ShareCloneReshapeBorrow) {
  Tensor a = testing::MakeF32({2, 2}, {1, 2, 3, 4});
  Tensor shared = a.Share();
  shared.data_as<float>()[0] = 9;
  EXPECT_EQ(a.data_as<float>()[0], 9);
  auto clone = a.Clone();
  ASSERT_THAT(clone.status(), IsOk());
  clone->data_as<float>()[1] = 7;
  EXPECT_EQ(a.data_as<float>()[1], 2);
  auto r = a.Reshaped({4});
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->shape(), std::vector<int64_t>({4}));
  EXPECT_EQ(r->data(), a.data());
  EXPECT_THAT(a.Reshaped({3}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "element counts"));
  // a is F32[2, 2] {9, 2, 3, 4}.
  auto rows = a.SliceRows(1, 2);
  ASSERT_THAT(rows.status(), IsOk());
  EXPECT_EQ(rows->shape(), std::vector<int64_t>({1, 2}));
  EXPECT_EQ(rows->data_as<float>(), a.data_as<float>() + 2);
  EXPECT_TRUE(rows->has_owner());
  auto none = a.SliceRows(2, 2);
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_EQ(none->shape(), std::vector<int64_t>({0, 2}));
  EXPECT_THAT(a.SliceRows(1, 3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "cannot take rows [1, 3)"));
  EXPECT_THAT(testing::MakeF32({}, {1}).SliceRows(0, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "F32[]"));

  float raw[3] = {1, 2, 3};
  Tensor b = Tensor::Borrow(proto::F32, {3}, raw);
  EXPECT_FALSE(b.has_owner());
  EXPECT_EQ(b.data(), raw);
  auto keep = std::make_shared<int>(5);
  Tensor c = Tensor::Borrow(proto::F32, {3}, raw, keep);
  EXPECT_EQ(keep.use_count(), 2);
  { Tensor d = c.Share(); EXPECT_EQ(keep.use_count(), 3); }
  EXPECT_EQ(keep.use_count(), 2);
}

TEST(Tensor, AdoptMallocedFreesOnce) {
  float *buf = static_cast<float *>(std::malloc(4 * sizeof(float)));
  buf[1] = 42;
  Tensor t = Tensor::AdoptMalloced(proto::F32, {3}, buf, buf + 1);
  Tensor s = t.Share();
  EXPECT_EQ(s.data_as<float>()[0], 42);
  // Both handles go out of scope: freed exactly once (a double free aborts).
}

TEST(Conversions, Bf16IsTheTop16Bits) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 3.140625f, 1e-30f, 65504.0f,
                  std::numeric_limits<float>::infinity()}) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    uint16_t hi = static_cast<uint16_t>(u >> 16);
    float back = Bf16ToF32(hi);
    uint32_t ub;
    std::memcpy(&ub, &back, 4);
    EXPECT_EQ(ub, u & 0xffff0000u) << f;
  }
  // Exhaustive: every bf16 bit pattern maps to (bits << 16).
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = Bf16ToF32(static_cast<uint16_t>(b));
    uint32_t u;
    std::memcpy(&u, &f, 4);
    ASSERT_EQ(u, b << 16);
  }
  // Round to nearest even.
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  uint32_t halfway = 0x3f808000u; // exactly between 0x3f80 and 0x3f81
  float hf;
  std::memcpy(&hf, &halfway, 4);
  EXPECT_EQ(F32ToBf16(hf), 0x3f80);
  halfway = 0x3f818000u;
  std::memcpy(&hf, &halfway, 4);
  EXPECT_EQ(F32ToBf16(hf), 0x3f82);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::nanf("")))));
}

TEST(Conversions, F16AllValues) {
  EXPECT_EQ(F16ToF32(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(F16ToF32(0x8000)));
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);            // max normal
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14)); // min normal
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24)); // min subnormal
  EXPECT_EQ(F16ToF32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(F16ToF32(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isinf(F16ToF32(0x7c00)));
  EXPECT_TRUE(std::isinf(F16ToF32(0xfc00)) && F16ToF32(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(F16ToF32(0x7e00)));
  EXPECT_TRUE(std::isnan(F16ToF32(0x7c01)));
  // Exhaustive against the definition value = (-1)^s * 2^(e-15) * (1 + m/1024).
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t e = (h >> 10) & 31, m = h & 1023;
    if (e == 31)
      continue;
    double v = e == 0 ? std::ldexp(static_cast<double>(m), -24)
                      : std::ldexp(1.0 + m / 1024.0, static_cast<int>(e) - 15);
    if (h & 0x8000)
      v = -v;
    ASSERT_EQ(static_cast<double>(F16ToF32(static_cast<uint16_t>(h))), v) << h;
  }
}

TEST(Conversions, ConvertToF32) {
  auto bf = Tensor::Allocate(proto::BF16, {3});
  ASSERT_THAT(bf.status(), IsOk());
  uint16_t *p = bf->data_as<uint16_t>();
  p[0] = F32ToBf16(1.5f);
  p[1] = F32ToBf16(-2.0f);
  p[2] = F32ToBf16(0.25f);
  auto f = ConvertToF32(*bf);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(testing::F32Values(*f), std::vector<float>({1.5f, -2.0f, 0.25f}));

  auto h = Tensor::Allocate(proto::F16, {2});
  h->data_as<uint16_t>()[0] = 0x3c00;
  h->data_as<uint16_t>()[1] = 0xc400;
  auto g = ConvertToF32(*h);
  ASSERT_THAT(g.status(), IsOk());
  EXPECT_EQ(testing::F32Values(*g), std::vector<float>({1.0f, -4.0f}));

  Tensor ids = testing::MakeI64({1}, {3});
  EXPECT_THAT(ConvertToF32(ids, "input_ids").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "input_ids"));
}

// f32 -> bf16 rounds to nearest, ties to even (the CUDA target's --dtype bf16
// weights): 1 + 2^-8 is a tie between 1 and 1 + 2^-7 and goes to 1 (even),
// 1 + 3·2^-8 a tie that goes up to 1 + 2^-6 (even), 1 + 2^-8 + 2^-20 above
// the tie goes up; NaN stays NaN.
TEST(Conversions, ConvertToBf16RoundsToNearestEven) {
  Tensor f = testing::MakeF32(
      {5}, {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f,
            -3.0f, std::numeric_limits<float>::quiet_NaN()});
  auto b = ConvertToBf16(f, "w");
  ASSERT_THAT(b.status(), IsOk());
  ASSERT_EQ(b->dtype(), proto::BF16);
  const uint16_t *p = b->data_as<uint16_t>();
  EXPECT_EQ(p[0], 0x3f80);
  EXPECT_EQ(p[1], 0x3f82);
  EXPECT_EQ(p[2], 0x3f81);
  EXPECT_EQ(p[3], 0xc040);
  EXPECT_TRUE(std::isnan(Bf16ToF32(p[4])));
  Tensor ids = testing::MakeI64({1}, {3});
  EXPECT_THAT(ConvertToBf16(ids, "input_ids").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "input_ids"));
}

} // namespace
} // namespace bt::rt
