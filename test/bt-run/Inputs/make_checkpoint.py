#!/usr/bin/env python3
"""Writes a (possibly corrupted) copy of an official fixture checkpoint for the
bad-input tests of bt-run.

    make_checkpoint.py KIND FIXTURE_DIR OUT_DIR

KIND names the corruption (see CORRUPTIONS). Uses only the Python standard
library: the safetensors format is an 8-byte little-endian header length, a
JSON header, then the raw data.
"""
import json
import os
import shutil
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def write(path, header, payload, header_len=None):
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    n = len(raw) if header_len is None else header_len
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", n) + raw + payload)


def first_tensor(header):
    return sorted(k for k in header if k != "__metadata__")[0]


def truncated(st, yaml):
    data = open(st, "rb").read()
    open(st, "wb").write(data[:len(data) // 2])


def header_past_eof(st, yaml):
    h, p = read(st)
    write(st, h, p, header_len=os.path.getsize(st) * 4)


def overlapping(st, yaml):
    h, p = read(st)
    names = sorted(h, key=lambda k: h[k]["data_offsets"][0] if k != "__metadata__" else -1)
    names = [k for k in names if k != "__metadata__"]
    a, b = names[0], names[1]
    # Make b start inside a, keeping its size.
    size = h[b]["data_offsets"][1] - h[b]["data_offsets"][0]
    start = h[a]["data_offsets"][0] + 4
    h[b]["data_offsets"] = [start, start + size]
    write(st, h, p)


def out_of_range(st, yaml):
    h, p = read(st)
    k = first_tensor(h)
    b, e = h[k]["data_offsets"]
    h[k]["data_offsets"] = [len(p) - 4, len(p) - 4 + (e - b)]
    write(st, h, p)


def unknown_dtype(st, yaml):
    h, p = read(st)
    h["embedder.embeddings.weight"]["dtype"] = "Q7"
    write(st, h, p)


def missing_tensor(st, yaml):
    h, p = read(st)
    del h["token_decoder.embed_out.weight"]
    write(st, h, p)


def wrong_shape(st, yaml):
    h, p = read(st)
    t = h["token_decoder.gpt_neox.layers.1.attention.dense.weight"]
    t["shape"] = [32, 128]  # same byte size as [64, 64]
    write(st, h, p)


def wrong_dtype(st, yaml):
    h, p = read(st)
    h["block_decoder.gpt_neox.final_layer_norm.bias"]["dtype"] = "I32"
    write(st, h, p)


def yaml_missing_field(st, yaml):
    text = open(yaml).read()
    text = text.replace("block_length: 4\n", "", 1)
    open(yaml, "w").write(text)


def yaml_inconsistent(st, yaml):
    # Block decoder width 66 is not divisible by the block length 4.
    text = open(yaml).read()
    parts = text.split("block_decoder:", 1)
    parts[1] = parts[1].replace("hidden_size: 64", "hidden_size: 66", 1)
    open(yaml, "w").write("block_decoder:".join(parts))


def yaml_syntax(st, yaml):
    open(yaml, "a").write("\nembedder: [unclosed\n")


def extra_tensor(st, yaml):
    h, p = read(st)
    h["token_decoder.mystery.weight"] = {"dtype": "F32", "shape": [2],
                                         "data_offsets": [len(p), len(p) + 8]}
    write(st, h, p + bytes(8))


def no_weights(st, yaml):
    os.remove(st)


def valid(st, yaml):
    pass


CORRUPTIONS = {f.__name__: f for f in [
    truncated, header_past_eof, overlapping, out_of_range, unknown_dtype, missing_tensor,
    wrong_shape, wrong_dtype, yaml_missing_field, yaml_inconsistent, yaml_syntax,
    extra_tensor, no_weights, valid]}


def main():
    kind, src, out = sys.argv[1:4]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for f in ("config.yaml", "model.safetensors"):
        shutil.copy(os.path.join(src, f), os.path.join(out, f))
    CORRUPTIONS[kind](os.path.join(out, "model.safetensors"), os.path.join(out, "config.yaml"))


if __name__ == "__main__":
    main()
