#!/usr/bin/env bash
# A read reply that fails is never sent twice. libfuse frees the request
# whether or not its reply reaches the kernel (a reply fails once the
# connection is gone); replyfail.so makes every read reply report failure
# after sending it, and the daemon must neither touch the freed request
# again (ASan build: no report) nor lose its way: reads still return the
# right bytes, from RAM and from disk, and the mount unmounts cleanly.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs

default_conf >"$T/c.conf"
export REPLYFAIL_FLAG="$T/fail"
mount_shimmed replyfail "$T/c.conf" || { fail mount; tap_exit; exit 1; }
head -c $((3 << 20 | 4321)) /dev/urandom >"$T/data"
check "write a file" cp "$T/data" "$MNT/f"
touch "$REPLYFAIL_FLAG"
check "replies fail: a read of the whole file gives its bytes" cmp -s "$T/data" "$MNT/f"
check "replies fail: an O_DIRECT read too" \
	sh -c "dd if='$MNT/f' iflag=direct bs=1M status=none | cmp -s '$T/data' -"
check "replies fail: a read at EOF gives 0 bytes" \
	sh -c "[ \$(dd if='$MNT/f' bs=1 skip=$((3 << 20 | 4321)) count=1 status=none | wc -c) = 0 ]"
rm -f "$REPLYFAIL_FLAG"
check "the daemon is still running" kill -0 "$TIERFS_PID"
check "unmount clean, no sanitizer report" umount_fs
unset REPLYFAIL_FLAG
check "remount" mount_fs "$T/c.conf"
check "after remount: the file is whole (read from disk)" cmp -s "$T/data" "$MNT/f"
check "unmount clean (2)" umount_fs
tap_exit
