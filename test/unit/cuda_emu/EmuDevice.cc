//===- EmuDevice.cc - the emulated CUDA device for compiler tests ---------===//
//
// See EmuDevice.h.
//
//===----------------------------------------------------------------------===//

#include "EmuDevice.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "bt/runtime/device/cuda/cuda.h"
#include "bt/runtime/device/cuda_emu/cuda_emu.h"
#include "bt/runtime/generate/sampler.h"

namespace bt::test::emu {
namespace {

std::unique_ptr<rt::CudaBackend> &backend() {
  static std::unique_ptr<rt::CudaBackend> b;
  return b;
}

/// The calls below have no error path in the tests: a failure is fatal.
void check(const absl::Status &s, const char *what) {
  if (s.ok())
    return;
  std::fprintf(stderr, "EmuDevice: %s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

} // namespace

bool open(std::string &error) {
  if (backend())
    return true;
  // As the device cuda-emu of runtime/exec/drivers.cc.
  rt::CudaOptions o;
  o.symbols = [](const char *name) { return cuda_emu::LookupSymbol(name); };
  o.symbols_name = cuda_emu::kDeviceName;
  o.emulated = true;
  absl::StatusOr<std::unique_ptr<rt::CudaBackend>> b = rt::CudaBackend::Open(o);
  if (!b.ok()) {
    error = b.status().ToString();
    return false;
  }
  backend() = std::move(*b);
  backend()->MakeCurrent();
  return true;
}

bool loadModule(const std::string &image, std::string &error) {
  absl::Status s = backend()->LoadModule(image);
  if (!s.ok()) {
    error = s.ToString();
    return false;
  }
  return true;
}

void *upload(const void *host, int64_t bytes) {
  absl::StatusOr<uint64_t> d = backend()->pool().Allocate(bytes);
  check(d.status(), "Allocate");
  check(backend()->CopyToDevice(*d, host, bytes), "CopyToDevice");
  return reinterpret_cast<void *>(*d);
}

void download(void *host, const void *device, int64_t bytes) {
  check(backend()->CopyToHost(host, reinterpret_cast<uint64_t>(device), bytes),
        "CopyToHost");
}

bool launch(const std::string &name, const int64_t (&grid)[3],
            const int64_t (&block)[3], int32_t smem,
            std::vector<int64_t> words, std::string &error) {
  std::vector<void *> params;
  for (int64_t &w : words)
    params.push_back(&w);
  absl::Status s =
      backend()->Launch(name.c_str(), grid[0], grid[1], grid[2], block[0],
                        block[1], block[2], smem, params.data());
  if (s.ok())
    s = backend()->Synchronize();
  if (!s.ok()) {
    error = s.ToString();
    return false;
  }
  return true;
}

void release(void *device) {
  check(backend()->pool().Free(reinterpret_cast<uint64_t>(device)), "Free");
}

namespace {
std::map<int64_t, std::unique_ptr<rt::CudaGraph>> &graphs() {
  static std::map<int64_t, std::unique_ptr<rt::CudaGraph>> g;
  return g;
}
} // namespace

int64_t captureGraph(void (*entry)(void **), void **argv, std::string &error) {
  rt::CudaBackend &b = *backend();
  absl::StatusOr<std::unique_ptr<rt::CudaGraph>> g =
      b.CaptureGraph([&] { return b.RunHostCode(entry, argv); });
  if (!g.ok()) {
    error = g.status().ToString();
    return 0;
  }
  const int64_t id = static_cast<int64_t>(graphs().size()) + 1;
  graphs()[id] = std::move(*g);
  return id;
}

bool launchGraph(int64_t id, std::string &error) {
  absl::Status s = backend()->LaunchGraph(*graphs().at(id));
  if (s.ok())
    s = backend()->Synchronize();
  if (!s.ok())
    error = s.ToString();
  return s.ok();
}

int64_t graphNodes(int64_t id) { return graphs().at(id)->nodes(); }

void destroyGraph(int64_t id) { graphs().at(id).reset(); }

namespace {
struct Recorded {
  proto::EntryPoint ep;
  std::unique_ptr<rt::DeviceRecording> rec;
};
std::map<int64_t, std::unique_ptr<Recorded>> &recordings() {
  static std::map<int64_t, std::unique_ptr<Recorded>> r;
  return r;
}

/// Host F32 tensors of `shapes` (zero-filled, or copies of `data`).
std::vector<rt::Tensor> hostTensors(const std::vector<std::vector<int64_t>> &shapes,
                                    const std::vector<const float *> &data) {
  std::vector<rt::Tensor> t;
  for (size_t i = 0; i < shapes.size(); ++i) {
    absl::StatusOr<rt::Tensor> a = rt::Tensor::Allocate(proto::F32, shapes[i]);
    check(a.status(), "Tensor::Allocate");
    if (i < data.size())
      std::memcpy(a->data(), data[i], a->nbytes());
    else
      std::memset(a->data(), 0, a->nbytes());
    t.push_back(std::move(*a));
  }
  return t;
}
} // namespace

int64_t recordEntry(void (*entry)(void **), const std::string &name,
                    const std::vector<std::vector<int64_t>> &shapes,
                    unsigned outRank, std::string &error) {
  auto r = std::make_unique<Recorded>();
  r->ep.set_name(name);
  r->ep.set_symbol("bt_entry_" + name);
  for (size_t i = 0; i < shapes.size(); ++i) {
    proto::TensorSpec *in = r->ep.add_inputs();
    in->set_name("in" + std::to_string(i));
    in->set_dtype(proto::F32);
    for (int64_t d : shapes[i])
      in->add_shape(d);
  }
  proto::TensorSpec *out = r->ep.add_outputs();
  out->set_name("out");
  out->set_dtype(proto::F32);
  for (unsigned i = 0; i < outRank; ++i)
    out->add_shape(-1);
  std::vector<rt::Tensor> host = hostTensors(shapes, {});
  std::vector<rt::DeviceArg> args(host.size());
  for (size_t i = 0; i < host.size(); ++i)
    args[i].host = &host[i];
  absl::StatusOr<std::unique_ptr<rt::DeviceRecording>> rec =
      rt::RecordDeviceEntryPointResident(*backend(), entry, r->ep, {}, args);
  if (!rec.ok()) {
    error = rec.status().ToString();
    return 0;
  }
  r->rec = std::move(*rec);
  const int64_t id = static_cast<int64_t>(recordings().size()) + 1;
  recordings()[id] = std::move(r);
  return id;
}

std::string replayEntry(int64_t id,
                        const std::vector<std::vector<int64_t>> &shapes,
                        const std::vector<const float *> &data,
                        std::vector<float> &out) {
  Recorded &r = *recordings().at(id);
  std::vector<rt::Tensor> host = hostTensors(shapes, data);
  std::vector<rt::DeviceArg> args(host.size());
  for (size_t i = 0; i < host.size(); ++i)
    args[i].host = &host[i];
  absl::Status s = r.rec->Replay(args);
  if (s.ok())
    s = backend()->Synchronize();
  if (!s.ok())
    return s.ToString();
  const rt::DeviceTensor &o = r.rec->outputs().at(0);
  int64_t n = 1;
  for (int64_t d : o.shape)
    n *= d;
  out.resize(static_cast<size_t>(n));
  check(backend()->CopyToHost(out.data(), o.address, n * 4), "CopyToHost");
  return "";
}

void destroyEntry(int64_t id) { recordings().at(id).reset(); }

Counters counters() {
  const rt::DeviceTraffic t = backend()->traffic();
  return {t.kernel_launches, t.gemm_calls, t.graph_launches, t.graph_nodes};
}

namespace {

/// rt::SampleOnDevice of `step` on logits [rows, vocab] (row stride
/// `rowStride`) and tokens [rows], then a synchronization.
bool sampleStep(int64_t handle, const void *logits, int64_t rows,
                int64_t vocab, int64_t rowStride, void *tokens,
                const rt::SamplerCallbackTarget::DeviceStep &step, bool bf16,
                std::string &error) {
  int64_t *t = static_cast<int64_t *>(tokens);
  rt::StridedMemRef<int64_t, 1> tm{t, t, 0, {rows}, {1}};
  absl::Status st;
  if (bf16) {
    uint16_t *l = const_cast<uint16_t *>(static_cast<const uint16_t *>(logits));
    rt::StridedMemRef<uint16_t, 2> lm{l, l, 0, {rows, vocab}, {rowStride, 1}};
    st = rt::SampleOnDevice(*backend(), handle, lm, tm, step);
  } else {
    float *l = const_cast<float *>(static_cast<const float *>(logits));
    rt::StridedMemRef<float, 2> lm{l, l, 0, {rows, vocab}, {rowStride, 1}};
    st = rt::SampleOnDevice(*backend(), handle, lm, tm, step);
  }
  if (!st.ok()) {
    error = st.ToString();
    return false;
  }
  check(backend()->Synchronize(), "Synchronize");
  return true;
}

} // namespace

bool sampleGreedy(int64_t handle, const void *logits, int64_t rows,
                  int64_t vocab, int64_t rowStride, void *tokens, int64_t step,
                  int64_t eos, int64_t pad, std::string &error, bool bf16) {
  rt::SamplerCallbackTarget::DeviceStep s;
  s.step_in_block = step;
  s.eos_token_id = eos;
  s.pad_token_id = pad;
  return sampleStep(handle, logits, rows, vocab, rowStride, tokens, s, bf16,
                    error);
}

bool sampleDraw(int64_t handle, const void *logits, int64_t rows,
                int64_t vocab, int64_t rowStride, void *tokens, int64_t step,
                int64_t eos, int64_t pad, double temperature, int64_t topK,
                double topP, const uint64_t *rngStates, std::string &error,
                bool bf16) {
  rt::SamplerCallbackTarget::DeviceStep s;
  s.step_in_block = step;
  s.eos_token_id = eos;
  s.pad_token_id = pad;
  s.greedy = false;
  s.inv_temperature = 1.0 / temperature;
  s.top_k = topK;
  s.top_p = topP;
  s.rng_states = rngStates;
  return sampleStep(handle, logits, rows, vocab, rowStride, tokens, s, bf16,
                    error);
}

int64_t hostSample(const float *logits, int64_t vocab, double temperature,
                   int64_t topK, double topP, uint64_t &rngState) {
  rt::SamplingOptions o;
  o.greedy = false;
  o.temperature = temperature;
  o.top_k = topK;
  o.top_p = topP;
  rt::Rng rng = rt::Rng::FromState(rngState);
  std::vector<double> scratch;
  absl::StatusOr<int64_t> t =
      rt::SampleToken(o, logits, vocab, 1, rng, scratch);
  rngState = rng.state();
  return t.ok() ? *t : -1;
}

uint64_t rngState(uint64_t seed, uint64_t stream) {
  return rt::Rng(seed, stream).state();
}

std::string endSampling(int64_t handle) {
  absl::Status s = rt::EndDeviceSampling(*backend(), handle);
  return s.ok() ? std::string() : std::string(s.message());
}

namespace {

/// The sampler of lmHeadSample: greedy, every step on the device (the
/// logits kept or not) or on the host.
class GreedyTarget : public rt::SamplerCallbackTarget {
public:
  bool onDevice = true, logitsKept = false;
  int64_t hostSteps = 0, deviceSteps = 0;
  void Step(const rt::StridedMemRef<float, 2> &logits,
            rt::StridedMemRef<int64_t, 1> &tokens) override {
    ++hostSteps;
    for (int64_t r = 0; r < logits.sizes[0]; ++r)
      tokens.aligned[tokens.offset + r * tokens.strides[0]] = rt::ArgMax(
          logits.aligned + logits.offset + r * logits.strides[0],
          logits.sizes[1], logits.strides[1]);
  }
  bool StepOnDevice(int64_t, int64_t, int64_t, DeviceStep &step) override {
    if (!onDevice)
      return false;
    ++deviceSteps;
    step = DeviceStep();
    step.greedy = true;
    step.logits_kept = logitsKept;
    return true;
  }
};

} // namespace

LMHeadStep lmHeadSample(bool onDevice, bool logitsKept, void *x, void *w,
                        void *logits, void *tokens, void *pv, void *pi,
                        int64_t m, int64_t n, int64_t k, int64_t xStride) {
  GreedyTarget target;
  target.onDevice = onDevice;
  target.logitsKept = logitsKept;
  const int64_t handle = rt::RegisterSamplerTarget(&target);
  const int64_t tiles = (n + 63) / 64;
  auto *xp = static_cast<uint16_t *>(x), *wp = static_cast<uint16_t *>(w),
       *lp = static_cast<uint16_t *>(logits);
  auto *tp = static_cast<int64_t *>(tokens);
  auto *vp = static_cast<float *>(pv);
  auto *ip = static_cast<int32_t *>(pi);
  rt::StridedMemRef<uint16_t, 2> xm{xp, xp, 0, {m, k}, {xStride, 1}};
  rt::StridedMemRef<uint16_t, 2> wm{wp, wp, 0, {n, k}, {k, 1}};
  rt::StridedMemRef<uint16_t, 2> lm{lp, lp, 0, {m, n}, {n, 1}};
  rt::StridedMemRef<int64_t, 1> tm{tp, tp, 0, {m}, {1}};
  rt::StridedMemRef<float, 2> vm{vp, vp, 0, {m, tiles}, {tiles, 1}};
  rt::StridedMemRef<int32_t, 2> im{ip, ip, 0, {m, tiles}, {tiles, 1}};
  _mlir_ciface_bt_gpu_lm_head_sample_bf16(handle, &xm, &wm, &lm, &tm, &vm,
                                          &im);
  check(backend()->Synchronize(), "Synchronize");
  LMHeadStep step;
  step.ended = endSampling(handle);
  rt::UnregisterSamplerTarget(handle);
  step.hostSteps = target.hostSteps;
  step.deviceSteps = target.deviceSteps;
  return step;
}

long reports() { return cuda_emu::ReportCount(); }

void setScheduleSeed(unsigned long long seed) {
  cuda_emu::SetScheduleSeed(seed);
}

} // namespace bt::test::emu
