#!/usr/bin/env bash
# make demo: tierfs on a built-in default setup, end to end.
#
# Mounts a RAM tier + one directory tier on local disk in a temporary
# directory, writes a synthetic DeepSpeed ZeRO-Infinity optimizer state with
# DeepSpeed's own file names and I/O pattern (O_DIRECT, libaio, 1 MiB, qd 8),
# runs a few training-step replays, verifies every byte, shows where the
# blocks live, runs the Adam updater over a native-layout model through the
# mount, unmounts and cleans up.
#   DEMO_STATE   optimizer state size (default 3G)
#   DEMO_RAM     RAM tier size (default 1G)
#   DEMO_DIR     where the temporary directory goes (default /var/tmp: local disk)
set -euo pipefail
cd "$(dirname "$0")/.."
B=$PWD/build
STATE=${DEMO_STATE:-3G}
RAM=${DEMO_RAM:-1G}
BASE=${DEMO_DIR:-/var/tmp}
W=$(mktemp -d "$BASE/tierfs-demo.XXXXXX")
MNT=$W/mnt
PID=
cleanup() {
	if mountpoint -q "$MNT" 2>/dev/null; then fusermount3 -u "$MNT" || true; fi
	[ -n "$PID" ] && wait "$PID" 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

mkdir -p "$MNT" "$W/nvme0" "$W/meta"
cat >"$W/tierfs.conf" <<CONF
# The demo's setup: host RAM in front of one directory on local disk.
[mount]
metadata = $W/meta
block_size = 1M

[tier ram]
type = ram
capacity = $RAM

[tier nvme0]
type = posix
path = $W/nvme0

[policy]
stripe = nvme0

# DeepSpeed's fp32 gradients are rewritten every step: keep them in RAM.
[rule gradients]
match = *_gradient_*.tensor.swp
tier = ram
persistent = no
CONF

step "mount: $B/tierfs $W/tierfs.conf $MNT"
cat "$W/tierfs.conf" | sed 's/^/    /'
"$B/tierfs" "$W/tierfs.conf" "$MNT" -f 2>"$W/daemon.log" &
PID=$!
for _ in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { cat "$W/daemon.log"; echo "demo: mount failed" >&2; exit 1; }
df -h "$MNT" | sed 's/^/    /'

step "DeepSpeed ZeRO-Infinity swap I/O: $STATE of optimizer state, init + 2 steps, verified"
"$B/tierfs-replay" --dir "$MNT" --state-size "$STATE" --steps 2 --verify --json "$W/replay.json"

step "where the blocks are"
R=$MNT/zero_stage_3/optimizer/rank0
ls -l "$R" | head -8 | sed 's/^/    /'
echo "    ... $(ls "$R" | wc -l) files"
f=$(ls "$R" | grep -v gradient | grep -v exp_avg | head -1)
g=$(ls "$R" | grep gradient | head -1)
echo "    $f: $(getfattr --absolute-names --only-values -n user.tierfs.placement "$R/$f")"
echo "    $g: $(getfattr --absolute-names --only-values -n user.tierfs.placement "$R/$g")"
echo "    tiers (name type used capacity):"
getfattr --absolute-names --only-values -n user.tierfs.tiers "$MNT" | sed 's/^/      /'
echo "    .tierfs/stats:"
sed 's/^/      /' "$MNT/.tierfs/stats"

step "sequential read of the whole state through the mount (cold blocks come from disk)"
total=0
t0=$(date +%s.%N)
for f in "$R"/*.tensor.swp; do
	n=$(stat -c %s "$f")
	dd if="$f" of=/dev/null bs=1M iflag=direct status=none
	total=$((total + n))
done
t1=$(date +%s.%N)
awk -v b=$total -v a="$t0" -v z="$t1" 'BEGIN { printf "    read %.2f GB in %.2f s: %.2f GB/s\n", b/1e9, z-a, b/1e9/(z-a) }'

step "Adam updater through the mount: 64M params in 8 sub-groups, both layouts"
TIERFS_UPDATE="$B/tierfs-update" cuda_update/demo.sh "$MNT/updater" 64M 8M 3

step "unmount (every dirty block is written back first)"
fusermount3 -u "$MNT"
wait "$PID"
PID=
echo "    daemon exited cleanly; slab files on disk:"
ls -l "$W/nvme0" | sed 's/^/    /'
echo
echo "demo: done"
