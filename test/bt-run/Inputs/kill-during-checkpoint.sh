#!/usr/bin/env bash
# Starts `train` on an artifact with the test hook that pauses the checkpoint
# write of step PAUSE_STEP halfway (model.safetensors written into the
# temporary directory, nothing renamed; bt/runtime/train.h
# kPauseInCheckpointEnv), waits for the pause, and SIGKILLs the trainer.
#   kill-during-checkpoint.sh ARTIFACT PAUSE_STEP OUT_DIR TRAIN_ARGS...
set -u
artifact=$1 step=$2 out=$3
shift 3
marker="$out.paused"
rm -f "$marker"
BT_TEST_PAUSE_IN_CHECKPOINT_WRITE="$step:$marker" \
  bt-launcher --artifact "$artifact" train -o "$out" "$@" > "$out.log" 2>&1 &
pid=$!
for _ in $(seq 1200); do
  [ -e "$marker" ] && break
  if ! kill -0 "$pid" 2> /dev/null; then
    echo "the trainer exited before the pause:"; cat "$out.log"; exit 1
  fi
  sleep 0.05
done
[ -e "$marker" ] || { echo "no pause within 60 s"; kill -9 "$pid"; exit 1; }
kill -9 "$pid"
wait "$pid" 2> /dev/null
echo "killed in the checkpoint write of step $step (status $?)"
