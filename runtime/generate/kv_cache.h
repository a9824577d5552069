//===- kv_cache.h - the generation loop's KV cache -------------*- C++ -*-===//
//
// Internal to runtime/generate (generate.cc): the runtime-owned KV cache of
// a batch (kv_cache and kv_valid, the in-out arguments of the generation
// entry points; docs/generation.md "KV caches across the ABI"), on the host
// or resident in device memory, and its compaction when sequences finish.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_GENERATE_KV_CACHE_H
#define BT_RUNTIME_GENERATE_KV_CACHE_H

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "bt/proto/bt.pb.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/base/tensor.h"
#include "bt/runtime/device/device.h"
#include "bt/runtime/generate/value.h"

namespace bt::rt::generate_internal {

/// The runtime-owned KV cache of a batch: kv_cache [rows, ...] and kv_valid
/// [rows, C], batch-major; the first `live` rows are the current batch. On
/// the resident path they live in device memory for the whole generation
/// (allocated once, zero-filled from the host, updated in place by the
/// kernels). An artifact compiled with the cache length on the device (the
/// CUDA target: bt-lower-kv-caches `device-cache-length`) takes
/// `cache_length` I64 [] in-out too: the cache holds it, starting at 0, and
/// each call advances it by the entries it appends (holds_length()).
class KvCache {
public:
  /// Sizes the cache from the in-out specs of `ep` (prefill), the layout
  /// the compiler put in the artifact (kv_cache [B, Ly, 2, H, C, hd],
  /// kv_valid [B, C]; bt-lower-kv-caches): dim 0 is the batch, the dim
  /// named "C" the capacity, every other dim the spec's static size.
  /// `device`: the resident path's device, or null (host).
  static absl::StatusOr<KvCache> Create(const proto::EntryPoint &ep,
                                        int64_t batch, int64_t capacity,
                                        Device *device) {
    KvCache c;
    c.capacity_ = capacity;
    c.live_ = batch;
    c.device_ = device;
    bool have_kv = false, have_valid = false;
    for (const proto::TensorSpec &s : ep.inputs()) {
      if (!s.inout())
        continue;
      const bool kv = s.name() == "kv_cache";
      if (s.name() == "cache_length" && s.dtype() == proto::I64 &&
          s.shape_size() == 0) {
        BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(proto::I64, {}));
        *t.data_as<int64_t>() = 0;
        BT_ASSIGN_OR_RETURN(c.length_, Value::Make(device, std::move(t)));
        c.holds_length_ = true;
        continue;
      }
      if (!kv && s.name() != "kv_valid")
        return absl::FailedPreconditionError(absl::StrCat(
            "entry point '", ep.name(), "' has in-out argument '", s.name(),
            "'; the runtime provides only kv_cache, kv_valid and "
            "cache_length I64 [] (docs/generation.md)"));
      const int rank = s.shape_size();
      if (rank < 2)
        return absl::FailedPreconditionError(absl::StrCat(
            "entry point '", ep.name(), "': in-out '", s.name(),
            "' has rank ", rank, ", expected [B, .., C, ..]"));
      std::vector<int64_t> shape(rank);
      for (int i = 0; i < rank; ++i) {
        if (i == 0)
          shape[i] = batch;
        else if (i < s.dim_names_size() && s.dim_names(i) == "C")
          shape[i] = capacity;
        else if (s.shape(i) >= 0)
          shape[i] = s.shape(i);
        else
          return absl::FailedPreconditionError(absl::StrCat(
              "entry point '", ep.name(), "': cannot size dim ", i,
              " of in-out '", s.name(), "' (dynamic, and not B or C)"));
      }
      BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(s.dtype(), shape));
      BT_ASSIGN_OR_RETURN(Value v, Value::Make(device, std::move(t)));
      (kv ? c.kv_ : c.valid_) = std::move(v);
      (kv ? have_kv : have_valid) = true;
    }
    if (!have_kv || !have_valid)
      return absl::FailedPreconditionError(absl::StrCat(
          "entry point '", ep.name(),
          "' must take the in-out arguments kv_cache and kv_valid "
          "(TensorSpec.inout, docs/generation.md)"));
    return c;
  }

  /// The in-out arguments for a call: views of the live rows.
  absl::StatusOr<ValueMap> InOuts() const {
    ValueMap m;
    BT_ASSIGN_OR_RETURN(Value kv, kv_.Rows(live_));
    BT_ASSIGN_OR_RETURN(Value valid, valid_.Rows(live_));
    m.emplace("kv_cache", std::move(kv));
    m.emplace("kv_valid", std::move(valid));
    if (holds_length_)
      m.emplace("cache_length", length_);
    return m;
  }

  /// Whether the entry points update `cache_length` in place (an in-out
  /// argument the cache holds); else the caller passes it with each call.
  bool holds_length() const { return holds_length_; }

  /// Keeps the live rows `keep` (ascending indices into the live rows),
  /// moving them down to 0..keep.size()-1; once at most half of the
  /// allocated rows are live, moves them to an exact-size buffer (releasing
  /// the rest). On the resident path the rows move within device memory
  /// (Device::CopyOnDevice, a copy per run of rows); through the host only
  /// where the device cannot copy within its memory.
  absl::Status Keep(const std::vector<int64_t> &keep) {
    live_ = static_cast<int64_t>(keep.size());
    for (Value *v : {&kv_, &valid_}) {
      if (device_ != nullptr) {
        absl::Status s = KeepOnDevice(*v, keep);
        if (s.ok())
          continue;
        if (!absl::IsUnimplemented(s))
          return s;
      }
      BT_RETURN_IF_ERROR(KeepOnHost(*v, keep));
    }
    return absl::OkStatus();
  }

  int64_t bytes() const { return kv_.nbytes() + valid_.nbytes(); }
  int64_t live() const { return live_; }
  int64_t capacity() const { return capacity_; }

private:
  /// Keep for a resident `v` [R, ...]: the kept rows copied in runs of
  /// consecutive rows, in place (a run never overlaps its destination) or
  /// into a new exact-size buffer. Unimplemented (nothing changed) where the
  /// device has no copies within its memory.
  absl::Status KeepOnDevice(Value &v, const std::vector<int64_t> &keep) {
    const DeviceTensor &t = *v.device();
    const int64_t rows = t.shape[0];
    if (rows == 0)
      return absl::OkStatus();
    const uint64_t row = static_cast<uint64_t>(v.nbytes() / rows);
    const bool shrink = live_ > 0 && 2 * live_ <= rows;
    Value dst = v;
    if (shrink) {
      std::vector<int64_t> shape = t.shape;
      shape[0] = live_;
      BT_ASSIGN_OR_RETURN(DeviceTensor n, device_->Allocate(t.dtype, shape));
      dst = Value::Resident(*device_, std::move(n));
    }
    auto rowsAt = [&](const DeviceTensor &base, int64_t r, int64_t n) {
      DeviceTensor d{base.address + static_cast<uint64_t>(r) * row, base.dtype,
                     base.shape};
      d.shape[0] = n;
      return d;
    };
    const int64_t kept = live_;
    for (int64_t j = 0; j < kept;) {
      const int64_t from = keep[j];
      int64_t n = 1;
      // In place, rows [from, from + n) must not reach row j + n.
      while (j + n < kept && keep[j + n] == from + n &&
             (shrink || from == j || j + n < from))
        ++n;
      if (shrink || from != j) {
        BT_RETURN_IF_ERROR(device_->CopyOnDevice(
            rowsAt(t, from, n), rowsAt(*dst.device(), j, n)));
      }
      j += n;
    }
    v = std::move(dst);
    return absl::OkStatus();
  }

  /// Keep for a host `v`, or a resident one through the host (a download,
  /// memmoves, an upload).
  absl::Status KeepOnHost(Value &v, const std::vector<int64_t> &keep) {
    Tensor t;
    if (device_ != nullptr) {
      BT_ASSIGN_OR_RETURN(t, v.ToHost(*device_));
    } else {
      t = v.host().Share();
    }
    const size_t row = t.nbytes() / static_cast<size_t>(t.dim(0));
    char *base = static_cast<char *>(t.data());
    for (size_t j = 0; j < keep.size(); ++j)
      if (keep[j] != static_cast<int64_t>(j))
        std::memmove(base + j * row, base + keep[j] * row, row);
    if (live_ > 0 && 2 * live_ <= t.dim(0)) {
      std::vector<int64_t> shape = t.shape();
      shape[0] = live_;
      BT_ASSIGN_OR_RETURN(Tensor n, Tensor::Allocate(t.dtype(), shape));
      std::memcpy(n.data(), t.data(), n.nbytes());
      t = std::move(n);
    }
    if (device_ != nullptr || t.data() != v.host().data()) {
      BT_ASSIGN_OR_RETURN(v, Value::Make(device_, std::move(t)));
    }
    return absl::OkStatus();
  }

  Value kv_, valid_, length_;
  bool holds_length_ = false;
  Device *device_ = nullptr;
  int64_t live_ = 0, capacity_ = 0;
};

} // namespace bt::rt::generate_internal

#endif // BT_RUNTIME_GENERATE_KV_CACHE_H
