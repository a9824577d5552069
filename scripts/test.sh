#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the lit suite
# (check-bt: dialect, passes, tools) and the GoogleTest suites (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
status=0
echo "== lit (check-bt)"
ninja -C build check-bt || status=1
echo "== ctest"
ctest --test-dir build --output-on-failure -j "${BT_JOBS:-2}" || status=1
if [ $status -ne 0 ]; then
  echo "== FAILED" >&2
else
  echo "== all tests passed"
fi
exit $status
