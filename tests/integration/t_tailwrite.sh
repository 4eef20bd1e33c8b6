#!/usr/bin/env bash
# Rewriting the last, partial block of a file from its start to EOF (what
# DeepSpeed does to every swap file whose size is not a block multiple)
# reads nothing from disk: nothing of the old block survives the write.
# A partial write that does not reach EOF still reads the block, and keeps
# the bytes it does not cover. The bytes past EOF read as zeros when the
# file grows, and all of it survives a remount.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
small_ram_conf "$T/c.conf" || { tap_exit; exit 1; }
M=$((64 * 1024)) # one block

mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
head -c $((5 * M / 2)) /dev/urandom >"$T/a"
head -c $((M / 2)) /dev/urandom >"$T/tail"
head -c $((10 * 1024)) /dev/urandom >"$T/mid"
check "write a file of 2.5 blocks" dd if="$T/a" of="$MNT/a" bs=1M conv=fsync status=none
check "push it out of the RAM tier" evict_ram

# 1. From the last block's start to EOF: no read.
r0=$(stat_field "tier nvme0" reads)
check "rewrite the last half block" dd if="$T/tail" of="$MNT/a" bs=32K seek=4 conv=notrunc,fsync status=none
r1=$(stat_field "tier nvme0" reads)
[ -n "$r0" ] && [ "$r0" = "$r1" ] && ok "no block read from disk for it ($r0 -> $r1 reads)" ||
	fail "the rewrite read from disk: $r0 -> $r1 reads"
{ head -c $((2 * M)) "$T/a"; cat "$T/tail"; } >"$T/want"
check "content is the old head and the new tail" cmp "$T/want" "$MNT/a"
check "grow the file to 3 blocks" truncate -s $((3 * M)) "$MNT/a"
head -c $((M / 2)) /dev/zero >>"$T/want"
check "the bytes past the old EOF read as zeros" cmp "$T/want" "$MNT/a"

# 2. A partial write short of EOF must read the block and keep the rest.
check "push it out again" evict_ram
r2=$(stat_field "tier nvme0" reads)
check "write 10 KiB at the last block's start, short of EOF" dd if="$T/mid" of="$MNT/a" bs=10K seek=$((2 * M)) oflag=seek_bytes conv=notrunc,fsync status=none
r3=$(stat_field "tier nvme0" reads)
[ -n "$r2" ] && [ "$r3" -gt "$r2" ] && ok "that write read its block ($r2 -> $r3 reads)" ||
	fail "a write short of EOF did not read its block ($r2 -> $r3): the eviction did not happen or the rest was not kept"
{ head -c $((2 * M)) "$T/want"; cat "$T/mid"; tail -c +$((2 * M + 10 * 1024 + 1)) "$T/want"; } >"$T/want2"
check "the rest of that block is kept" cmp "$T/want2" "$MNT/a"

check "unmount clean" umount_fs
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
check "all of it survives a remount" cmp "$T/want2" "$MNT/a"
check "unmount clean" umount_fs
tap_exit
