//===- EmuDevice.h - the emulated CUDA device for compiler tests -*- C++ -*-===//
//
// The runtime's CUDA backend over the CUDA emulator (docs/cuda-emulator.md),
// behind an interface without abseil or protobuf, so that tests compiled
// like LLVM (bt-cuda-emu-kernel-tests) can run the kernels they compile.
// EmuDevice.cc is compiled like the runtime (exceptions, RTTI), the rest of
// the test like LLVM, as tools/bt-run's RuntimeBridge.
//
//   std::string error;
//   if (!bt::test::emu::open(error) || !bt::test::emu::loadModule(so, error)) ...
//   void *d = bt::test::emu::upload(host, bytes);   // then bt_entry_<name>
//
// The host code of a CUDA kernel library calls the runtime's GPU ABI
// (bt_gpu_alloc, bt_gpu_launch, ...), which this process defines and
// exports (bt_device_cuda), on the backend `open` made current. A check of
// the emulator that fires prints its report to stderr and exits the process
// with status 1 (CudaOptions::emulated).
//
//===----------------------------------------------------------------------===//

#ifndef BT_TEST_UNIT_CUDA_EMU_EMUDEVICE_H
#define BT_TEST_UNIT_CUDA_EMU_EMUDEVICE_H

#include <cstdint>
#include <string>
#include <vector>

namespace bt::test::emu {

/// Opens the emulated device (once per process) and makes it the backend of
/// the GPU ABI. False with `error` set when it cannot be opened.
bool open(std::string &error);
/// Loads a kernel module image: the emulator's shared object of
/// buildEmulatorKernels + compileToSharedObject (the artifact's cuda_emu
/// section). Replaces the module loaded before.
bool loadModule(const std::string &image, std::string &error);
/// A device buffer of `bytes` (> 0) holding a copy of `host`.
void *upload(const void *host, int64_t bytes);
/// Copies `bytes` of device memory at `device` to `host`.
void download(void *host, const void *device, int64_t bytes);
/// Releases a buffer of `upload` or an output of the host code.
void release(void *device);
/// Launches kernel `name` of the loaded module (rt::CudaBackend::Launch):
/// grid `grid`, block `block`, `smem` bytes of dynamic shared memory, the
/// kernel's parameters as 8-byte words in the NVVM kernel order (each
/// memref as allocated, aligned, offset, sizes..., strides...), and
/// synchronizes. False with `error` set when the launch fails.
bool launch(const std::string &name, const int64_t (&grid)[3],
            const int64_t (&block)[3], int32_t smem,
            std::vector<int64_t> words, std::string &error);
/// The greedy sampler on the device (rt::SampleOnDevice: the kernel
/// bt_sample_greedy of the loaded module) for sampler `handle`: logits F32
/// [rows, vocab] at `logits` with row stride `rowStride` elements, tokens
/// I64 [rows] written to `tokens`; `step` within the block, `eos` (< 0:
/// none), `pad`. False with `error` set when the launch fails. With `bf16`
/// the logits are BF16 (the bits) and the kernel is bt_sample_greedy_bf16.
bool sampleGreedy(int64_t handle, const void *logits, int64_t rows,
                  int64_t vocab, int64_t rowStride, void *tokens, int64_t step,
                  int64_t eos, int64_t pad, std::string &error,
                  bool bf16 = false);
/// Sampling on the device (rt::SampleOnDevice: the kernel bt_sample) for
/// sampler `handle`, as sampleGreedy (bf16: bt_sample_bf16), with
/// `temperature` (> 0), `topK` (0:
/// off), `topP` (1: off); `rngStates` [rows] (the rows' SplitMix64 states)
/// are loaded first when non-null, else the device continues its streams.
bool sampleDraw(int64_t handle, const void *logits, int64_t rows,
                int64_t vocab, int64_t rowStride, void *tokens, int64_t step,
                int64_t eos, int64_t pad, double temperature, int64_t topK,
                double topP, const uint64_t *rngStates, std::string &error,
                bool bf16 = false);
/// The CPU sampler's token (rt::SampleToken) for `logits` [vocab] under the
/// same options, drawing from the stream whose state is `rngState` (advanced
/// by the draw); -1 on its error (NaN, +inf, no finite logit).
int64_t hostSample(const float *logits, int64_t vocab, double temperature,
                   int64_t topK, double topP, uint64_t &rngState);
/// The state of rt::Rng(seed, stream).
uint64_t rngState(uint64_t seed, uint64_t stream);
/// rt::EndDeviceSampling for `handle`: "" or its error (a row with a NaN).
std::string endSampling(int64_t handle);

/// What one call of _mlir_ciface_bt_gpu_lm_head_sample_bf16 did.
struct LMHeadStep {
  int64_t hostSteps = 0, deviceSteps = 0; ///< the sampler's steps
  std::string ended; ///< EndDeviceSampling's error message, "" when OK
};
/// One step of _mlir_ciface_bt_gpu_lm_head_sample_bf16 (the LM head and
/// the sampler in one call, runtime/device/cuda/cuda.h) with a greedy
/// sampler of its own that runs the step on the device, the logits kept or
/// not, or (`onDevice` false) on the host (rt::ArgMax). Device buffers: x
/// BF16 [m, k] (row stride `xStride`), w BF16 [n, k], logits BF16 [m, n],
/// tokens I64 [m], pv F32 and pi I32 [m, ceil(n / 64)], all dense.
LMHeadStep lmHeadSample(bool onDevice, bool logitsKept, void *x, void *w,
                        void *logits, void *tokens, void *pv, void *pi,
                        int64_t m, int64_t n, int64_t k, int64_t xStride);
/// Captures the host code call `entry(argv)` (bt_entry_<name> and its argv)
/// into a CUDA graph on the emulated device (rt::CudaBackend::CaptureGraph:
/// nothing runs; the blocks it allocates become the graph's). Returns the
/// graph's id (> 0), or 0 with `error` set.
int64_t captureGraph(void (*entry)(void **), void **argv, std::string &error);
/// Replays graph `id` and synchronizes. False with `error` set on failure.
bool launchGraph(int64_t id, std::string &error);
/// The number of nodes of graph `id`.
int64_t graphNodes(int64_t id);
/// Destroys graph `id` (its blocks, outputs included, go back to the pool).
void destroyGraph(int64_t id);
/// rt::RecordDeviceEntryPointResident of `entry` (bt_entry_<name>) as an
/// entry point `name` whose inputs are host F32 tensors of `shapes` (every
/// input gets a slot of the recording) and whose one output is F32 of rank
/// `outRank`. Returns the recording's id (> 0), or 0 with `error` set.
int64_t recordEntry(void (*entry)(void **), const std::string &name,
                    const std::vector<std::vector<int64_t>> &shapes,
                    unsigned outRank, std::string &error);
/// DeviceRecording::Replay of recording `id` on host F32 tensors of
/// `shapes` holding `data`, synchronized; the output is copied into `out`.
/// Returns "" or the error.
std::string replayEntry(int64_t id,
                        const std::vector<std::vector<int64_t>> &shapes,
                        const std::vector<const float *> &data,
                        std::vector<float> &out);
/// Destroys recording `id`.
void destroyEntry(int64_t id);
/// The backend's launch counters (rt::DeviceTraffic): kernels and GEMMs the
/// host launched itself, graph replays and the nodes they ran.
struct Counters {
  int64_t kernels = 0, gemms = 0, graphLaunches = 0, graphNodes = 0;
};
Counters counters();
/// Reports of the emulator's checks so far in this process.
long reports();
/// The schedule seed of the launches that follow (as BT_CUDA_EMU_SEED: 0
/// in order, otherwise a permutation of blocks and threads).
void setScheduleSeed(unsigned long long seed);

} // namespace bt::test::emu

#endif // BT_TEST_UNIT_CUDA_EMU_EMUDEVICE_H
