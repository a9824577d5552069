//===- cuda_call.cc - calling CUDA-target entry points on device buffers --===//
//
// See bt/runtime/cuda.h (UploadTensor, CallDeviceEntryPoint,
// _mlir_ciface_bt_gpu_sample) and docs/abi.md, "Kernel library (CUDA
// target)": the same argv layout as the CPU target (bt/runtime/kernels.h),
// with every memref descriptor pointing to device memory.
//
//===----------------------------------------------------------------------===//

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "bt/runtime/device/cuda/cuda.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/device/entry_call.h"

namespace bt::rt {
namespace {

// Dense row-major descriptor words of a device buffer.
std::vector<int64_t> DeviceDescriptor(uint64_t address,
                                      const std::vector<int64_t> &shape) {
  return entry_call::DenseDescriptor(static_cast<int64_t>(address), shape);
}

// Device blocks of one call, released to the pool when it ends (also on an
// error path).
class CallBuffers {
public:
  explicit CallBuffers(CudaBackend &gpu) : gpu_(gpu) {}
  ~CallBuffers() {
    for (uint64_t a : blocks_)
      (void)gpu_.pool().Free(a);
  }
  void Own(uint64_t address) {
    if (address != 0)
      blocks_.insert(address);
  }

private:
  CudaBackend &gpu_;
  std::set<uint64_t> blocks_;
};

// The element span [min, max] (in elements from the descriptor's aligned
// pointer) that a strided view with `sizes` > 0 covers; strides >= 0.
std::pair<int64_t, int64_t> Span(int64_t offset, const int64_t *sizes,
                                 const int64_t *strides, int64_t rank) {
  int64_t hi = offset;
  for (int64_t i = 0; i < rank; ++i)
    hi += (sizes[i] - 1) * strides[i];
  return {offset, hi};
}

} // namespace

absl::StatusOr<DeviceTensor> UploadTensor(CudaBackend &gpu, const Tensor &t) {
  DeviceTensor d;
  d.dtype = t.dtype();
  d.shape = t.shape();
  if (t.nbytes() == 0)
    return d;
  BT_ASSIGN_OR_RETURN(d.address,
                      gpu.pool().Allocate(static_cast<int64_t>(t.nbytes())));
  absl::Status s =
      gpu.CopyToDevice(d.address, t.data(), static_cast<int64_t>(t.nbytes()));
  if (!s.ok()) {
    (void)gpu.pool().Free(d.address);
    return s;
  }
  return d;
}

absl::StatusOr<std::vector<Tensor>>
CallDeviceEntryPoint(CudaBackend &gpu, KernelEntryFn fn,
                     const proto::EntryPoint &ep,
                     absl::Span<const DeviceTensor *const> params,
                     absl::Span<Tensor *const> inputs) {
  const std::string what = absl::StrCat("entry point '", ep.name(), "'");
  BT_RETURN_IF_ERROR(
      entry_call::CheckArity(what, fn, ep, params.size(), inputs.size()));

  CallBuffers buffers(gpu);
  std::vector<std::vector<int64_t>> args;
  args.reserve(params.size() + inputs.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i] == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": param '", ep.params(i), "' is missing"));
    args.push_back(DeviceDescriptor(params[i]->address, params[i]->shape));
  }
  std::vector<uint64_t> input_addresses(inputs.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    BT_RETURN_IF_ERROR(entry_call::CheckInput(what, ep.inputs(i), inputs[i]));
    const Tensor *t = inputs[i];
    BT_ASSIGN_OR_RETURN(DeviceTensor d, UploadTensor(gpu, *t));
    buffers.Own(d.address);
    input_addresses[i] = d.address;
    args.push_back(DeviceDescriptor(d.address, d.shape));
  }

  gpu.MakeCurrent();
  const std::vector<int64_t> result = entry_call::Invoke(fn, ep, args);
  const std::vector<const int64_t *> words =
      entry_call::OutputDescriptors(ep, result);

  // The outputs' device buffers belong to this call from here on (freed
  // once, even when outputs share one).
  for (const int64_t *w : words)
    buffers.Own(static_cast<uint64_t>(w[0]));
  BT_RETURN_IF_ERROR(gpu.Synchronize());

  // In-out buffers: the kernel updated the device copy.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!ep.inputs(i).inout() || inputs[i]->nbytes() == 0)
      continue;
    BT_RETURN_IF_ERROR(gpu.CopyToHost(inputs[i]->data(), input_addresses[i],
                                      static_cast<int64_t>(inputs[i]->nbytes())));
  }

  std::vector<Tensor> outputs;
  for (int o = 0; o < ep.outputs_size(); ++o) {
    BT_ASSIGN_OR_RETURN(entry_call::OutputView v,
                        entry_call::ReadOutput(what, ep.outputs(o), words[o]));
    BT_ASSIGN_OR_RETURN(Tensor t,
                        Tensor::Allocate(ep.outputs(o).dtype(), v.sizes));
    if (v.numel > 0) {
      const int64_t r = static_cast<int64_t>(v.sizes.size());
      for (int64_t i = r - 1; i >= 0; --i) {
        if (v.strides[i] < 0)
          return absl::InvalidArgumentError(absl::StrCat(
              v.what, " has negative stride ", v.strides[i], " in dim ", i));
      }
      const uint64_t base =
          static_cast<uint64_t>(v.aligned) + v.offset * v.itemsize;
      if (v.dense) {
        BT_RETURN_IF_ERROR(gpu.CopyToHost(t.data(), base,
                                          static_cast<int64_t>(t.nbytes())));
      } else {
        auto [lo, hi] = Span(0, v.sizes.data(), v.strides.data(), r);
        std::vector<char> span((hi - lo + 1) * v.itemsize);
        BT_RETURN_IF_ERROR(gpu.CopyToHost(span.data(), base,
                                          static_cast<int64_t>(span.size())));
        entry_call::GatherStrided(span.data(), static_cast<char *>(t.data()),
                                  v.itemsize, v.sizes, v.strides);
      }
    }
    outputs.push_back(std::move(t));
  }
  return outputs;
}

} // namespace bt::rt

namespace {

// Copies the span of a device memref view to `host` and returns the host
// view of the same elements (offset 0, same sizes and strides).
template <typename T, int N>
bt::rt::StridedMemRef<T, N> ToHost(bt::rt::CudaBackend &gpu,
                                   const bt::rt::StridedMemRef<T, N> &d,
                                   std::vector<T> &host, uint64_t &base) {
  bt::rt::StridedMemRef<T, N> h = d;
  bool empty = false;
  for (int i = 0; i < N; ++i)
    empty |= d.sizes[i] <= 0;
  auto [lo, hi] = bt::rt::Span(0, d.sizes, d.strides, N);
  host.assign(empty ? 0 : static_cast<size_t>(hi - lo + 1), T());
  base = reinterpret_cast<uintptr_t>(d.aligned + d.offset);
  if (!host.empty()) {
    absl::Status s = gpu.CopyToHost(host.data(), base,
                                    static_cast<int64_t>(host.size() * sizeof(T)));
    if (!s.ok()) {
      std::fprintf(stderr, "bt: _mlir_ciface_bt_gpu_sample: %s\n",
                   std::string(s.message()).c_str());
      std::abort();
    }
  }
  h.allocated = h.aligned = host.data();
  h.offset = 0;
  return h;
}

} // namespace

extern "C" __attribute__((visibility("default"), used)) void
_mlir_ciface_bt_gpu_sample(int64_t sampler,
                           bt::rt::StridedMemRef<float, 2> *logits,
                           bt::rt::StridedMemRef<int64_t, 1> *tokens) {
  bt::rt::CudaBackend *gpu = bt::rt::CudaBackend::Current();
  if (gpu == nullptr || logits == nullptr || tokens == nullptr) {
    std::fprintf(stderr, "bt: _mlir_ciface_bt_gpu_sample: %s\n",
                 gpu == nullptr ? "no CUDA backend is active"
                                : "null memref descriptor");
    std::abort();
  }
  std::vector<float> hl;
  std::vector<int64_t> ht;
  uint64_t lbase = 0, tbase = 0;
  bt::rt::StridedMemRef<float, 2> l = ToHost(*gpu, *logits, hl, lbase);
  bt::rt::StridedMemRef<int64_t, 1> t = ToHost(*gpu, *tokens, ht, tbase);
  _mlir_ciface_bt_rt_sample(sampler, &l, &t);
  if (!ht.empty()) {
    absl::Status s = gpu->CopyToDevice(
        tbase, ht.data(), static_cast<int64_t>(ht.size() * sizeof(int64_t)));
    if (!s.ok()) {
      std::fprintf(stderr, "bt: _mlir_ciface_bt_gpu_sample: %s\n",
                   std::string(s.message()).c_str());
      std::abort();
    }
  }
}
