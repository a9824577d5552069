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
#include "bt/runtime/cuda.h"
#include "bt/runtime/status_macros.h"

namespace bt::rt {
namespace {

// Dense row-major descriptor words of a device buffer.
std::vector<int64_t> DeviceDescriptor(uint64_t address,
                                      const std::vector<int64_t> &shape) {
  const int64_t r = static_cast<int64_t>(shape.size());
  std::vector<int64_t> w(MemRefDescriptorWords(r));
  w[0] = w[1] = static_cast<int64_t>(address);
  w[2] = 0;
  int64_t stride = 1;
  for (int64_t i = r - 1; i >= 0; --i) {
    w[3 + i] = shape[i];
    w[3 + r + i] = stride;
    stride *= shape[i];
  }
  return w;
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

// Copies a strided view (base = element `offset` of `src`) into dense `dst`.
void Gather(const char *src, char *dst, size_t itemsize,
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
  if (fn == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(what, ": null function"));
  if (params.size() != static_cast<size_t>(ep.params_size()))
    return absl::InvalidArgumentError(absl::StrCat(
        what, " takes ", ep.params_size(), " params, got ", params.size()));
  if (inputs.size() != static_cast<size_t>(ep.inputs_size()))
    return absl::InvalidArgumentError(absl::StrCat(
        what, " takes ", ep.inputs_size(), " inputs, got ", inputs.size()));

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
    const proto::TensorSpec &spec = ep.inputs(i);
    const Tensor *t = inputs[i];
    if (t == nullptr || !t->valid())
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": input '", spec.name(), "' is missing"));
    if (t->dtype() != spec.dtype() || t->rank() != spec.shape_size())
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": input '", spec.name(), "' is ", t->DebugString(),
          ", expected ", DTypeName(spec.dtype()), " of rank ",
          spec.shape_size()));
    BT_ASSIGN_OR_RETURN(DeviceTensor d, UploadTensor(gpu, *t));
    buffers.Own(d.address);
    input_addresses[i] = d.address;
    args.push_back(DeviceDescriptor(d.address, d.shape));
  }

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
  gpu.MakeCurrent();
  fn(argv.data());

  // The outputs' device buffers belong to this call from here on (freed
  // once, even when outputs share one).
  size_t pos = 0;
  for (const proto::TensorSpec &o : ep.outputs()) {
    buffers.Own(static_cast<uint64_t>(result[pos]));
    pos += MemRefDescriptorWords(o.shape_size());
  }
  BT_RETURN_IF_ERROR(gpu.Synchronize());

  // In-out buffers: the kernel updated the device copy.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!ep.inputs(i).inout() || inputs[i]->nbytes() == 0)
      continue;
    BT_RETURN_IF_ERROR(gpu.CopyToHost(inputs[i]->data(), input_addresses[i],
                                      static_cast<int64_t>(inputs[i]->nbytes())));
  }

  std::vector<Tensor> outputs;
  pos = 0;
  for (const proto::TensorSpec &o : ep.outputs()) {
    const int64_t r = o.shape_size();
    const int64_t *w = result.data() + pos;
    pos += MemRefDescriptorWords(r);
    const uint64_t allocated = static_cast<uint64_t>(w[0]);
    const uint64_t aligned = static_cast<uint64_t>(w[1]);
    const int64_t offset = w[2];
    std::vector<int64_t> sizes(w + 3, w + 3 + r),
        strides(w + 3 + r, w + 3 + 2 * r);
    const std::string ow = absl::StrCat(what, ": output '", o.name(), "'");
    for (int64_t i = 0; i < r; ++i) {
      if (sizes[i] < 0)
        return absl::InvalidArgumentError(absl::StrCat(
            ow, " has negative size ", sizes[i], " in dim ", i));
      if (o.shape(i) >= 0 && sizes[i] != o.shape(i))
        return absl::InvalidArgumentError(absl::StrCat(
            ow, " has shape ", ShapeToString(sizes), ", expected ",
            ShapeToString(
                std::vector<int64_t>(o.shape().begin(), o.shape().end()))));
    }
    const size_t itemsize = DTypeSize(o.dtype());
    auto numel = NumElements(sizes, itemsize);
    if (!numel.ok())
      return absl::InvalidArgumentError(
          absl::StrCat(ow, ": ", numel.status().message()));
    BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(o.dtype(), sizes));
    if (*numel > 0) {
      if (aligned == 0 || allocated == 0)
        return absl::InvalidArgumentError(
            absl::StrCat(ow, " has ", *numel, " elements but a null buffer"));
      bool dense = true;
      int64_t expect = 1;
      for (int64_t i = r - 1; i >= 0; --i) {
        if (sizes[i] != 1 && strides[i] != expect)
          dense = false;
        if (strides[i] < 0)
          return absl::InvalidArgumentError(absl::StrCat(
              ow, " has negative stride ", strides[i], " in dim ", i));
        expect *= sizes[i];
      }
      const uint64_t base = aligned + offset * itemsize;
      if (dense) {
        BT_RETURN_IF_ERROR(gpu.CopyToHost(t.data(), base,
                                          static_cast<int64_t>(t.nbytes())));
      } else {
        auto [lo, hi] = Span(0, sizes.data(), strides.data(), r);
        std::vector<char> span((hi - lo + 1) * itemsize);
        BT_RETURN_IF_ERROR(gpu.CopyToHost(span.data(), base,
                                          static_cast<int64_t>(span.size())));
        Gather(span.data(), static_cast<char *>(t.data()), itemsize, sizes,
               strides);
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
