//===- bench.h - throughput benchmarks of a compiled model ------*- C++ -*-===//
//
// The timing harness behind `./model bench` and `bt-run bench` (docs/design.md
// §5): runs benchmark *settings* on a loaded Model, and optionally the same
// settings on our PyTorch Block Transformer (bench/bt_torch.py --serve) as a
// baseline in a child process, with the same weights and thread count.
//
// A setting is a workload: a name, a batch size and per-row prompt and
// generation lengths.
//   "forward"        the `eval` entry point (logits of a whole sequence) on
//                    [batch, prompt_tokens] tokens; tokens per call =
//                    batch * prompt_tokens (= B * N_blk * L_B).
//   "prefill-heavy"  greedy generation (Generate, docs/generation.md) of
//                    gen_tokens (default 128) after a random prompt of
//                    prompt_tokens (default 2048) per row, EOS ignored, so
//                    every call does the same work;
//   "decode-heavy"   the same with 128 / 2048 (paper §3.2 and appendix
//                    "Analysis on the inference efficiency", Table 1).
// Generation throughput follows the paper (§3.3, Fig. 3: "Throughput denotes
// the number of generated tokens per second"): tokens per call = batch *
// gen_tokens, over the whole call (prefill included). Next to it: the
// prefill time, the decode throughput (generated tokens over the call minus
// its prefill) and the total, batch * (prompt + gen) tokens per second.
// Memory per sample (paper Table 1: "the amount of memory allocated per
// sample"): the KV-cache bytes per sequence predicted by the compiler's plan
// (bt-plan-kv-memory, stored in the manifest: kv_plan.h) and those the
// implementation allocated (bt: the runtime's kv_cache + kv_valid,
// GenerateCounters; torch: its key/value tensors), next to each process's
// peak resident set. docs/bench.md defines every column.
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
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bt/runtime/generate/generate.h"
#include "bt/runtime/exec/model.h"
#include "bt/runtime/tooling/progress.h"
#include "bt/runtime/train/trainer.h"

namespace bt::rt {

/// Names of the settings.
inline constexpr char kForwardSetting[] = "forward";
inline constexpr char kPrefillHeavySetting[] = "prefill-heavy";
inline constexpr char kDecodeHeavySetting[] = "decode-heavy";
/// One optimizer step (`train_step`: forward, backward, clipping, AdamW)
/// on [batch, prompt_tokens] random tokens, the labels = the ids, through a
/// Trainer (its state resident on a device with resident calls); tokens
/// per call = batch * prompt_tokens. Needs an artifact compiled with
/// --train; no PyTorch baseline in bench (`train --baseline torch`
/// compares training with PyTorch).
inline constexpr char kTrainSetting[] = "train";

/// What `bench` runs without --setting.
inline constexpr char kDefaultBenchSettings[] =
    "forward,prefill-heavy,decode-heavy";

/// True for "prefill-heavy" and "decode-heavy".
bool IsGenerationSetting(const std::string &name);
/// True for "forward" and "train": a call on [batch, prompt_tokens] tokens,
/// --tokens / --seq-blocks per row.
bool IsSequenceSetting(const std::string &name);

/// One workload.
struct BenchSetting {
  std::string name = kForwardSetting; // "forward", "prefill-heavy", ...
  int64_t batch = 1;
  /// Tokens per row fed to the model: the sequence of a forward, the
  /// prompt of a generation.
  int64_t prompt_tokens = 0;
  /// Tokens generated per row (0 for a forward).
  int64_t gen_tokens = 0;
  /// The batch is the largest one the KV-cache plan (bt-plan-kv-memory)
  /// allows for a memory budget (`--batch max`).
  bool max_batch = false;
  /// Generation: KV-cache bytes per sequence of the plan (PlanKV) for these
  /// lengths; 0 if unknown (no plan in the manifest) or a forward.
  int64_t planned_kv_bytes_per_sample = 0;
};

/// A setting named on the command line (`--setting`), before batch sizes.
struct BenchSettingSpec {
  std::string name;
  /// Generation lengths per row (0 for "forward": its length is --tokens).
  int64_t prompt_tokens = 0;
  int64_t gen_tokens = 0;
};

/// Parses a comma-separated list of NAME or NAME=PROMPT/GEN (generation
/// settings only), e.g. "forward,prefill-heavy,decode-heavy=64/512".
/// Generation lengths default to 2048/128 (prefill-heavy) and 128/2048
/// (decode-heavy); `prompt_tokens` / `gen_tokens` > 0 (bench --prompt,
/// --gen) replace them in every generation setting that does not give its
/// own. Errors: InvalidArgument for an unknown or repeated name, a
/// malformed length, a length < 1, or lengths on "forward".
absl::StatusOr<std::vector<BenchSettingSpec>>
ParseBenchSettings(const std::string &list, int64_t prompt_tokens = 0,
                   int64_t gen_tokens = 0);

/// The measurement of one setting by one implementation.
struct BenchResult {
  BenchSetting setting;
  std::string impl;   // "bt" | "torch"
  std::string device; // "cpu"
  std::string model;  // ModelConfig.name
  /// Tokens counted per call: forward batch * prompt_tokens; generation
  /// batch * gen_tokens (generated tokens, the paper's throughput).
  int64_t tokens = 0;
  /// Median seconds per call over the timed runs.
  double seconds = 0;
  double tokens_per_s = 0;
  /// Every token a call processes: batch * (prompt_tokens + gen_tokens)
  /// (forward: = tokens), and per second at the median.
  int64_t total_tokens = 0;
  double total_tokens_per_s = 0;
  /// Generation: median seconds of the prefill (prompt through the block
  /// decoder, up to the first token-decoder call); -1 for a forward.
  double prefill_seconds = -1;
  /// Generation: median over the calls of (call - prefill) seconds, and
  /// batch * gen_tokens / that (generated tokens only); -1 / 0 for a
  /// forward.
  double decode_seconds = -1;
  double decode_tokens_per_s = 0;
  /// Generation: KV-cache bytes per sequence allocated by the call
  /// (CallStats::kv_bytes_per_sample); 0 for a forward.
  int64_t kv_bytes_per_sample = 0;
  /// Peak resident set of the process during the setting, MiB (0: unknown).
  double peak_rss_mb = 0;
  /// Every timed call, seconds, in run order.
  std::vector<double> run_seconds;
  /// The device traffic of the last timed call (CallStats::traffic).
  DeviceTraffic traffic;
  /// Generation: the new tokens of the last call, row-major [batch,
  /// gen_tokens] (BenchRunner::GeneratedTokens; empty when the runner has
  /// none).
  std::vector<int64_t> new_tokens;
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
  /// bench/bt_torch.py; empty: $BT_TORCH_SCRIPT, then share/bt/bt_torch.py
  /// next to the executable's folder (BaselineScript, child_process.h).
  std::string torch_script;
  /// Interpreter with torch (empty: $BT_PYTHON, then /usr/bin/python3;
  /// BaselinePython).
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
  /// How RunSettings shows the progress of a generation call: "bar" (a bar
  /// redrawn in place with carriage returns, for a terminal), "dots" (ten
  /// dots per call, for logs), "none". The launcher picks "bar" when stderr
  /// is a terminal (--progress auto).
  std::string progress = "dots";
  /// Lines printed under the header of the results (e.g. how a planned max
  /// batch was computed).
  std::vector<std::string> notes;
  /// The emulated device (cuda-emu): the planned max batches (`--batch
  /// max`), not run — the emulator would need days for them — but derived
  /// in the efficiency report from the counted run of the same setting at
  /// its largest batch (DerivedEfficiencyOf, efficiency.h). Empty elsewhere.
  std::vector<BenchSetting> derived;
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

/// Generation settings `spec` (ParseBenchSettings) for each batch size,
/// then, if `max_batch` > 0, one at that batch marked max_batch.
/// Errors: InvalidArgument for a batch < 1, no batch at all, lengths < 1 or
/// a name that is not a generation setting.
absl::StatusOr<std::vector<BenchSetting>>
GenerationSettings(const BenchSettingSpec &spec,
                   const std::vector<int64_t> &batches, int64_t max_batch = 0);

/// Every setting of a `bench` command, in `specs` order: "forward" at each
/// of `batches` with `forward_tokens` per row (ForwardSettings; skipped when
/// `batches` is empty), generation settings at each of `batches` and, with
/// `with_max`, at the largest batch the manifest's KV-cache plan allows in
/// `memory_bytes` (PlannedMaxBatch; `memory_source` says where the budget
/// came from, e.g. "--memory 8GiB"), explained by one line per setting
/// appended to `notes`. Generation settings get the plan's bytes per sample
/// when the manifest has a plan. Errors: InvalidArgument for bad batches or
/// lengths, `with_max` without a generation setting, or a budget that does
/// not fit one sequence; FailedPrecondition for `with_max` on an artifact
/// without a plan.
absl::StatusOr<std::vector<BenchSetting>>
BenchSettingsFor(const proto::Manifest &manifest,
                 const std::vector<BenchSettingSpec> &specs,
                 const std::vector<int64_t> &batches, int64_t forward_tokens,
                 bool with_max, int64_t memory_bytes,
                 const std::string &memory_source,
                 std::vector<std::string> *notes);

/// The prompts of a generation setting: I64 [batch, prompt_tokens], ids
/// uniform in [2, vocab_size) from `seed` (0 and 1 are pad / EOS ids of the
/// official models), row-major from one std::mt19937_64, so row 0 is the
/// same for every batch size. No padding (the attention mask is all ones).
absl::StatusOr<Tensor> GenerationPrompt(const proto::ModelConfig &config,
                                        const BenchSetting &setting,
                                        uint64_t seed);

/// What one call measured.
struct CallStats {
  /// Wall time of the call.
  double seconds = 0;
  /// Generation: the prefill's part of it (-1: not a generation).
  double prefill_seconds = -1;
  /// Generation: KV-cache bytes allocated per sequence (0: not a
  /// generation).
  int64_t kv_bytes_per_sample = 0;
  /// The device's traffic (DeviceTraffic; device-memory bytes only on the
  /// emulated device): forward, the whole call; generation, the decoding
  /// phase (GenerateCounters::decode_traffic).
  DeviceTraffic traffic;
};


/// One implementation under test. A setting is prepared once, then timed
/// one call at a time, so that several runners can take turns (RunSettings).
class BenchRunner {
public:
  virtual ~BenchRunner() = default;
  /// "bt" | "torch".
  virtual std::string impl() const = 0;
  /// Builds the inputs of `setting` (ForwardInputs for "forward",
  /// GenerationPrompt for generation settings) and resets the peak-memory
  /// mark. Errors: Unimplemented for a setting the runner cannot run.
  virtual absl::Status Prepare(const BenchSetting &setting) = 0;
  /// One call of the prepared setting. Generation calls report their
  /// progress to `progress` (may be empty) after the prefill and after each
  /// generated block.
  virtual absl::StatusOr<CallStats> Call(const ProgressFn &progress) = 0;
  /// Peak resident set of the runner's process since Prepare, MiB (0:
  /// unknown).
  virtual absl::StatusOr<double> PeakRssMb() = 0;
  /// Generation: the new tokens of the last call, row-major [batch,
  /// gen_tokens]; empty if there are none (the default).
  virtual absl::StatusOr<std::vector<int64_t>> GeneratedTokens() {
    return std::vector<int64_t>();
  }
  /// Whether the runner has `setting` at all (RunSettings skips it for the
  /// settings it has not, without an error): all, but torch has no "train".
  virtual bool Runs(const BenchSetting &setting) const { return true; }
};

/// bt: the model's compiled kernels in this process.
class BtRunner : public BenchRunner {
public:
  BtRunner(const Model &model, uint64_t seed) : model_(model), seed_(seed) {}
  std::string impl() const override { return "bt"; }
  /// "forward": the `eval` entry point. Generation settings: Generate
  /// (greedy, EOS ignored, step logits not kept) on GenerationPrompt.
  /// "train": Trainer::Step on ForwardInputs plus labels (= input_ids),
  /// from a fresh Trainer (the artifact's weights, zero moments; each call,
  /// warm-up included, takes a step). Errors: InvalidArgument for an
  /// unknown setting; NotFound if the model lacks `eval` (forward),
  /// `train_step` (train) or the generation entry points (prefill,
  /// decode_tokens, decode_block; vanilla prefill, decode_step);
  /// InvalidArgument if `eval` takes an input the forward benchmark does
  /// not make. A generation setting holds the model's weights constant
  /// (ConstantParamsScope) from Prepare to the next Prepare: what the
  /// device derives from them once (cpu: the decode GEMMs' packed panels)
  /// is made by the first call, the warm-up, as a server that loads the
  /// model once would, and not again by every timed call.
  absl::Status Prepare(const BenchSetting &setting) override;
  absl::StatusOr<CallStats> Call(const ProgressFn &progress) override;
  absl::StatusOr<double> PeakRssMb() override;
  absl::StatusOr<std::vector<int64_t>> GeneratedTokens() override;
  /// The inputs of the prepared setting (forward: eval's; generation:
  /// input_ids) and the outputs of its last call (forward: eval's;
  /// generation: new_tokens).
  const TensorMap &inputs() const { return inputs_; }
  const TensorMap &outputs() const { return outputs_; }
  /// The work counters of the last generation call.
  const GenerateCounters &counters() const { return counters_; }

private:
  const Model &model_;
  uint64_t seed_;
  std::string entry_;
  BenchSetting setting_;
  TensorMap inputs_, outputs_;
  GenerateCounters counters_;
  std::unique_ptr<Trainer> trainer_; // "train"
  // Generation settings: the weights' derived forms live until the next
  // Prepare (declared last: released before the rest).
  std::unique_ptr<ConstantParamsScope> constant_params_;
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
  /// Not "train" (bt_torch.py serves inference; `train --baseline torch`
  /// measures PyTorch's training).
  bool Runs(const BenchSetting &setting) const override {
    return setting.name != kTrainSetting;
  }
  /// Generation settings: writes GenerationPrompt (the same seed as bt's,
  /// so both generate from the same prompts) for the script to read.
  absl::Status Prepare(const BenchSetting &setting) override;
  /// Generation calls relay the script's progress lines.
  absl::StatusOr<CallStats> Call(const ProgressFn &progress) override;
  absl::StatusOr<double> PeakRssMb() override;
  absl::StatusOr<std::vector<int64_t>> GeneratedTokens() override;
  /// The forward of the baseline on `inputs` (eval's inputs by name); its
  /// logits.
  absl::StatusOr<Tensor> Logits(const TensorMap &inputs);
  /// "torch 1.13.0a0, 2 thread(s)".
  const std::string &description() const { return description_; }

private:
  TorchRunner() = default;
  /// Sends one request and returns its reply; lines with a "progress" key
  /// before it go to `progress`.
  absl::StatusOr<std::string> Request(const std::string &json_line,
                                      const ProgressFn &progress = nullptr);
  proto::ModelConfig config_;
  uint64_t seed_ = 0;
  bool generation_ = false;
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
/// without a baseline), a '*' after a planned max batch; when a generation
/// setting is present, a second table with prefill seconds, decode tokens/s
/// and KV-cache bytes per sample (plan, bt, torch) and the definitions of
/// the columns.
std::string FormatBenchTable(const std::vector<BenchResult> &bt,
                             const std::vector<BenchResult> &torch);

/// "3.19 MiB", "6.00 KiB", "512 B" (binary units).
std::string FormatBytes(int64_t bytes);

/// Compares the new tokens of bt and torch for every generation setting both
/// ran: one line per setting, e.g.
///   tokens check prefill-heavy batch 8: 8/8 rows identical
///   tokens check decode-heavy batch 1: 0/1 rows identical (row 0 first
///   differs at token 57)
/// (greedy on both sides; with random weights, near-ties can make fp32
/// implementations diverge). Empty without generation results.
std::string FormatTokensCheck(const std::vector<BenchResult> &bt,
                              const std::vector<BenchResult> &torch);

/// CSV with header
///   setting,device,model,batch,tokens,seconds,tokens_per_s,impl,
///   ratio_vs_torch,peak_rss_mb,prompt_tokens,gen_tokens,total_tokens,
///   total_tokens_per_s,prefill_seconds,decode_tokens_per_s,
///   kv_bytes_per_sample,planned_kv_bytes_per_sample,max_batch
/// one row per result (bt rows, then torch rows); ratio_vs_torch is
/// tokens_per_s / torch tokens_per_s of the same setting and batch (1 for
/// torch rows, empty without a baseline); prefill_seconds,
/// decode_tokens_per_s and the KV columns are empty for a forward (planned
/// also without a plan); max_batch is 1 for a planned max batch, else 0.
/// Definitions: docs/bench.md. Atomic write.
absl::Status WriteBenchCsv(const std::string &path,
                           const std::vector<BenchResult> &bt,
                           const std::vector<BenchResult> &torch);

/// The whole `bench` command: threads, the baseline process (a missing
/// torch is reported on `err` and the command continues with bt only), every
/// setting on bt and torch in turns (RunSettings), the logits of the
/// smallest-batch forward setting and the tokens of every generation setting
/// compared between the two, the table on `out`, the CSV. Progress goes to
/// `err`.
absl::Status RunBenchCommand(const Model &model, const BenchOptions &opts,
                             std::ostream &out, std::ostream &err);

/// The `bench` command line parsed, before it is resolved against a model
/// (ParseBenchArgs, ResolveBenchOptions): what bt-launcher's argv and an
/// in-process caller (bt-run) both fill.
struct BenchCommandOptions {
  /// Everything but the settings, the device and the notes (which
  /// ResolveBenchOptions fills from the model).
  BenchOptions bench;
  /// --batch: the batch sizes of every setting; `with_max` adds the largest
  /// batch the KV plan allows within the memory budget.
  std::vector<int64_t> batches = {1, 8};
  bool with_max = false;
  /// --setting (ParseBenchSettings, with --prompt / --gen tokens; 0: each
  /// setting's default).
  std::string setting_list = kDefaultBenchSettings;
  int64_t prompt_tokens = 0, gen_tokens = 0;
  std::vector<BenchSettingSpec> specs; // setting_list parsed
  /// Forward length: --tokens, or --seq-blocks blocks of L_B tokens (0 and
  /// 0: 512 tokens rounded up to whole blocks).
  int64_t tokens = 0, seq_blocks = 0;
  /// --memory in bytes and its source text; 0: the available memory
  /// (MemAvailable) when `with_max`.
  int64_t memory_bytes = 0;
  std::string memory_source;
  /// --progress: auto (a bar when stderr is a terminal, else dots), bar,
  /// dots, none.
  std::string progress = "auto";
  /// --emu-lengths P/G (`--device cuda-emu` only): the lengths the counted
  /// generation runs use instead of each setting's (a short run the
  /// emulator can finish); the derived planned max batches keep the
  /// setting's lengths. 0 / 0: the settings' own.
  int64_t emu_prompt_tokens = 0, emu_gen_tokens = 0;
  /// -h / --help was given (the caller prints the usage).
  bool help = false;
};

/// Sets the option `name` (e.g. "--batch", "--memory", "--iters") of
/// `bench` from its text `value`, as on the command line (docs/bench.md);
/// the checks across options wait for FinishBenchCommandOptions. Errors:
/// InvalidArgument naming the option and what it expects, or an unknown name.
absl::Status SetBenchOption(const std::string &name, const std::string &value,
                            BenchCommandOptions &options);

/// The checks across options once all are set (--seq-blocks and --tokens
/// exclusive, --memory only with --batch max, positive --iters/--threads),
/// and the parses they wait for (`specs` from `setting_list`, `memory_bytes`
/// from `memory_source`). Errors: InvalidArgument (a usage error).
absl::Status FinishBenchCommandOptions(BenchCommandOptions &options);

/// Parses the arguments of `bench` after the command name (docs/bench.md):
/// SetBenchOption for each, then FinishBenchCommandOptions.
/// Errors: InvalidArgument (a usage error) naming the option and what it
/// expects.
absl::StatusOr<BenchCommandOptions>
ParseBenchArgs(const std::vector<std::string> &args);

/// The BenchOptions of `command` for `model`: the device, the settings
/// (BenchSettingsFor over the model's manifest and L_B), the memory budget
/// of a max batch and the progress mode. On the emulated device (cuda-emu)
/// the generation settings run at `emu_*_tokens` when given, and the
/// planned max batches go to BenchOptions::derived instead of the settings.
/// Errors: InvalidArgument for --emu-lengths elsewhere, for a planned max
/// batch on the emulator without a counted batch, for
/// settings the model cannot run (a usage error), those of
/// AvailableMemoryBytes ("bench --batch max: ...") and of BenchSettingsFor.
absl::StatusOr<BenchOptions> ResolveBenchOptions(const Model &model,
                                                 const BenchCommandOptions &command);

} // namespace bt::rt

#endif // BT_RUNTIME_BENCH_H
