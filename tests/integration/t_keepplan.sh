#!/usr/bin/env bash
# The keep plan (policy/keepplan.h) on a real mount: with the DeepSpeed
# replay's pipelined update learned, the blocks that stay in RAM from one
# step to the next are an even share of every sub-group, not whole
# neighbouring sub-groups (which save the pipelined update no time: each
# of its iterations reads one sub-group while it writes another). Seen
# through user.tierfs.cached per state file after the steps; the replay
# then verifies every byte.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd getfattr
REPLAY=$(dirname "$TIERFS_BIN")/tierfs-replay
[ -x "$REPLAY" ] || { echo "# SKIP: $REPLAY not built"; exit 77; }

# 96 MiB of state in 8 sub-groups (48 blocks of 256 KiB each) and 32 MiB
# of gradients (128 blocks, in RAM by the rule); RAM for them and 176
# blocks more, of which the plan gets 96 (25% of the state): the rest is
# for requests in flight and read-ahead (cache_plan_budget).
# The idle time after the steps would be used to write everything back,
# and the kept blocks are looked at then.
replay_conf 256K 76M "gap_plan = no" | mount_key "flush_interval = 60" >"$T/c.conf"
mount_fs "$T/c.conf" || { fail "mount"; tap_exit; exit 1; }
# user.tierfs.cached itself, before any order is learned (nothing is written
# back on its own for a minute, flush_interval): 4 blocks and a partial
# fifth, all dirty; after fsync all still in RAM, none dirty.
cached() { getfattr --only-values -n user.tierfs.cached "$MNT/small" 2>/dev/null; }
head -c $((1048576 + 1000)) /dev/urandom >"$MNT/small"
check "user.tierfs.cached of a file just written: all dirty ($(cached))" \
	test "$(cached)" = "ram=1049576 dirty=1049576"
$PY -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDWR); os.fsync(fd)' "$MNT/small"
check "user.tierfs.cached after fsync: in RAM, none dirty ($(cached))" \
	test "$(cached)" = "ram=1049576 dirty=0"
rm -f "$MNT/small"
mkdir -p "$T/snap"
check "4 pipelined steps of the replay" "$REPLAY" --dir "$MNT" --state-size 96M --steps 4 \
	--stats "$MNT/.tierfs/stats" --stats-out "$T/snap"
grep -E '^(cache|order)' "$MNT/.tierfs/stats" | sed 's/^/# /'
check "the order is learned" test "$(stat_field order learned)" = yes
kept=$(stat_field order plan_kept)
check "a keep plan: $kept of $(stat_field order plan_blocks) state blocks stay in RAM" \
	test "${kept:-0}" -ge 48 -a "$(stat_field order plan_blocks)" = 384
grep -q 'keep plan: ' "$T/daemon.log" && ok "the daemon logs the plan" || fail "no 'keep plan:' in the log"

# Dirty blocks per sub-group (param, exp_avg and exp_avg_sq: 48 blocks):
# the blocks kept from this step to the next (not written back; the mount
# is written back only after a minute without I/O, flush_interval). The
# plan keeps 25% of each, 12 blocks; kept whole neighbouring sub-groups
# would leave most with none. A kept block may go out early for a reader
# waiting for RAM, more often the slower the daemon runs (in CI under ASan
# one sub-group once kept 6); flushes_kept counts those write-backs.
D="$MNT/zero_stage_3/optimizer/rank0"
shares= short=0
for i in 0 1 2 3 4 5 6 7; do
	id="$((4 * i))_$((4 * i + 3))"
	sum=0
	for f in "$id.tensor.swp" "exp_avg-$id.tensor.swp" "exp_avg_sq-$id.tensor.swp"; do
		v=$(getfattr --only-values -n user.tierfs.cached "$D/$f" 2>/dev/null | sed -n 's/^ram=[0-9]* dirty=\([0-9]*\)$/\1/p')
		sum=$((sum + ${v:-0}))
	done
	b=$((sum / (256 << 10)))
	shares="$shares $b"
	[ $b -lt 12 ] && short=$((short + 12 - b))
done
# Those of the last update phase: the blocks kept at its end were written
# in it.
before=$(snap_field "$T/snap/step4-backward" cache flushes_kept)
early=$(($(stat_field cache flushes_kept) - ${before:-0}))
echo "# blocks of each sub-group's 48 kept dirty in RAM after the last step:$shares"
check "every sub-group keeps the plan's 12 blocks in RAM, but for kept blocks written back for a waiter ($short short, flushes_kept=$early:$shares)" \
	test "$short" -le "${early:-0}"
check "getfattr -d lists user.tierfs.cached" \
	sh -c "getfattr -d -m user.tierfs '$D/0_3.tensor.swp' | grep -q '^user.tierfs.cached=\"ram=[0-9]* dirty=[0-9]*\"'"
check "user.tierfs.cached of a gradient file: all of it, dirty" \
	sh -c "getfattr --only-values -n user.tierfs.cached '$D/'*_gradient_*.tensor.swp 2>/dev/null | head -c 200 | grep -q '^ram=[1-9][0-9]* dirty=[1-9]'"
check "the replay verifies every file" "$REPLAY" --dir "$MNT" --state-size 96M --steps 1 --verify
check "unmount clean" umount_fs

# keep_plan = no: the order is learned, but no plan is made.
sed -i 's/^\[policy\]$/[policy]\nkeep_plan = no/' "$T/c.conf"
grep -q '^keep_plan = no$' "$T/c.conf" || fail "config edit"
: >"$T/daemon.log"
mount_fs "$T/c.conf" || { fail "mount (keep_plan = no)"; tap_exit; exit 1; }
check "keep_plan = no: 4 steps, every file verified" \
	"$REPLAY" --dir "$MNT" --state-size 96M --steps 4 --verify
check "the order is learned" test "$(stat_field order learned)" = yes
check "and no plan is made (plan_kept=$(stat_field order plan_kept))" \
	test "$(stat_field order plan_kept)" = 0
check_fails "nor logged" grep -q 'keep plan: ' "$T/daemon.log"
check "unmount clean" umount_fs
tap_exit
