//===- roofline.cc - the machine's bounds in the bench report ------------===//

#include "bt/runtime/tooling/roofline.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bt/runtime/model/param_names.h"
#include "cblas.h"

namespace bt::rt {
namespace {

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// a = b + s * c over [begin, end).
void Triad(float *a, const float *b, const float *c, float s, int64_t begin,
           int64_t end) {
  for (int64_t i = begin; i < end; ++i)
    a[i] = b[i] + s * c[i];
}

// Fastest of `reps` triads over n floats split over `threads` threads.
double BestTriadSeconds(std::vector<float> &a, const std::vector<float> &b,
                        const std::vector<float> &c, int threads, int reps) {
  const int64_t n = static_cast<int64_t>(a.size());
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = Now();
    std::vector<std::thread> workers;
    for (int t = 1; t < threads; ++t)
      workers.emplace_back(Triad, a.data(), b.data(), c.data(), 3.0f,
                           n * t / threads, n * (t + 1) / threads);
    Triad(a.data(), b.data(), c.data(), 3.0f, 0, n / threads);
    for (std::thread &w : workers)
      w.join();
    best = std::min(best, Now() - t0);
  }
  return best;
}

// Fastest of `reps` n x n x n sgemm calls (one untimed first).
double BestGemmSeconds(int64_t n, int reps) {
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {
    const double t0 = Now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.data(), n, b.data(), n, 0.0f, c.data(), n);
    if (r > 0)
      best = std::min(best, Now() - t0);
  }
  return best;
}

constexpr double kF32 = 4; // bytes per weight and cache element

// Bytes of a GPT-NeoX stack's parameters (neoxStackParams: the one list):
// the matrices at `matrix_bytes` per element, the vectors in f32.
double StackBytes(const proto::NeoXConfig &s, double matrix_bytes) {
  double n = 0;
  for (const ParamSpec &p : neoxStackParams("", s.hidden_size(), s.num_layers(),
                                            s.intermediate_size())) {
    double e = 1;
    for (int64_t d : p.shape)
      e *= static_cast<double>(d);
    n += e * (p.shape.size() == 2 ? matrix_bytes : kF32);
  }
  return n;
}

// Multiply-add FLOPs of one position through a stack's weight matrices
// (query_key_value 3d^2, dense d^2, MLP 2 d I per layer).
double StackMatFlops(const proto::NeoXConfig &s) {
  const double d = s.hidden_size(), i = s.intermediate_size();
  return 2.0 * s.num_layers() * (4 * d * d + 2 * d * i);
}

// Attention FLOPs (QK^T and PV, 4 d per query-key pair per layer) of `n`
// causal positions after `past` cached ones.
double AttentionFlops(const proto::NeoXConfig &s, double past, double n) {
  return 4.0 * s.num_layers() * s.hidden_size() *
         (n * past + n * (n + 1) / 2);
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

MachineBounds MeasureMachineBounds(int threads) {
  MachineBounds m;
  m.threads = std::max(1, threads);
  const int64_t n = int64_t{8} << 20; // 32 MiB per array
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  m.triad_bytes_per_array = n * static_cast<int64_t>(sizeof(float));
  m.bandwidth = 3.0 * m.triad_bytes_per_array /
                BestTriadSeconds(a, b, c, m.threads, 10);
  m.gemm_n = 1024;
  m.gemm_peak = 2.0 * m.gemm_n * m.gemm_n * m.gemm_n /
                BestGemmSeconds(m.gemm_n, 5);
  return m;
}

double MatrixWeightBytes(const proto::Manifest &manifest) {
  for (const proto::EntryPoint &ep : manifest.entry_points())
    for (int d : ep.param_dtypes())
      if (d == proto::BF16)
        return 2;
  return kF32;
}

SettingWork WorkOf(const proto::ModelConfig &config,
                   const BenchSetting &setting, int64_t kv_bytes_per_entry,
                   double matrix_bytes) {
  if (setting.name == kTrainSetting) {
    // A training step: the forward's products, and in the backward two per
    // product (the input gradient and the weight gradient; attention: dP
    // and dV, dQ and dK), so 3x the forward's FLOPs (the optimizer's
    // elementwise work is not counted). Bytes, per weight: read by the
    // forward and by the backward's input gradient, its gradient written
    // and read back by AdamW, the weight and both moments read and written:
    // 10x the forward's weight bytes (activations are not counted).
    BenchSetting forward = setting;
    forward.name = kForwardSetting;
    SettingWork w = WorkOf(config, forward, kv_bytes_per_entry, matrix_bytes);
    w.flops *= 3;
    w.bytes *= 10;
    return w;
  }
  SettingWork w;
  const double B = setting.batch, V = config.vocab_size();
  const double kv = static_cast<double>(kv_bytes_per_entry);
  const proto::NeoXConfig &bd = config.block_decoder();
  const bool generation = IsGenerationSetting(setting.name);

  if (config.kind() == proto::ModelConfig::VANILLA) {
    // One stack; LM head [V, d] per position; one cache entry per token.
    const double d = bd.hidden_size();
    const double weights = StackBytes(bd, matrix_bytes) + V * d * matrix_bytes;
    const double per_pos = StackMatFlops(bd) + 2 * V * d;
    const double n = setting.prompt_tokens;
    w.flops = B * (n * per_pos + AttentionFlops(bd, 0, n));
    w.bytes = weights + (generation ? B * n * kv : 0);
    if (generation) {
      const double g = setting.gen_tokens;
      w.decode_steps = setting.gen_tokens;
      w.decode_flops = B * (g * per_pos + AttentionFlops(bd, n, g));
      // Step j reads n + j + 1 entries (its own included).
      w.decode_bytes = g * weights + B * kv * (g * n + g * (g + 1) / 2);
    }
    return w;
  }

  // Block Transformer: per block the block decoder (one position), the
  // expansion D -> P*T, the token decoder over C positions (prefix: P + L_B
  // - 1; summation: L_B) and the LM head on L_B of them.
  const proto::NeoXConfig &td = config.token_decoder();
  const double L = config.block_length(), D = bd.hidden_size(),
               T = td.hidden_size(), P = config.prefix_length();
  const double C =
      config.strategy() == proto::ModelConfig::PREFIX ? P + L - 1 : L;
  const double w_bd = StackBytes(bd, matrix_bytes),
               w_td = StackBytes(td, matrix_bytes), w_lm = V * T * matrix_bytes,
               w_exp = (P * T * D + P * T) * kF32;
  const double token_decoder_flops = 2 * P * T * D + C * StackMatFlops(td) +
                                     AttentionFlops(td, 0, C) + L * 2 * V * T;
  if (!generation) {
    const double nblk = static_cast<double>(setting.prompt_tokens) / L;
    w.flops = B * (nblk * StackMatFlops(bd) + AttentionFlops(bd, 0, nblk) +
                   nblk * token_decoder_flops);
    w.bytes = w_bd + w_td + w_lm + w_exp;
    return w;
  }
  const double np = CeilDiv(setting.prompt_tokens, config.block_length());
  const int64_t ng = CeilDiv(setting.gen_tokens, config.block_length());
  w.flops = B * (np * StackMatFlops(bd) + AttentionFlops(bd, 0, np));
  w.bytes = w_bd + B * np * kv;
  // ng decode_tokens calls of L_B steps, each step reading the token
  // decoder and the LM head; ng - 1 decode_block calls (the last generated
  // block is never appended), the j-th reading np + j cache entries and
  // writing one.
  const double nb = static_cast<double>(ng - 1);
  w.decode_steps = ng * config.block_length();
  w.decode_flops = B * (ng * token_decoder_flops + nb * StackMatFlops(bd) +
                        AttentionFlops(bd, np, nb));
  w.decode_bytes = ng * (L * (w_td + w_lm) + w_exp) + nb * w_bd +
                   B * kv * (nb * np + nb * (nb + 1) / 2);
  return w;
}

std::string FormatRoofline(const MachineBounds &machine,
                           const proto::ModelConfig &config,
                           int64_t kv_bytes_per_entry,
                           const std::vector<BenchResult> &bt) {
  std::string s = absl::StrFormat(
      "\nroofline: memory bandwidth %.2f GB/s (STREAM triad, 3 x %s, %d "
      "thread(s)), fp32 GEMM peak %.1f GFLOP/s (OpenBLAS sgemm %d^3, this "
      "run's BLAS threads)\n",
      machine.bandwidth / 1e9, FormatBytes(machine.triad_bytes_per_array),
      machine.threads, machine.gemm_peak / 1e9, machine.gemm_n);
  s += "bound = max(FLOPs / peak, bytes / bandwidth) per phase; of bound = "
       "bound / bt's median time (docs/bench.md \"Roofline\")\n";
  s += absl::StrFormat("%-14s %5s %-8s %10s %10s %10s %-8s %10s %10s %9s\n",
                       "setting", "batch", "phase", "GFLOP", "MB", "MB/step",
                       "bound by", "bound s", "bt s", "of bound");
  auto line = [&](const BenchResult &r, const char *phase, double flops,
                  double bytes, int64_t steps, double seconds) {
    const double tc = flops / machine.gemm_peak,
                 tm = bytes / machine.bandwidth;
    const double bound = std::max(tc, tm);
    s += absl::StrFormat(
        "%-14s %5d %-8s %10.3f %10.1f %10s %-8s %10.4f %10.4f %8.1f%%\n",
        r.setting.name + (r.setting.max_batch ? "*" : ""), r.setting.batch,
        phase, flops / 1e9, bytes / 1e6,
        steps > 0 ? absl::StrFormat("%.2f", bytes / 1e6 / steps) : "-",
        tc >= tm ? "compute" : "memory", bound, seconds,
        seconds > 0 ? 100 * bound / seconds : 0.0);
  };
  for (const BenchResult &r : bt) {
    const SettingWork w = WorkOf(config, r.setting, kv_bytes_per_entry);
    if (!IsGenerationSetting(r.setting.name)) {
      line(r, "call", w.flops, w.bytes, 0, r.seconds);
      continue;
    }
    line(r, "prefill", w.flops, w.bytes, 0, r.prefill_seconds);
    line(r, "decode", w.decode_flops, w.decode_bytes, w.decode_steps,
         r.decode_seconds);
  }
  if (kv_bytes_per_entry == 0)
    s += "(the artifact has no KV-cache plan: KV-cache reads not counted)\n";
  return s;
}

} // namespace bt::rt
