#!/usr/bin/env bash
# The inode sweep with the learned order and the prefetcher at work: the
# DeepSpeed replay (which opens and closes its swap files for every swap)
# runs while the kernel's caches are dropped every ~0.2 s, so the files it
# is not using are forgotten, their inodes swept, and the prefetcher loads
# them back from LMDB (engine.c). Every byte verified, then after a
# remount; no sanitizer report. SWEEP_STEPS (default 20).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
REPLAY=$(dirname "$TIERFS_BIN")/tierfs-replay
[ -x "$REPLAY" ] || { echo "# SKIP: $REPLAY not built"; exit 77; }
STEPS=${SWEEP_STEPS:-20}
RANKS=${SWEEP_RANKS:-2}
{
	default_conf | sed 's/^block_size = 1M/block_size = 256K\nthreads = 4/; s/^capacity = 256M/capacity = 24M/'
	printf 'prefetch_depth = 64\n\n[rule gradients]\nmatch = *_gradient_*.tensor.swp\ntier = ram\npersistent = no\n'
} >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
# An fsync now and then syncs the tiers: write-backs no fsync is owed any
# more (wb_first) then keep no inode in the table.
touch "$MNT/syncer"
( while :; do echo 3 >/proc/sys/vm/drop_caches; $PY -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$MNT/syncer"; sleep 0.2; done ) &
DROP=$!
check "replay, $STEPS steps under drop_caches, verified" \
	"$REPLAY" --dir "$MNT" --state-size 64M --ranks "$RANKS" --subgroup-size 512K --block-size 256K --steps "$STEPS" --verify
kill $DROP; wait $DROP 2>/dev/null
# Every replay file was looked up; once the kernel forgets them and a
# commit runs, those with no block in RAM leave the table (the gradients,
# kept in RAM by the rule, stay): fewer inodes than files.
settle() {
	echo 3 >/proc/sys/vm/drop_caches
	$PY -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$MNT/syncer"
	sleep 1.5
}
settle
settle
nfiles=$(find "$MNT/zero_stage_3" -type f | wc -l)
settle
table=$(grep -oE '^inodes table=[0-9]+' "$MNT/.tierfs/stats" | cut -d= -f2)
check "the sweep gave back forgotten inodes: ${table:-?} in the table for $nfiles files" \
	test -n "$table" -a "${table:-0}" -lt "$nfiles"
stats=$(cat "$MNT/.tierfs/stats")
echo "$stats" | sed 's/^/# /'
echo "$stats" | grep -qE 'learned=yes' && ok "the order was learned" || fail "the order was not learned"
echo "$stats" | grep -qE 'prefetches=[1-9]' && ok "the prefetcher fetched blocks" || fail "no prefetch"
check "unmount (no sanitizer report)" umount_fs
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
check "replay after remount: 1 step, verified" \
	"$REPLAY" --dir "$MNT" --state-size 64M --ranks "$RANKS" --subgroup-size 512K --block-size 256K --steps 1 --verify
check "unmount (2)" umount_fs
tap_exit
