#!/usr/bin/env bash
# tierfs-update's steps through a mount are learned, and keep their bytes.
# The updater writes each native state file whole to NAME.tmp and renames
# it over NAME, so each step's files are new inodes: keyed by inode number
# the order never repeated, and the cache ran the updater's steps as LRU
# for good (learned=no after any number of steps). Files are now known to
# the learner by the name they were created under (fs/orderid.c). The
# updater's default order alternates (even steps run the sub-groups
# backwards), so the cycle is two steps long; in ascending order, one.
# The same steps on a plain directory give the bytes every state file must
# hold on the mount, before and after a remount.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
UPD=$(dirname "$TIERFS_BIN")/tierfs-update
[ -x "$UPD" ] || { echo "# SKIP: $UPD not built"; exit 77; }

# 8 sub-groups of 2M params: 192 MiB of state and 32 MiB of gradients,
# twice the RAM tier.
default_conf | sed 's/^capacity = 256M$/capacity = 112M/' >"$T/c.conf"
grep -q '^capacity = 112M$' "$T/c.conf" || { fail "config edit"; tap_exit; exit 1; }
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
M=$MNT/m P=$T/plain
INIT="--params 16M --subgroup 2M --seed 7"
check "init on the mount" "$UPD" init "$M" $INIT
check "init on a plain directory" "$UPD" init "$P" $INIT
# learned_steps ORDER STEPS LOW HIGH [OPTION...]: N (8) steps in ORDER on
# the mount and on the plain directory; the mount learns a cycle of more
# than LOW and less than HIGH quarters of a step's accesses.
N=8
learned_steps() {
	local order=$1 steps=$2 lo=$3 hi=$4 a0 per cycle
	shift 4
	a0=$(stat_field order accesses)
	check "$N $order steps on the mount" "$UPD" step "$M" --steps $N --order "$order" --threads 2 "$@"
	check "$N $order steps on the plain directory" "$UPD" step "$P" --steps $N --order "$order" --threads 2 "$@"
	check "the $order order is learned" test "$(stat_field order learned)" = yes
	per=$((($(stat_field order accesses) - a0) / N))
	cycle=$(stat_field order cycle)
	echo "# $order: $(grep '^order' "$MNT/.tierfs/stats" | grep -o 'cycle=[0-9]*\|learns=[0-9]*\|relearns=[0-9]*\|predicted_ratio=[0-9.]*' | tr '\n' ' ')"
	check "its cycle is $steps (cycle $cycle, $per accesses a step)" \
		test "$cycle" -gt $((per * lo / 4)) -a "$cycle" -lt $((per * hi / 4))
}
learned_steps alternating "two steps" 6 10 --keep 2
check "no .tmp file is left" test -z "$(find "$M" -name '*.tmp')"
same_files() {
	local f n=0
	for f in "$P"/sg-*; do
		cmp -s "$f" "$M/${f##*/}" || { echo "# ${f##*/} differs" >&2; return 1; }
		n=$((n + 1))
	done
	[ $n -eq 16 ]
}
check "every file equals the plain directory's" same_files
check "remount" remount "$T/c.conf"
check "every file equals the plain directory's after a remount" same_files
# DeepSpeed's order (ascending, nothing kept), learned afresh after the
# remount: a cycle of one step.
learned_steps ascending "one step" 3 5
check "every file equals the plain directory's after the ascending steps" same_files
# On the same mount, back to alternating, then ascending again: the
# two-step cycle is about 445 accesses and an ascending step 410, each
# access within the other's tolerance, which kept the old cycle for good
# (learns stayed 1), with half of its predictions off; the period that
# holds, its matches close where the cycle's are not, now takes over once
# the health window (4096 accesses, 10-16 steps here) has judged the old
# cycle and a candidate near the new period has been checked with its
# matches close (within a quarter of the tolerance, 95% of them). How
# soon such a candidate comes depends on how evenly the updater's reader
# and writer take turns from step to step, which CPU load upsets: with the
# CPUs busy the switch takes several times as many steps as on an idle
# machine, so the steps run 8 at a time until learns goes up. MAX only
# stops a learner that never switches.
MAX=160
switch_steps() { # ORDER LEARNS [OPTION...]: steps until learns exceeds LEARNS
	local order=$1 l=$2 n=0
	shift 2
	while [ $n -lt $MAX ] && [ "$(stat_field order learns)" -le "$l" ]; do
		"$UPD" step "$M" --steps 8 --order "$order" --threads 2 "$@" >/dev/null || return 1
		"$UPD" step "$P" --steps 8 --order "$order" --threads 2 "$@" >/dev/null || return 1
		n=$((n + 8))
	done
	echo "# $order: learns $l to $(stat_field order learns) after $n steps"
}
N=8
l0=$(stat_field order learns)
check "alternating steps until it relearns" switch_steps alternating "$l0" --keep 2
l1=$(stat_field order learns)
check "the one-step cycle gave way to the two-step one (learns $l0 to $l1)" test "$l1" -gt "$l0"
learned_steps alternating "two steps" 6 10 --keep 2
# A new cycle may be replaced while on probation: count from here.
l1=$(stat_field order learns)
check "ascending steps until it relearns" switch_steps ascending "$l1"
l2=$(stat_field order learns)
check "and back to the one-step cycle (learns $l1 to $l2)" test "$l2" -gt "$l1"
learned_steps ascending "one step, on the same mount" 3 5
check "every file equals the plain directory's after the switch" same_files
check "unmount" umount_fs
tap_exit
