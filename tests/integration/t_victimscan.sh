#!/usr/bin/env bash
# A victim search (the block to evict for a new one) visits a bounded part
# of the cache, not all of it. With a learned order nearly every cached
# block is dirty (Belady keeps what is read soonest), and the searches,
# which counted only the blocks they could take, walked the whole cache
# under the daemon's lock on every miss and for every woken waiter: 16 Ki
# blocks of RAM took the replay's update phase from 440 MB/s to 51. Here:
# 8192 RAM blocks of 16 KiB, more than half of them gradients the rule
# keeps in RAM; a search must visit fewer than half of them on average
# (.tierfs/stats: victim_visits / victim_scans). Searches for a victim walk
# only clean blocks and the flusher's only dirty ones (one list per
# write-back state): fewer than an eighth (1855 per search with one list
# per class, 233 with one per state).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
REPLAY=$(dirname "$TIERFS_BIN")/tierfs-replay
[ -x "$REPLAY" ] || { echo "# SKIP: $REPLAY not built"; exit 77; }

{
	default_conf | sed 's/^block_size = 1M/block_size = 16K/; s/^capacity = 256M/capacity = 128M/'
	printf '\n[rule gradients]\nmatch = *_gradient_*.tensor.swp\ntier = ram\npersistent = no\n'
} >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
check "replay: 3 steps of 256 MiB of state through 128 MiB of RAM" \
	"$REPLAY" --dir "$MNT" --state-size 256M --steps 3 --verify
grep -E '^(cache|order)' "$MNT/.tierfs/stats" | sed 's/^/# /'
blocks=$(stat_field cache blocks)
scans=$(stat_field cache victim_scans)
visits=$(stat_field cache victim_visits)
check "the order was learned (the searches ran with a learned order)" \
	test "$(stat_field order learns)" -ge 1
check "victim searches ran (${scans:-none})" test "${scans:-0}" -gt 1000
check "a search visits fewer than half the cache's $blocks blocks (visits per search: $((${visits:-0} / (${scans:-0} + 1))))" \
	test "$((${visits:-0} / (${scans:-0} + 1)))" -lt "$((${blocks:-0} / 2))"
check "and fewer than an eighth: the dirty blocks are not walked" \
	test "$((${visits:-0} / (${scans:-0} + 1)))" -lt "$((${blocks:-0} / 8))"
check "unmount" umount_fs
tap_exit
