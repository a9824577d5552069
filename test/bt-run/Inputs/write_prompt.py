#!/usr/bin/env python3
"""Writes a random generation prompt as safetensors, with the Python standard
library only (CI machines may lack numpy):

    write_prompt.py OUT --batch B --tokens T --vocab V [--seed S]

OUT holds prompt.input_ids I64 [B, T] (ids uniform in [2, V): 0 and 1 are the
pad / EOS ids of the official models) and prompt.attention_mask I64 [B, T]
(all ones: no padding), the names `generate --inputs` reads
(docs/generation.md).
"""
import argparse
import json
import random
import struct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    n = a.batch * a.tokens
    ids = struct.pack("<%dq" % n, *(rng.randrange(2, a.vocab) for _ in range(n)))
    mask = struct.pack("<%dq" % n, *([1] * n))
    shape = [a.batch, a.tokens]
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
