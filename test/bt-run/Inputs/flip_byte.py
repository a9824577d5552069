#!/usr/bin/env python3
"""Flips one bit of an artifact or executable in place, inside the region
named by argv[2] (docs/abi.md: 32-byte trailer "BTARTIF2" | u64 payload_start
| u64 manifest_offset | u32 manifest_size | u32 manifest_crc32):

    flip_byte.py FILE kernels    a byte of the kernels section (payload + 64)
    flip_byte.py FILE weights    a byte of the last weight (just before the
                                 8-aligned manifest)
    flip_byte.py FILE manifest   a byte in the middle of the manifest
"""
import struct
import sys

path, where = sys.argv[1], sys.argv[2]
data = bytearray(open(path, "rb").read())
magic, start, offset, size, _crc = struct.unpack("<8sQQII", data[-32:])
if magic != b"BTARTIF2":
    sys.exit("not a bt artifact: " + path)
at = {"kernels": start + 64,
      "weights": start + offset - 16,
      "manifest": start + offset + size // 2}[where]
data[at] ^= 0x08
open(path, "wb").write(data)
