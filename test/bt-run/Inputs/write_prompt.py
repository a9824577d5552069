#!/usr/bin/env python3
"""Writes a random generation prompt as safetensors, with the Python standard
library only (CI machines may lack numpy):

    write_prompt.py OUT --batch B --tokens T --vocab V [--seed S]
    write_prompt.py OUT --rows-of PROMPT --rows I,J,...

OUT holds prompt.input_ids I64 [B, T] (ids uniform in [2, V): 0 and 1 are the
pad / EOS ids of the official models) and prompt.attention_mask I64 [B, T]
(all ones: no padding), the names `generate --inputs` reads
(docs/generation.md). With --rows-of, the rows I, J, ... (in that order,
repeats allowed) of the prompt.input_ids and prompt.attention_mask of the
safetensors file PROMPT (a fixture's generate*.safetensors) instead.
"""
import argparse
import json
import random
import struct


def read_i64(path, name):
    """The values and shape of the I64 tensor `name` of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    if name not in header or header[name]["dtype"] != "I64":
        raise SystemExit("%s: no I64 tensor %s" % (path, name))
    begin, end = header[name]["data_offsets"]
    raw = data[8 + n + begin:8 + n + end]
    return list(struct.unpack("<%dq" % (len(raw) // 8), raw)), header[name]["shape"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--tokens", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows-of")
    ap.add_argument("--rows")
    a = ap.parse_args()
    if a.rows_of:
        if not a.rows:
            ap.error("--rows-of needs --rows")
        rows = [int(r) for r in a.rows.split(",")]
        src_ids, shape = read_i64(a.rows_of, "prompt.input_ids")
        src_mask, mshape = read_i64(a.rows_of, "prompt.attention_mask")
        if mshape != shape or len(shape) != 2:
            ap.error("%s: prompt.input_ids %s and prompt.attention_mask %s "
                     "must both be [B, T]" % (a.rows_of, shape, mshape))
        t = shape[1]
        for r in rows:
            if not 0 <= r < shape[0]:
                ap.error("--rows: %d is not a row of %s (B = %d)"
                         % (r, a.rows_of, shape[0]))
        pick = lambda v: [x for r in rows for x in v[r * t:(r + 1) * t]]
        ids_v, mask_v = pick(src_ids), pick(src_mask)
        shape = [len(rows), t]
    else:
        if a.batch is None or a.tokens is None or a.vocab is None:
            ap.error("--batch, --tokens and --vocab are required without --rows-of")
        rng = random.Random(a.seed)
        n = a.batch * a.tokens
        ids_v = [rng.randrange(2, a.vocab) for _ in range(n)]
        mask_v = [1] * n
        shape = [a.batch, a.tokens]
    ids = struct.pack("<%dq" % len(ids_v), *ids_v)
    mask = struct.pack("<%dq" % len(mask_v), *mask_v)
    header = {
        "prompt.attention_mask": {"dtype": "I64", "shape": shape,
                                  "data_offsets": [0, len(mask)]},
        "prompt.input_ids": {"dtype": "I64", "shape": shape,
                             "data_offsets": [len(mask), len(mask) + len(ids)]},
    }
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + mask + ids)


if __name__ == "__main__":
    main()
