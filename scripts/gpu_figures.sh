#!/usr/bin/env bash
# scripts/gpu_figures.sh — the checks and figures that need a GPU, for a
# machine that has one (CI has none, so the CUDA tests skip there):
#   1. the updater's CUDA tests, and compute-sanitizer's memcheck over them
#      when it is installed;
#   2. `tierfs-update bench`: CPU Adam against the memory bandwidth, and the
#      fused CUDA kernel alone against the card's;
#   3. the updater over one synthetic model (native layout, bf16 gradients,
#      alternating order, keep 2), --device cpu and --device cuda, on a plain
#      directory of the local disk and on a tierfs mount over that disk with
#      a RAM tier of half the state. The mount learns the alternating order
#      (a cycle of two steps) in about its fifth step: the steps after it
#      are the learned figures (3 steps, the default before, never got there).
# Runs from a built tree (`make`); the work directory is removed at the end.
#   scripts/gpu_figures.sh [PARAMS] [STEPS]      (defaults 256M, 8)
#   GPU_DIR  where the model and the mount go (default /var/tmp)
set -uo pipefail
cd "$(dirname "$0")/.."
B=$PWD/build
PARAMS=${1:-256M} STEPS=${2:-8}
U=$B/tierfs-update
W=$(mktemp -d "${GPU_DIR:-/var/tmp}/tierfs-gpu.XXXXXX") || exit 1
MNT=$W/mnt PID=
cleanup() {
	if mountpoint -q "$MNT" 2>/dev/null; then fusermount3 -u "$MNT" || umount -l "$MNT"; fi
	[ -n "$PID" ] && wait "$PID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }
[ -x "$U" ] || { echo "gpu_figures: $U is not built (run make)" >&2; exit 1; }

say "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader ||
	echo "gpu_figures: nvidia-smi failed: no GPU?"
echo "$(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)"

say "updater tests (cuda_update/run-tests.sh)"
out=$(TIERFS_BUILD=$B bash cuda_update/run-tests.sh 2>&1)
rc=$?
grep -E '^not ok|cuda|CUDA|SKIP' <<<"$out"
echo "updater tests: $(grep -c '^ok' <<<"$out") ok ($(grep -c '# SKIP' <<<"$out") of them skipped)," \
	"$(grep -c '^not ok' <<<"$out") failed; exit $rc"

if command -v compute-sanitizer >/dev/null; then
	say "compute-sanitizer memcheck over test_cuda"
	timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 \
		"$B/tests/cuda_update/test_cuda" 2>&1 | tail -8
	echo "memcheck exit: ${PIPESTATUS[0]}"
fi

say "tierfs-update bench --params 256M"
"$U" bench --params 256M 2>&1 | grep -v '^tierfs-update: step'

run_step() { # label dir device
	local out
	out=$("$U" step "$2" --steps "$STEPS" --order alternating --keep 2 --device "$3" 2>&1) ||
		{ echo "$1: failed: $out"; return 1; }
	echo "$out" | grep '^step' | sed "s/^/$1: /"
}

say "updater, $PARAMS params, $STEPS steps each: plain directory on $(df --output=source "$W" | tail -1)"
"$U" init "$W/plain" --params "$PARAMS" --subgroup 32M --grad-dtype bf16 | tail -1
run_step "plain cpu " "$W/plain" cpu
run_step "plain cuda" "$W/plain" cuda

if [ -c /dev/fuse ]; then
	state=$(du -sb "$W/plain" | cut -f1)
	rm -rf "$W/plain"
	mkdir -p "$MNT" "$W/disk" "$W/meta"
	cat >"$W/tierfs.conf" <<CONF
[mount]
metadata = $W/meta
block_size = 1M

[tier ram]
type = ram
capacity = $((state / 2 / 1048576))M

[tier disk]
type = posix
path = $W/disk
CONF
	say "the same on a tierfs mount: RAM $((state / 2 / 1048576)) MiB (half the state) + the disk"
	"$B/tierfs" "$W/tierfs.conf" "$MNT" -f 2>"$W/daemon.log" &
	PID=$!
	for _ in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
	if mountpoint -q "$MNT"; then
		"$U" init "$MNT/m" --params "$PARAMS" --subgroup 32M --grad-dtype bf16 | tail -1
		run_step "tierfs cpu " "$MNT/m" cpu
		run_step "tierfs cuda" "$MNT/m" cuda
		grep -E '^(order|cache|hit)' "$MNT/.tierfs/stats"
		fusermount3 -u "$MNT"
		wait "$PID"
		echo "unmount: daemon exit $?"
	else
		echo "gpu_figures: mount failed:"
		cat "$W/daemon.log"
	fi
	PID=
else
	echo "no /dev/fuse: the mount runs are skipped"
fi
