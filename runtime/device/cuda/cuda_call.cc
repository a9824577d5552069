//===- cuda_call.cc - calling CUDA-target entry points on device buffers --===//
//
// See bt/runtime/cuda.h (UploadTensor, CallDeviceEntryPoint,
// _mlir_ciface_bt_gpu_sample) and docs/abi.md, "Kernel library (CUDA
// target)": the same argv layout as the CPU target (bt/runtime/kernels.h),
// with every memref descriptor pointing to device memory.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

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
  // Hands `address` over to the caller (it is not released with the call).
  void Disown(uint64_t address) { blocks_.erase(address); }

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

namespace {

// Calls `fn` on device descriptors: `params` and the resident `args` in
// place, the host `args` copied into blocks owned by `buffers`. After the
// stream synchronization the host in-out args are copied back. Returns the
// result descriptor words; the outputs' blocks are owned by `buffers`.
// `captured`: the call runs under a stream capture, which forbids the
// synchronization (the args are all resident or host scalars then).
absl::StatusOr<std::vector<int64_t>>
InvokeOnDevice(CudaBackend &gpu, KernelEntryFn fn, const proto::EntryPoint &ep,
               absl::Span<const DeviceTensor *const> params,
               absl::Span<const DeviceArg> args, CallBuffers &buffers,
               bool captured = false) {
  const std::string what = absl::StrCat("entry point '", ep.name(), "'");
  BT_RETURN_IF_ERROR(
      entry_call::CheckArity(what, fn, ep, params.size(), args.size()));
  std::vector<std::vector<int64_t>> argv;
  argv.reserve(params.size() + args.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i] == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": param '", ep.params(i), "' is missing"));
    argv.push_back(DeviceDescriptor(params[i]->address, params[i]->shape));
  }
  std::vector<uint64_t> host_copies(args.size(), 0);
  for (size_t i = 0; i < args.size(); ++i) {
    const proto::TensorSpec &spec = ep.inputs(i);
    if (const DeviceTensor *d = args[i].device) {
      if (spec.host_scalar())
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": input '", spec.name(),
            "' is passed by value (host_scalar) and must be a host tensor, "
            "not a resident device tensor"));
      if (d->dtype != spec.dtype() ||
          static_cast<int>(d->shape.size()) != spec.shape_size())
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": resident input '", spec.name(), "' is ",
            DTypeName(d->dtype), ShapeToString(d->shape), ", expected ",
            DTypeName(spec.dtype()), " of rank ", spec.shape_size()));
      argv.push_back(DeviceDescriptor(d->address, d->shape));
      continue;
    }
    BT_RETURN_IF_ERROR(entry_call::CheckInput(what, spec, args[i].host));
    if (spec.host_scalar()) {
      // By value: the host code reads it where it is (bt.host_scalar).
      argv.push_back(entry_call::DenseDescriptor(
          reinterpret_cast<intptr_t>(args[i].host->data()),
          args[i].host->shape()));
      continue;
    }
    BT_ASSIGN_OR_RETURN(DeviceTensor d, UploadTensor(gpu, *args[i].host));
    buffers.Own(d.address);
    host_copies[i] = d.address;
    argv.push_back(DeviceDescriptor(d.address, d.shape));
  }

  gpu.MakeCurrent();
  absl::StatusOr<std::vector<int64_t>> invoked = entry_call::InvokeWith(
      fn, ep, argv, [&gpu](KernelEntryFn f, void **a) {
        return gpu.RunHostCode(f, a);
      });
  if (!invoked.ok())
    return absl::Status(invoked.status().code(),
                        absl::StrCat(what, ": ", invoked.status().message()));
  std::vector<int64_t> result = std::move(*invoked);
  // The outputs' device buffers belong to this call from here on (freed
  // once, even when outputs share one).
  for (const int64_t *w : entry_call::OutputDescriptors(ep, result))
    buffers.Own(static_cast<uint64_t>(w[0]));
  if (captured)
    return result;
  BT_RETURN_IF_ERROR(gpu.Synchronize());

  // Host in-out args: the kernel updated the device copy.
  for (size_t i = 0; i < args.size(); ++i) {
    Tensor *t = args[i].host;
    if (t == nullptr || !ep.inputs(i).inout() || t->nbytes() == 0)
      continue;
    BT_RETURN_IF_ERROR(gpu.CopyToHost(t->data(), host_copies[i],
                                      static_cast<int64_t>(t->nbytes())));
  }
  return result;
}

// Copies output view `v` (device) into the dense host tensor `t`.
absl::Status DownloadOutput(CudaBackend &gpu, const entry_call::OutputView &v,
                            Tensor &t) {
  if (v.numel == 0)
    return absl::OkStatus();
  const int64_t r = static_cast<int64_t>(v.sizes.size());
  for (int64_t i = r - 1; i >= 0; --i) {
    if (v.strides[i] < 0)
      return absl::InvalidArgumentError(absl::StrCat(
          v.what, " has negative stride ", v.strides[i], " in dim ", i));
  }
  const uint64_t base =
      static_cast<uint64_t>(v.aligned) + v.offset * v.itemsize;
  if (v.dense)
    return gpu.CopyToHost(t.data(), base, static_cast<int64_t>(t.nbytes()));
  auto [lo, hi] = Span(0, v.sizes.data(), v.strides.data(), r);
  std::vector<char> span((hi - lo + 1) * v.itemsize);
  BT_RETURN_IF_ERROR(
      gpu.CopyToHost(span.data(), base, static_cast<int64_t>(span.size())));
  entry_call::GatherStrided(span.data(), static_cast<char *>(t.data()),
                            v.itemsize, v.sizes, v.strides);
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<std::vector<Tensor>>
CallDeviceEntryPoint(CudaBackend &gpu, KernelEntryFn fn,
                     const proto::EntryPoint &ep,
                     absl::Span<const DeviceTensor *const> params,
                     absl::Span<Tensor *const> inputs) {
  const std::string what = absl::StrCat("entry point '", ep.name(), "'");
  std::vector<DeviceArg> args(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    args[i].host = inputs[i];
  CallBuffers buffers(gpu);
  BT_ASSIGN_OR_RETURN(std::vector<int64_t> result,
                      InvokeOnDevice(gpu, fn, ep, params, args, buffers));
  const std::vector<const int64_t *> words =
      entry_call::OutputDescriptors(ep, result);
  std::vector<Tensor> outputs;
  for (int o = 0; o < ep.outputs_size(); ++o) {
    BT_ASSIGN_OR_RETURN(entry_call::OutputView v,
                        entry_call::ReadOutput(what, ep.outputs(o), words[o]));
    BT_ASSIGN_OR_RETURN(Tensor t,
                        Tensor::Allocate(ep.outputs(o).dtype(), v.sizes));
    BT_RETURN_IF_ERROR(DownloadOutput(gpu, v, t));
    outputs.push_back(std::move(t));
  }
  return outputs;
}

absl::StatusOr<std::vector<ResidentOutput>>
CallDeviceEntryPointResident(CudaBackend &gpu, KernelEntryFn fn,
                             const proto::EntryPoint &ep,
                             absl::Span<const DeviceTensor *const> params,
                             absl::Span<const DeviceArg> args) {
  const std::string what = absl::StrCat("entry point '", ep.name(), "'");
  CallBuffers buffers(gpu);
  BT_ASSIGN_OR_RETURN(std::vector<int64_t> result,
                      InvokeOnDevice(gpu, fn, ep, params, args, buffers));
  const std::vector<const int64_t *> words =
      entry_call::OutputDescriptors(ep, result);
  std::vector<ResidentOutput> outputs;
  for (int o = 0; o < ep.outputs_size(); ++o) {
    BT_ASSIGN_OR_RETURN(entry_call::OutputView v,
                        entry_call::ReadOutput(what, ep.outputs(o), words[o]));
    ResidentOutput r;
    r.tensor.dtype = ep.outputs(o).dtype();
    r.tensor.shape = v.sizes;
    if (v.numel > 0 && v.dense) {
      // Kept in place: a view of the call's block, which the caller now owns.
      r.tensor.address =
          static_cast<uint64_t>(v.aligned) + v.offset * v.itemsize;
      r.block = static_cast<uint64_t>(v.allocated);
      buffers.Disown(r.block);
    } else if (v.numel > 0) {
      // A strided view (e.g. the last block's context of a [B, N, D] buffer):
      // made dense through the host, as the device has no gather of its own.
      BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(r.tensor.dtype, v.sizes));
      BT_RETURN_IF_ERROR(DownloadOutput(gpu, v, t));
      BT_ASSIGN_OR_RETURN(r.tensor, UploadTensor(gpu, t));
      r.block = r.tensor.address;
    }
    outputs.push_back(std::move(r));
  }
  return outputs;
}

absl::StatusOr<std::unique_ptr<DeviceRecording>>
RecordDeviceEntryPointResident(CudaBackend &gpu, KernelEntryFn fn,
                               const proto::EntryPoint &ep,
                               absl::Span<const DeviceTensor *const> params,
                               absl::Span<const DeviceArg> args) {
  const std::string what = absl::StrCat("entry point '", ep.name(), "'");
  BT_RETURN_IF_ERROR(
      entry_call::CheckArity(what, fn, ep, params.size(), args.size()));
  auto rec = std::unique_ptr<DeviceRecording>(new DeviceRecording());
  rec->gpu_ = &gpu;
  rec->ep_ = &ep;
  // The bindings; the capture sees every non-scalar input as resident.
  std::vector<DeviceTensor> slots(args.size());
  std::vector<DeviceArg> bound(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const proto::TensorSpec &spec = ep.inputs(i);
    DeviceRecording::Binding b;
    const Tensor *host = args[i].host;
    const DeviceTensor *dev = args[i].device;
    if (host != nullptr && spec.host_scalar()) {
      BT_RETURN_IF_ERROR(entry_call::CheckInput(what, spec, host));
      b.kind = DeviceRecording::Binding::kScalar;
      b.scalar.assign(static_cast<const char *>(host->data()), host->nbytes());
      bound[i].host = args[i].host;
      rec->bindings_.push_back(std::move(b));
      continue;
    }
    if (host != nullptr && spec.inout())
      return absl::UnimplementedError(absl::StrCat(
          what, ": in-out input '", spec.name(),
          "' is a host tensor; a recorded call takes in-out inputs resident"));
    if (dev != nullptr && spec.inout()) {
      b.kind = DeviceRecording::Binding::kInPlace;
      b.address = dev->address;
      b.dtype = dev->dtype;
      b.shape = dev->shape;
      bound[i].device = dev;
      rec->bindings_.push_back(std::move(b));
      continue;
    }
    if (host != nullptr)
      BT_RETURN_IF_ERROR(entry_call::CheckInput(what, spec, host));
    b.kind = DeviceRecording::Binding::kSlot;
    b.dtype = host != nullptr ? host->dtype() : dev->dtype;
    b.shape = host != nullptr ? host->shape() : dev->shape;
    b.bytes = static_cast<int64_t>(DTypeSize(b.dtype));
    for (int64_t d : b.shape)
      b.bytes *= d;
    if (b.bytes > 0) {
      BT_ASSIGN_OR_RETURN(b.address, gpu.pool().Allocate(b.bytes));
    }
    slots[i] = DeviceTensor{b.address, b.dtype, b.shape};
    bound[i].device = &slots[i];
    rec->bindings_.push_back(std::move(b));
  }
  // From here the recording owns the slots (its destructor frees them).
  CallBuffers buffers(gpu);
  absl::StatusOr<std::vector<int64_t>> result;
  absl::StatusOr<std::unique_ptr<CudaGraph>> graph =
      gpu.CaptureGraph([&]() -> absl::Status {
        result = InvokeOnDevice(gpu, fn, ep, params, bound, buffers,
                                /*captured=*/true);
        return result.status();
      });
  // The outputs' blocks were allocated during the capture: the graph's, or
  // released by a failed capture.
  const std::vector<const int64_t *> words =
      result.ok() ? entry_call::OutputDescriptors(ep, *result)
                  : std::vector<const int64_t *>();
  for (const int64_t *w : words)
    buffers.Disown(static_cast<uint64_t>(w[0]));
  BT_RETURN_IF_ERROR(graph.status());
  rec->graph_ = std::move(*graph);
  for (int o = 0; o < ep.outputs_size(); ++o) {
    BT_ASSIGN_OR_RETURN(entry_call::OutputView v,
                        entry_call::ReadOutput(what, ep.outputs(o), words[o]));
    if (v.numel > 0 && !v.dense)
      return absl::UnimplementedError(absl::StrCat(
          what, ": output '", ep.outputs(o).name(),
          "' is a strided view; a recorded call needs dense outputs"));
    DeviceTensor t;
    t.dtype = ep.outputs(o).dtype();
    t.shape = v.sizes;
    if (v.numel > 0)
      t.address = static_cast<uint64_t>(v.aligned) + v.offset * v.itemsize;
    rec->outputs_.push_back(std::move(t));
  }
  return rec;
}

DeviceRecording::~DeviceRecording() {
  graph_.reset();
  for (const Binding &b : bindings_)
    if (b.kind == Binding::kSlot && b.address != 0)
      (void)gpu_->pool().Free(b.address);
}

absl::Status DeviceRecording::Replay(absl::Span<const DeviceArg> args) {
  const std::string what =
      absl::StrCat("recorded entry point '", ep_->name(), "'");
  if (args.size() != bindings_.size())
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", args.size(), " inputs, recorded with ", bindings_.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const Binding &b = bindings_[i];
    const std::string &name = ep_->inputs(i).name();
    const Tensor *host = args[i].host;
    const DeviceTensor *dev = args[i].device;
    const DType dtype = host != nullptr ? host->dtype()
                        : dev != nullptr ? dev->dtype
                                         : b.dtype;
    if (host == nullptr && dev == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": input '", name, "' is missing"));
    if (b.kind == Binding::kScalar) {
      if (host == nullptr || host->nbytes() != b.scalar.size() ||
          std::memcmp(host->data(), b.scalar.data(), b.scalar.size()) != 0)
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": host scalar '", name,
            "' differs from its value at the recording (it is part of the "
            "graph)"));
      continue;
    }
    const std::vector<int64_t> &shape = host != nullptr ? host->shape()
                                                        : dev->shape;
    if (dtype != b.dtype || shape != b.shape)
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": input '", name, "' is ", DTypeName(dtype),
          ShapeToString(shape), ", recorded as ", DTypeName(b.dtype),
          ShapeToString(b.shape)));
    if (b.kind == Binding::kInPlace) {
      if (dev == nullptr || dev->address != b.address)
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": in-out input '", name,
            "' is not the tensor of the recording (updated in place)"));
      continue;
    }
    if (host != nullptr)
      BT_RETURN_IF_ERROR(gpu_->CopyToDevice(b.address, host->data(), b.bytes));
    else if (dev->address != b.address)
      BT_RETURN_IF_ERROR(gpu_->CopyOnDevice(b.address, dev->address, b.bytes));
  }
  return gpu_->LaunchGraph(*graph_);
}

namespace {

// The per-row state of the sampling kernels for each (backend, sampler
// handle): a device block of I64 [rows, 2] (EOS flag, error code), and for
// bt_sample the rows' SplitMix64 states I64 [rows] (allocated on its first
// launch).
struct SamplerState {
  uint64_t address = 0;
  uint64_t rng_address = 0;
  int64_t rows = 0;
};

std::mutex &SamplerStatesMutex() {
  static std::mutex m;
  return m;
}

std::map<std::pair<const CudaBackend *, int64_t>, SamplerState> &
SamplerStates() {
  static auto *m =
      new std::map<std::pair<const CudaBackend *, int64_t>, SamplerState>();
  return *m;
}

// The launches bt_sample_greedy and bt_sample are written for
// (lib/Codegen/CUDA/GPUSamplerKernels.cpp): one block of 256 threads per
// row, and the shared memory of their reductions (greedy: value f32, id
// i32, NaN flag i32 per thread; bt_sample: an f64 and an i64 slot).
constexpr int64_t kSampleThreads = 256;
constexpr int32_t kSampleSharedBytes = kSampleThreads * (4 + 4 + 4);
constexpr int32_t kDrawSharedBytes = kSampleThreads * (8 + 8);

} // namespace

namespace {

// SampleOnDevice for logits of element type T: float launches
// bt_sample_greedy / bt_sample, uint16_t (bf16 bits) their _bf16 variants
// (the same parameters: a descriptor's offset and strides count elements).
// With `ids` (a greedy step only), `logits` are the per-tile maxima F32
// [B', T] of bt_lm_head_argmax_bf16 and `ids` their ids I32 [B', T]:
// bt_sample_greedy_partials.
template <typename T>
absl::Status SampleOnDeviceT(CudaBackend &gpu, int64_t handle,
                             const StridedMemRef<T, 2> &logits,
                             const StridedMemRef<int64_t, 1> &tokens,
                             const SamplerCallbackTarget::DeviceStep &step,
                             const StridedMemRef<int32_t, 2> *ids = nullptr) {
  constexpr bool kBf16 = std::is_same_v<T, uint16_t>;
  if (ids != nullptr && (kBf16 || !step.greedy))
    return absl::InternalError(
        "sampling on the device: per-tile maxima of a step that is not "
        "greedy");
  const char *greedy_kernel = ids != nullptr ? "bt_sample_greedy_partials"
                              : kBf16        ? "bt_sample_greedy_bf16"
                                             : "bt_sample_greedy";
  const char *draw_kernel = kBf16 ? "bt_sample_bf16" : "bt_sample";
  const int64_t rows = tokens.sizes[0];
  if (rows <= 0)
    return absl::OkStatus();
  std::lock_guard<std::mutex> lock(SamplerStatesMutex());
  SamplerState &st = SamplerStates()[{&gpu, handle}];
  int64_t first = 0;
  if (st.rows < rows) {
    // Rows only shrink during a generation (finished rows are dropped).
    if (st.address != 0)
      return absl::InternalError(absl::StrCat(
          "sampling on the device: batch of ", rows, " rows for sampler ",
          handle, " whose state has ", st.rows));
    BT_ASSIGN_OR_RETURN(st.address, gpu.pool().Allocate(rows * 2 * 8));
    st.rows = rows;
    // The kernel's first step initializes the state too; zeroed here as
    // well so that the NaN flags EndDeviceSampling reads never depend on a
    // kernel having run (a pooled block holds its last owner's bytes).
    BT_RETURN_IF_ERROR(gpu.Memset(st.address, 0, rows * 2 * 8));
    first = 1;
  }
  // The arguments of the kernels in the NVVM kernel order: each memref as
  // (allocated, aligned, offset, sizes..., strides...), then the scalars.
  const auto ptr = [](const void *p) {
    return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p));
  };
  const int64_t state = static_cast<int64_t>(st.address);
  std::vector<int64_t> words = {
      ptr(logits.allocated), ptr(logits.aligned), logits.offset,
      logits.sizes[0], logits.sizes[1], logits.strides[0], logits.strides[1]};
  if (ids != nullptr)
    words.insert(words.end(),
                 {ptr(ids->allocated), ptr(ids->aligned), ids->offset,
                  ids->sizes[0], ids->sizes[1], ids->strides[0],
                  ids->strides[1]});
  words.insert(words.end(),
               {ptr(tokens.allocated), ptr(tokens.aligned), tokens.offset,
                tokens.sizes[0], tokens.strides[0], state, state, 0, st.rows,
                2, 2, 1});
  if (step.greedy) {
    words.insert(words.end(), {step.step_in_block, first, step.eos_token_id,
                               step.pad_token_id});
    std::vector<void *> params;
    for (int64_t &w : words)
      params.push_back(&w);
    return gpu.Launch(greedy_kernel, rows, 1, 1, kSampleThreads, 1, 1,
                      kSampleSharedBytes, params.data());
  }
  // bt_sample: the rows' stream states, loaded when the sampler hands them
  // over (the first block, or other rows than the device's last block).
  if (st.rng_address == 0) {
    if (step.rng_states == nullptr)
      return absl::InternalError(absl::StrCat(
          "sampling on the device: no random-stream states for sampler ",
          handle));
    BT_ASSIGN_OR_RETURN(st.rng_address, gpu.pool().Allocate(st.rows * 8));
  }
  if (step.rng_states != nullptr)
    BT_RETURN_IF_ERROR(
        gpu.CopyToDevice(st.rng_address, step.rng_states, rows * 8));
  const int64_t rng = static_cast<int64_t>(st.rng_address);
  words.insert(words.end(), {rng, rng, 0, st.rows, 1, step.step_in_block,
                             first, step.eos_token_id, step.pad_token_id});
  double inv_t = step.inv_temperature, top_p = step.top_p;
  int64_t top_k = step.top_k;
  std::vector<void *> params;
  for (int64_t &w : words)
    params.push_back(&w);
  params.push_back(&inv_t);
  params.push_back(&top_k);
  params.push_back(&top_p);
  return gpu.Launch(draw_kernel, rows, 1, 1, kSampleThreads, 1, 1,
                    kDrawSharedBytes, params.data());
}

} // namespace

absl::Status SampleOnDevice(CudaBackend &gpu, int64_t handle,
                            const StridedMemRef<float, 2> &logits,
                            const StridedMemRef<int64_t, 1> &tokens,
                            const SamplerCallbackTarget::DeviceStep &step) {
  return SampleOnDeviceT(gpu, handle, logits, tokens, step);
}

absl::Status SampleOnDevice(CudaBackend &gpu, int64_t handle,
                            const StridedMemRef<uint16_t, 2> &logits,
                            const StridedMemRef<int64_t, 1> &tokens,
                            const SamplerCallbackTarget::DeviceStep &step) {
  return SampleOnDeviceT(gpu, handle, logits, tokens, step);
}

absl::Status SampleOnDevicePartials(
    CudaBackend &gpu, int64_t handle, const StridedMemRef<float, 2> &maxima,
    const StridedMemRef<int32_t, 2> &ids,
    const StridedMemRef<int64_t, 1> &tokens,
    const SamplerCallbackTarget::DeviceStep &step) {
  return SampleOnDeviceT(gpu, handle, maxima, tokens, step, &ids);
}

absl::Status BeginDeviceSampling(CudaBackend &gpu, int64_t handle,
                                 int64_t rows) {
  if (rows <= 0)
    return absl::OkStatus();
  std::lock_guard<std::mutex> lock(SamplerStatesMutex());
  SamplerState &st = SamplerStates()[{&gpu, handle}];
  if (st.address != 0)
    return absl::OkStatus();
  absl::StatusOr<uint64_t> address = gpu.pool().Allocate(rows * 2 * 8);
  // Zeroed: the kernels' first launch then needs no `first` (their NaN and
  // error flags start at 0, the EOS flags are reset at step 0).
  absl::Status zeroed =
      address.ok() ? gpu.Memset(*address, 0, rows * 2 * 8) : address.status();
  if (!zeroed.ok()) {
    if (address.ok())
      (void)gpu.pool().Free(*address);
    SamplerStates().erase({&gpu, handle});
    return zeroed;
  }
  st.address = *address;
  st.rows = rows;
  return absl::OkStatus();
}

absl::Status EndDeviceSampling(CudaBackend &gpu, int64_t handle) {
  SamplerState st;
  {
    std::lock_guard<std::mutex> lock(SamplerStatesMutex());
    auto it = SamplerStates().find({&gpu, handle});
    if (it == SamplerStates().end())
      return absl::OkStatus();
    st = it->second;
    SamplerStates().erase(it);
  }
  std::vector<int64_t> flags(static_cast<size_t>(st.rows * 2));
  absl::Status s = gpu.CopyToHost(flags.data(), st.address,
                                  static_cast<int64_t>(flags.size() * 8));
  (void)gpu.pool().Free(st.address);
  if (st.rng_address != 0)
    (void)gpu.pool().Free(st.rng_address);
  BT_RETURN_IF_ERROR(s);
  // The kernels' error codes (GPUSamplerKernels.cpp), in the CPU sampler's
  // words (generate/sampler.cc).
  for (int64_t r = 0; r < st.rows; ++r) {
    const int64_t code = flags[2 * r + 1];
    if (code == 0)
      continue;
    const char *what = code == 1   ? "has a NaN logit"
                       : code == 2 ? "has a +inf logit"
                       : code == 3 ? "has no finite logit (all -inf)"
                                   : "has an unknown error code";
    return absl::InvalidArgumentError(
        absl::StrCat("sampler (on the device): a row of the batch (row ", r,
                     " when it was sampled) ", what));
  }
  return absl::OkStatus();
}

} // namespace bt::rt

namespace {

// The sampler callback cannot return an error to the kernels: a failed
// device step or copy aborts the process with the callback's name.
void AbortUnlessOk(const absl::Status &s) {
  if (s.ok())
    return;
  std::fprintf(stderr, "bt: _mlir_ciface_bt_gpu_sample: %s\n",
               std::string(s.message()).c_str());
  std::abort();
}

// Copies the span of a device memref view to `host` (when `copy`; else only
// sizes it) and returns the host view of the same elements (offset 0, same
// sizes and strides). The bytes copied count as the sampler's.
template <typename T, int N>
bt::rt::StridedMemRef<T, N> ToHost(bt::rt::CudaBackend &gpu,
                                   const bt::rt::StridedMemRef<T, N> &d,
                                   std::vector<T> &host, uint64_t &base,
                                   bool copy) {
  bt::rt::StridedMemRef<T, N> h = d;
  bool empty = false;
  for (int i = 0; i < N; ++i)
    empty |= d.sizes[i] <= 0;
  auto [lo, hi] = bt::rt::Span(0, d.sizes, d.strides, N);
  host.assign(empty ? 0 : static_cast<size_t>(hi - lo + 1), T());
  base = reinterpret_cast<uintptr_t>(d.aligned + d.offset);
  if (copy && !host.empty()) {
    const int64_t bytes = static_cast<int64_t>(host.size() * sizeof(T));
    absl::Status s = gpu.CopyToHost(host.data(), base, bytes);
    AbortUnlessOk(s);
    gpu.CountSamplerBytes(bytes);
  }
  h.allocated = h.aligned = host.data();
  h.offset = 0;
  return h;
}

// The logits [B, V] of a device view on the host, dense row-major. Rows
// with a gap between them (one step's row of decode_tokens' step_logits
// [B, L_B, V]: row stride L_B * V) are copied one by one, so that only the
// B * V logits cross, not the span; other views are copied as their span
// (ToHost). The bytes count as the sampler's.
template <typename T>
bt::rt::StridedMemRef<T, 2>
LogitsToHost(bt::rt::CudaBackend &gpu, const bt::rt::StridedMemRef<T, 2> &d,
             std::vector<T> &host) {
  const int64_t rows = d.sizes[0], cols = d.sizes[1];
  const bool gapped =
      rows > 1 && cols > 0 && d.strides[1] == 1 && d.strides[0] > cols;
  if (!gapped) {
    uint64_t base = 0;
    return ToHost(gpu, d, host, base, true);
  }
  host.assign(static_cast<size_t>(rows * cols), T());
  const int64_t bytes = cols * static_cast<int64_t>(sizeof(T));
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t src =
        reinterpret_cast<uintptr_t>(d.aligned + d.offset + r * d.strides[0]);
    absl::Status s = gpu.CopyToHost(host.data() + r * cols, src, bytes);
    AbortUnlessOk(s);
    gpu.CountSamplerBytes(bytes);
  }
  bt::rt::StridedMemRef<T, 2> h = d;
  h.allocated = h.aligned = host.data();
  h.offset = 0;
  h.strides[0] = cols;
  h.strides[1] = 1;
  return h;
}

// The current CUDA backend of a sampler callback `name`; aborts when there
// is none or a descriptor is null (`descriptors` false).
bt::rt::CudaBackend *BackendOrAbort(const char *name, bool descriptors) {
  bt::rt::CudaBackend *gpu = bt::rt::CudaBackend::Current();
  if (gpu == nullptr || !descriptors) {
    std::fprintf(stderr, "bt: %s: %s\n", name,
                 gpu == nullptr ? "no CUDA backend is active"
                                : "null memref descriptor");
    std::abort();
  }
  return gpu;
}

// Whether the sampler registered as `sampler` runs the step of logits
// [rows, vocab] on the device (SamplerCallbackTarget::StepOnDevice, which
// fills `step` and counts it).
bool StepsOnDevice(int64_t sampler, int64_t rows, int64_t vocab,
                   int64_t token_rows,
                   bt::rt::SamplerCallbackTarget::DeviceStep &step) {
  bt::rt::SamplerCallbackTarget *target =
      sampler != 0 ? bt::rt::LookupSamplerTarget(sampler) : nullptr;
  return target != nullptr &&
         target->StepOnDevice(rows, vocab, token_rows, step);
}

// A step the sampler runs on the host: the logits to the host, the host's
// callback `host_sample`, the tokens back.
template <typename T>
void SampleOnHost(bt::rt::CudaBackend &gpu, int64_t sampler,
                  bt::rt::StridedMemRef<T, 2> *logits,
                  bt::rt::StridedMemRef<int64_t, 1> *tokens,
                  void (*host_sample)(int64_t, bt::rt::StridedMemRef<T, 2> *,
                                      bt::rt::StridedMemRef<int64_t, 1> *)) {
  std::vector<T> hl;
  std::vector<int64_t> ht;
  uint64_t tbase = 0;
  bt::rt::StridedMemRef<T, 2> l = LogitsToHost(gpu, *logits, hl);
  // The tokens are the sampler's output: copied down only when they are a
  // strided view (the copy back writes their whole span).
  const bool strided = tokens->sizes[0] > 1 && tokens->strides[0] != 1;
  bt::rt::StridedMemRef<int64_t, 1> t =
      ToHost(gpu, *tokens, ht, tbase, strided);
  host_sample(sampler, &l, &t);
  if (!ht.empty()) {
    const int64_t bytes = static_cast<int64_t>(ht.size() * sizeof(int64_t));
    absl::Status s = gpu.CopyToDevice(tbase, ht.data(), bytes);
    gpu.CountSamplerBytes(bytes);
    AbortUnlessOk(s);
  }
}

// The device sampler callback for logits of element type T (float, or
// uint16_t: bf16 bits): a device step when the sampler allows it, else the
// logits to the host and the host's callback `host_sample`.
template <typename T>
void GpuSample(const char *name, int64_t sampler,
               bt::rt::StridedMemRef<T, 2> *logits,
               bt::rt::StridedMemRef<int64_t, 1> *tokens,
               void (*host_sample)(int64_t, bt::rt::StridedMemRef<T, 2> *,
                                   bt::rt::StridedMemRef<int64_t, 1> *)) {
  bt::rt::CudaBackend *gpu =
      BackendOrAbort(name, logits != nullptr && tokens != nullptr);
  bt::rt::SamplerCallbackTarget::DeviceStep step;
  if (StepsOnDevice(sampler, logits->sizes[0], logits->sizes[1],
                    tokens->sizes[0], step)) {
    absl::Status s =
        bt::rt::SampleOnDevice(*gpu, sampler, *logits, *tokens, step);
    AbortUnlessOk(s);
    return;
  }
  SampleOnHost(*gpu, sampler, logits, tokens, host_sample);
}

} // namespace

extern "C" __attribute__((visibility("default"), used)) void
_mlir_ciface_bt_gpu_sample(int64_t sampler,
                           bt::rt::StridedMemRef<float, 2> *logits,
                           bt::rt::StridedMemRef<int64_t, 1> *tokens) {
  GpuSample("_mlir_ciface_bt_gpu_sample", sampler, logits, tokens,
            &_mlir_ciface_bt_rt_sample);
}

extern "C" __attribute__((visibility("default"), used)) void
_mlir_ciface_bt_gpu_sample_bf16(int64_t sampler,
                                bt::rt::StridedMemRef<uint16_t, 2> *logits,
                                bt::rt::StridedMemRef<int64_t, 1> *tokens) {
  GpuSample("_mlir_ciface_bt_gpu_sample_bf16", sampler, logits, tokens,
            &_mlir_ciface_bt_rt_sample_bf16);
}

extern "C" __attribute__((visibility("default"), used)) void
_mlir_ciface_bt_gpu_lm_head_sample_bf16(
    int64_t sampler, bt::rt::StridedMemRef<uint16_t, 2> *x,
    bt::rt::StridedMemRef<uint16_t, 2> *w,
    bt::rt::StridedMemRef<uint16_t, 2> *logits,
    bt::rt::StridedMemRef<int64_t, 1> *tokens,
    bt::rt::StridedMemRef<float, 2> *pv,
    bt::rt::StridedMemRef<int32_t, 2> *pi) {
  bt::rt::CudaBackend *gpu =
      BackendOrAbort("_mlir_ciface_bt_gpu_lm_head_sample_bf16",
                     x != nullptr && w != nullptr && logits != nullptr &&
                         tokens != nullptr && pv != nullptr && pi != nullptr);
  bt::rt::SamplerCallbackTarget::DeviceStep step;
  if (StepsOnDevice(sampler, logits->sizes[0], logits->sizes[1],
                    tokens->sizes[0], step)) {
    if (step.greedy && !step.logits_kept && bt::rt::LMHeadArgmaxEnabled() &&
        bt::rt::LMHeadArgmaxFits(*x, *w, *logits, *pv, *pi)) {
      AbortUnlessOk(bt::rt::LMHeadArgmaxBf16(*gpu, *x, *w, *pv, *pi));
      AbortUnlessOk(bt::rt::SampleOnDevicePartials(*gpu, sampler, *pv, *pi,
                                                   *tokens, step));
      return;
    }
    AbortUnlessOk(bt::rt::LMHeadGemmBf16(*gpu, *x, *w, *logits));
    AbortUnlessOk(
        bt::rt::SampleOnDevice(*gpu, sampler, *logits, *tokens, step));
    return;
  }
  AbortUnlessOk(bt::rt::LMHeadGemmBf16(*gpu, *x, *w, *logits));
  SampleOnHost(*gpu, sampler, logits, tokens, &_mlir_ciface_bt_rt_sample_bf16);
}
