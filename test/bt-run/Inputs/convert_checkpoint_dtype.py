#!/usr/bin/env python3
"""Copies a fixture checkpoint with its float weights converted to BF16 or F16:

    convert_checkpoint_dtype.py [--released] FIXTURE_DIR OUT_DIR BF16|F16|F32

config.yaml / config.json are copied unchanged (with --released they are not:
OUT_DIR then holds only model.safetensors, as a released `checkpoint-<step>/`
folder of the official trainer, whose config is the trainer YAML); every F32
tensor of model.safetensors becomes BF16 (round to nearest, ties to even, on
the f32 bit pattern: what torch's .to(torch.bfloat16) does) or F16 (IEEE
binary16, struct's 'e' format, also round-half-even); F32 copies the tensors
unchanged. Python standard library only (no numpy).
"""
import array
import json
import os
import shutil
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def write(path, header, blobs):
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for b in blobs:
            f.write(b)


def to_bf16(raw):
    bits = array.array("I")
    bits.frombytes(raw)
    if sys.byteorder != "little":
        bits.byteswap()
    out = array.array("H", [0]) * len(bits)
    for i, u in enumerate(bits):
        if (u & 0x7FFFFFFF) > 0x7F800000:  # NaN: keep it a quiet NaN
            out[i] = (u >> 16) | 0x40
        else:
            out[i] = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def to_f16(raw):
    n = len(raw) // 4
    values = struct.unpack("<%df" % n, raw)
    return struct.pack("<%de" % n, *values)


def main():
    args = sys.argv[1:]
    released = "--released" in args
    if released:
        args.remove("--released")
    fixture, out, dtype = args
    convert = {"BF16": to_bf16, "F16": to_f16, "F32": lambda raw: raw}[dtype]
    os.makedirs(out, exist_ok=True)
    for name in ("config.yaml", "config.json"):
        if not released and os.path.exists(os.path.join(fixture, name)):
            shutil.copyfile(os.path.join(fixture, name), os.path.join(out, name))
    header, payload = read(os.path.join(fixture, "model.safetensors"))
    new_header, blobs, offset = {}, [], 0
    if "__metadata__" in header:
        new_header["__metadata__"] = header.pop("__metadata__")
    for name in sorted(header):
        info = header[name]
        b, e = info["data_offsets"]
        raw = payload[b:e]
        if info["dtype"] == "F32":
            raw = convert(raw)
            info = dict(info, dtype=dtype)
        new_header[name] = dict(info, data_offsets=[offset, offset + len(raw)])
        offset += len(raw)
        blobs.append(raw)
    write(os.path.join(out, "model.safetensors"), new_header, blobs)


if __name__ == "__main__":
    main()
