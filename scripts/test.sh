#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the lit suite
# (check-bt: dialect, passes, tools), the GoogleTest suites (ctest), the
# sanitizer stage (scripts/sanitize.sh: the runtime, bt-launcher, the BPE
# library, the CUDA emulator and all their GoogleTest suites built with
# ASan + UBSan in build-asan/ and run; then the lit tests of standalone
# executables with the instrumented bt-launcher), and the libFuzzer targets
# of fuzz/ (ASan + UBSan, BT_FUZZ_SECONDS each, default 30; the runtime's
# targets in build-asan/, the IR target in build-fuzz-ir/).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, printed at the end (CI's budget is the sum).
timings=()
stage_start=$SECONDS stage_name=""
stage() {
  if [ -n "$stage_name" ]; then
    timings+=("$(printf '%5d s  %s' $((SECONDS - stage_start)) "$stage_name")")
  fi
  stage_start=$SECONDS stage_name=$1
  [ -n "$1" ] && echo "== $1"
  return 0
}
stage "install dependencies"
scripts/install-deps.sh
stage "build"
scripts/build.sh
status=0
stage "lit (check-bt)"
ninja -C build check-bt || status=1
stage "ctest"
ctest --test-dir build --output-on-failure -j "${BT_JOBS:-2}" || status=1
stage "sanitizers (ASan + UBSan): the runtime's GoogleTest suites"
BT_JOBS="${BT_JOBS:-2}" scripts/sanitize.sh || status=1
stage "sanitizers (ASan + UBSan): lit tests of standalone executables"
BT_JOBS="${BT_JOBS:-2}" scripts/sanitize.sh --lit \
  build/test/bt-run/executable.test build/test/bt-run/train-step-executable.test \
  build/test/bt-run/tokenizer.test build/test/bt-run/output-paths.test \
  build/test/bt-run/cuda-executable.test || status=1
stage "fuzz (ASan + UBSan, ${BT_FUZZ_SECONDS:-30} s per target)"
BT_FUZZ_JOBS="${BT_JOBS:-2}" scripts/fuzz.sh "${BT_FUZZ_SECONDS:-30}" || status=1
stage ""
echo "== time per stage (total ${SECONDS} s)"
printf '%s\n' "${timings[@]}"
if [ $status -ne 0 ]; then
  echo "== FAILED" >&2
else
  echo "== all tests passed"
fi
exit $status
