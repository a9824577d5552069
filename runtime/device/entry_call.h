//===- entry_call.h - the argv of a kernel entry point -----------*- C++
//-*-===//
//
// Internal to btrt: the argv marshalling that CallEntryPoint (kernels.cc, CPU
// buffers) and CallDeviceEntryPoint (cuda_call.cc, device buffers) share —
// the same layout for both targets (docs/abi.md, "Kernel ABI"): argv[0] the
// packed result descriptors (when the entry point has outputs), then one
// memref descriptor per param and input, each 3 + 2 * rank int64 words
// {allocated, aligned, offset, sizes[rank], strides[rank]}.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_SRC_ENTRY_CALL_H
#define BT_RUNTIME_SRC_ENTRY_CALL_H

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "bt/proto/bt.pb.h"
#include "bt/runtime/device/kernels.h"
#include "bt/runtime/base/tensor.h"

namespace bt::rt::entry_call {

/// Descriptor words of a dense row-major buffer of `shape` whose first
/// element is at `address` (a host pointer or a device address; offset 0).
inline std::vector<int64_t> DenseDescriptor(int64_t address,
                                            const std::vector<int64_t> &shape) {
  const int64_t r = static_cast<int64_t>(shape.size());
  std::vector<int64_t> w(MemRefDescriptorWords(r));
  w[0] = w[1] = address;
  w[2] = 0;
  int64_t stride = 1;
  for (int64_t i = r - 1; i >= 0; --i) {
    w[3 + i] = shape[i];
    w[3 + r + i] = stride;
    stride *= shape[i];
  }
  return w;
}

/// InvalidArgument (prefixed with `what`, e.g. "entry point 'f'") unless
/// `fn` is set and `num_params` / `num_inputs` match `ep`.
inline absl::Status CheckArity(const std::string &what, KernelEntryFn fn,
                               const proto::EntryPoint &ep, size_t num_params,
                               size_t num_inputs) {
  if (fn == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(what, ": null function"));
  if (num_params != static_cast<size_t>(ep.params_size()))
    return absl::InvalidArgumentError(absl::StrCat(
        what, " takes ", ep.params_size(), " params, got ", num_params));
  if (num_inputs != static_cast<size_t>(ep.inputs_size()))
    return absl::InvalidArgumentError(absl::StrCat(
        what, " takes ", ep.inputs_size(), " inputs, got ", num_inputs));
  return absl::OkStatus();
}

/// InvalidArgument naming the input unless `t` is a valid tensor with the
/// dtype and rank of `spec`.
inline absl::Status CheckInput(const std::string &what,
                               const proto::TensorSpec &spec, const Tensor *t) {
  if (t == nullptr || !t->valid())
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": input '", spec.name(), "' is missing"));
  if (t->dtype() != spec.dtype() || t->rank() != spec.shape_size())
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": input '", spec.name(), "' is ", t->DebugString(),
                     ", expected ", DTypeName(spec.dtype()), " of rank ",
                     spec.shape_size()));
  return absl::OkStatus();
}

/// Calls `fn` with argv = [result descriptors (when `ep` has outputs),
/// args...] through `run(fn, argv)` (an absl::Status: a device's way of
/// running host code, CudaBackend::RunHostCode) and returns the result
/// descriptor words the entry point wrote, the outputs' descriptors one
/// after the other in `ep.outputs()` order, or run's error.
template <typename Run>
absl::StatusOr<std::vector<int64_t>>
InvokeWith(KernelEntryFn fn, const proto::EntryPoint &ep,
           std::vector<std::vector<int64_t>> &args, Run &&run) {
  size_t result_words = 0;
  for (const proto::TensorSpec &o : ep.outputs())
    result_words += MemRefDescriptorWords(o.shape_size());
  std::vector<int64_t> result(result_words, 0);
  std::vector<void *> argv;
  argv.reserve(1 + args.size());
  if (ep.outputs_size() > 0)
    argv.push_back(result.data());
  for (auto &a : args)
    argv.push_back(a.data());
  absl::Status s = run(fn, argv.data());
  if (!s.ok())
    return s;
  return result;
}

/// InvokeWith calling `fn` directly (host code that cannot fail: the CPU).
inline std::vector<int64_t> Invoke(KernelEntryFn fn,
                                   const proto::EntryPoint &ep,
                                   std::vector<std::vector<int64_t>> &args) {
  return *InvokeWith(fn, ep, args, [](KernelEntryFn f, void **argv) {
    f(argv);
    return absl::OkStatus();
  });
}

/// The first word of each output's descriptor in `result` (from Invoke),
/// in `ep.outputs()` order.
inline std::vector<const int64_t *>
OutputDescriptors(const proto::EntryPoint &ep,
                  const std::vector<int64_t> &result) {
  std::vector<const int64_t *> words;
  size_t pos = 0;
  for (const proto::TensorSpec &o : ep.outputs()) {
    words.push_back(result.data() + pos);
    pos += MemRefDescriptorWords(o.shape_size());
  }
  return words;
}

/// One output descriptor, checked against its TensorSpec.
struct OutputView {
  std::string what; // "<what>: output '<name>'", for further errors
  int64_t allocated = 0, aligned = 0, offset = 0;
  std::vector<int64_t> sizes, strides;
  size_t itemsize = 0; // bytes per element of the spec's dtype
  int64_t numel = 0;
  bool dense = false; // row-major contiguous (size-1 dims: any stride)
};

/// Reads the descriptor at `w` of output `o`. InvalidArgument (naming the
/// output) for a negative size, a size other than a static dim of `o`, an
/// element count that overflows, or elements without a buffer.
inline absl::StatusOr<OutputView> ReadOutput(const std::string &what,
                                             const proto::TensorSpec &o,
                                             const int64_t *w) {
  const int64_t r = o.shape_size();
  OutputView v;
  v.what = absl::StrCat(what, ": output '", o.name(), "'");
  v.allocated = w[0];
  v.aligned = w[1];
  v.offset = w[2];
  v.sizes.assign(w + 3, w + 3 + r);
  v.strides.assign(w + 3 + r, w + 3 + 2 * r);
  for (int64_t i = 0; i < r; ++i) {
    if (v.sizes[i] < 0)
      return absl::InvalidArgumentError(absl::StrCat(
          v.what, " has negative size ", v.sizes[i], " in dim ", i));
    if (o.shape(i) >= 0 && v.sizes[i] != o.shape(i))
      return absl::InvalidArgumentError(absl::StrCat(
          v.what, " has shape ", ShapeToString(v.sizes), ", expected ",
          ShapeToString(
              std::vector<int64_t>(o.shape().begin(), o.shape().end()))));
  }
  v.itemsize = DTypeSize(o.dtype());
  auto numel = NumElements(v.sizes, v.itemsize);
  if (!numel.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(v.what, ": ", numel.status().message()));
  v.numel = *numel;
  if (v.numel > 0 && (v.aligned == 0 || v.allocated == 0))
    return absl::InvalidArgumentError(
        absl::StrCat(v.what, " has ", v.numel, " elements but a null buffer"));
  v.dense = true;
  int64_t expect = 1;
  for (int64_t i = r - 1; i >= 0; --i) {
    if (v.sizes[i] != 1 && v.strides[i] != expect)
      v.dense = false;
    expect *= v.sizes[i];
  }
  return v;
}

/// Copies the strided view of `sizes` / `strides` (in elements) starting at
/// `src` into the dense row-major `dst`.
inline void GatherStrided(const char *src, char *dst, size_t itemsize,
                          const std::vector<int64_t> &sizes,
                          const std::vector<int64_t> &strides) {
  const size_t r = sizes.size();
  int64_t numel = 1;
  for (int64_t s : sizes)
    numel *= s;
  std::vector<int64_t> idx(r, 0);
  for (int64_t n = 0; n < numel; ++n) {
    int64_t off = 0;
    for (size_t i = 0; i < r; ++i)
      off += idx[i] * strides[i];
    std::memcpy(dst + n * itemsize, src + off * static_cast<int64_t>(itemsize),
                itemsize);
    for (size_t i = r; i-- > 0;) {
      if (++idx[i] < sizes[i])
        break;
      idx[i] = 0;
    }
  }
}

} // namespace bt::rt::entry_call

#endif // BT_RUNTIME_SRC_ENTRY_CALL_H
