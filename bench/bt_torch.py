"""Our own PyTorch implementation of the Block Transformer (and vanilla GPT-NeoX).

Written from the paper (Ho et al., NeurIPS 2024, §2) and the fixture README
(../shared/fixtures/official/README.md), not copied from the official code. It
is the PyTorch baseline that `bt-run bench` measures against, and an
independent numerical reference. Runs on Debian's python3-torch (1.13, CPU):
    /usr/bin/python3 bench/bt_torch.py --check ../shared/fixtures/official

Shapes: B batch, N blocks, L = L_B block length, D block width, T token width,
P prefix length, V vocabulary, H heads, hd head dim.
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# --------------------------------------------------------------------------
# safetensors (the format is tiny; no extra package needed)
# --------------------------------------------------------------------------

_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32,
           "F16": np.float16, "U8": np.uint8, "I8": np.int8, "BOOL": np.bool_}


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
    c, s = cos[:, None, :], sin[:, None, :]  # [S, 1, r]
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

    def attention(self, x, cos, sin, key_mask):
        """x [B', S, D]; key_mask [B', S] (1 attend, 0 pad) or None."""
        c = self.cfg
        bsz, s, _ = x.shape
        qkv = self.query_key_value(x).view(bsz, s, c.heads, 3, c.head_dim)
        q, k, v = qkv[..., 0, :], qkv[..., 1, :], qkv[..., 2, :]  # [B', S, H, hd]
        q = apply_rotary(q, cos, sin, c.rotary_dims)
        k = apply_rotary(k, cos, sin, c.rotary_dims)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B', H, S, hd]
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(c.head_dim))
        fmin = torch.finfo(scores.dtype).min
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        scores = torch.where(causal, scores, torch.tensor(fmin, dtype=scores.dtype))
        if key_mask is not None:
            scores = scores + (1.0 - key_mask[:, None, None, :].to(scores.dtype)) * fmin
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(bsz, s, c.hidden)
        return self.dense(out)

    def forward(self, x, cos, sin, key_mask):
        a = self.attention(self.input_layernorm(x), cos, sin, key_mask)
        m = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(self.post_attention_layernorm(x))))
        return m + a + x


class NeoXStack(nn.Module):
    def __init__(self, cfg: Stack):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList([NeoXLayer(cfg) for _ in range(cfg.layers)])
        self.final_layer_norm = nn.LayerNorm(cfg.hidden, eps=cfg.eps)

    def forward(self, x, key_mask=None):
        """x [B', S, W] -> [B', S, W] (positions 0..S-1)."""
        cos, sin = rotary_tables(torch.arange(x.shape[1]), self.cfg.rotary_dims, self.cfg.base)
        for layer in self.layers:
            x = layer(x, cos, sin, key_mask)
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


class BlockTransformer(nn.Module):
    """Embedder (lookup + token-major concat) → block decoder → token decoder (prefix)."""

    def __init__(self, vocab, block_length, embed_width, block: Stack, token: Stack, prefix_length,
                 pad_id=0, eos_id=0):
        super().__init__()
        self.vocab, self.L, self.P = vocab, block_length, prefix_length
        self.pad_id, self.eos_id = pad_id, eos_id
        self.embeddings = nn.Embedding(vocab, embed_width)
        self.block_decoder = NeoXStack(block)
        self.token_embed = nn.Embedding(vocab, token.hidden)
        self.token_decoder = NeoXStack(token)
        self.expansion = nn.Linear(block.hidden, prefix_length * token.hidden)
        self.embed_out = nn.Linear(token.hidden, vocab, bias=False)
        self.T = token.hidden

    def load(self, w):
        self.embeddings.weight.data.copy_(torch.from_numpy(w["embedder.embeddings.weight"]))
        self.block_decoder.load(w, "block_decoder.gpt_neox")
        self.token_embed.weight.data.copy_(torch.from_numpy(w["token_decoder.gpt_neox.embed_in.weight"]))
        self.token_decoder.load(w, "token_decoder.gpt_neox")
        self.expansion.weight.data.copy_(torch.from_numpy(w["token_decoder.expansion_layer.weight"][..., 0]))
        self.expansion.bias.data.copy_(torch.from_numpy(w["token_decoder.expansion_layer.bias"]))
        self.embed_out.weight.data.copy_(torch.from_numpy(w["token_decoder.embed_out.weight"]))

    def context(self, input_ids, block_mask):
        """[B, N, L] ids → context embeddings [B, N, D]."""
        bsz, n, L = input_ids.shape
        x = self.embeddings(input_ids).reshape(bsz, n, -1)
        return self.block_decoder(x, block_mask)

    def decode_blocks(self, ctx, ids, mask):
        """ctx [B', D], ids/mask [B', L] → hidden [B', L, T] predicting ids."""
        bp = ctx.shape[0]
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


def stack_from_json(d):
    return Stack(d["hidden_size"], d["num_hidden_layers"], d["num_attention_heads"], d["intermediate_size"],
                 d["rotary_ndims"] if "rotary_ndims" in d else int(d["hidden_size"] // d["num_attention_heads"] * d["rotary_pct"]),
                 d.get("rotary_emb_base", 10000.0), d.get("layer_norm_eps", 1e-5))


def model_from_fixture_config(cfg):
    """Builds a model from a fixture's resolved config.json."""
    if cfg["model_type"] == "block_transformer":
        return BlockTransformer(cfg["vocab_size"], cfg["block_length"], cfg["embedder"]["hidden_size"],
                                stack_from_json(cfg["block_decoder"]), stack_from_json(cfg["token_decoder"]),
                                cfg["token_decoder"]["prefix_length"], cfg["pad_token_id"], cfg["eos_token_id"])
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
        t = {k: torch.from_numpy(v) for k, v in inp.items()}
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
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", metavar="FIXTURES_DIR", help="compare with every official fixture case")
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.check:
        sys.exit(0 if check_fixtures(args.check) else 1)
    ap.print_help()


if __name__ == "__main__":
    main()
