"""Our own PyTorch implementation of the Block Transformer (and vanilla GPT-NeoX).

Written from the paper (Ho et al., NeurIPS 2024, §2) and the fixture README
(../shared/fixtures/official/README.md), not copied from the official code. It
is the PyTorch baseline that `bt-run bench` measures against, and an
independent numerical reference. Runs on Debian's python3-torch (1.13, CPU):
    /usr/bin/python3 bench/bt_torch.py --check ../shared/fixtures/official

The PyTorch baseline of `bt-run bench` (runtime/include/bt/runtime/bench.h). bt writes the model
(bt_config.json: bt.proto ModelConfig as JSON; model.safetensors: official names) to a directory
and starts, with OMP_WAIT_POLICY=PASSIVE and the thread variables set,
    bt_torch.py --serve --model-dir DIR --threads 2
which answers one JSON request per stdin line with one JSON line on stdout, so that bt and torch
can take turns call by call:
    (start)                                        -> {"ready": true, "description": "torch ..."}
    {"cmd": "prepare", "setting": "forward", "batch": B, "prompt_tokens": T, "gen_tokens": 0}
                                                   -> {"ok": true}   (inputs built, peak RSS reset)
    {"cmd": "prepare", "setting": "prefill-heavy" | "decode-heavy", "batch": B,
     "prompt_tokens": T, "gen_tokens": N, "prompt": F}
                                                   -> {"ok": true}   (F: input_ids [B, T] I64,
                                                      the prompts bt generates from)
    {"cmd": "call"}                                -> {"seconds": s} (one forward, no_grad, fp32)
                                                      generation: {"progress": n, "total": N}
                                                      lines (after the prefill and each block),
                                                      then {"seconds": s, "prefill_seconds": p,
                                                      "kv_bytes_per_sample": k} (greedy generate
                                                      of N tokens, EOS ignored, no step logits)
    {"cmd": "tokens", "output": G}                 -> {"ok": true}   (the last generation's
                                                      new_tokens [B, N] I64 to G)
    {"cmd": "peak"}                                -> {"peak_rss_mb": m}
    {"cmd": "logits", "inputs": F, "output": G}    -> {"ok": true}   (forward on F, logits to G)
    errors                                         -> {"error": message}; EOF ends the process.
`--bench` runs the same forward settings on its own and prints one JSON result per setting:
    bt_torch.py --bench --model-dir DIR --batch 1,8 --tokens 512 --iters 5 --warmup 1 --threads 2
`--device cuda` (torch >= 2.0 with a CUDA GPU, e.g. the GPU machine's PyTorch; `bench --device
cuda` passes it, so both run on the same GPU) moves the model and every tensor to the GPU and
synchronizes before each time is taken; `--dtype bf16` runs it in bfloat16 there (default f32,
the dtype bt's CUDA artifacts compute in). The "peak" reply then also has "peak_device_mb"
(torch.cuda.max_memory_allocated since the last prepare).
`--train-serve` is the PyTorch side of `train --baseline torch` (runtime/include/bt/runtime/train.h):
the same model, initial weights (DIR/model.safetensors, official names), batches in the same order
(`--batches`: input_ids/attention_mask/labels [S, B, N, L], block_attention_mask [S, B, N], as bt
feeds them) and learning rate per step (bt's compiled schedule's, sent with each request), with
torch.optim.AdamW (one parameter group, weight decay on every parameter, as the official DeepSpeed
setup) and clip_grad_norm_ — the official trainer's optimizer step. bt and torch take turns step by
step (protocol: train_serve below), so a shared machine's load hits both alike. `--train` runs the
same steps on its own with the `lr` column of bt's log.csv:
    bt_torch.py --train --model-dir DIR --batches B.safetensors --lr-from log.csv --steps S \
        --threads 2 --out torch_log.csv
writing step,loss,grad_norm,lr,seconds,tokens_per_s per step (seconds: forward + backward + clip +
AdamW, like bt's train_step).
All modes print {"unavailable": reason} and exit with status 3 when torch or numpy cannot be imported
(and --serve/--bench with --device cuda when torch sees no CUDA GPU).

Shapes: B batch, N blocks, L = L_B block length, D block width, T token width,
P prefix length, V vocabulary, H heads, hd head dim.
"""

import argparse
import contextlib
import json
import math
import os
import struct
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError as e:
    # bt-run bench reads this line and continues without the baseline.
    _msg = f"{sys.executable} cannot import torch/numpy ({e})"
    if any(a in sys.argv for a in ("--bench", "--serve", "--train", "--train-serve")):
        print(json.dumps({"unavailable": _msg}), flush=True)
    print(f"bt_torch.py: {_msg}", file=sys.stderr)
    sys.exit(3)

# --------------------------------------------------------------------------
# safetensors (the format is tiny; no extra package needed)
# --------------------------------------------------------------------------

_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32,
           "F16": np.float16, "U8": np.uint8, "I8": np.int8, "BOOL": np.bool_}


def write_safetensors(path, tensors):
    """Writes {name: np.ndarray} (F32/I64/...) as safetensors (sorted, header padded to 8)."""
    names = {np.dtype(v): k for k, v in _DTYPES.items()}
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        raw = a.tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Returns ({name: np.ndarray}, metadata). BF16 is widened to float32."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        raw = data[base + b: base + e]
        if info["dtype"] == "BF16":
            u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=_DTYPES[info["dtype"]])
        out[name] = arr.reshape(info["shape"]).copy()
    return out, meta


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------

def _cache_bytes(caches):
    """Bytes of the key/value tensors in per-layer cache dicts (values: tensors, or per-row dicts)."""
    total = 0
    for c in caches:
        for v in c.values():
            if isinstance(v, dict):
                total += _cache_bytes([v])
            else:
                total += v.element_size() * v.nelement()
    return total


class Stack:
    """Architecture of one GPT-NeoX stack."""

    def __init__(self, hidden, layers, heads, intermediate, rotary_dims, base=10000.0, eps=1e-5):
        self.hidden, self.layers, self.heads = hidden, layers, heads
        self.head_dim = hidden // heads
        self.intermediate, self.rotary_dims = intermediate, rotary_dims
        self.base, self.eps = base, eps


def rotary_tables(positions, rotary_dims, base):
    """cos/sin [S, r] for integer positions [S] (GPT-NeoX: inv_freq in f32, cat(freqs, freqs))."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dims, 2, dtype=torch.int64).float() / rotary_dims))
    freqs = torch.outer(positions.float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def apply_rotary(x, cos, sin, r):
    """x [..., S, H, hd]; rotate-half on the first r dims of each head."""
    xr, xp = x[..., :r], x[..., r:]
    half = r // 2
    rot = torch.cat((-xr[..., half:], xr[..., :half]), dim=-1)
    c, s = cos[:, None, :].to(x.dtype), sin[:, None, :].to(x.dtype)  # [S, 1, r]
    return torch.cat((xr * c + rot * s, xp), dim=-1)


class NeoXLayer(nn.Module):
    def __init__(self, cfg: Stack):
        super().__init__()
        d, i = cfg.hidden, cfg.intermediate
        self.cfg = cfg
        self.input_layernorm = nn.LayerNorm(d, eps=cfg.eps)
        self.post_attention_layernorm = nn.LayerNorm(d, eps=cfg.eps)
        self.query_key_value = nn.Linear(d, 3 * d)
        self.dense = nn.Linear(d, d)
        self.dense_h_to_4h = nn.Linear(d, i)
        self.dense_4h_to_h = nn.Linear(i, d)
        self.bf16_kv_cache = False  # use_bf16_gemms
        self.bf16_activations = False  # use_bf16_gemms(activations=True)
        self.bf16_rotary_uncached = False

    def attention(self, x, cos, sin, key_mask, cache=None):
        """x [B', S, D]; key_mask [B', S_past + S] (1 attend, 0 pad) or None; cache: dict with
        'k', 'v' [B', H, S_past, hd] (updated in place when given). Query s sits at S_past + s."""
        c = self.cfg
        bsz, s, _ = x.shape
        qkv = self.query_key_value(x).view(bsz, s, c.heads, 3, c.head_dim)
        q, k, v = qkv[..., 0, :], qkv[..., 1, :], qkv[..., 2, :]  # [B', S, H, hd]
        q = apply_rotary(q, cos, sin, c.rotary_dims)
        k = apply_rotary(k, cos, sin, c.rotary_dims)
        if self.bf16_activations and (cache is not None or self.bf16_rotary_uncached):
            # bt's `--dtype bf16` (bt-bf16-activations): the rotary kernels write the rotated
            # query and key in bf16 for the attention kernel (a cached key is rounded by the
            # cache as well, to the same value), in every attention but the token decoder's
            # without a cache (eval: the fused local attention rotates in registers).
            q, k = q.to(torch.bfloat16).float(), k.to(torch.bfloat16).float()
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B', H, S, hd]
        if cache is not None:
            if self.bf16_kv_cache:
                # bt's `--dtype bf16`: the cache stores k and v in bf16 (rounded to nearest even
                # as they are appended); attention reads them back exactly.
                k, v = k.to(torch.bfloat16).float(), v.to(torch.bfloat16).float()
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        total = k.shape[2]
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(c.head_dim))
        fmin = torch.finfo(scores.dtype).min
        # Query i (at total - s + i) sees keys 0 .. total - s + i: an [s, total] mask (not a
        # [total, total] one, which would cost O(total^2) per decoding step).
        causal = torch.arange(total)[None, :] <= torch.arange(total - s, total)[:, None]
        scores = torch.where(causal, scores, torch.tensor(fmin, dtype=scores.dtype))
        if key_mask is not None:
            scores = scores + (1.0 - key_mask[:, None, None, :].to(scores.dtype)) * fmin
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(bsz, s, c.hidden)
        return self.dense(out)

    def forward(self, x, cos, sin, key_mask, cache=None):
        a = self.attention(self.input_layernorm(x), cos, sin, key_mask, cache)
        m = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(self.post_attention_layernorm(x))))
        out = m + a + x
        if self.bf16_activations:
            # bt's `--dtype bf16` (bt-bf16-activations): the residual stream between layers is
            # stored in bf16 (the residual add's sum, in f32, rounded once).
            out = out.to(torch.bfloat16).float()
        return out


class NeoXStack(nn.Module):
    def __init__(self, cfg: Stack):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList([NeoXLayer(cfg) for _ in range(cfg.layers)])
        self.final_layer_norm = nn.LayerNorm(cfg.hidden, eps=cfg.eps)

    def forward(self, x, key_mask=None, positions=None, caches=None):
        """x [B', S, W] -> [B', S, W]. positions [S] (default 0..S-1, or S_past.. with caches);
        key_mask covers the cached and new positions; caches: one dict per layer (see attention)."""
        if positions is None:
            past = caches[0]["k"].shape[2] if caches and "k" in caches[0] else 0
            positions = torch.arange(past, past + x.shape[1])
        cos, sin = rotary_tables(positions, self.cfg.rotary_dims, self.cfg.base)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, key_mask, caches[i] if caches is not None else None)
        return self.final_layer_norm(x)

    def load(self, w, prefix):
        for l, layer in enumerate(self.layers):
            p = f"{prefix}.layers.{l}."
            for mod, name in [(layer.input_layernorm, "input_layernorm"),
                              (layer.post_attention_layernorm, "post_attention_layernorm"),
                              (layer.query_key_value, "attention.query_key_value"),
                              (layer.dense, "attention.dense"),
                              (layer.dense_h_to_4h, "mlp.dense_h_to_4h"),
                              (layer.dense_4h_to_h, "mlp.dense_4h_to_h")]:
                mod.weight.data.copy_(torch.from_numpy(w[p + name + ".weight"]))
                mod.bias.data.copy_(torch.from_numpy(w[p + name + ".bias"]))
        self.final_layer_norm.weight.data.copy_(torch.from_numpy(w[prefix + ".final_layer_norm.weight"]))
        self.final_layer_norm.bias.data.copy_(torch.from_numpy(w[prefix + ".final_layer_norm.bias"]))


def sampled_logits(head, h):
    """The LM head of a decode step (the logits a decode entry samples and returns). Under
    use_bf16_gemms(sampled_logits=True) its product is rounded to bf16 once, as bt's `--dtype
    bf16` decode entries store it (bt-bf16-gemm-outputs: the sampler chooses from the bf16 logits
    and the entry returns them); eval's and prefill's logits stay f32."""
    if not getattr(head, "bf16_sampled", False):
        return head(h)
    saved = head.bf16_product
    head.bf16_product = True
    try:
        return head(h)
    finally:
        head.bf16_product = saved


class BlockTransformer(nn.Module):
    """Embedder → block decoder → token decoder.

    Embedder (official embedder.projection_method): "concat", the token-major concatenation of
    the block's L lookup embeddings [E(t_0) | ... | E(t_{L-1})] (D = L·E), or "projection_layer"
    (uptraining, paper §3.5), Conv1d(E → D, kernel L, stride L, bias) over them:
    block vector[o] = bias[o] + Σ_i Σ_k W[o, i, k]·E(t_k)[i], W [D, E, L].
    Token decoder (official decoding_strategy): "prefix" (paper §2.4), P prefix vectors projected
    from the context embedding, then the block's tokens; or "summation" (MEGABYTE), no prefix: L
    slots S_k projected from the context embedding are added position-wise to the inputs
    [E(BOS)+S_0, E(t_0)+S_1, ..., E(t_{L-2})+S_{L-1}] (key mask [1, m_0, ..., m_{L-2}], positions
    0..L-1), and output k predicts t_k."""

    def __init__(self, vocab, block_length, embed_width, block: Stack, token: Stack, prefix_length,
                 pad_id=0, eos_id=0, strategy="prefix", projection="concat", bos_id=0):
        super().__init__()
        if strategy not in ("prefix", "summation"):
            raise ValueError(f"decoding strategy {strategy!r} is not implemented")
        if projection not in ("concat", "projection_layer"):
            raise ValueError(f"embedder projection {projection!r} is not implemented")
        self.vocab, self.L, self.P = vocab, block_length, prefix_length
        self.pad_id, self.eos_id, self.bos_id = pad_id, eos_id, bos_id
        self.strategy, self.projection_method = strategy, projection
        self.embeddings = nn.Embedding(vocab, embed_width)
        self.projection = (nn.Conv1d(embed_width, block.hidden, block_length, stride=block_length)
                           if projection == "projection_layer" else None)
        self.block_decoder = NeoXStack(block)
        self.token_embed = nn.Embedding(vocab, token.hidden)
        self.token_decoder = NeoXStack(token)
        # The expansion layer's slots: P prefix vectors, or L summation slots.
        self.slots = block_length if strategy == "summation" else prefix_length
        self.expansion = nn.Linear(block.hidden, self.slots * token.hidden)
        self.embed_out = nn.Linear(token.hidden, vocab, bias=False)
        self.T = token.hidden

    def load(self, w):
        self.embeddings.weight.data.copy_(torch.from_numpy(w["embedder.embeddings.weight"]))
        if self.projection is not None:
            self.projection.weight.data.copy_(torch.from_numpy(w["embedder.projection_layer.weight"]))
            self.projection.bias.data.copy_(torch.from_numpy(w["embedder.projection_layer.bias"]))
        self.block_decoder.load(w, "block_decoder.gpt_neox")
        self.token_embed.weight.data.copy_(torch.from_numpy(w["token_decoder.gpt_neox.embed_in.weight"]))
        self.token_decoder.load(w, "token_decoder.gpt_neox")
        self.expansion.weight.data.copy_(torch.from_numpy(w["token_decoder.expansion_layer.weight"][..., 0]))
        self.expansion.bias.data.copy_(torch.from_numpy(w["token_decoder.expansion_layer.bias"]))
        self.embed_out.weight.data.copy_(torch.from_numpy(w["token_decoder.embed_out.weight"]))

    def embed_blocks(self, ids):
        """[B, N, L] ids → block vectors [B, N, D] (the embedder)."""
        bsz, n, L = ids.shape
        e = self.embeddings(ids)  # [B, N, L, E]
        if self.projection is None:
            return e.reshape(bsz, n, -1)
        x = e.reshape(bsz * n, L, -1).transpose(1, 2)  # [B·N, E, L]
        return self.projection(x).view(bsz, n, -1)

    def context(self, input_ids, block_mask):
        """[B, N, L] ids → context embeddings [B, N, D]."""
        return self.block_decoder(self.embed_blocks(input_ids), block_mask)

    def decode_blocks(self, ctx, ids, mask):
        """ctx [B', D], ids/mask [B', L] → hidden [B', L, T] predicting ids."""
        bp = ctx.shape[0]
        if self.strategy == "summation":
            slots = self.expansion(ctx).view(bp, self.L, self.T)
            bos = torch.full((bp, 1), self.bos_id, dtype=ids.dtype)
            x = self.token_embed(torch.cat([bos, ids[:, :-1]], dim=1)) + slots
            key_mask = None
            if mask is not None:
                key_mask = torch.cat([torch.ones(bp, 1, dtype=mask.dtype), mask[:, :-1]], dim=1)
            return self.token_decoder(x, key_mask)
        prefix = self.expansion(ctx).view(bp, self.P, self.T)
        tok = self.token_embed(ids[:, :-1])
        x = torch.cat([prefix, tok], dim=1)
        key_mask = None
        if mask is not None:
            key_mask = torch.cat([torch.ones(bp, self.P, dtype=mask.dtype), mask[:, :-1]], dim=1)
        h = self.token_decoder(x, key_mask)
        return h[:, self.P - 1:]

    def forward(self, input_ids, attention_mask, block_attention_mask, labels=None):
        """Official BlockTransformer.forward semantics: logits [B, N-1, L, V] (padding targets 0,
        padding blocks eos), loss = mean CE over labels[:, 1:] != -100."""
        bsz, n, L = input_ids.shape
        ctx = self.context(input_ids, block_attention_mask)[:, :-1]
        ctx = ctx.reshape(-1, ctx.shape[-1])
        ids = input_ids[:, 1:].reshape(-1, L)
        mask = attention_mask[:, 1:].reshape(-1, L)
        logits = self.embed_out(self.decode_blocks(ctx, ids, mask))  # [B(N-1), L, V]
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, self.vocab), labels[:, 1:].reshape(-1), ignore_index=-100)
        content = (ids != self.pad_id) | (mask == 1)
        logits = torch.where(content[..., None], logits, torch.zeros(()))
        kept = block_attention_mask[:, 1:].reshape(-1) != 0
        logits = torch.where(kept[:, None, None], logits, torch.tensor(float(self.eos_id)))
        return logits.view(bsz, n - 1, L, self.vocab), loss


    @torch.no_grad()
    def generate(self, prompt_ids, prompt_mask, max_new_tokens, official_positions=False,
                 keep_logits=True, progress=None, stats=None):
        """Greedy generation with KV caches (global: one entry per block; local: one block).
        prompt_ids/mask [B, T] (left padding: mask 0). The prompt is left-padded to a block
        boundary (official preprocess_inputs_for_generation). Token-decoder positions are the
        training ones (0..P+L-2) unless official_positions, which reproduces the official
        generate: every prefix vector at 0, token t_{k-1} at k. Returns (new_tokens [B, N],
        step_logits [N, B, V], or None without keep_logits). No EOS stopping.
        progress(done, total) is called after the prefill and after each block; stats (a dict)
        receives prefill_seconds and kv_bytes_per_sample (the block decoder's cache at the end)."""
        t_start = time.perf_counter()
        bsz, t = prompt_ids.shape
        pad = (-t) % self.L
        ids = F.pad(prompt_ids, (pad, 0), value=self.pad_id).view(bsz, -1, self.L)
        mask = F.pad(prompt_mask, (pad, 0), value=0).view(bsz, -1, self.L)
        block_mask = mask.any(-1).long()
        caches = [dict() for _ in self.block_decoder.layers]
        ctx = self.block_decoder(self.embed_blocks(ids), block_mask, caches=caches)[:, -1]
        if stats is not None:
            _sync()
            stats["prefill_seconds"] = time.perf_counter() - t_start
        if progress:
            progress(0, max_new_tokens)
        new_tokens, step_logits = [], []
        summation = self.strategy == "summation"
        while len(new_tokens) < max_new_tokens:
            local = [dict() for _ in self.token_decoder.layers]
            if summation:
                # E(BOS) + S_0 at position 0 (both position conventions agree).
                slots = self.expansion(ctx).view(bsz, self.L, self.T)
                bos = torch.full((bsz,), self.bos_id, dtype=torch.int64)
                x = (self.token_embed(bos) + slots[:, 0])[:, None]
                h = self.token_decoder(x, positions=torch.tensor([0]), caches=local)[:, -1]
            else:
                prefix = self.expansion(ctx).view(bsz, self.P, self.T)
                if official_positions:
                    pos = torch.zeros(self.P, dtype=torch.int64)
                else:
                    pos = torch.arange(self.P)
                h = self.token_decoder(prefix, positions=pos, caches=local)[:, -1]
            block = []
            for k in range(self.L):
                logits = sampled_logits(self.embed_out, h)
                nxt = logits.argmax(-1)
                if keep_logits:
                    step_logits.append(logits)
                new_tokens.append(nxt)
                block.append(nxt)
                if len(new_tokens) == max_new_tokens or k == self.L - 1:
                    break
                x = self.token_embed(nxt)
                if summation:
                    p = k + 1
                    x = x + slots[:, k + 1]
                else:
                    p = k + 1 if official_positions else self.P + k
                h = self.token_decoder(x[:, None], positions=torch.tensor([p]), caches=local)[:, -1]
            if progress:
                progress(len(new_tokens), max_new_tokens)
            if len(new_tokens) == max_new_tokens:
                break
            blk = torch.stack(block, dim=1)  # [B, L]
            block_mask = torch.cat([block_mask, torch.ones(bsz, 1, dtype=torch.long)], dim=1)
            ctx = self.block_decoder(self.embed_blocks(blk[:, None]), block_mask, caches=caches)[:, -1]
        if stats is not None:
            stats["kv_bytes_per_sample"] = _cache_bytes(caches) // bsz
        return (torch.stack(new_tokens, dim=1),
                torch.stack(step_logits, dim=0) if keep_logits else None)


class VanillaNeoX(nn.Module):
    """HF GPTNeoXForCausalLM semantics (untied embed_out, no bias)."""

    def __init__(self, vocab, stack: Stack):
        super().__init__()
        self.vocab = vocab
        self.embed_in = nn.Embedding(vocab, stack.hidden)
        self.gpt_neox = NeoXStack(stack)
        self.embed_out = nn.Linear(stack.hidden, vocab, bias=False)

    def load(self, w):
        self.embed_in.weight.data.copy_(torch.from_numpy(w["gpt_neox.embed_in.weight"]))
        self.gpt_neox.load(w, "gpt_neox")
        self.embed_out.weight.data.copy_(torch.from_numpy(w["embed_out.weight"]))

    def forward(self, input_ids, attention_mask, labels=None):
        logits = self.embed_out(self.gpt_neox(self.embed_in(input_ids), attention_mask))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, self.vocab), labels[:, 1:].reshape(-1),
                                   ignore_index=-100)
        return logits, loss


    @torch.no_grad()
    def generate(self, prompt_ids, prompt_mask, max_new_tokens, keep_logits=True, progress=None,
                 stats=None):
        """HF-style greedy generation with a KV cache; positions cumsum(mask)-1 (pads at 1).
        Without padding every row has the same positions and the batch runs as one; otherwise
        row by row. keep_logits, progress (after the prefill and each token) and stats
        (prefill_seconds, kv_bytes_per_sample) as BlockTransformer.generate."""
        t_start = time.perf_counter()
        pos = prompt_mask.cumsum(-1) - 1
        pos = pos.masked_fill(prompt_mask == 0, 1)
        batched = bool((prompt_mask == 1).all())
        caches = [dict() for _ in self.gpt_neox.layers]
        mask = prompt_mask
        new_tokens, step_logits = [], []
        x = self.embed_in(prompt_ids)
        if batched:
            h = self.gpt_neox(x, mask, positions=pos[0], caches=caches)[:, -1]
        else:
            # Rows may need different positions: run the stack per row for the prompt.
            h = self._rows(x, mask, pos, caches)
        if stats is not None:
            _sync()
            stats["prefill_seconds"] = time.perf_counter() - t_start
        if progress:
            progress(0, max_new_tokens)
        nxt_pos = pos[:, -1] + 1
        for step in range(max_new_tokens):
            # Token 0 from the prefill's logits, the others from decode steps.
            logits = self.embed_out(h) if step == 0 else sampled_logits(self.embed_out, h)
            nxt = logits.argmax(-1)
            if keep_logits:
                step_logits.append(logits)
            new_tokens.append(nxt)
            if progress:
                progress(step + 1, max_new_tokens)
            if step == max_new_tokens - 1:
                break
            mask = torch.cat([mask, torch.ones(mask.shape[0], 1, dtype=mask.dtype)], dim=1)
            if batched:
                h = self.gpt_neox(self.embed_in(nxt)[:, None], mask, positions=nxt_pos[:1],
                                  caches=caches)[:, -1]
            else:
                h = self._rows(self.embed_in(nxt)[:, None], mask, nxt_pos[:, None], caches)
            nxt_pos = nxt_pos + 1
        if stats is not None:
            stats["kv_bytes_per_sample"] = _cache_bytes(caches) // prompt_ids.shape[0]
        return (torch.stack(new_tokens, dim=1),
                torch.stack(step_logits, dim=0) if keep_logits else None)

    def _rows(self, x, key_mask, positions, caches):
        """Runs the stack row by row (per-row positions) and returns the last hidden state [B, W]."""
        outs = []
        for b in range(x.shape[0]):
            row_caches = [c.setdefault(b, dict()) for c in caches]
            outs.append(self.gpt_neox(x[b:b + 1], key_mask[b:b + 1], positions=positions[b],
                                      caches=row_caches)[:, -1])
        return torch.cat(outs, dim=0)


def stack_from_json(d):
    return Stack(d["hidden_size"], d["num_hidden_layers"], d["num_attention_heads"], d["intermediate_size"],
                 d["rotary_ndims"] if "rotary_ndims" in d else int(d["hidden_size"] // d["num_attention_heads"] * d["rotary_pct"]),
                 d.get("rotary_emb_base", 10000.0), d.get("layer_norm_eps", 1e-5))


def model_from_fixture_config(cfg):
    """Builds a model from a fixture's resolved config.json."""
    if cfg["model_type"] == "block_transformer":
        td = cfg["token_decoder"]
        return BlockTransformer(cfg["vocab_size"], cfg["block_length"], cfg["embedder"]["hidden_size"],
                                stack_from_json(cfg["block_decoder"]), stack_from_json(td),
                                td["prefix_length"], cfg["pad_token_id"], cfg["eos_token_id"],
                                strategy=td.get("decoding_strategy", "prefix"),
                                projection=cfg["embedder"].get("projection_method", "concat"),
                                bos_id=cfg.get("token_decoder_bos_placeholder_id", cfg["eos_token_id"]))
    hf = cfg["hf_config"]
    st = Stack(hf["hidden_size"], hf["num_hidden_layers"], hf["num_attention_heads"], hf["intermediate_size"],
               int(hf["hidden_size"] // hf["num_attention_heads"] * hf["rotary_pct"]),
               hf.get("rotary_emb_base", 10000.0), hf.get("layer_norm_eps", 1e-5))
    return VanillaNeoX(hf["vocab_size"], st)


def check_fixtures(root):
    """Compares this implementation with every case under root; returns True if all match."""
    ok = True
    for case in sorted(os.listdir(root)):
        d = os.path.join(root, case)
        if not os.path.isfile(os.path.join(d, "config.json")):
            continue
        cfg = json.load(open(os.path.join(d, "config.json")))
        model = model_from_fixture_config(cfg)
        w, _ = read_safetensors(os.path.join(d, "model.safetensors"))
        model.load(w)
        model.eval()
        inp, _ = read_safetensors(os.path.join(d, "inputs.safetensors"))
        ref, _ = read_safetensors(os.path.join(d, "outputs.safetensors"))
        t = {k: torch.from_numpy(v).to(_DEVICE) for k, v in inp.items()}
        with torch.no_grad():
            if isinstance(model, BlockTransformer):
                logits, loss = model(t["input_ids"], t["attention_mask"], t["block_attention_mask"], t["labels"])
            else:
                logits, loss = model(t["input_ids"], t["attention_mask"], t["labels"])
        dl = float((logits - torch.from_numpy(ref["logits"])).abs().max())
        rl = abs(float(loss) - float(ref["loss"])) / abs(float(ref["loss"]))
        good = dl <= 1e-4 and rl <= 1e-5
        ok &= good
        print(f"{case:16s} logits max|Δ| {dl:.3e}  loss rel {rl:.3e}  {'OK' if good else 'FAIL'}")
        gpath = os.path.join(d, "generate.safetensors")
        if not os.path.exists(gpath):
            continue
        g, _ = read_safetensors(gpath)
        pid, pm = torch.from_numpy(g["prompt.input_ids"]), torch.from_numpy(g["prompt.attention_mask"])
        n = g["official.new_tokens"].shape[1]
        modes = [("official", True)] + ([("trainpos", False)] if "trainpos.new_tokens" in g else [])
        for name, official in modes:
            if isinstance(model, BlockTransformer):
                toks, steps = model.generate(pid, pm, n, official_positions=official)
            else:
                toks, steps = model.generate(pid, pm, n)
            same = bool((toks.numpy() == g[name + ".new_tokens"]).all())
            ds = float((steps - torch.from_numpy(g[name + ".step_logits"])).abs().max())
            good = same and ds <= 1e-4
            ok &= good
            print(f"{case:16s} generate {name:9s} tokens {'equal' if same else 'DIFFER'}  "
                  f"step_logits max|Δ| {ds:.3e}  {'OK' if good else 'FAIL'}")
    return ok


# The GEMMs whose product bt stores in bf16 (bt-bf16-gemm-outputs): the attention output
# projection and the MLP of every layer, whose bias (and GELU, residual add) an elementwise
# kernel applies in f32 after the rounded product; and the QKV projection, whose bias cuBLAS adds
# as a bf16 C (beta = 1) before the one rounding. The LM head keeps an f32 product where the
# logits are an unsampled output (eval, prefill) and is rounded where a decode entry samples them
# (sampled_logits); the token decoder's expansion layer (f32 weight) keeps f32 products.
_BF16_PRODUCTS = ("dense", "dense_h_to_4h", "dense_4h_to_h")
_BF16_BIAS_PRODUCTS = ("query_key_value",)


def use_bf16_gemms(model, kv_caches=True, products=True, sampled=True, activations=True):
    """Rounds what bt's `--dtype bf16` keeps in bf16 (docs/codegen-cuda.md "bf16"):
      - the GEMM inputs (bt-bf16-gemms): every nn.Linear but the token decoder's expansion layer
        computes x·Wᵀ with x and W rounded to bf16 (round to nearest even), products summed in
        f32, then + bias in f32;
      - with products, the GEMM products of the layers' attention output projection and MLP
        (bt-bf16-gemm-outputs): x·Wᵀ (f32 sums) rounded to bf16 once, before the f32 bias; and
        of the QKV projection: x·Wᵀ + bf16(b) rounded to bf16 once (cuBLAS adds a bf16 C);
      - with sampled (and products), the LM head's product in the decode steps of generation
        (sampled_logits): rounded to bf16 once, so greedy chooses from bf16 logits;
      - with kv_caches, the KV caches (bt-generate-entry-points kv-dtype=bf16): the keys and
        values a cached attention appends are rounded to bf16, so generation attends over
        rounded keys and values (eval has no cache and is unaffected);
      - with activations (and products), the activations bt stores between kernels in bf16
        (bt-bf16-activations): every layer's output (the residual stream, rounded after the
        residual add) and the rotated query and key of every attention but the token decoder's
        without a cache (eval's token decoder rotates inside its fused local attention kernel).
    Everything else stays f32 (the stacks' inputs: embeddings, prefix vectors). An independent reference for bt's bf16 path."""
    def bf16(t):
        return t.to(torch.bfloat16).float()

    def forward(self, x):
        if self.bf16_product == "bias":
            # The product as cuBLAS's f32 result would hold it (summed in double, as the CUDA
            # emulator does, so that f32 summation order flips no rounding), then rounded.
            out = torch.matmul(bf16(x).double(), bf16(self.weight).double().t())
            return bf16((out + bf16(self.bias).double()).float())
        if self.bf16_product:
            out = bf16(torch.matmul(bf16(x).double(), bf16(self.weight).double().t()).float())
        else:
            out = torch.matmul(bf16(x), bf16(self.weight).t())
        return out if self.bias is None else out + self.bias
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear) and not name.endswith("expansion"):
            leaf = name.split(".")[-1]
            mod.bf16_product = products and ("bias" if leaf in _BF16_BIAS_PRODUCTS else
                                             leaf in _BF16_PRODUCTS)
            mod.forward = forward.__get__(mod)
            mod.bf16_sampled = products and sampled and leaf == "embed_out"
        if isinstance(mod, NeoXLayer):
            mod.bf16_kv_cache = kv_caches
            mod.bf16_activations = products and activations
            mod.bf16_rotary_uncached = not name.startswith("token_decoder.")


def bf16_reference(case_dir):
    """The fixture case's model with its weights, in eval mode, under use_bf16_gemms."""
    cfg = json.load(open(os.path.join(case_dir, "config.json")))
    model = model_from_fixture_config(cfg)
    w, _ = read_safetensors(os.path.join(case_dir, "model.safetensors"))
    model.load(w)
    model.eval()
    use_bf16_gemms(model)
    return model


def check_bf16_gemms(case_dir, bt_eval, tol, min_exact=0.9):
    """Compares bt's eval logits of a `--dtype bf16` CUDA artifact (bt_eval, safetensors) with this
    implementation under use_bf16_gemms, per position (one row of V logits, error relative to the
    fixture's max|logit|), and both with the f32 fixture. They agree when
      - at least 90 % of the positions match the reference to f32 precision (<= tol, 1e-5): the
        same values rounded at the same points;
      - every position is within 2^-7 of it: an activation within f32 noise of a bf16 rounding
        midpoint rounds the other way in one implementation (one bf16 ulp, 2^-8 relative, on one
        GEMM input), which moves a few positions by about the size of bf16 rounding itself;
      - bt is within 2^-6 of the f32 fixture (what bf16 rounding of the GEMM inputs does to these
        models with the products rounded too: measured 4.9e-3 to 6.9e-3, i.e. 1.25 to 1.8 bf16 ulps
        of 2^-8; the bound leaves 2.2x).
    Returns True if all three hold."""
    model = bf16_reference(case_dir)
    inp, _ = read_safetensors(os.path.join(case_dir, "inputs.safetensors"))
    ref, _ = read_safetensors(os.path.join(case_dir, "outputs.safetensors"))
    got, _ = read_safetensors(bt_eval)
    t = {k: torch.from_numpy(v) for k, v in inp.items()}
    with torch.no_grad():
        if isinstance(model, BlockTransformer):
            logits, _ = model(t["input_ids"], t["attention_mask"], t["block_attention_mask"], t["labels"])
        else:
            logits, _ = model(t["input_ids"], t["attention_mask"], t["labels"])
    f32 = torch.from_numpy(ref["logits"])
    bt = torch.from_numpy(got["logits"])
    scale = float(f32.abs().max())
    per_pos = (bt - logits).abs().amax(dim=-1).flatten() / scale
    exact = float((per_pos <= tol).float().mean())
    d_ref = float(per_pos.max())
    d_f32 = float((bt - f32).abs().max()) / scale
    d_model = float((logits - f32).abs().max()) / scale
    good = exact >= min_exact and d_ref <= 2.0 ** -7 and d_f32 <= 2.0 ** -6
    case = os.path.basename(os.path.normpath(case_dir))
    print(f"{case:16s} bf16 GEMMs: bt vs reference: {100 * exact:.1f}% of {per_pos.numel()} positions "
          f"<= {tol:g}, max {d_ref:.3e} (<= 2^-7); bt vs f32 fixture max|Δ|/max|logit| {d_f32:.3e} "
          f"(<= 2^-6; reference {d_model:.3e})  {'OK' if good else 'FAIL'}")
    return good


def check_bf16_generate(case_dir, mode, bt_gen, tol, min_exact=0.25):
    """Compares bt's greedy generation (bt_gen: new_tokens [B, N], step_logits [N, B, V]) of a
    `--dtype bf16` CUDA artifact from the case's generate.safetensors prompt (mode: trainpos or
    official positions) with this implementation under use_bf16_gemms: the tokens must be equal,
    every step's logits within 2^-7 of the reference's (relative to the fixture's max|logit|) and
    at least a quarter of them within tol (f32 precision). A rounding flip (check_bf16_gemms) in
    the block decoder moves the context, hence every step of that row's block: on block_tiny_b8
    (L_B = 8, 2 rows) one flip moves 8 of 24 steps, so fewer steps than in eval match exactly;
    a systematic difference would move all of them. Reports the tokens that differ
    from the f32 fixture's (bf16 rounding may flip an argmax whose f32 margin is small: not an
    error) and the step logits' max|Δ| / max|logit| against it. Returns True if bt agrees with
    the reference."""
    model = bf16_reference(case_dir)
    g, _ = read_safetensors(os.path.join(case_dir, "generate.safetensors"))
    got, _ = read_safetensors(bt_gen)
    pid, pm = torch.from_numpy(g["prompt.input_ids"]), torch.from_numpy(g["prompt.attention_mask"])
    n = got["new_tokens"].shape[1]
    with torch.no_grad():
        if isinstance(model, BlockTransformer):
            toks, steps = model.generate(pid, pm, n, official_positions=(mode == "official"))
        else:
            toks, steps = model.generate(pid, pm, n)
    f32_toks = g[mode + ".new_tokens"][:, :n]
    f32_steps = torch.from_numpy(g[mode + ".step_logits"][:n])
    bt_toks, bt_steps = got["new_tokens"], torch.from_numpy(got["step_logits"])
    scale = float(f32_steps.abs().max())
    per_pos = (bt_steps - steps).abs().amax(dim=-1).flatten() / scale
    exact = float((per_pos <= tol).float().mean())
    same = bool((bt_toks == toks.numpy()).all())
    differ = int((bt_toks != f32_toks).sum())
    d_f32 = float((bt_steps - f32_steps).abs().max()) / scale
    good = same and exact >= min_exact and float(per_pos.max()) <= 2.0 ** -7
    case = os.path.basename(os.path.normpath(case_dir))
    print(f"{case:16s} bf16 generate {mode:8s}: tokens {'equal to' if same else 'DIFFER from'} the "
          f"reference; step logits {100 * exact:.1f}% of {per_pos.numel()} <= {tol:g}, max "
          f"{float(per_pos.max()):.3e}; vs f32 fixture: {differ} of {f32_toks.size} tokens differ, "
          f"step logits max|Δ|/max|logit| {d_f32:.3e}  {'OK' if good else 'FAIL'}")
    return good


# --------------------------------------------------------------------------
# Benchmark (the baseline of `bt-run bench`)
# --------------------------------------------------------------------------

def stack_from_bt(s):
    """A Stack from a bt.proto NeoXConfig as JSON (int64 fields are strings in proto3 JSON)."""
    return Stack(int(s["hidden_size"]), int(s["num_layers"]), int(s["num_heads"]),
                 int(s["intermediate_size"]), int(s["rotary_dims"]), float(s["rotary_base"]),
                 float(s["layer_norm_eps"]))


def model_from_bt_config(cfg):
    """Builds a model from bt.proto ModelConfig JSON (bt_config.json of `bt-run bench`)."""
    if cfg["kind"] == "VANILLA":
        return VanillaNeoX(int(cfg["vocab_size"]), stack_from_bt(cfg["block_decoder"]))
    # proto3 JSON: enums as names, default values (PREFIX, CONCAT, 0) omitted.
    strategy = {"PREFIX": "prefix", "SUMMATION": "summation"}.get(cfg.get("strategy", "PREFIX"))
    projection = {"CONCAT": "concat", "PROJECTION_LAYER": "projection_layer"}.get(
        cfg.get("embedder_projection", "CONCAT"))
    if strategy is None or projection is None:
        raise SystemExit(f"bt_torch.py: strategy {cfg.get('strategy')} / embedder projection "
                         f"{cfg.get('embedder_projection')} is not implemented")
    return BlockTransformer(int(cfg["vocab_size"]), int(cfg["block_length"]), int(cfg["embedder_width"]),
                            stack_from_bt(cfg["block_decoder"]), stack_from_bt(cfg["token_decoder"]),
                            int(cfg.get("prefix_length", 0)), int(cfg.get("pad_token_id", 0)),
                            int(cfg.get("eos_token_id", 0)), strategy=strategy, projection=projection,
                            bos_id=int(cfg.get("bos_token_id", 0)))


def forward_inputs(model, batch, tokens, gen):
    """Random ids in [2, V) and all-ones masks in the shapes of the bt forward."""
    if isinstance(model, BlockTransformer):
        shape = (batch, tokens // model.L, model.L)
        ids = torch.randint(2, model.vocab, shape, generator=gen, device="cpu").to(_DEVICE)
        return (ids, torch.ones(shape, dtype=torch.long), torch.ones(shape[:2], dtype=torch.long))
    ids = torch.randint(2, model.vocab, (batch, tokens), generator=gen, device="cpu").to(_DEVICE)
    return (ids, torch.ones(ids.shape, dtype=torch.long))


# The device of --serve / --bench ("cpu", or "cuda": the GPU bt's artifact runs on) and the
# dtype of the weights and activations there (set by load_bench_model).
_DEVICE = "cpu"


def _sync():
    """Waits for the GPU's queued work (timings on --device cuda); nothing on the CPU."""
    if _DEVICE == "cuda":
        torch.cuda.synchronize()


def _reset_peak_device():
    if _DEVICE == "cuda":
        torch.cuda.reset_peak_memory_stats()


def _peak_device_mb():
    """Peak GPU memory torch allocated since _reset_peak_device (0 on the CPU)."""
    return torch.cuda.max_memory_allocated() / 2**20 if _DEVICE == "cuda" else 0.0


def _reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


_TORCH_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def load_bench_model(args):
    """The model of --model-dir on --device in --dtype, and its description."""
    global _DEVICE
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda: torch sees no CUDA GPU")
        if not hasattr(torch, "set_default_device"):
            raise RuntimeError(f"--device cuda needs torch >= 2.0 (this is {torch.__version__})")
        # Factory calls in the model (masks, positions) then allocate on the GPU too.
        torch.set_default_device("cuda")
    elif args.dtype != "f32":
        raise RuntimeError("--dtype bf16 is for --device cuda")
    _DEVICE = args.device
    cfg = json.load(open(os.path.join(args.model_dir, "bt_config.json")))
    # Built and loaded on the CPU (torch.device is a context manager in torch >= 2.0), then moved.
    with torch.device("cpu") if args.device == "cuda" else contextlib.nullcontext():
        model = model_from_bt_config(cfg)
        w, _ = read_safetensors(os.path.join(args.model_dir, "model.safetensors"))
        model.load(w)
        del w
    model = model.to(device=args.device, dtype=_TORCH_DTYPES[args.dtype])
    model.eval()
    desc = f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)"
    if args.device == "cuda":
        desc = (f"torch {torch.__version__} on {torch.cuda.get_device_name()}, {args.dtype}, "
                f"CUDA {torch.version.cuda}")
    print(f"[torch] {desc}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '')}",
          file=sys.stderr, flush=True)
    return model, desc


def run_forward(model, inputs):
    """The forward bt's `eval` computes (labels=None): logits."""
    return model(*inputs)[0]


def eval_inputs(model, path):
    inp, _ = read_safetensors(path)
    t = {k: torch.from_numpy(v) for k, v in inp.items()}
    if isinstance(model, BlockTransformer):
        return (t["input_ids"], t["attention_mask"], t["block_attention_mask"])
    return (t["input_ids"], t["attention_mask"])


GENERATION_SETTINGS = ("prefill-heavy", "decode-heavy")


def serve(args):
    """The request loop of --serve (protocol in the module docstring)."""
    model, desc = load_bench_model(args)
    gen = torch.Generator().manual_seed(args.seed)
    inputs = None
    prompt, gen_tokens, last_tokens = None, 0, None
    print(json.dumps({"ready": True, "description": desc}), flush=True)

    def report(done, total):
        print(json.dumps({"progress": done, "total": total}), flush=True)

    with torch.no_grad():
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                req = json.loads(line)
                cmd = req["cmd"]
                if cmd == "prepare":
                    inputs, prompt, last_tokens = None, None, None
                    if req["setting"] in GENERATION_SETTINGS:
                        ids = read_safetensors(req["prompt"])[0]["input_ids"]
                        if list(ids.shape) != [int(req["batch"]), int(req["prompt_tokens"])]:
                            raise ValueError(f"prompt {list(ids.shape)} does not match the setting")
                        prompt = torch.from_numpy(ids).to(_DEVICE)
                        gen_tokens = int(req["gen_tokens"])
                    elif req["setting"] == "forward":
                        inputs = forward_inputs(model, int(req["batch"]), int(req["prompt_tokens"]), gen)
                    else:
                        raise ValueError(f"setting {req['setting']!r} is not implemented")
                    _reset_peak_rss()
                    _reset_peak_device()
                    reply = {"ok": True}
                elif cmd == "call":
                    if prompt is not None:
                        # Greedy, EOS ignored (generate never stops early), no step logits kept.
                        stats = {}
                        last_tokens = None
                        t0 = time.perf_counter()
                        toks, _ = model.generate(prompt, torch.ones_like(prompt), gen_tokens,
                                                 keep_logits=False, progress=report, stats=stats)
                        _sync()
                        reply = {"seconds": time.perf_counter() - t0,
                                 "prefill_seconds": stats["prefill_seconds"],
                                 "kv_bytes_per_sample": stats["kv_bytes_per_sample"]}
                        last_tokens = toks
                    elif inputs is not None:
                        t0 = time.perf_counter()
                        out = run_forward(model, inputs)
                        _sync()
                        reply = {"seconds": time.perf_counter() - t0}
                        del out
                    else:
                        raise ValueError("call before prepare")
                elif cmd == "tokens":
                    if last_tokens is None:
                        raise ValueError("tokens before a generation call")
                    write_safetensors(req["output"], {"new_tokens": last_tokens.cpu().numpy()})
                    reply = {"ok": True}
                elif cmd == "peak":
                    reply = {"peak_rss_mb": _peak_rss_mb(), "peak_device_mb": _peak_device_mb()}
                elif cmd == "logits":
                    logits = run_forward(model, eval_inputs(model, req["inputs"]))
                    write_safetensors(req["output"], {"logits": logits.float().cpu().numpy()})
                    del logits
                    reply = {"ok": True}
                else:
                    raise ValueError(f"unknown command {cmd!r}")
            except Exception as e:  # reported to bt, which drops the baseline
                reply = {"error": f"{type(e).__name__}: {e}"}
            print(json.dumps(reply), flush=True)


def bench(args):
    model, _ = load_bench_model(args)
    gen = torch.Generator().manual_seed(args.seed)
    with torch.no_grad():
        for batch in [int(b) for b in args.batch.split(",")]:
            inputs = forward_inputs(model, batch, args.tokens, gen)
            print(f"[torch] forward batch {batch} x {args.tokens} tokens: ", end="", file=sys.stderr, flush=True)
            _reset_peak_rss()
            _reset_peak_device()
            runs = []
            for i in range(args.warmup + args.iters):
                t0 = time.perf_counter()
                out = run_forward(model, inputs)
                _sync()
                dt = time.perf_counter() - t0
                del out
                if i < args.warmup:
                    print(f"warmup {dt:.3g}s, ", end="", file=sys.stderr, flush=True)
                else:
                    runs.append(dt)
                    print(f"{dt:.3g}s ", end="", file=sys.stderr, flush=True)
            med = median(runs)
            tokens = batch * args.tokens
            print(f"-> {tokens / med:.1f} tok/s", file=sys.stderr, flush=True)
            print(json.dumps({"setting": "forward", "impl": "torch", "batch": batch,
                              "prompt_tokens": args.tokens, "gen_tokens": 0, "tokens": tokens,
                              "seconds": med, "tokens_per_s": tokens / med,
                              "peak_rss_mb": _peak_rss_mb(), "peak_device_mb": _peak_device_mb(),
                              "device": args.device, "dtype": args.dtype, "run_seconds": runs}),
                  flush=True)
        if args.check_inputs:
            logits = run_forward(model, eval_inputs(model, args.check_inputs))
            write_safetensors(args.check_output, {"logits": logits.float().cpu().numpy()})


def read_lr_column(path):
    """{step: lr} from bt's log.csv (rows with a loss; the header names the columns)."""
    with open(path) as f:
        header = f.readline().strip().split(",")
        cs, cl = header.index("step"), header.index("lr")
        lrs = {}
        for line in f:
            c = line.strip().split(",")
            if len(c) > cl and c[cl]:
                lrs[int(c[cs])] = float(c[cl])
    return lrs


class TrainSession:
    """The model, bt's batches and AdamW of --train / --train-serve."""

    def __init__(self, args):
        torch.set_num_threads(args.threads)
        cfg = json.load(open(os.path.join(args.model_dir, "bt_config.json")))
        self.model = model_from_bt_config(cfg)
        if not isinstance(self.model, BlockTransformer):
            raise SystemExit("bt_torch.py --train: only the Block Transformer is implemented")
        w, _ = read_safetensors(os.path.join(args.model_dir, "model.safetensors"))
        self.model.load(w)
        del w
        self.model.train()
        self.batches, _ = read_safetensors(args.batches)
        self.steps = self.batches["input_ids"].shape[0]
        self.tokens = int(np.prod(self.batches["input_ids"].shape[1:]))
        self.clip = args.clip
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=0.0, betas=(args.beta1, args.beta2),
                                     eps=args.eps, weight_decay=args.weight_decay)
        self.description = f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)"

    def step(self, step, lr):
        """Optimizer step `step` (1-based: batch step - 1) at `lr`: (loss, grad_norm, seconds)."""
        b = {k: torch.from_numpy(v[step - 1]) for k, v in self.batches.items()}
        t0 = time.perf_counter()
        for g in self.opt.param_groups:
            g["lr"] = lr
        _, loss = self.model(b["input_ids"], b["attention_mask"], b["block_attention_mask"], b["labels"])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.opt.step()
        return loss.item(), float(norm), time.perf_counter() - t0


def train(args):
    """--train: every dumped batch at bt's learning rates (log.csv), per-step CSV."""
    s = TrainSession(args)
    lrs = read_lr_column(args.lr_from)
    steps = min(args.steps, s.steps)
    rows = ["step,loss,grad_norm,lr,seconds,tokens_per_s"]
    print(f"[torch] {s.description}: {steps} steps of {s.tokens} tokens", file=sys.stderr, flush=True)
    for step in range(1, steps + 1):
        loss, norm, dt = s.step(step, lrs[step])
        rows.append(f"{step},{loss:.9g},{norm:.9g},{lrs[step]:.9g},{dt:.6f},{s.tokens / dt:.1f}")
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(rows) + "\n")
    os.replace(tmp, args.out)


def train_serve(args):
    """--train-serve: one optimizer step per request, so that bt and torch take turns step by step
    (bt/runtime/train.h):
        (start)                                   -> {"ready": true, "description": ..., "steps": S}
        {"cmd": "step", "step": s, "lr": x}       -> {"loss": l, "grad_norm": g, "seconds": t}
        errors                                    -> {"error": message}; EOF ends the process."""
    s = TrainSession(args)
    print(json.dumps({"ready": True, "description": s.description, "steps": s.steps}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            if req["cmd"] != "step":
                raise ValueError(f"unknown command {req['cmd']!r}")
            step = int(req["step"])
            if not 1 <= step <= s.steps:
                raise ValueError(f"step {step} outside the {s.steps} dumped batches")
            loss, norm, dt = s.step(step, float(req["lr"]))
            reply = {"loss": loss, "grad_norm": norm, "seconds": dt}
        except Exception as e:  # reported to bt
            reply = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(reply), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", metavar="FIXTURES_DIR", help="compare with every official fixture case")
    ap.add_argument("--check-bf16-gemms", nargs=2, metavar=("CASE_DIR", "BT_EVAL"),
                    help="compare bt's eval logits of a --dtype bf16 artifact with the bf16-GEMM reference")
    ap.add_argument("--check-bf16-generate", nargs=3, metavar=("CASE_DIR", "MODE", "BT_GENERATE"),
                    help="compare bt's greedy generation (trainpos|official) of a --dtype bf16 "
                    "artifact with the bf16-GEMM reference")
    ap.add_argument("--tol", type=float, default=1e-5,
                    help="--check-bf16-gemms: f32 agreement with the reference, per position")
    ap.add_argument("--bench", action="store_true", help="time the forward per batch size")
    ap.add_argument("--serve", action="store_true", help="answer bt-run bench's requests on stdin")
    ap.add_argument("--model-dir", help="--bench/--serve: directory with bt_config.json and model.safetensors")
    ap.add_argument("--batch", default="1,8", help="--bench: batch sizes, comma-separated")
    ap.add_argument("--tokens", type=int, default=512, help="--bench: tokens per row")
    ap.add_argument("--iters", type=int, default=5, help="--bench: timed calls per setting")
    ap.add_argument("--warmup", type=int, default=1, help="--bench: untimed calls first")
    ap.add_argument("--threads", type=int, default=2, help="--bench: torch.set_num_threads")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="--bench/--serve: where the model runs (cuda: the GPU, torch >= 2.0)")
    ap.add_argument("--min-exact", type=float, default=None, metavar="FRACTION",
                    help="--check-bf16-gemms / --check-bf16-generate: the share of positions "
                    "(steps) that must match the reference to --tol (default 0.9 / 0.25; on a GPU, "
                    "whose cuBLAS sums in another order than the reference's double sums, 0: "
                    "only the 2^-7 and 2^-6 bounds then hold)")
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32",
                    help="--bench/--serve: weights and activations (bf16: --device cuda only)")
    ap.add_argument("--seed", type=int, default=0, help="--bench: seed of the random ids")
    ap.add_argument("--check-inputs", help="--bench: also run the forward on these inputs ...")
    ap.add_argument("--check-output", help="--bench: ... and write its logits here")
    ap.add_argument("--train", action="store_true", help="AdamW steps on bt's batches, lr from its log.csv")
    ap.add_argument("--train-serve", action="store_true", help="AdamW steps on bt's batches on request "
                    "(bt train --baseline torch)")
    ap.add_argument("--batches", help="--train: the batches bt trained on (safetensors, [S, ...])")
    ap.add_argument("--lr-from", help="--train: bt's log.csv (the lr column is used per step)")
    ap.add_argument("--steps", type=int, default=1 << 62, help="--train: at most this many steps")
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0, help="--train: max global gradient norm")
    ap.add_argument("--out", help="--train: the per-step CSV to write")
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.check:
        sys.exit(0 if check_fixtures(args.check) else 1)
    if args.check_bf16_gemms:
        extra = {} if args.min_exact is None else {"min_exact": args.min_exact}
        sys.exit(0 if check_bf16_gemms(*args.check_bf16_gemms, args.tol, **extra) else 1)
    if args.check_bf16_generate:
        extra = {} if args.min_exact is None else {"min_exact": args.min_exact}
        sys.exit(0 if check_bf16_generate(*args.check_bf16_generate, args.tol, **extra) else 1)
    if args.train:
        if not (args.model_dir and args.batches and args.lr_from and args.out):
            ap.error("--train needs --model-dir, --batches, --lr-from and --out")
        train(args)
        return
    if args.train_serve:
        if not (args.model_dir and args.batches):
            ap.error("--train-serve needs --model-dir and --batches")
        train_serve(args)
        return
    if args.bench or args.serve:
        if not args.model_dir:
            ap.error("--bench/--serve need --model-dir")
        if args.device == "cuda" and not torch.cuda.is_available():
            print(json.dumps({"unavailable": f"--device cuda: torch {torch.__version__} sees no CUDA GPU"}),
                  flush=True)
            sys.exit(3)
        serve(args) if args.serve else bench(args)
        return
    ap.print_help()


if __name__ == "__main__":
    main()
