#!/usr/bin/env python3
"""Bit-exact comparison of two safetensors files (no numpy/torch needed).

  compare_safetensors_exact.py GOT WANT [--except NAME ...] [--ulps-of-max REL]

Every tensor of WANT except the --except names must be in GOT with the same
dtype, shape and bytes; with --ulps-of-max REL, an F32 tensor whose bytes
differ still counts as the same ("close NAME: ...") when every element is
within REL x max|WANT| of WANT's (a difference of rounding, not of results). Prints one line per tensor ("same NAME" or "DIFF
NAME: ..."), then "compared N tensor(s), M differ". Exit 1 if any differs or
is missing, 2 on unreadable input.
"""
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    skip = set()
    rel = None
    rest = argv[3:]
    while rest:
        if rest[0] not in ("--except", "--ulps-of-max") or len(rest) < 2:
            sys.stderr.write(__doc__)
            return 2
        if rest[0] == "--except":
            skip.add(rest[1])
        else:
            rel = float(rest[1])
        rest = rest[2:]
    try:
        got, want = read(argv[1]), read(argv[2])
    except (OSError, struct.error, ValueError, KeyError) as e:
        sys.stderr.write(f"not a readable safetensors file: {e}\n")
        return 2
    bad = 0
    n = 0
    for name in sorted(want):
        if name in skip:
            continue
        n += 1
        if name not in got:
            print(f"DIFF {name}: missing")
            bad += 1
        elif got[name] != want[name]:
            g, w = got[name], want[name]
            if rel is not None and g[:2] == w[:2] and g[0] == "F32":
                n_el = len(w[2]) // 4
                gv = struct.unpack(f"<{n_el}f", g[2])
                wv = struct.unpack(f"<{n_el}f", w[2])
                scale = max((abs(x) for x in wv), default=0.0)
                worst = max((abs(a - b) for a, b in zip(gv, wv)), default=0.0)
                if worst <= rel * scale:
                    print(f"close {name}: max|diff| {worst:.3e} <= {rel:g} x max|want| {scale:.3e}")
                    continue
            what = "bytes" if g[:2] == w[:2] else f"{g[0]} {g[1]} vs {w[0]} {w[1]}"
            print(f"DIFF {name}: {what}")
            bad += 1
        else:
            print(f"same {name}")
    print(f"compared {n} tensor(s), {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
