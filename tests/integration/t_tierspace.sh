#!/usr/bin/env bash
# A posix tier on a small file system of its own (a tmpfs of fixed size):
# its default capacity (no capacity key) does not shrink by what the tier
# already holds, so a remount after filling it comes up with every file
# intact.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" getfattr sha256sum mount umount

DISK=$T/disk
mkdir -p "$DISK" "$T/meta"
# The FUSE mount goes first (lib.sh's cleanup), then the tmpfs under it.
trap 'if mountpoint -q "$MNT"; then fusermount3 -u "$MNT" || umount -l "$MNT"; fi
	[ -n "$TIERFS_PID" ] && wait "$TIERFS_PID"; TIERFS_PID=
	mountpoint -q "$DISK" && umount "$DISK"; cleanup' EXIT
# disk SIZE: a fresh tmpfs of SIZE on $DISK, or skip the whole test.
disk() {
	if mountpoint -q "$DISK"; then umount "$DISK" || return 1; fi
	mount -t tmpfs -o "size=$1" tmpfs "$DISK" 2>/dev/null || {
		echo "# SKIP: cannot mount a tmpfs (not root?)"
		exit 77
	}
}
# conf [KEY = VALUE...]: RAM + the posix tier "disk" on $DISK, 32 MiB slabs.
conf() {
	cat <<CONF
[mount]
metadata = $T/meta
block_size = 1M
threads = 4

[tier ram]
type = ram
capacity = 64M

[tier disk]
type = posix
path = $DISK
slab_size = 32M
CONF
	local l
	for l in "$@"; do echo "$l"; done
}
capacity() { # the disk tier's capacity in user.tierfs.tiers
	getfattr --absolute-names --only-values -n user.tierfs.tiers "$MNT" | awk '$1 == "disk" { print $4 }'
}
# write MIB FILE: MIB MiB of random bytes, fsynced; prints the errno name.
write() {
	"$PY" - "$@" <<'PYEOF'
import errno, os, sys
mib, path = int(sys.argv[1]), sys.argv[2]
try:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for _ in range(mib):
            os.write(fd, os.urandom(1 << 20))
        os.fsync(fd)
    finally:
        os.close(fd)
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PYEOF
}
says() { # WANT CMD...: CMD prints WANT
	local want=$1 got
	shift
	got=$("$@")
	[ "$got" = "$want" ] || { echo "# got '$got', want '$want'"; return 1; }
}

# 1. Default capacity: free space at mount plus what the slabs hold.
disk 160M
conf >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
cap1=$(capacity)
echo "# capacity at the first mount: $cap1"
check "write 100 MiB to the default-capacity tier" says ok write 100 "$MNT/f"
sha256sum <"$MNT/f" >"$T/f.sum"
check "unmount clean" umount_fs
du -k "$DISK" | sed 's/^/# tier holds (KiB): /'
check "remount with 100 MiB of slabs preallocated (was: beyond the tier's capacity)" \
	mount_fs "$T/c.conf"
if mountpoint -q "$MNT"; then
	cap2=$(capacity)
	echo "# capacity at the remount: $cap2"
	check "the capacity did not shrink by the tier's own slabs" test "$cap2" = "$cap1"
	check "the file is intact" sh -c "sha256sum <'$MNT/f' | cmp -s - '$T/f.sum'"
	check "unmount clean (2)" umount_fs
fi

tap_exit
