#!/usr/bin/env bash
# cuda_update/demo.sh — the updater part of `make demo`: writes a synthetic
# model into DIR (a directory in the tierfs mount, or any directory) in both
# layouts and runs a few steps of tierfs-update on each, printing per-step
# times and GB/s. scripts/demo.sh calls it with a directory in the mount.
#   cuda_update/demo.sh DIR [PARAMS] [SUBGROUP] [STEPS]
set -eu
cd "$(dirname "$0")/.."
U=${TIERFS_UPDATE:-build/tierfs-update}
DIR=${1:?usage: cuda_update/demo.sh DIR [PARAMS] [SUBGROUP] [STEPS]}
PARAMS=${2:-16M} SUB=${3:-2M} STEPS=${4:-3}
echo "== tierfs-update: native layout, bf16 gradients, alternating order, keep 1"
"$U" init "$DIR/native" --params "$PARAMS" --subgroup "$SUB" --grad-dtype bf16
"$U" step "$DIR/native" --steps "$STEPS" --order alternating --keep 1
echo "== tierfs-update: DeepSpeed layout (zero_stage_3/optimizer/rank0), ascending order"
"$U" init "$DIR/ds" --params "$PARAMS" --subgroup "$SUB" --layout deepspeed
"$U" step "$DIR/ds" --layout deepspeed --steps "$STEPS" --first-step 1 --order ascending
echo "== same, alternating order, keep 2"
"$U" step "$DIR/ds" --layout deepspeed --steps "$STEPS" --first-step $((STEPS + 1)) --order alternating --keep 2
