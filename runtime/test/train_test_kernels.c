/*===- train_test_kernels.c - a fake model with train_step / eval_loss ----===*
 *
 * Stands in for the compiled training entry points (docs/training.md)
 * through the ABI of docs/abi.md, so that the training loop (bt/runtime/
 * train.h: data, Trainer steps, held-out loss, checkpoints, resume) is
 * tested without the compiler:
 *
 *   a bigram language model: the logits of the target at flat position j
 *   (j >= L_B: blocks 1..N_blk-1, as the Block Transformer's loss) are the
 *   row W[input_ids[j - 1]] of a [V, V] table W. Loss = mean cross-entropy
 *   over targets with label != -100.
 *
 *   train_step  inputs  input_ids, attention_mask, block_attention_mask,
 *                       labels, step I64[], peak_lr F32[], warmup_steps,
 *                       total_steps I64[]; in-out param.bigram,
 *                       adam_m.bigram, adam_v.bigram F32[V, V]
 *               outputs loss, grad_norm, lr F32[]
 *     the schedule of docs/training.md (DeepSpeed WarmupCosineLR: step 1 at
 *     peak_lr, linear warmup over max(2, warmup) steps, cosine to 0.1),
 *     clipping at norm 1.0 (factor min(1, 1 / (norm + 1e-6))), AdamW with
 *     betas 0.9, 0.95, eps 1e-8, weight decay 0.1 (the formulas of
 *     docs/training.md), in double, rounded to float per element.
 *   eval_loss   params  bigram F32[V, V]; the four batch inputs
 *               outputs logits F32[B, N_blk-1, L_B, V], loss F32[]
 *
 *===----------------------------------------------------------------------===*/

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
typedef MEMREF(4) memref4;

int32_t bt_kernel_abi_version(void) { return 1; }

static void scalar_out(memref0 *m, float v) {
  float *p = (float *)malloc(sizeof(float));
  *p = v;
  m->allocated = m->aligned = p;
  m->offset = 0;
}

/* Loss and (optionally) dL/dW of the bigram model over the batch. */
static double bigram_loss(const float *w, int64_t V, const memref3 *ids,
                          const memref3 *labels, double *grad, float *logits) {
  const int64_t B = ids->sizes[0], N = ids->sizes[1], L = ids->sizes[2];
  const int64_t *id = (const int64_t *)ids->aligned + ids->offset;
  const int64_t *lab = (const int64_t *)labels->aligned + labels->offset;
  double *p = (double *)malloc(sizeof(double) * (size_t)V);
  double loss = 0;
  int64_t count = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = L; j < N * L; ++j) {
      const int64_t prev = id[b * N * L + j - 1];
      const float *row = w + prev * V;
      if (logits)
        memcpy(logits + ((b * (N - 1)) * L + (j - L)) * V, row, sizeof(float) * (size_t)V);
      const int64_t y = lab[b * N * L + j];
      if (y == -100)
        continue;
      double mx = row[0], z = 0;
      for (int64_t v = 1; v < V; ++v)
        mx = row[v] > mx ? row[v] : mx;
      for (int64_t v = 0; v < V; ++v)
        z += (p[v] = exp((double)row[v] - mx));
      loss += log(z) + mx - row[y];
      ++count;
      if (grad) {
        for (int64_t v = 0; v < V; ++v)
          grad[prev * V + v] += p[v] / z;
        grad[prev * V + y] -= 1.0;
      }
    }
  free(p);
  if (count == 0)
    return 0;
  if (grad)
    for (int64_t i = 0; i < V * V; ++i)
      grad[i] /= (double)count;
  return loss / (double)count;
}

static double schedule(double peak, int64_t warmup, int64_t total, int64_t step) {
  const int64_t W = warmup > 2 ? warmup : 2, i = step - 2;
  double ratio;
  if (i < 0)
    ratio = 1.0;
  else if (i < W)
    ratio = (double)i / (double)W;
  else {
    double p = (double)(i - W + 1) / (double)(total - W > 1 ? total - W : 1);
    if (p > 1)
      p = 1;
    ratio = 0.1 + 0.9 * (1.0 + cos(M_PI * p)) / 2.0;
    if (ratio < 0)
      ratio = 0;
  }
  return (double)(float)(peak * ratio);
}

static int64_t scalar_i64(void *m) {
  const memref0 *r = (const memref0 *)m;
  return *((const int64_t *)r->aligned + r->offset);
}

void bt_entry_train_step(void **argv) {
  struct {
    memref0 loss, grad_norm, lr;
  } *out = argv[0];
  const memref3 *ids = (const memref3 *)argv[1];
  /* argv[2] attention_mask, argv[3] block_attention_mask: unused */
  const memref3 *labels = (const memref3 *)argv[4];
  const int64_t step = scalar_i64(argv[5]);
  const memref0 *peakm = (const memref0 *)argv[6];
  const double peak = *((const float *)peakm->aligned + peakm->offset);
  const int64_t warmup = scalar_i64(argv[7]), total = scalar_i64(argv[8]);
  memref2 *wm = (memref2 *)argv[9];
  memref2 *mm = (memref2 *)argv[10];
  memref2 *vm = (memref2 *)argv[11];
  const int64_t V = wm->sizes[0];
  float *w = (float *)wm->aligned + wm->offset;
  float *m = (float *)mm->aligned + mm->offset;
  float *v = (float *)vm->aligned + vm->offset;
  double *g = (double *)calloc((size_t)(V * V), sizeof(double));
  const double loss = bigram_loss(w, V, ids, labels, g, NULL);
  double norm = 0;
  for (int64_t i = 0; i < V * V; ++i)
    norm += g[i] * g[i];
  norm = sqrt(norm);
  const double lr = schedule(peak, warmup, total, step);
  const double b1 = 0.9, b2 = 0.95, wd = 0.1, eps = 1e-8;
  double c = 1.0 / (norm + 1e-6);
  if (c > 1)
    c = 1;
  const double bc1 = 1 - pow(b1, (double)step), bc2 = 1 - pow(b2, (double)step);
  for (int64_t i = 0; i < V * V; ++i) {
    const double gi = g[i] * c;
    double p = (double)w[i] * (1 - lr * wd);
    const double mi = b1 * m[i] + (1 - b1) * gi;
    const double vi = b2 * v[i] + (1 - b2) * gi * gi;
    m[i] = (float)mi;
    v[i] = (float)vi;
    p -= lr / bc1 * (double)m[i] / (sqrt((double)v[i]) / sqrt(bc2) + eps);
    w[i] = (float)p;
  }
  free(g);
  scalar_out(&out->loss, (float)loss);
  scalar_out(&out->grad_norm, (float)norm);
  scalar_out(&out->lr, (float)lr);
}

void bt_entry_eval_loss(void **argv) {
  struct {
    memref4 logits;
    memref0 loss;
  } *out = argv[0];
  const memref2 *wm = (const memref2 *)argv[1];
  const memref3 *ids = (const memref3 *)argv[2];
  const memref3 *labels = (const memref3 *)argv[5];
  const int64_t V = wm->sizes[0];
  const int64_t B = ids->sizes[0], N = ids->sizes[1], L = ids->sizes[2];
  float *logits = (float *)malloc(sizeof(float) * (size_t)(B * (N - 1) * L * V + 1));
  const double loss =
      bigram_loss((const float *)wm->aligned + wm->offset, V, ids, labels, NULL, logits);
  out->logits.allocated = out->logits.aligned = logits;
  out->logits.offset = 0;
  const int64_t sizes[4] = {B, N - 1, L, V};
  int64_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    out->logits.sizes[d] = sizes[d];
    out->logits.strides[d] = stride;
    stride *= sizes[d];
  }
  scalar_out(&out->loss, (float)loss);
}
