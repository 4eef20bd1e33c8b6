#!/usr/bin/env bash
# A file's last, partial block moves its bytes up to EOF only (rounded up
# to 4 KiB), not a whole block: written back, and read back. The rest of
# the block reads as zeros, also where the slot held another file's bytes
# before and the file then grows past its old EOF, by truncate or by a
# write further on; all of it survives a remount.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
small_ram_conf "$T/c.conf" || { tap_exit; exit 1; }
M=$((64 * 1024)) # one block

mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
# Slots full of random bytes, then freed: the next file's blocks may land
# on them, and must not show what lies past their bytes.
check "write and fsync 32 MiB of random bytes" dd if=/dev/urandom of="$MNT/old" bs=1M count=32 conv=fsync status=none
check "delete it" rm "$MNT/old"
check "sync the deletion" sync -f "$MNT"
head -c $((2 * M + 5000)) /dev/urandom >"$T/want"
w0=$(stat_field "tier nvme0" bytes_written)
check "write and fsync a file of 2 blocks and 5000 bytes" dd if="$T/want" of="$MNT/p" bs=1M conv=fsync status=none
w1=$(stat_field "tier nvme0" bytes_written)
[ -n "$w0" ] && [ $((w1 - w0)) -eq $((2 * M + 8192)) ] &&
	ok "its write-back moved 2 blocks and 8 KiB ($((w1 - w0)) bytes)" ||
	fail "its write-back moved $((w1 - w0)) bytes, not $((2 * M + 8192))"
check "push it out of the RAM tier" evict_ram
r0=$(stat_field "tier nvme0" bytes_read)
check "it reads back whole" cmp "$T/want" "$MNT/p"
r1=$(stat_field "tier nvme0" bytes_read)
[ -n "$r0" ] && [ $((r1 - r0)) -eq $((2 * M + 8192)) ] &&
	ok "its read moved 2 blocks and 8 KiB ($((r1 - r0)) bytes)" ||
	fail "its read moved $((r1 - r0)) bytes, not $((2 * M + 8192))"

check "push it out again" evict_ram
check "grow it by truncate to 3 blocks" truncate -s $((3 * M)) "$MNT/p"
head -c $((M - 5000)) /dev/zero >>"$T/want"
check "the bytes past the old EOF read as zeros" cmp "$T/want" "$MNT/p"
check "shrink it back to 2 blocks and 5000 bytes" truncate -s $((2 * M + 5000)) "$MNT/p"
check "fsync it" "$PY" -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDWR); os.fsync(fd)' "$MNT/p"
check "push it out again" evict_ram
printf 'past the hole' >"$T/tailbytes"
check "write 13 bytes at block 5, past a hole" dd if="$T/tailbytes" of="$MNT/p" bs=1 seek=$((5 * M)) conv=notrunc,fsync status=none
{ head -c $((2 * M + 5000)) "$T/want"; head -c $((3 * M - 5000)) /dev/zero; cat "$T/tailbytes"; } >"$T/want2"
check "the old last block reads as its bytes and zeros" cmp "$T/want2" "$MNT/p"
check "unmount clean" umount_fs
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
check "all of it survives a remount" cmp "$T/want2" "$MNT/p"
check "unmount clean" umount_fs
tap_exit
