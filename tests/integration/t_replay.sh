#!/usr/bin/env bash
# The DeepSpeed update-phase replay (build/tierfs-replay) on a real mount,
# with every byte checked after several steps:
#   - the RAM tier smaller than one sub-group (memory pressure: every step
#     must evict, write back and re-read without a stale or lost block);
#   - the gradient rule on (gradients live in RAM, persistent = no);
#   - the order learner sees a repeating pattern, then the pattern changes
#     (other sub-group size and rank count) and the data stays right;
#   - a remount keeps the last step's state (re-verified);
#   - the bench's shape: the order stays learned, gradients stay in RAM.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
REPLAY=$(dirname "$TIERFS_BIN")/tierfs-replay
[ -x "$REPLAY" ] || { echo "# SKIP: $REPLAY not built"; exit 77; }

conf() { replay_conf 1M "$1"; } # RAM_SIZE

# 1. RAM (64 MiB) smaller than one sub-group (96 MiB of param+m+v + 32 MiB
#    of gradients): 4 steps, every file verified.
conf 64M >"$T/small.conf"
mount_fs "$T/small.conf" || { fail "mount"; tap_exit; exit 1; }
check "RAM < one sub-group: 4 steps, content verified" \
	"$REPLAY" --dir "$MNT" --state-size 384M --subgroup-size 8M --steps 4 --verify
stats=$(cat "$MNT/.tierfs/stats")
echo "$stats" | sed 's/^/# /'
echo "$stats" | grep -qE '^cache .*evictions=[1-9]' && ok "memory pressure really evicted blocks" ||
	fail "no eviction happened: the test did not exercise pressure"
echo "$stats" | grep -qE '^tier nvme0 .*bytes_read=[1-9]' && ok "blocks were re-read from disk" ||
	fail "nothing was read back from nvme0"
check "unmount clean" umount_fs

# 2. The cycle repeats: the learner locks on; then the pattern changes.
conf 256M >"$T/big.conf"
rm -rf "$T/meta" "$T/nvme0"; mkdir -p "$T/meta" "$T/nvme0"
mount_fs "$T/big.conf" || { fail "mount"; tap_exit; exit 1; }
check "repeating pattern: 4 steps, content verified" \
	"$REPLAY" --dir "$MNT" --state-size 192M --subgroup-size 2M --steps 4 --verify
grep '^order' "$MNT/.tierfs/stats" | sed 's/^/# /'
grep -qE '^order .*learned=yes' "$MNT/.tierfs/stats" && ok "the access order was learned" ||
	fail "the access order was not learned after the init and 4 identical steps"
# (In the lockstep order: the other runs take DeepSpeed's, the default.)
check "pattern changed (2 ranks, other sub-groups, lockstep): content verified" \
	"$REPLAY" --dir "$MNT" --state-size 128M --subgroup-size 3M --ranks 2 --steps 3 --verify \
	--pipeline lockstep --trace "$T/trace"
# --trace: per rank and step, each of the 2 sub-groups read (R), written
# (W) and updated (A) once, and no line ends before it starts.
trace_ok() {
	awk 'NF != 7 || $5 > $6 || $6 > $7 { bad++ } { n[$1 " " $2 " " $3]++ }
	     END { for (k in n) { keys++; if (n[k] != 2) bad++ }; exit bad > 0 || keys != 18 }' "$T/trace"
}
check "--trace: a line per transfer and Adam pass of 2 ranks x 3 steps x 2 sub-groups" trace_ok
check "unmount clean" umount_fs
mount_fs "$T/big.conf" || { fail "remount"; tap_exit; exit 1; }
check "after remount: the last step's param/exp_avg/exp_avg_sq intact" \
	"$REPLAY" --dir "$MNT" --state-size 128M --subgroup-size 3M --ranks 2 --steps 3 --verify-state-only
check "unmount clean" umount_fs
# 3. The bench's shape at 1/3 of its size: 8 sub-groups of 32-block files,
#    the RAM budget half the state. The pipelined reads and writes take turns
#    differently every step; the learner must still lock on after the init
#    and keep the order to the end, and write-back under memory pressure
#    must send state blocks to disk, never the gradients the rule keeps in
#    RAM (they fit: 256 MiB of 384).
conf 384M >"$T/shape.conf"
rm -rf "$T/meta" "$T/nvme0"; mkdir -p "$T/meta" "$T/nvme0"
mount_fs "$T/shape.conf" || { fail "mount"; tap_exit; exit 1; }
check "bench shape: 4 steps, content verified" \
	"$REPLAY" --dir "$MNT" --state-size 768M --steps 4 --verify
grep '^order' "$MNT/.tierfs/stats" | sed 's/^/# /'
grep -qE '^order .*learned=yes' "$MNT/.tierfs/stats" && ok "bench shape: the order is learned at the end" ||
	fail "bench shape: the order is not (or no longer) learned after the init and 4 steps"
# Every block read ahead is used, dropped unread, or still waiting: never
# counted twice.
read -r pf used wasted <<<"$(grep '^order' "$MNT/.tierfs/stats" |
	sed -nE 's/.* prefetches=([0-9]+) prefetch_hits=([0-9]+) prefetch_wasted=([0-9]+).*/\1 \2 \3/p')"
if [ -n "${wasted:-}" ] && [ "$pf" -gt 0 ] && [ $((used + wasted)) -le "$pf" ]; then
	ok "prefetch accounting: $used used + $wasted dropped unread <= $pf read ahead"
else
	fail "prefetch accounting: prefetches=${pf:-?} prefetch_hits=${used:-?} prefetch_wasted=${wasted:-?}"
fi
spilled=$(find "$MNT/.tierfs/tiers/nvme0" -name '*_gradient_*' | wc -l)
[ "$spilled" -eq 0 ] && ok "no gradient block was spilled to nvme0" ||
	fail "$spilled gradient files have blocks on nvme0"
[ "$(find "$MNT/.tierfs/tiers/nvme0" -name 'exp_avg-*' | wc -l)" -gt 0 ] &&
	ok "state blocks are on nvme0 (the listing works)" || fail "no state file listed on nvme0"
check "unmount clean" umount_fs

# 4. RAM holds half the state besides the gradients (640 MiB: 256 for the
#    gradients, 384 for 768 blocks of state). Belady keeps about half of the
#    state dirty in RAM from its write to its next read and writes back the
#    rest, about 400 blocks a step. Write-back by dirty_ratio, with dirty
#    blocks ranked by their next read (a block read, then overwritten, looks
#    farthest), wrote back all 768 (measured 730-830; now 450-520). A steady
#    step (the 4th) must write back at most 614 (4/5). Then, left alone,
#    the mount writes back what it kept. gap_plan = no: this counts what
#    the keep plan writes back; gap mode writes everything back on purpose
#    in the time between steps, which here is the replay generating the
#    gradients (about a second under ASan: 695 write-backs, once in CI).
conf 640M | sed 's/^stripe = nvme0$/&\ngap_plan = no/' >"$T/half.conf"
rm -rf "$T/meta" "$T/nvme0" "$T/st"; mkdir -p "$T/meta" "$T/nvme0" "$T/st"
mount_fs "$T/half.conf" || { fail "mount"; tap_exit; exit 1; }
check "RAM = half the state: 4 steps, content verified" \
	"$REPLAY" --dir "$MNT" --state-size 768M --steps 4 --verify \
	--stats "$MNT/.tierfs/stats" --stats-out "$T/st"
# Kept blocks that went out early for a reader waiting for RAM
# (flushes_kept) are left out: how many do depends on how fast the daemon
# runs (t_keepplan), not on what the order keeps.
before=$(snap_field "$T/st/step3-update" cache flushes) after=$(snap_field "$T/st/step4-update" cache flushes)
kb=$(snap_field "$T/st/step3-update" cache flushes_kept) ka=$(snap_field "$T/st/step4-update" cache flushes_kept)
if [ -n "$before" ] && [ -n "$after" ] && [ -n "$kb" ] && [ -n "$ka" ]; then
	wb=$((after - before)) early=$((ka - kb))
	echo "# step 4 wrote back $wb blocks of the 768 it wrote, $early of them kept ones for a waiter"
	[ $((wb - early)) -le 614 ] &&
		ok "a steady step keeps blocks dirty in RAM: $wb write-backs - $early for waiters <= 614" ||
		fail "a steady step wrote back $wb blocks, $early for waiters (> 614 of 768 besides): kept blocks were written for nothing"
else
	fail "no stats snapshot of steps 3 and 4 in $T/st"
fi
idle_clean() { # up to 60 s: 384 MiB of kept blocks, from the flusher's next quiet tick
	local i s d p
	for i in $(seq 1 600); do
		s=$(grep '^cache' "$MNT/.tierfs/stats")
		d=$(echo "$s" | sed -E 's/.* dirty=([0-9]+).*/\1/') p=$(echo "$s" | sed -E 's/.* pinned=([0-9]+).*/\1/')
		[ "$d" -le "$p" ] && return 0
		sleep 0.1
	done
	echo "# still dirty after 60 s idle: $s"
	return 1
}
check "left alone, the mount writes back every block it kept dirty" idle_clean
check "unmount clean" umount_fs

# 5. A state that fits in RAM stays dirty there while the steps run; a file
#    written once meanwhile (outside the cycle) must still reach its disk
#    tier while the training runs, not when it stops. The rule sends it to
#    nvme1, whose bytes_written then counts it alone.
{
	conf 640M
	cat <<CONF
[tier nvme1]
type = posix
path = $T/nvme1
capacity = 1G

[rule once]
match = once.bin
tier = nvme1
CONF
} >"$T/once.conf"
rm -rf "$T/meta" "$T/nvme0" "$T/nvme1"; mkdir -p "$T/meta" "$T/nvme0" "$T/nvme1"
mount_fs "$T/once.conf" || { fail "mount"; tap_exit; exit 1; }
"$REPLAY" --dir "$MNT" --state-size 192M --subgroup-size 4M --steps 100000 >"$T/once.log" 2>&1 &
replay=$!
learned=no
for i in $(seq 1 300); do
	grep -qE '^order .*learned=yes' "$MNT/.tierfs/stats" && { learned=yes; break; }
	sleep 0.1
done
if [ $learned = yes ] && dd if=/dev/urandom of="$MNT/once.bin" bs=1M count=8 status=none; then
	got=0
	for i in $(seq 1 200); do
		got=$(stat_field "tier nvme1" bytes_written)
		got=${got:-0}
		[ "$got" -ge $((8 << 20)) ] && break
		sleep 0.1
	done
	if [ "$got" -lt $((8 << 20)) ]; then
		fail "once.bin not written back after 20 s of a running cycle ($got bytes on nvme1)"
	elif kill -0 $replay 2>/dev/null; then
		ok "a file outside the learned cycle is written back while the cycle runs"
	else
		fail "the replay stopped before once.bin was written back: $(tail -2 "$T/once.log")"
	fi
else
	fail "the order was not learned within 30 s, or writing once.bin failed"
fi
# The replay runs each rank in a child process: stop those first.
pkill -P $replay 2>/dev/null
for i in $(seq 1 100); do pgrep -P $replay >/dev/null || break; sleep 0.1; done
kill $replay 2>/dev/null
wait $replay 2>/dev/null
check "unmount clean" umount_fs
tap_exit
