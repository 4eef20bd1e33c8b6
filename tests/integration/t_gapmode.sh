#!/usr/bin/env bash
# gap_plan (default auto) on a real mount: the DeepSpeed replay with
# forward and backward time between its update phases (--compute), so the
# disks idle between steps. Once the order is learned the cache goes into
# gap mode (said in the log), writes back and reads ahead in the idle
# stretches, and every byte is still right: after the steps, after a
# remount, and after more steps with the update phases back to back.
# Then, on a disk capped at 64 MiB/s, stretches of 0.3 s are too short for
# that work: auto stops working them (idle_worked < idle_stretches, the
# threshold raised, no gap mode), and takes up 3 s stretches again.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
REPLAY=$(dirname "$TIERFS_BIN")/tierfs-replay
[ -x "$REPLAY" ] || { echo "# SKIP: $REPLAY not built"; exit 77; }

# 96 MiB of state in 8 sub-groups and 32 MiB of gradients (in RAM by the
# rule); RAM for the gradients and about half the state.
replay_conf 256K 80M >"$T/c.conf"
mount_fs "$T/c.conf" || { fail "mount"; tap_exit; exit 1; }
check "5 steps with 2 s of compute each: content verified" \
	"$REPLAY" --dir "$MNT" --state-size 96M --steps 5 --compute 2 --verify
grep -E '^order' "$MNT/.tierfs/stats" | sed 's/^/# /'
grep 'gap mode' "$T/daemon.log" | sed 's/^/# /'
check "the order was learned" grep -qE '^order .*learned=yes' "$MNT/.tierfs/stats"
check "gap_plan is auto by default" grep -qE '^order .* gap_plan=auto ' "$MNT/.tierfs/stats"
check "gap mode came on (daemon log)" grep -q 'gap mode: the disks idle' "$T/daemon.log"
check "blocks went to the disk (write-back ran)" \
	test "$(stat_field "tier nvme0" bytes_written)" -gt 0
check "unmount clean" umount_fs
mount_fs "$T/c.conf" || { fail "remount"; tap_exit; exit 1; }
check "after remount: the last step's param/exp_avg/exp_avg_sq intact" \
	"$REPLAY" --dir "$MNT" --state-size 96M --steps 5 --verify-state-only
# Update phases back to back: the stretches between them are short.
check "3 steps more without compute: content verified" \
	"$REPLAY" --dir "$MNT" --state-size 96M --steps 3 --verify
check "unmount clean (2)" umount_fs

sed -i 's|^path = .*/nvme0$|&\nmax_bandwidth = 64M/s|' "$T/c.conf"
# A stretch that a background commit overlapped is not judged, and commits
# wait for just such quiet moments: with one per 5 s most of the 4
# stretches could go unjudged. Here only the stretches are the subject.
sed -i 's|^\[mount\]$|&\ncommit_interval = 60|' "$T/c.conf"
grep -q '^commit_interval = 60$' "$T/c.conf" || fail "config edit"
: >"$T/daemon.log"
mount_fs "$T/c.conf" || { fail "remount capped"; tap_exit; exit 1; }
check "capped disk, 5 steps with 0.3 s of compute: content verified" \
	"$REPLAY" --dir "$MNT" --state-size 96M --steps 5 --compute 0.3 --verify
order=$(grep -E '^order' "$MNT/.tierfs/stats")
echo "# $order"
grep 'gap_plan\|gap mode' "$T/daemon.log" | sed 's/^/# /'
field() { echo "$order" | sed -nE "s/.* $1=([0-9]+).*/\1/p"; }
check "a short stretch raised the threshold (daemon log)" \
	grep -q 'gap_plan: a .* s stretch without disk I/O ended before' "$T/daemon.log"
check "the threshold rose above 20 ms" test "$(field idle_after_ms)" -gt 20
check "later short stretches were not worked" \
	test "$(field idle_worked)" -lt "$(field idle_stretches)"
check_fails "no gap mode with stretches too short" grep -q 'gap mode: the disks idle' "$T/daemon.log"
check "capped disk, 3 steps with 3 s of compute: content verified" \
	"$REPLAY" --dir "$MNT" --state-size 96M --steps 3 --compute 3 --verify
grep 'gap mode' "$T/daemon.log" | sed 's/^/# /'
check "long stretches are worked again: gap mode came on" \
	grep -q 'gap mode: the disks idle' "$T/daemon.log"
check "unmount clean (3)" umount_fs
tap_exit
