#!/usr/bin/env bash
# The main job. Installs what is missing, builds bt, and runs the compiler on a
# real model: the Block Transformer of the official block_tiny fixture
# (examples/block_tiny.mlir), verified (ops, parameters by official name, KV-cache
# lifetimes) and printed in generic form.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh bt-opt
echo "== bt-opt examples/block_tiny.mlir --bt-verify-kv-lifetimes"
build/bin/bt-opt examples/block_tiny.mlir --bt-verify-kv-lifetimes -o build/block_tiny.verified.mlir
echo "verified: $(grep -c 'bt.param ' build/block_tiny.verified.mlir) parameters," \
     "$(grep -c 'bt.kv_' build/block_tiny.verified.mlir) KV-cache ops with checked lifetimes"
echo "== output: build/block_tiny.verified.mlir"
