#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the lit suite
# (check-bt: dialect, passes, tools), the GoogleTest suites (ctest), and the
# libFuzzer targets of fuzz/ (ASan + UBSan, BT_FUZZ_SECONDS each, default 30;
# scripts/fuzz.sh builds them in build-fuzz/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
status=0
echo "== lit (check-bt)"
ninja -C build check-bt || status=1
echo "== ctest"
ctest --test-dir build --output-on-failure -j "${BT_JOBS:-2}" || status=1
echo "== fuzz (ASan + UBSan, ${BT_FUZZ_SECONDS:-30} s per target)"
BT_FUZZ_JOBS="${BT_JOBS:-2}" scripts/fuzz.sh "${BT_FUZZ_SECONDS:-30}" || status=1
if [ $status -ne 0 ]; then
  echo "== FAILED" >&2
else
  echo "== all tests passed"
fi
exit $status
