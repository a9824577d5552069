#!/usr/bin/env python3
"""Reads the JSON header of a safetensors file (no numpy/torch needed).

  safetensors_header.py has  TENSOR FILE   exit 0 if FILE holds TENSOR, else 1
  safetensors_header.py dim1 TENSOR FILE   print dim 1 of TENSOR's shape
                                           (e.g. N_new of new_tokens [B, N_new])
  safetensors_header.py scalar TENSOR FILE print the value of a scalar F32
                                           tensor (repr of the float)

Used by scripts/gpu_check.sh and test/bt-run/Inputs/check-generate.sh.
Errors (unreadable file, bad header, missing tensor for dim1, shape of rank
< 2) are reported on stderr with exit status 2.
"""
import json
import struct
import sys


def main(argv):
    if len(argv) != 4 or argv[1] not in ("has", "dim1", "scalar"):
        sys.stderr.write("usage: safetensors_header.py has|dim1|scalar TENSOR FILE\n")
        return 2
    what, name, path = argv[1:]
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
    except (OSError, struct.error, ValueError) as e:
        sys.stderr.write(f"{path}: not a readable safetensors file: {e}\n")
        return 2
    if what == "has":
        return 0 if name in header else 1
    if what == "scalar":
        e = header.get(name, {})
        if e.get("dtype") != "F32" or e.get("shape") != []:
            sys.stderr.write(f"{path}: tensor {name} is not a scalar F32 ({e})\n")
            return 2
        with open(path, "rb") as f:
            f.seek(8 + n + e["data_offsets"][0])
            print(repr(struct.unpack("<f", f.read(4))[0]))
        return 0
    shape = header.get(name, {}).get("shape")
    if shape is None or len(shape) < 2:
        sys.stderr.write(f"{path}: tensor {name} absent or of rank < 2 "
                         f"(shape {shape})\n")
        return 2
    print(shape[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
