//===- cublas.cc - the emulator's cuBLAS and cuBLASLt ---------------------===//
//
// The cuBLAS and cuBLASLt entry points of cuda_emu.h (LookupCublasSymbol)
// that runtime/device/cuda/cuda_blas.cc resolves, with the C signatures of
// cublas_api.h / cublasLt.h, on the emulated device: cublasSgemm_v2,
// cublasGemmEx (bf16 A and B, an f32 or bf16 C) and cublasLtMatmul (bf16,
// in place, the DEFAULT or BIAS epilogue), computed in double (OpenBLAS
// dgemm) and rounded once; recorded by a stream capture (driver.cc).
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "cblas.h"
#include "cuda_emu.h"
#include "emulator.h"

namespace bt::cuda_emu {
namespace {

int g_cublas;

//===----------------------------------------------------------------------===//
// cuBLAS
//===----------------------------------------------------------------------===//

int emu_cublasCreate_v2(void **handle) {
  *handle = &g_cublas;
  return kCublasSuccess;
}
int emu_cublasDestroy_v2(void *) { return kCublasSuccess; }
int emu_cublasSetStream_v2(void *, void *stream) {
  return IsDriverStream(stream) ? kCublasSuccess : kCublasInvalidValue;
}
int emu_cublasSetMathMode(void *, int) { return kCublasSuccess; }

/// Column-major C = alpha·op(A)·op(B) + beta·C (cuBLAS's semantics; C m×n,
/// op(A) m×k, op(B) k×n, op: 0 = N, 1 = T), computed in double.
std::string GemmDims(const GemmCall &g) {
  char dims[160];
  std::snprintf(dims, sizeof dims,
                "%s(%c, %c, m=%d, n=%d, k=%d, lda=%d, ldb=%d, ldc=%d)",
                g.bias      ? "cublasLtMatmul[bf16->bf16, bias]"
                : g.bf16_c  ? "cublasGemmEx[bf16->bf16]"
                : g.bf16_ab ? "cublasGemmEx[bf16]"
                            : "cublasSgemm",
                g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n, g.k, g.lda,
                g.ldb, g.ldc);
  return dims;
}

/// f32 → bf16 bits, round to nearest even, NaN → a quiet NaN with its sign
/// (what cuBLAS does to its f32 result for a CUDA_R_16BF C; the same as the
/// runtime's F32ToBf16, which this layer does not link).
uint16_t RoundToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// The bias vector of a cublasLtMatmul with the BIAS epilogue (`g.m` bf16
/// elements) inside one live allocation and initialized; reports otherwise.
bool CheckBias(const GemmCall &g, const std::string &dims) {
  DeviceMemory &mem = DeviceMemory::Get();
  const uint64_t base = reinterpret_cast<uint64_t>(g.bias);
  const uint64_t bytes = uint64_t(g.m) * 2;
  if (!mem.InLive(base, bytes)) {
    Report("cuBLASLt bias vector [" + Hex(base) + ", +" +
               std::to_string(bytes) +
               " bytes) outside a live device allocation",
           {dims, mem.Describe(base, bytes)});
    return false;
  }
  if (const uint64_t u = mem.FirstUninitialized(base, bytes); u != UINT64_MAX) {
    Report("cuBLASLt reads uninitialized device memory in the bias vector",
           {dims, "byte " + Hex(u) + " of " + mem.Describe(u, 1)});
    return false;
  }
  return true;
}

/// Adds the epilogue's bias (bf16, exact in double) to every column of the
/// column-major product `dc` [m, n], before the one rounding.
void AddBias(const GemmCall &g, std::vector<double> &dc) {
  const char *hb = static_cast<const char *>(
      DeviceMemory::Get().Host(reinterpret_cast<uint64_t>(g.bias)));
  for (int i = 0; i < g.m; ++i) {
    uint16_t half;
    std::memcpy(&half, hb + size_t(i) * 2, 2);
    const uint32_t bits = static_cast<uint32_t>(half) << 16;
    float x;
    std::memcpy(&x, &bits, 4);
    for (int j = 0; j < g.n; ++j)
      dc[static_cast<size_t>(j) * g.m + i] += x;
  }
}

} // namespace

// RunGemm (emulator.h).
int RunGemm(const GemmCall &g) {
  const int ta = g.ta, tb = g.tb, m = g.m, n = g.n, k = g.k;
  const int lda = g.lda, ldb = g.ldb, ldc = g.ldc;
  const void *a = g.a, *b = g.b;
  void *c = g.c;
  const float *alpha = &g.alpha, *beta = &g.beta;
  const std::string dims = GemmDims(g);
  const int rows_a = ta ? k : m, cols_a = ta ? m : k;
  const int rows_b = tb ? n : k, cols_b = tb ? k : n;
  if (m == 0 || n == 0)
    return kCublasSuccess;
  DeviceMemory &mem = DeviceMemory::Get();
  const bool read_c = *beta != 0.0f;
  // Each operand: inside one live allocation, its elements written.
  const uint64_t ab_size = g.bf16_ab ? 2 : 4;
  const uint64_t c_size = g.bf16_c ? 2 : 4;
  struct Operand {
    const char *name;
    const void *p;
    int rows, cols, ld;
    bool read;
    uint64_t size; // bytes per element
  } ops[] = {{"A", a, rows_a, cols_a, lda, k > 0, ab_size},
             {"B", b, rows_b, cols_b, ldb, k > 0, ab_size},
             {"C", c, m, n, ldc, read_c, c_size}};
  for (const Operand &o : ops) {
    if (o.rows == 0 || o.cols == 0)
      continue;
    const uint64_t base = reinterpret_cast<uint64_t>(o.p);
    const uint64_t bytes =
        (static_cast<uint64_t>(o.cols - 1) * o.ld + o.rows) * o.size;
    if (!mem.InLive(base, bytes)) {
      Report(std::string("cuBLAS operand ") + o.name + " [" + Hex(base) +
                 ", +" + std::to_string(bytes) +
                 " bytes) outside a live device allocation",
             {dims, mem.Describe(base, bytes)});
      return kCublasExecutionFailed;
    }
    if (!o.read)
      continue;
    for (int j = 0; j < o.cols; ++j) {
      const uint64_t col = base + static_cast<uint64_t>(j) * o.ld * o.size;
      const uint64_t u =
          mem.FirstUninitialized(col, uint64_t(o.rows) * o.size);
      if (u != UINT64_MAX) {
        Report(std::string("cuBLAS reads uninitialized device memory in "
                           "operand ") + o.name,
               {dims, "byte " + Hex(u) + " of " + mem.Describe(u, 1)});
        return kCublasExecutionFailed;
      }
    }
  }
  if (g.bias != nullptr && !CheckBias(g, dims))
    return kCublasExecutionFailed;
  // Double precision, then rounded once to float.
  // (bf16: exact in double, the top 16 bits of an f32.)
  auto widen = [&](const Operand &o) {
    std::vector<double> d(static_cast<size_t>(o.rows) * o.cols);
    const char *h = static_cast<const char *>(
        mem.Host(reinterpret_cast<uint64_t>(o.p)));
    for (int j = 0; j < o.cols; ++j)
      for (int i = 0; i < o.rows; ++i) {
        const size_t at = static_cast<size_t>(j) * o.ld + i;
        float x;
        if (o.size == 2) {
          uint32_t bits = 0;
          uint16_t half;
          std::memcpy(&half, h + at * 2, 2);
          bits = static_cast<uint32_t>(half) << 16;
          std::memcpy(&x, &bits, 4);
        } else {
          std::memcpy(&x, h + at * 4, 4);
        }
        d[static_cast<size_t>(j) * o.rows + i] = x;
      }
    return d;
  };
  std::vector<double> da =
      k > 0 ? widen(ops[0]) : std::vector<double>();
  std::vector<double> db =
      k > 0 ? widen(ops[1]) : std::vector<double>();
  std::vector<double> dc =
      read_c ? widen(ops[2]) : std::vector<double>(size_t(m) * n, 0.0);
  if (k > 0)
    cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, m, n, k, *alpha, da.data(),
                rows_a, db.data(), rows_b, read_c ? *beta : 0.0, dc.data(), m);
  else if (read_c)
    for (double &x : dc)
      x *= *beta;
  if (g.bias != nullptr)
    AddBias(g, dc);
  KernelProfile gemm;
  gemm.launches = 1;
  gemm.access_read = ab_size * (uint64_t(rows_a) * cols_a * (k > 0) +
                                uint64_t(rows_b) * cols_b * (k > 0)) +
                     c_size * (read_c ? uint64_t(m) * n : 0) +
                     (g.bias != nullptr ? uint64_t(m) * 2 : 0);
  gemm.access_written = c_size * uint64_t(m) * n;
  gemm.sector_read = gemm.access_read;
  gemm.sector_written = gemm.access_written;
  gemm.flops = 2 * uint64_t(m) * n * k;
  ProfileAdd(g.bias      ? "cublasLtMatmul"
             : g.bf16_ab ? "cublasGemmEx"
                         : "cublasSgemm",
             gemm);
  // Rounded once to f32 (cuBLAS's f32 result), and a bf16 C then to
  // nearest even (RoundToBf16, as cuBLAS converts its f32 result).
  char *hc = static_cast<char *>(mem.Host(reinterpret_cast<uint64_t>(c)));
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      const size_t at = static_cast<size_t>(j) * ldc + i;
      const float x = static_cast<float>(dc[static_cast<size_t>(j) * m + i]);
      if (g.bf16_c) {
        const uint16_t half = RoundToBf16(x);
        std::memcpy(hc + at * 2, &half, 2);
      } else {
        std::memcpy(hc + at * 4, &x, 4);
      }
    }
    mem.SetInitialized(
        reinterpret_cast<uint64_t>(c) + uint64_t(j) * ldc * c_size,
        uint64_t(m) * c_size);
  }
  return kCublasSuccess;
}

namespace {

/// cuBLAS's argument checks, then the GEMM at once or recorded by a
/// capture (cublasSgemm_v2, cublasGemmEx).
int SubmitGemm(void *handle, const GemmCall &call) {
  const int ta = call.ta, tb = call.tb, m = call.m, n = call.n, k = call.k;
  const int lda = call.lda, ldb = call.ldb, ldc = call.ldc;
  const std::string dims = GemmDims(call);
  const int rows_a = ta ? k : m, rows_b = tb ? n : k;
  auto bad = [&](const std::string &what) {
    Report("cuBLAS argument error: " + what, {dims});
    return kCublasInvalidValue;
  };
  if (handle != &g_cublas)
    return bad("not a handle of cublasCreate");
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    return bad("transpose must be CUBLAS_OP_N or CUBLAS_OP_T");
  if (m < 0 || n < 0 || k < 0)
    return bad("negative dimension");
  if (lda < std::max(1, rows_a))
    return bad("lda " + std::to_string(lda) + " < max(1, " +
               std::to_string(rows_a) + ")");
  if (ldb < std::max(1, rows_b))
    return bad("ldb " + std::to_string(ldb) + " < max(1, " +
               std::to_string(rows_b) + ")");
  if (ldc < std::max(1, m))
    return bad("ldc " + std::to_string(ldc) + " < max(1, " +
               std::to_string(m) + ")");
  if (CaptureGemm(call))
    return kCublasSuccess;
  return RunGemm(call);
}

int emu_cublasSgemm_v2(void *handle, int ta, int tb, int m, int n, int k,
                       const float *alpha, const float *a, int lda,
                       const float *b, int ldb, const float *beta, float *c,
                       int ldc) {
  std::lock_guard<std::recursive_mutex> lock(DriverMutex());
  return SubmitGemm(handle, GemmCall{ta, tb, m, n, k, *alpha, *beta, a, b, c,
                                     lda, ldb, ldc});
}

/// cublasGemmEx for the combinations the runtime uses (GemmBf16):
/// CUDA_R_16BF A and B, a CUDA_R_32F or CUDA_R_16BF C, CUBLAS_COMPUTE_32F,
/// f32 alpha/beta; computed as cublasSgemm is (in double, rounded once to
/// f32; a bf16 C then rounded to nearest even). Any other combination is
/// reported as unsupported.
int emu_cublasGemmEx(void *handle, int ta, int tb, int m, int n, int k,
                     const void *alpha, const void *a, int a_type, int lda,
                     const void *b, int b_type, int ldb, const void *beta,
                     void *c, int c_type, int ldc, int compute, int algo) {
  std::lock_guard<std::recursive_mutex> lock(DriverMutex());
  constexpr int kR16BF = 14, kR32F = 0, kCompute32F = 68;
  (void)algo; // every algorithm computes the same product here
  GemmCall call{ta, tb, m, n, k,
                *static_cast<const float *>(alpha),
                *static_cast<const float *>(beta), a, b,
                c, lda, ldb, ldc, /*bf16_ab=*/true,
                /*bf16_c=*/c_type == kR16BF};
  if (a_type != kR16BF || b_type != kR16BF ||
      (c_type != kR32F && c_type != kR16BF) || compute != kCompute32F) {
    Report("cuBLAS argument error: cublasGemmEx types A " +
               std::to_string(a_type) + ", B " + std::to_string(b_type) +
               ", C " + std::to_string(c_type) + ", compute " +
               std::to_string(compute) +
               " (the emulator implements A, B CUDA_R_16BF (14), C "
               "CUDA_R_32F (0) or CUDA_R_16BF (14), CUBLAS_COMPUTE_32F (68))",
           {GemmDims(call)});
    return kCublasInvalidValue;
  }
  return SubmitGemm(handle, call);
}

//===----------------------------------------------------------------------===//
// cuBLASLt (the GEMMs with an epilogue: CudaBackend::GemmBf16Bias)
//===----------------------------------------------------------------------===//

int g_cublas_lt;

/// A cublasLtMatmulDesc_t: the attributes the runtime sets.
struct LtMatmulDesc {
  int compute, scale;
  int32_t trans_a = 0, trans_b = 0; // cublasOperation_t
  int32_t epilogue = 1;             // CUBLASLT_EPILOGUE_DEFAULT
  const void *bias = nullptr;
  int32_t bias_type = -1; // the D type
};
/// A cublasLtMatrixLayout_t (column-major, no batch).
struct LtLayout {
  int type;
  uint64_t rows, cols;
  int64_t ld;
};

int emu_cublasLtCreate(void **handle) {
  *handle = &g_cublas_lt;
  return kCublasSuccess;
}
int emu_cublasLtDestroy(void *) { return kCublasSuccess; }
int emu_cublasLtMatmulDescCreate(void **desc, int compute, int scale) {
  *desc = new LtMatmulDesc{compute, scale};
  return kCublasSuccess;
}
int emu_cublasLtMatmulDescDestroy(void *desc) {
  delete static_cast<LtMatmulDesc *>(desc);
  return kCublasSuccess;
}
/// The attributes of cublasLt.h that the runtime sets: TRANSA (3), TRANSB
/// (4), EPILOGUE (7), BIAS_POINTER (8), BIAS_DATA_TYPE (26); any other is
/// reported as unsupported.
int emu_cublasLtMatmulDescSetAttribute(void *desc, int attr, const void *buf,
                                       size_t size) {
  std::lock_guard<std::recursive_mutex> lock(DriverMutex());
  auto *d = static_cast<LtMatmulDesc *>(desc);
  auto set = [&](auto &field) {
    if (size != sizeof field) {
      Report("cuBLASLt argument error: attribute " + std::to_string(attr) +
                 " of " + std::to_string(size) + " bytes (expected " +
                 std::to_string(sizeof field) + ")",
             {});
      return kCublasInvalidValue;
    }
    std::memcpy(&field, buf, size);
    return kCublasSuccess;
  };
  switch (attr) {
  case 3: return set(d->trans_a);
  case 4: return set(d->trans_b);
  case 7: return set(d->epilogue);
  case 8: return set(d->bias);
  case 26: return set(d->bias_type);
  default:
    Report("cuBLASLt argument error: matmul attribute " +
               std::to_string(attr) +
               " (the emulator implements TRANSA, TRANSB, EPILOGUE, "
               "BIAS_POINTER, BIAS_DATA_TYPE)",
           {});
    return kCublasInvalidValue;
  }
}
int emu_cublasLtMatrixLayoutCreate(void **layout, int type, uint64_t rows,
                                   uint64_t cols, int64_t ld) {
  *layout = new LtLayout{type, rows, cols, ld};
  return kCublasSuccess;
}
int emu_cublasLtMatrixLayoutDestroy(void *layout) {
  delete static_cast<LtLayout *>(layout);
  return kCublasSuccess;
}

/// cublasLtMatmul for what the runtime uses (GemmBf16Bias): CUDA_R_16BF A,
/// B, C = D in place (same pointer and layout), CUBLAS_COMPUTE_32F with f32
/// scale, epilogue DEFAULT or BIAS (a CUDA_R_16BF bias), on the stream;
/// computed as cublasGemmEx is (in double, rounded once to f32, then to
/// bf16), the bias added before the rounding. Any other use is reported as
/// unsupported.
int emu_cublasLtMatmul(void *handle, void *desc, const void *alpha,
                       const void *a, void *a_desc, const void *b,
                       void *b_desc, const void *beta, const void *c,
                       void *c_desc, void *d, void *d_desc, const void *algo,
                       void *workspace, size_t workspace_bytes,
                       void *stream) {
  std::lock_guard<std::recursive_mutex> lock(DriverMutex());
  constexpr int kR16BF = 14, kR32F = 0, kCompute32F = 68;
  (void)algo, (void)workspace, (void)workspace_bytes;
  const auto *md = static_cast<const LtMatmulDesc *>(desc);
  const auto *la = static_cast<const LtLayout *>(a_desc);
  const auto *lb = static_cast<const LtLayout *>(b_desc);
  const auto *lc = static_cast<const LtLayout *>(c_desc);
  const auto *ld = static_cast<const LtLayout *>(d_desc);
  auto bad = [&](const std::string &what) {
    Report("cuBLASLt argument error: cublasLtMatmul " + what, {});
    return kCublasInvalidValue;
  };
  if (handle != &g_cublas_lt)
    return bad("handle is not one of cublasLtCreate");
  if (!IsDriverStream(stream))
    return bad("stream is not the context's stream");
  if (!md || !la || !lb || !lc || !ld)
    return bad("descriptor or layout is null");
  if (md->compute != kCompute32F || md->scale != kR32F)
    return bad("compute type " + std::to_string(md->compute) +
               ", scale type " + std::to_string(md->scale) +
               " (the emulator implements CUBLAS_COMPUTE_32F, CUDA_R_32F)");
  if (la->type != kR16BF || lb->type != kR16BF || ld->type != kR16BF)
    return bad("types A " + std::to_string(la->type) + ", B " +
               std::to_string(lb->type) + ", D " + std::to_string(ld->type) +
               " (the emulator implements CUDA_R_16BF)");
  if (c != d || lc->rows != ld->rows || lc->cols != ld->cols ||
      lc->ld != ld->ld || lc->type != ld->type)
    return bad("C differs from D (the emulator implements C = D in place)");
  if (md->epilogue != 1 && md->epilogue != 4)
    return bad("epilogue " + std::to_string(md->epilogue) +
               " (the emulator implements DEFAULT (1) and BIAS (4))");
  if (md->epilogue == 4 &&
      ((md->bias_type != -1 && md->bias_type != kR16BF) || !md->bias))
    return bad("BIAS epilogue without a CUDA_R_16BF bias vector");
  const int ta = md->trans_a, tb = md->trans_b;
  const uint64_t m = ld->rows, n = ld->cols;
  const uint64_t k = ta ? la->rows : la->cols;
  if ((ta ? la->cols : la->rows) != m || (tb ? lb->cols : lb->rows) != k ||
      (tb ? lb->rows : lb->cols) != n)
    return bad("shapes of A, B and D do not agree");
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || la->ld > INT32_MAX ||
      lb->ld > INT32_MAX || ld->ld > INT32_MAX)
    return bad("dimension beyond the emulator's 32-bit GEMMs");
  GemmCall call{ta, tb, int(m), int(n), int(k),
                *static_cast<const float *>(alpha),
                *static_cast<const float *>(beta), a, b, d, int(la->ld),
                int(lb->ld), int(ld->ld), /*bf16_ab=*/true, /*bf16_c=*/true,
                md->epilogue == 4 ? md->bias : nullptr};
  return SubmitGemm(&g_cublas, call);
}

} // namespace

void *LookupCublasSymbol(const char *name) {
#define BT_EMU_SYMBOL(s)                                                       \
  if (std::strcmp(name, #s) == 0)                                              \
    return reinterpret_cast<void *>(&emu_##s);
  BT_EMU_SYMBOL(cublasCreate_v2)
  BT_EMU_SYMBOL(cublasDestroy_v2)
  BT_EMU_SYMBOL(cublasSetStream_v2)
  BT_EMU_SYMBOL(cublasSetMathMode)
  BT_EMU_SYMBOL(cublasSgemm_v2)
  BT_EMU_SYMBOL(cublasGemmEx)
  BT_EMU_SYMBOL(cublasLtCreate)
  BT_EMU_SYMBOL(cublasLtDestroy)
  BT_EMU_SYMBOL(cublasLtMatmulDescCreate)
  BT_EMU_SYMBOL(cublasLtMatmulDescDestroy)
  BT_EMU_SYMBOL(cublasLtMatmulDescSetAttribute)
  BT_EMU_SYMBOL(cublasLtMatrixLayoutCreate)
  BT_EMU_SYMBOL(cublasLtMatrixLayoutDestroy)
  BT_EMU_SYMBOL(cublasLtMatmul)
#undef BT_EMU_SYMBOL
  return nullptr;
}

} // namespace bt::cuda_emu
