# Sourced by the scripts that run on the CUDA emulator (check-cuda-emu.sh,
# check-train-step.sh cuda-emu).
# emu LOG CMD...: runs CMD on the emulator (--device cuda-emu) with its
# stderr in LOG; fails on a failing CMD or any emulator report (a
# "bt cuda-emu:" line; docs/cuda-emulator.md), printing LOG.
emu() {
  local log=$1
  shift
  if ! "$@" --device cuda-emu 2> "$log"; then
    cat "$log" >&2
    return 1
  fi
  if grep -q '^bt cuda-emu:' "$log"; then
    echo "FAIL: the emulator reported:" >&2
    cat "$log" >&2
    return 1
  fi
}
