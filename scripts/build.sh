#!/usr/bin/env bash
# Configures (once) and builds bt incrementally into build/ (tools in build/bin).
#   scripts/build.sh [ninja targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${BT_JOBS:-2}"
if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py
fi
ninja -C build -j "$JOBS" "$@"
