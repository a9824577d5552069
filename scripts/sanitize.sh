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
#   scripts/sanitize.sh --lit [lit arguments...]  lit tests of standalone
#       executables with the instrumented launcher, e.g.
#       --lit build/test/bt-run/executable.test (needs build/ built)
#
# The same build directory holds the fuzz targets (-DBT_FUZZ=ON adds
# libFuzzer's coverage instrumentation; fuzz/README.md), so that CI compiles
# the instrumented runtime once for both.
#
# Environment: BT_SANITIZE_BUILD (build directory, default build-asan),
# BT_JOBS (ninja -j and ctest -j, default 2), BT_SANITIZE_COMPILER (set:
# configure with the compiler too; scripts/fuzz.sh's IR target).
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
  # BT_SANITIZE_COMPILER=1 (scripts/fuzz.sh, the IR target): with the
  # compiler, against the system's MLIR.
  compiler=(-DBT_BUILD_COMPILER=OFF)
  if [ -n "${BT_SANITIZE_COMPILER:-}" ]; then
    compiler=(-DBT_BUILD_COMPILER=ON -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir)
  fi
  cmake -G Ninja -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS_DEBUG="-O1" -DCMAKE_CXX_FLAGS_DEBUG="-O1" \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DBT_SANITIZE=ON -DBT_FUZZ=ON "${compiler[@]}" -DBT_STATIC_LAUNCHER=OFF \
    "${launcher[@]}" >/dev/null
fi
if [ "${1:-}" = --configure-only ]; then exit 0; fi
# detect_leaks: every test process is checked for leaks at exit.
# detect_stack_use_after_return=0: the CUDA emulator's fibers (annotated
# with ASan's fiber API) keep no fake stacks.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [ "${1:-}" = --lit ]; then
  # The lit tests that run standalone executables, with the instrumented
  # bt-launcher: bt-run and bt-opt of the regular build (build/, which must
  # be built; uninstrumented, as are the kernels they generate) write
  # executables whose launcher prefix is this build's bt-launcher (bt-run
  # takes the bt-launcher next to itself: both are linked into one folder).
  # Every sanitizer report goes to a file (log_path), so that a report in a
  # command that is expected to fail (`not ...`) fails the run too.
  shift
  ninja -C "$BUILD" -j "$JOBS" bt-launcher
  tools=$BUILD/lit-tools reports=$BUILD/lit-reports
  rm -rf "$tools" "$reports" && mkdir -p "$tools" "$reports"
  for f in build/bin/bt-run build/bin/bt-opt "$BUILD/bin/bt-launcher"; do
    ln "$f" "$tools/" 2>/dev/null || cp "$f" "$tools/"
  done
  status=0
  ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$PWD/$reports/asan" \
  UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$PWD/$reports/ubsan" \
    /usr/lib/llvm-19/build/utils/lit/lit.py -sv -j "$JOBS" \
      --param bt_tools_dir="$PWD/$tools" --param bt_exec_root="$PWD/$BUILD/lit" \
      "$@" || status=1
  if compgen -G "$reports/*" >/dev/null; then
    echo "sanitizer reports:"; head -50 "$reports"/*; status=1
  fi
  exit $status
fi
ninja -C "$BUILD" -j "$JOBS"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" "$@"
