//===- value.h - a tensor the generation keeps between calls ---*- C++ -*-===//
//
// Internal to runtime/generate (generate.cc): the generation loop's values —
// host tensors, or on the resident path (Device::resident_calls) tensors in
// the model's device memory, owned (released with the last Value viewing
// them) or borrowed (a recording's outputs, Model::RecordedEntry).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_GENERATE_VALUE_H
#define BT_RUNTIME_GENERATE_VALUE_H

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/base/tensor.h"
#include "bt/runtime/device/device.h"

namespace bt::rt::generate_internal {

/// A tensor the generation keeps between calls: a host tensor, or on the
/// resident path (Device::resident_calls) a tensor in the model's device
/// memory, released when the last Value viewing it goes.
class Value {
public:
  Value() = default;
  explicit Value(Tensor t) : host_(std::move(t)) {}
  Value(const Value &o) : host_(o.host_.Share()), view_(o.view_), owner_(o.owner_) {}
  Value(Value &&) = default;
  Value &operator=(const Value &o) {
    if (this != &o) {
      host_ = o.host_.Share();
      view_ = o.view_;
      owner_ = o.owner_;
    }
    return *this;
  }
  Value &operator=(Value &&) = default;
  static Value Resident(Device &device, DeviceTensor t) {
    Value v;
    v.view_ = t;
    v.owner_ = std::shared_ptr<const DeviceTensor>(
        new DeviceTensor(std::move(t)), [&device](const DeviceTensor *p) {
          device.Release(*p);
          delete p;
        });
    return v;
  }
  /// A view of device memory that something else owns and releases (a
  /// recording's output, RecordedCall::outputs): never released by a Value.
  static Value Borrowed(DeviceTensor t) {
    Value v;
    v.view_ = t;
    v.owner_ = std::make_shared<const DeviceTensor>(std::move(t));
    return v;
  }
  /// Uploads `t` when `device` is set (resident), else keeps it.
  static absl::StatusOr<Value> Make(Device *device, Tensor t) {
    if (device == nullptr)
      return Value(std::move(t));
    BT_ASSIGN_OR_RETURN(DeviceTensor d, device->Upload(t));
    return Resident(*device, std::move(d));
  }

  bool resident() const { return owner_ != nullptr; }
  const Tensor &host() const { return host_; }
  const DeviceTensor *device() const { return &view_; }
  DType dtype() const { return resident() ? view_.dtype : host_.dtype(); }
  const std::vector<int64_t> &shape() const {
    return resident() ? view_.shape : host_.shape();
  }
  int64_t nbytes() const {
    int64_t n = static_cast<int64_t>(DTypeSize(dtype()));
    for (int64_t d : shape())
      n *= d;
    return n;
  }
  /// A view of rows [0, rows) of dim 0.
  absl::StatusOr<Value> Rows(int64_t rows) const {
    if (!resident()) {
      BT_ASSIGN_OR_RETURN(Tensor t, host_.SliceRows(0, rows));
      return Value(std::move(t));
    }
    Value v = *this;
    v.view_.shape[0] = rows;
    return v;
  }
  /// A view of the same elements with `shape`.
  absl::StatusOr<Value> Reshaped(std::vector<int64_t> shape) const {
    if (!resident()) {
      BT_ASSIGN_OR_RETURN(Tensor t, host_.Reshaped(std::move(shape)));
      return Value(std::move(t));
    }
    Value v = *this;
    v.view_.shape = std::move(shape);
    return v;
  }
  /// The host tensor: a Share(), or a download from `device`.
  absl::StatusOr<Tensor> ToHost(Device &device) const {
    if (!resident())
      return host_.Share();
    BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(view_.dtype, view_.shape));
    BT_RETURN_IF_ERROR(device.Download(view_, t));
    return t;
  }

private:
  Tensor host_;
  DeviceTensor view_;
  std::shared_ptr<const DeviceTensor> owner_;
};

using ValueMap = std::map<std::string, Value>;

} // namespace bt::rt::generate_internal

#endif // BT_RUNTIME_GENERATE_VALUE_H
