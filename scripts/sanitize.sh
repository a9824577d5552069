#!/usr/bin/env bash
# Builds the runtime, its tools and their GoogleTest suites with
# AddressSanitizer + UndefinedBehaviorSanitizer (clang-19, -DBT_SANITIZE=ON,
# any report aborts) in a build directory of their own, and runs them under
# ctest. The compiler (MLIR) is not built here: the runtime's libraries, the
# BPE library, the CUDA emulator, bt-launcher and bt-bpe are, with every
# GoogleTest binary that tests them (btrt-tests, bt-bpe-tests, the emulator's
# tests) and the layer checks.
#
#   scripts/sanitize.sh [ctest arguments...]     e.g. -R Artifact
#   scripts/sanitize.sh --configure-only          (scripts/fuzz.sh)
#
# The same build directory holds the fuzz targets (-DBT_FUZZ=ON adds
# libFuzzer's coverage instrumentation; fuzz/README.md), so that CI compiles
# the instrumented runtime once for both.
#
# Environment: BT_SANITIZE_BUILD (build directory, default build-asan),
# BT_JOBS (ninja -j and ctest -j, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BT_SANITIZE_BUILD:-build-asan}
JOBS=${BT_JOBS:-2}
if [ ! -f "$BUILD/build.ninja" ]; then
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  # -O1: the level ASan's documentation recommends (readable reports,
  # shorter compiles than -O2); the static launcher (libstdc++ linked in)
  # does not mix with the sanitizer runtimes, so bt-launcher links
  # dynamically here.
  cmake -G Ninja -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS_DEBUG="-O1" -DCMAKE_CXX_FLAGS_DEBUG="-O1" \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DBT_SANITIZE=ON -DBT_FUZZ=ON -DBT_BUILD_COMPILER=OFF -DBT_STATIC_LAUNCHER=OFF \
    "${launcher[@]}" >/dev/null
fi
if [ "${1:-}" = --configure-only ]; then exit 0; fi
ninja -C "$BUILD" -j "$JOBS"
# detect_leaks: every test process is checked for leaks at exit.
# detect_stack_use_after_return=0: the CUDA emulator switches stacks with
# swapcontext (one fiber per GPU thread).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" "$@"
