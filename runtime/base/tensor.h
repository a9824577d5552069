//===- tensor.h - dense host tensors ----------------------------*- C++ -*-===//
//
// A dense, row-major host tensor: a dtype (bt.proto DType), a shape and a
// pointer to little-endian element data, either owned (a 64-byte aligned
// allocation, or a malloc'ed buffer adopted from a kernel, docs/abi.md) or
// borrowed (e.g. a view into a memory-mapped safetensors file or artifact,
// optionally kept alive by a shared owner).
//
// Tensors are move-only; aliasing is explicit (Share(), Borrow()) and copying
// is explicit (Clone()).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_TENSOR_H
#define BT_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bt/proto/bt.pb.h"

namespace bt::rt {

using DType = ::bt::proto::DType;

/// Alignment in bytes of every buffer Tensor::Allocate returns (and of weights
/// inside an artifact, docs/abi.md).
inline constexpr size_t kTensorAlignment = 64;

/// Size in bytes of one element of `dtype`: F32/I32 4, BF16/F16 2, I64/F64 8,
/// I8/U8/BOOL 1; 0 for DTYPE_UNSPECIFIED or an unknown enum value.
size_t DTypeSize(DType dtype);

/// The safetensors spelling of `dtype` ("F32", "BF16", "F16", "I64", "I32",
/// "F64", "I8", "U8", "BOOL"); "UNSPECIFIED" for DTYPE_UNSPECIFIED and
/// "DTYPE(<n>)" for values outside the enum.
std::string DTypeName(DType dtype);

/// Parses a safetensors dtype name (exact, case-sensitive, see DTypeName).
/// Errors: InvalidArgument naming `name` for names bt does not support
/// (e.g. "I16", "F8_E4M3") or does not know.
absl::StatusOr<DType> ParseDTypeName(absl::string_view name);

/// Number of elements of `shape` (1 for rank 0). Errors: InvalidArgument if a
/// dimension is negative or the product overflows int64 (or the byte size
/// overflows size_t for `itemsize`, when itemsize > 0).
absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape,
                                    size_t itemsize = 0);

/// "[2, 6, 4]"; "[]" for a scalar.
std::string ShapeToString(absl::Span<const int64_t> shape);

/// bf16 -> f32, exact: a bf16 value is the top 16 bits of an IEEE f32.
float Bf16ToF32(uint16_t bits);
/// f32 -> bf16 with round-to-nearest-even (NaN stays a quiet NaN).
uint16_t F32ToBf16(float value);
/// IEEE binary16 -> f32, exact for every input (normals, subnormals, +-0,
/// +-inf, NaN payloads are kept as quiet NaNs).
float F16ToF32(uint16_t bits);

class Tensor {
public:
  /// An empty tensor: DTYPE_UNSPECIFIED, rank 0, no data (valid() == false).
  Tensor() = default;
  Tensor(Tensor &&) noexcept = default;
  Tensor &operator=(Tensor &&) noexcept = default;
  Tensor(const Tensor &) = delete;
  Tensor &operator=(const Tensor &) = delete;

  /// A new zero-filled owning tensor, 64-byte aligned.
  /// Errors: InvalidArgument for an unspecified/unknown dtype, a negative
  /// dimension or a size overflow; ResourceExhausted if allocation fails.
  static absl::StatusOr<Tensor> Allocate(DType dtype,
                                         std::vector<int64_t> shape);

  /// A non-owning view of `data` (which must hold NumElements(shape) *
  /// DTypeSize(dtype) bytes, suitably aligned for the dtype). `keepalive`, if
  /// given, is held for the lifetime of the view and of every Share() of it
  /// (e.g. the memory mapping `data` points into). Shape and dtype are not
  /// validated here; use Allocate-style checks at the call site.
  static Tensor Borrow(DType dtype, std::vector<int64_t> shape, void *data,
                       std::shared_ptr<const void> keepalive = nullptr);

  /// Takes ownership of a buffer allocated with malloc (kernel outputs,
  /// docs/abi.md): `allocated` is released with free() when the last Tensor
  /// sharing it goes away; `data` points into it (aligned + offset).
  static Tensor AdoptMalloced(DType dtype, std::vector<int64_t> shape,
                              void *allocated, void *data);

  /// A tensor sharing `storage` (any owner) with data at `data`.
  static Tensor FromShared(DType dtype, std::vector<int64_t> shape,
                           std::shared_ptr<void> storage, void *data);

  bool valid() const { return dtype_ != DType::DTYPE_UNSPECIFIED; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i]; }
  /// Product of the dims (1 for a scalar).
  int64_t num_elements() const;
  /// num_elements() * DTypeSize(dtype()).
  size_t nbytes() const;
  /// True if this tensor (or a Share() of it) keeps its buffer alive: an
  /// Allocate/AdoptMalloced/FromShared tensor, or a Borrow with keepalive.
  bool has_owner() const { return owner_ != nullptr; }

  void *data() { return data_; }
  const void *data() const { return data_; }
  template <typename T> T *data_as() { return static_cast<T *>(data_); }
  template <typename T> const T *data_as() const {
    return static_cast<const T *>(data_);
  }
  /// The element bytes.
  absl::string_view bytes() const {
    return absl::string_view(static_cast<const char *>(data_), nbytes());
  }

  /// Another handle on the same data (same owner); writes through either are
  /// visible in both.
  Tensor Share() const;
  /// A deep copy into a new owning, 64-byte aligned buffer.
  absl::StatusOr<Tensor> Clone() const;
  /// Same data viewed with another shape of the same element count.
  /// Errors: InvalidArgument if the element counts differ.
  absl::StatusOr<Tensor> Reshaped(std::vector<int64_t> shape) const;
  /// Rows [begin, end) of dim 0 as a view sharing this tensor's buffer (and
  /// owner): shape [end - begin, dims 1..]. E.g. the live rows of a
  /// batch-major KV cache. Errors: InvalidArgument for a scalar or a range
  /// outside [0, dim(0)].
  absl::StatusOr<Tensor> SliceRows(int64_t begin, int64_t end) const;

  /// "F32[2, 6, 4]".
  std::string DebugString() const;

private:
  DType dtype_ = DType::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape_;
  std::shared_ptr<const void> owner_;
  void *data_ = nullptr;
};

/// Converts a floating-point tensor to a new owning F32 tensor (F32: copy,
/// BF16: exact, F16: exact, F64: rounded). Errors: InvalidArgument naming
/// `what` (e.g. the tensor name) for non-float dtypes.
absl::StatusOr<Tensor> ConvertToF32(const Tensor &t, absl::string_view what = "tensor");

/// Converts a floating-point tensor to a new owning BF16 tensor: each
/// element (F32 directly; other dtypes through ConvertToF32) rounded to
/// nearest even (F32ToBf16; a BF16 input is copied exactly). What the CUDA target's `--dtype bf16`
/// weights go through at upload (runtime/exec/model.cc). Errors: those of
/// ConvertToF32.
absl::StatusOr<Tensor> ConvertToBf16(const Tensor &t, absl::string_view what = "tensor");

} // namespace bt::rt

#endif // BT_RUNTIME_TENSOR_H
