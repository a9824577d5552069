#!/usr/bin/env python3
"""Writes the serialized manifest (bt.proto.Manifest) of an artifact or
standalone executable to stdout (docs/abi.md: 32-byte trailer
"BTARTIF2" | u64 payload_start | u64 manifest_offset | u32 manifest_size
| u32 manifest_crc32).

    manifest.py ARTIFACT | protoc --decode bt.proto.Manifest -I DIR bt.proto
"""
import struct
import sys

data = open(sys.argv[1], "rb").read()
magic, start, offset, size, _crc = struct.unpack("<8sQQII", data[-32:])
if magic != b"BTARTIF2":
    sys.exit("not a bt artifact: " + sys.argv[1])
sys.stdout.buffer.write(data[start + offset:start + offset + size])
