#!/usr/bin/env bash
# The space tierfs reports and promises. Mount: RAM 64 MiB, one 128 MiB
# posix tier. statfs counts the persistent tier, not the RAM cache beside
# it (files never spill to RAM): once writes get ENOSPC, df says nothing is
# available, as ext4 does. fallocate of a range larger than the free space
# fails with ENOSPC, as on ext4 (t_fallocate: what it sets aside).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd fallocate stat df

default_conf | sed 's/^capacity = 256M/capacity = 64M/; s/^capacity = 2G/capacity = 128M/' >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
avail() { local f; f=$(stat -f -c '%a * %S' "$MNT") && echo $((f)); }
size() { local f; f=$(stat -f -c '%b * %S' "$MNT") && echo $((f)); }
check "statfs: the size is the persistent tier's 128 MiB (says $(size))" \
	test "$(size)" = $((128 << 20))

check_fails "fallocate of 1 GiB on a 128 MiB mount fails" fallocate -l 1G "$MNT/huge"
check "... and leaves no 1 GiB file behind" test "$(stat -c %s "$MNT/huge" 2>/dev/null || echo 0)" = 0
rm -f "$MNT/huge"
check "fallocate of 64 MiB succeeds" fallocate -l 64M "$MNT/pre"
check "fallocate over written blocks needs no more space" \
	sh -c "dd if=/dev/urandom of='$MNT/pre' bs=1M count=64 conv=notrunc status=none &&
	       dd if=/dev/zero of='$MNT/w' bs=1M count=60 status=none && fallocate -l 64M '$MNT/pre'"
rm -f "$MNT/pre" "$MNT/w"

echo "# before: $(df -B1M "$MNT" | tail -1)"
check_fails "filling the mount ends in ENOSPC" \
	dd if=/dev/zero of="$MNT/fill" bs=1M count=1024 status=none
echo "# after ENOSPC at $(stat -c %s "$MNT/fill") bytes: $(df -B1M "$MNT" | tail -1)"
check "statfs: less than a block available once writes get ENOSPC (says $(avail))" \
	test "$(avail)" -lt $((1 << 20))
check "unmount" umount_fs
tap_exit
