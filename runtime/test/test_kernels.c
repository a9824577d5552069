/*===- test_kernels.c - a hand-written kernel library for the ABI tests ---===*
 *
 * Implements the CPU kernel ABI of docs/abi.md by hand, as the compiler's
 * generated shared object does:
 *   int32_t bt_kernel_abi_version(void);
 *   void bt_entry_<name>(void **argv);  argv[0] = result block, then args.
 * Memref descriptors are MLIR's StridedMemRefType<T, r>.
 *
 *===----------------------------------------------------------------------===*/

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef BT_TEST_ABI_VERSION
#define BT_TEST_ABI_VERSION 1
#endif

#define MEMREF(R)                                                              \
  struct {                                                                     \
    void *allocated;                                                           \
    void *aligned;                                                             \
    int64_t offset;                                                            \
    int64_t sizes[R];                                                          \
    int64_t strides[R];                                                        \
  }

typedef struct {
  void *allocated;
  void *aligned;
  int64_t offset;
} memref0;
typedef MEMREF(1) memref1;
typedef MEMREF(2) memref2;
typedef MEMREF(3) memref3;

int32_t bt_kernel_abi_version(void) { return BT_TEST_ABI_VERSION; }

static float at2(const memref2 *m, int64_t i, int64_t j) {
  const float *p = (const float *)m->aligned + m->offset;
  return p[i * m->strides[0] + j * m->strides[1]];
}

static void dense2(memref2 *m, float *buf, int64_t n, int64_t k) {
  m->allocated = m->aligned = buf;
  m->offset = 0;
  m->sizes[0] = n;
  m->sizes[1] = k;
  m->strides[0] = k;
  m->strides[1] = 1;
}

/* add: a, b f32 [N, M] -> sum f32 [N, M]. */
void bt_entry_add(void **argv) {
  memref2 *out = (memref2 *)argv[0];
  const memref2 *a = (const memref2 *)argv[1];
  const memref2 *b = (const memref2 *)argv[2];
  int64_t n = a->sizes[0], k = a->sizes[1];
  float *buf = (float *)malloc(sizeof(float) * (size_t)(n * k + 1));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j)
      buf[i * k + j] = at2(a, i, j) + at2(b, i, j);
  dense2(out, buf, n, k);
}

/* split: x f32 [N, M] -> rowsum f32 [N], total f32 [] (two ranks). */
void bt_entry_split(void **argv) {
  struct {
    memref1 rowsum;
    memref0 total;
  } *out = argv[0];
  const memref2 *x = (const memref2 *)argv[1];
  int64_t n = x->sizes[0], k = x->sizes[1];
  float *rs = (float *)malloc(sizeof(float) * (size_t)(n + 1));
  float *tot = (float *)malloc(sizeof(float));
  *tot = 0;
  for (int64_t i = 0; i < n; ++i) {
    rs[i] = 0;
    for (int64_t j = 0; j < k; ++j)
      rs[i] += at2(x, i, j);
    *tot += rs[i];
  }
  out->rowsum.allocated = out->rowsum.aligned = rs;
  out->rowsum.offset = 0;
  out->rowsum.sizes[0] = n;
  out->rowsum.strides[0] = 1;
  out->total.allocated = out->total.aligned = tot;
  out->total.offset = 0;
}

/* transpose: x f32 [N, M] -> y f32 [M, N], returned as a NON-dense view:
 * aligned != allocated, offset 3, strides [1, M] over a row-major copy. */
void bt_entry_transpose(void **argv) {
  memref2 *out = (memref2 *)argv[0];
  const memref2 *x = (const memref2 *)argv[1];
  int64_t n = x->sizes[0], k = x->sizes[1];
  float *buf = (float *)malloc(sizeof(float) * (size_t)(n * k + 32));
  float *aligned = buf + 16;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j)
      aligned[3 + i * k + j] = at2(x, i, j);
  out->allocated = buf;
  out->aligned = aligned;
  out->offset = 3;
  out->sizes[0] = k;
  out->sizes[1] = n;
  out->strides[0] = 1;
  out->strides[1] = k;
}

/* halves: x f32 [2N] -> lo f32 [N], hi f32 [N], both views of ONE buffer. */
void bt_entry_halves(void **argv) {
  struct {
    memref1 lo, hi;
  } *out = argv[0];
  const memref1 *x = (const memref1 *)argv[1];
  int64_t n = x->sizes[0] / 2;
  float *buf = (float *)malloc(sizeof(float) * (size_t)(2 * n + 1));
  for (int64_t i = 0; i < 2 * n; ++i)
    buf[i] = ((const float *)x->aligned)[x->offset + i * x->strides[0]];
  out->lo.allocated = out->lo.aligned = buf;
  out->lo.offset = 0;
  out->lo.sizes[0] = n;
  out->lo.strides[0] = 1;
  out->hi.allocated = out->hi.aligned = buf;
  out->hi.offset = n;
  out->hi.sizes[0] = n;
  out->hi.strides[0] = 1;
}

/* wrong_shape: x f32 [N, M] -> claims an output of shape [N + 1, M]. */
void bt_entry_wrong_shape(void **argv) {
  memref2 *out = (memref2 *)argv[0];
  const memref2 *x = (const memref2 *)argv[1];
  int64_t n = x->sizes[0] + 1, k = x->sizes[1];
  float *buf = (float *)calloc((size_t)(n * k + 1), sizeof(float));
  dense2(out, buf, n, k);
}

/* A toy "language model" with the CPU-slice entry-point signatures of
 * docs/abi.md (vanilla form):
 *   eval:      param w f32 [V]; input_ids, attention_mask i64 [B, T]
 *              -> logits f32 [B, T, V], logits[b,t,v] = w[v]*mask[b,t] + id[b,t]
 *   eval_loss: as eval, plus labels i64 [B, T] -> logits, loss f32 [] =
 *              sum(labels) */
static void toy_logits(memref3 *out, const memref1 *w, const memref2 *ids,
                       const memref2 *mask) {
  int64_t v = w->sizes[0], b = ids->sizes[0], t = ids->sizes[1];
  float *buf = (float *)malloc(sizeof(float) * (size_t)(b * t * v + 1));
  const float *wp = (const float *)w->aligned + w->offset;
  const int64_t *ip = (const int64_t *)ids->aligned + ids->offset;
  const int64_t *mp = (const int64_t *)mask->aligned + mask->offset;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < t; ++j)
      for (int64_t k = 0; k < v; ++k)
        buf[(i * t + j) * v + k] =
            wp[k * w->strides[0]] *
                (float)mp[i * mask->strides[0] + j * mask->strides[1]] +
            (float)ip[i * ids->strides[0] + j * ids->strides[1]];
  out->allocated = out->aligned = buf;
  out->offset = 0;
  out->sizes[0] = b;
  out->sizes[1] = t;
  out->sizes[2] = v;
  out->strides[0] = t * v;
  out->strides[1] = v;
  out->strides[2] = 1;
}

void bt_entry_eval(void **argv) {
  toy_logits((memref3 *)argv[0], (const memref1 *)argv[1],
             (const memref2 *)argv[2], (const memref2 *)argv[3]);
}

void bt_entry_eval_loss(void **argv) {
  struct {
    memref3 logits;
    memref0 loss;
  } *out = argv[0];
  toy_logits(&out->logits, (const memref1 *)argv[1], (const memref2 *)argv[2],
             (const memref2 *)argv[3]);
  const memref2 *labels = (const memref2 *)argv[4];
  const int64_t *lp = (const int64_t *)labels->aligned + labels->offset;
  float *loss = (float *)malloc(sizeof(float));
  *loss = 0;
  for (int64_t i = 0; i < labels->sizes[0]; ++i)
    for (int64_t j = 0; j < labels->sizes[1]; ++j)
      *loss += (float)lp[i * labels->strides[0] + j * labels->strides[1]];
  out->loss.allocated = out->loss.aligned = loss;
  out->loss.offset = 0;
}

/* matmul: a f32 [N, K] x b f32 [K, M] -> c f32 [N, M] through cblas_sgemm,
 * which this library leaves UNDEFINED: it must resolve against the global
 * scope of the loading process (docs/abi.md, "External symbols"). */
enum { CblasRowMajor = 101, CblasNoTrans = 111 };
extern void cblas_sgemm(int order, int transa, int transb, int m, int n, int k,
                        float alpha, const float *a, int lda, const float *b,
                        int ldb, float beta, float *c, int ldc);

void bt_entry_matmul(void **argv) {
  memref2 *out = (memref2 *)argv[0];
  const memref2 *a = (const memref2 *)argv[1];
  const memref2 *b = (const memref2 *)argv[2];
  int64_t n = a->sizes[0], k = a->sizes[1], m = b->sizes[1];
  float *c = (float *)malloc(sizeof(float) * (size_t)(n * m + 1));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)m, (int)k,
              1.0f, (const float *)a->aligned + a->offset, (int)a->strides[0],
              (const float *)b->aligned + b->offset, (int)b->strides[0], 0.0f, c,
              (int)m);
  dense2(out, c, n, m);
}
