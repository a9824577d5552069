//===- bench.h - throughput benchmarks of a compiled model ------*- C++ -*-===//
//
// The timing harness behind `./model bench` and `bt-run bench` (DESIGN.md
// §5): runs benchmark *settings* on a loaded Model, and optionally the same
// settings on our PyTorch Block Transformer (bench/bt_torch.py --bench) as a
// baseline in a child process, with the same weights and thread count.
//
// A setting is a workload: a name, a batch size and per-row prompt and
// generation lengths. Implemented here:
//   "forward"  the `eval` entry point (logits of a whole sequence) on
//              [batch, prompt_tokens] tokens; tokens per call =
//              batch * prompt_tokens (= B * N_blk * L_B).
// Generation settings ("prefill-heavy" 2048/128, "decode-heavy" 128/2048,
// paper §3) use the same structs and are added with the generate entry
// points (docs/generation.md); until then they are Unimplemented.
//
// Timing: `warmup` untimed calls, then `iters` timed calls; the result is
// the median call time. With the baseline, bt and torch take turns call by
// call (RunSettings), so a shared machine's load affects both alike. Peak
// memory is each process's peak resident set while the setting ran (VmHWM,
// reset per setting through /proc/self/clear_refs).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_BENCH_H
#define BT_RUNTIME_BENCH_H

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bt/runtime/model.h"

namespace bt::rt {

/// Name of the forward (`eval`) setting.
inline constexpr char kForwardSetting[] = "forward";

/// One workload.
struct BenchSetting {
  std::string name = kForwardSetting; // "forward", "prefill-heavy", ...
  int64_t batch = 1;
  /// Tokens per row fed to the model: the sequence of a forward, the
  /// prompt of a generation.
  int64_t prompt_tokens = 0;
  /// Tokens generated per row (0 for a forward).
  int64_t gen_tokens = 0;
};

/// The measurement of one setting by one implementation.
struct BenchResult {
  BenchSetting setting;
  std::string impl;   // "bt" | "torch"
  std::string device; // "cpu"
  std::string model;  // ModelConfig.name
  /// Tokens counted per call (forward: batch * prompt_tokens).
  int64_t tokens = 0;
  /// Median seconds per call over the timed runs.
  double seconds = 0;
  double tokens_per_s = 0;
  /// Peak resident set of the process during the setting, MiB (0: unknown).
  double peak_rss_mb = 0;
  /// Every timed call, seconds, in run order.
  std::vector<double> run_seconds;
};

struct BenchOptions {
  std::string device = "cpu";
  std::vector<BenchSetting> settings;
  int iters = 5;
  int warmup = 1;
  /// BLAS / intra-op threads of both implementations.
  int threads = 2;
  /// Seed of the random token ids.
  uint64_t seed = 0;
  /// "torch" or "none".
  std::string baseline = "torch";
  /// bench/bt_torch.py; empty: $BT_TORCH_SCRIPT, then ./bench/bt_torch.py.
  std::string torch_script;
  /// Interpreter with torch (default /usr/bin/python3, or $BT_PYTHON).
  std::string python;
  /// glibc malloc of the baseline process: "tuned" gives it the settings the
  /// bt runtime uses for itself (Model::Open: never mmap, never trim;
  /// MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=SIZE_MAX), "default" leaves
  /// glibc's defaults (every large tensor a fresh mmap: on the 2-core VM
  /// PyTorch 1.13 then spends most of a block_main_b4_5 forward in page
  /// faults, 2.3 s instead of 0.45 s at batch 1 x 512 tokens).
  std::string torch_malloc = "tuned";
  /// Write the result rows as CSV here (empty: no CSV).
  std::string csv_path;
  /// Seconds between calls of different runners (RunSettings).
  double switch_pause = 0.3;
};

/// Median of `values` (mean of the two middle ones for an even count; 0 for
/// none).
double Median(std::vector<double> values);

/// Forward settings for each batch size, `tokens` tokens per row.
/// Errors: InvalidArgument if a batch is < 1, `tokens` is not a multiple of
/// the block length L_B, or gives fewer than 2 blocks (the first block is
/// never predicted, so `eval` needs N_blk >= 2); vanilla models need
/// tokens >= 1.
absl::StatusOr<std::vector<BenchSetting>>
ForwardSettings(const proto::ModelConfig &config,
                const std::vector<int64_t> &batches, int64_t tokens);

/// Inputs of `eval` for a forward setting: input_ids uniform in
/// [2, vocab_size) from `seed` (ids 0 and 1 are pad/EOS), every mask 1.
/// Block models: input_ids / attention_mask [B, N_blk, L_B],
/// block_attention_mask [B, N_blk]; vanilla: [B, T].
absl::StatusOr<TensorMap> ForwardInputs(const proto::ModelConfig &config,
                                        const BenchSetting &setting,
                                        uint64_t seed);

/// Sets the BLAS thread count of this process (OpenBLAS) and returns the
/// count OpenBLAS reports afterwards.
int SetBenchThreads(int threads);

/// One implementation under test. A setting is prepared once, then timed
/// one call at a time, so that several runners can take turns (RunSettings).
class BenchRunner {
public:
  virtual ~BenchRunner() = default;
  /// "bt" | "torch".
  virtual std::string impl() const = 0;
  /// Builds the inputs of `setting` (ForwardInputs for "forward") and resets
  /// the peak-memory mark. Errors: Unimplemented for a setting the runner
  /// cannot run.
  virtual absl::Status Prepare(const BenchSetting &setting) = 0;
  /// One call of the prepared setting; its wall time in seconds.
  virtual absl::StatusOr<double> Call() = 0;
  /// Peak resident set of the runner's process since Prepare, MiB (0:
  /// unknown).
  virtual absl::StatusOr<double> PeakRssMb() = 0;
};

/// bt: the model's compiled kernels in this process.
class BtRunner : public BenchRunner {
public:
  BtRunner(const Model &model, uint64_t seed) : model_(model), seed_(seed) {}
  std::string impl() const override { return "bt"; }
  /// "forward": the `eval` entry point. Errors: Unimplemented for other
  /// settings (generation entry points, docs/generation.md); NotFound if the
  /// model has no `eval`; InvalidArgument if `eval` takes an input the
  /// forward benchmark does not make.
  absl::Status Prepare(const BenchSetting &setting) override;
  absl::StatusOr<double> Call() override;
  absl::StatusOr<double> PeakRssMb() override;
  /// The inputs of the prepared setting and the outputs of its last call.
  const TensorMap &inputs() const { return inputs_; }
  const TensorMap &outputs() const { return outputs_; }

private:
  const Model &model_;
  uint64_t seed_;
  std::string entry_;
  TensorMap inputs_, outputs_;
};

/// The PyTorch baseline: bench/bt_torch.py --serve in a child process that
/// answers one JSON request per line (protocol in bt_torch.py). Start()
/// writes `model`'s configuration (bt.proto ModelConfig as JSON) and weights
/// (model.safetensors, official names) to a temporary directory, removed by
/// the destructor, and starts the script with OMP_NUM_THREADS,
/// OPENBLAS_NUM_THREADS, MKL_NUM_THREADS = opts.threads,
/// OMP_WAIT_POLICY=PASSIVE (torch.set_num_threads(threads) in the script) and
/// malloc per opts.torch_malloc.
class JsonLineChild;

class TorchRunner : public BenchRunner {
public:
  /// Errors: Unavailable (with the reason) when the script, the interpreter,
  /// torch or numpy cannot be found or started; Internal for a child that
  /// fails otherwise.
  static absl::StatusOr<std::unique_ptr<TorchRunner>>
  Start(const Model &model, const BenchOptions &opts, std::ostream &progress);
  ~TorchRunner() override;
  std::string impl() const override { return "torch"; }
  absl::Status Prepare(const BenchSetting &setting) override;
  absl::StatusOr<double> Call() override;
  absl::StatusOr<double> PeakRssMb() override;
  /// The forward of the baseline on `inputs` (eval's inputs by name); its
  /// logits.
  absl::StatusOr<Tensor> Logits(const TensorMap &inputs);
  /// "torch 1.13.0a0, 2 thread(s)".
  const std::string &description() const { return description_; }

private:
  TorchRunner() = default;
  absl::StatusOr<std::string> Request(const std::string &json_line);
  std::string dir_;
  std::unique_ptr<JsonLineChild> child_;
  std::string description_;
};

/// Runs every setting on every runner and returns the results per runner
/// (same order as `runners`). The runners take turns call by call: for each
/// setting, `warmup + iters` rounds of one call per runner, so that all of
/// them see the same machine load (the benchmark machine may be shared).
/// With several runners, each call waits opts.switch_pause seconds first, so
/// that the BLAS threads of the previous runner, which spin for a while
/// after a call (OpenBLAS: 2^28 cycles, ~0.1 s), are asleep. Failures
/// of runners other than the first are reported on `progress`, that runner
/// is dropped (its results stop), and the first such error is returned in
/// `secondary_error`; a failure of the first runner is the result.
absl::StatusOr<std::vector<std::vector<BenchResult>>>
RunSettings(const std::vector<BenchRunner *> &runners, const BenchOptions &opts,
            const std::string &model_name, std::ostream &progress,
            absl::Status *secondary_error = nullptr);

/// The side-by-side table: one line per setting with bt and torch tokens/s,
/// the ratio bt/torch, seconds per call and peak memory (torch columns "-"
/// without a baseline).
std::string FormatBenchTable(const std::vector<BenchResult> &bt,
                             const std::vector<BenchResult> &torch);

/// CSV with header
///   setting,device,model,batch,tokens,seconds,tokens_per_s,impl,
///   ratio_vs_torch,peak_rss_mb
/// one row per result (bt rows, then torch rows); ratio_vs_torch is
/// tokens_per_s / torch tokens_per_s of the same setting and batch (1 for
/// torch rows, empty without a baseline). Atomic write.
absl::Status WriteBenchCsv(const std::string &path,
                           const std::vector<BenchResult> &bt,
                           const std::vector<BenchResult> &torch);

/// The whole `bench` command: threads, the baseline process (a missing
/// torch is reported on `err` and the command continues with bt only), every
/// setting on bt and torch in turns (RunSettings), the logits of the
/// smallest-batch setting compared between the two, the table on `out`, the
/// CSV. Progress goes to `err`.
absl::Status RunBenchCommand(const Model &model, const BenchOptions &opts,
                             std::ostream &out, std::ostream &err);

} // namespace bt::rt

#endif // BT_RUNTIME_BENCH_H
