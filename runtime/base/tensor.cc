//===- tensor.cc - dense host tensors -------------------------------------===//

#include "bt/runtime/base/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace bt::rt {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
  case proto::F32:
  case proto::I32:
    return 4;
  case proto::BF16:
  case proto::F16:
    return 2;
  case proto::I64:
  case proto::F64:
    return 8;
  case proto::I8:
  case proto::U8:
  case proto::BOOL:
    return 1;
  default:
    return 0;
  }
}

std::string DTypeName(DType dtype) {
  switch (dtype) {
  case proto::F32:
    return "F32";
  case proto::BF16:
    return "BF16";
  case proto::F16:
    return "F16";
  case proto::I64:
    return "I64";
  case proto::I32:
    return "I32";
  case proto::F64:
    return "F64";
  case proto::I8:
    return "I8";
  case proto::U8:
    return "U8";
  case proto::BOOL:
    return "BOOL";
  case proto::DTYPE_UNSPECIFIED:
    return "UNSPECIFIED";
  default:
    return absl::StrCat("DTYPE(", static_cast<int>(dtype), ")");
  }
}

absl::StatusOr<DType> ParseDTypeName(absl::string_view name) {
  static const std::pair<const char *, DType> kNames[] = {
      {"F32", proto::F32},   {"BF16", proto::BF16}, {"F16", proto::F16},
      {"I64", proto::I64},   {"I32", proto::I32},   {"F64", proto::F64},
      {"I8", proto::I8},     {"U8", proto::U8},     {"BOOL", proto::BOOL}};
  for (const auto &[n, d] : kNames)
    if (name == n)
      return d;
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported dtype '", name,
      "' (expected one of F32, BF16, F16, I64, I32, F64, I8, U8, BOOL)"));
}

absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape,
                                    size_t itemsize) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("negative dimension in shape ", ShapeToString(shape)));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeToString(shape), " is too large"));
    n *= d;
  }
  if (itemsize > 0 && static_cast<uint64_t>(n) >
                          std::numeric_limits<int64_t>::max() / itemsize)
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", ShapeToString(shape), " is too large"));
  return n;
}

std::string ShapeToString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

float Bf16ToF32(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t F32ToBf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return static_cast<uint16_t>((u >> 16) | 0x0040u); // quiet NaN
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exactly representable in f32.
    float mag = std::ldexp(static_cast<float>(mant), -24);
    std::memcpy(&u, &mag, sizeof u);
    u |= sign;
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);
    if (mant != 0)
      u |= 0x00400000u; // quiet NaN, payload kept
  } else {
    u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

absl::StatusOr<Tensor> Tensor::Allocate(DType dtype,
                                        std::vector<int64_t> shape) {
  const size_t itemsize = DTypeSize(dtype);
  if (itemsize == 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate a tensor of dtype ", DTypeName(dtype)));
  auto n = NumElements(shape, itemsize);
  if (!n.ok())
    return n.status();
  size_t bytes = static_cast<size_t>(*n) * itemsize;
  // aligned_alloc needs a size that is a multiple of the alignment (and > 0).
  size_t padded = (bytes + kTensorAlignment - 1) / kTensorAlignment *
                  kTensorAlignment;
  if (padded == 0)
    padded = kTensorAlignment;
  void *p = std::aligned_alloc(kTensorAlignment, padded);
  if (p == nullptr)
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", padded, " bytes for a ", DTypeName(dtype),
        ShapeToString(shape), " tensor"));
  std::memset(p, 0, padded);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = std::shared_ptr<void>(p, [](void *q) { std::free(q); });
  t.data_ = p;
  return t;
}

Tensor Tensor::Borrow(DType dtype, std::vector<int64_t> shape, void *data,
                      std::shared_ptr<const void> keepalive) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = std::move(keepalive);
  t.data_ = data;
  return t;
}

Tensor Tensor::AdoptMalloced(DType dtype, std::vector<int64_t> shape,
                             void *allocated, void *data) {
  return FromShared(dtype, std::move(shape),
                    std::shared_ptr<void>(allocated,
                                          [](void *q) { std::free(q); }),
                    data);
}

Tensor Tensor::FromShared(DType dtype, std::vector<int64_t> shape,
                          std::shared_ptr<void> storage, void *data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.owner_ = std::move(storage);
  t.data_ = data;
  return t;
}

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape_)
    n *= d;
  return n;
}

size_t Tensor::nbytes() const {
  return static_cast<size_t>(num_elements()) * DTypeSize(dtype_);
}

Tensor Tensor::Share() const {
  Tensor t;
  t.dtype_ = dtype_;
  t.shape_ = shape_;
  t.owner_ = owner_;
  t.data_ = data_;
  return t;
}

absl::StatusOr<Tensor> Tensor::Clone() const {
  auto t = Allocate(dtype_, shape_);
  if (!t.ok())
    return t.status();
  if (nbytes() > 0)
    std::memcpy(t->data(), data_, nbytes());
  return t;
}

absl::StatusOr<Tensor> Tensor::Reshaped(std::vector<int64_t> shape) const {
  auto n = NumElements(shape);
  if (!n.ok())
    return n.status();
  if (*n != num_elements())
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reshape ", DebugString(), " to ",
                     ShapeToString(shape), ": element counts differ"));
  Tensor t = Share();
  t.shape_ = std::move(shape);
  return t;
}

absl::StatusOr<Tensor> Tensor::SliceRows(int64_t begin, int64_t end) const {
  if (rank() == 0 || begin < 0 || begin > end || end > dim(0))
    return absl::InvalidArgumentError(
        absl::StrCat("cannot take rows [", begin, ", ", end, ") of ",
                     DebugString()));
  Tensor t = Share();
  t.shape_[0] = end - begin;
  const size_t row_bytes =
      dim(0) == 0 ? 0 : nbytes() / static_cast<size_t>(dim(0));
  if (data_ != nullptr)
    t.data_ = static_cast<char *>(data_) + static_cast<size_t>(begin) * row_bytes;
  return t;
}

std::string Tensor::DebugString() const {
  return absl::StrCat(DTypeName(dtype_), ShapeToString(shape_));
}

absl::StatusOr<Tensor> ConvertToF32(const Tensor &t, absl::string_view what) {
  switch (t.dtype()) {
  case proto::F32:
  case proto::BF16:
  case proto::F16:
  case proto::F64:
    break;
  default:
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": cannot convert ", t.DebugString(),
                     " to F32 (expected a floating-point dtype F32, BF16, "
                     "F16 or F64)"));
  }
  auto out = Tensor::Allocate(proto::F32, t.shape());
  if (!out.ok())
    return out.status();
  float *dst = out->data_as<float>();
  const int64_t n = t.num_elements();
  const char *src = static_cast<const char *>(t.data());
  // Element reads go through memcpy: the source may be a view into a mapped
  // file without natural alignment.
  switch (t.dtype()) {
  case proto::F32:
    if (n > 0)
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    break;
  case proto::BF16:
    for (int64_t i = 0; i < n; ++i) {
      uint16_t b;
      std::memcpy(&b, src + 2 * i, 2);
      dst[i] = Bf16ToF32(b);
    }
    break;
  case proto::F16:
    for (int64_t i = 0; i < n; ++i) {
      uint16_t b;
      std::memcpy(&b, src + 2 * i, 2);
      dst[i] = F16ToF32(b);
    }
    break;
  case proto::F64:
    for (int64_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, src + 8 * i, 8);
      dst[i] = static_cast<float>(d);
    }
    break;
  default:
    break;
  }
  return out;
}

absl::StatusOr<Tensor> ConvertToBf16(const Tensor &t, absl::string_view what) {
  // F32 (the stored weights) is rounded in one pass; other dtypes go
  // through an F32 copy first.
  Tensor f32;
  if (t.dtype() != proto::F32) {
    absl::StatusOr<Tensor> c = ConvertToF32(t, what);
    if (!c.ok())
      return c.status();
    f32 = std::move(*c);
  }
  absl::StatusOr<Tensor> out = Tensor::Allocate(proto::BF16, t.shape());
  if (!out.ok())
    return out.status();
  const char *src = static_cast<const char *>(
      t.dtype() == proto::F32 ? t.data() : f32.data());
  uint16_t *dst = out->data_as<uint16_t>();
  // memcpy: a mapped weight may lack natural alignment (ConvertToF32).
  for (int64_t i = 0, n = t.num_elements(); i < n; ++i) {
    float x;
    std::memcpy(&x, src + 4 * i, 4);
    dst[i] = F32ToBf16(x);
  }
  return out;
}

} // namespace bt::rt
