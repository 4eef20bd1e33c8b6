#!/usr/bin/env bash
# A posix tier on a small file system of its own (a tmpfs of fixed size):
# its default capacity (no capacity key) does not shrink by what the tier
# already holds, so a remount after filling it comes up with every file
# intact. A slab grows only as far as a full disk allows, so the disk's last
# blocks short of a slab hold data too; one that cannot grow at all is not
# left behind, and one that cannot grow at mount does not stop the mount. Nor does a
# disk that is full when every slab is in place. Without a slab_size key the
# tier keeps the slab size it was formatted with.
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

slabs() { ls "$DISK" | grep -c '^slab-'; }

# 2. The disk fills while a slab grows (capacity 1G on a 100M disk).
disk 100M
rm -rf "$T/meta"
mkdir -p "$T/meta"
conf "capacity = 1G" >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
check "write 80 MiB (3 slabs of 32 MiB)" says ok write 80 "$MNT/f"
sha256sum <"$MNT/f" >"$T/f.sum"
check "80 MiB more: ENOSPC (the 4th slab does not fit)" says ENOSPC write 80 "$MNT/g"
ls -ls "$DISK" | sed 's/^/# /'
df -k "$DISK" | sed 's/^/# /'
# The 4 MiB short of a whole slab hold blocks too (were left free, while
# the tier's capacity and statfs counted them).
check "the disk's last MiB short of a slab are used" \
	test "$(df --output=avail -k "$DISK" | tail -1)" -lt 1024
check "a 4th slab holds them, grown only as far as the disk allows" \
	test "$(stat -c %s "$DISK/slab-00003.dat" 2>/dev/null || echo 0)" -gt 0 -a \
	"$(stat -c %s "$DISK/slab-00003.dat" 2>/dev/null || echo 0)" -lt $((32 << 20))
rm -f "$MNT/g"
check "4 slabs, none beyond the disk" says 4 slabs
check "unmount clean (3)" umount_fs
check "remount after ENOSPC (was: a leftover slab failed the mount)" mount_fs "$T/c.conf"
if mountpoint -q "$MNT"; then
	check "the file is intact (2)" sh -c "sha256sum <'$MNT/f' | cmp -s - '$T/f.sum'"
	check "unmount clean (4)" umount_fs
fi
# A slab that cannot grow at mount (an empty one, as a capacity that grew
# would make): the mount comes up, and allocation in it fails with ENOSPC
# until the disk has room.
: >"$DISK/slab-00003.dat"
check "remount with a slab the disk has no room to grow" mount_fs "$T/c.conf"
if mountpoint -q "$MNT"; then
	check "the file is intact (3)" sh -c "sha256sum <'$MNT/f' | cmp -s - '$T/f.sum'"
	check "writing past the grown slabs: ENOSPC" says ENOSPC write 40 "$MNT/h"
	rm -f "$MNT/h"
	mount -o remount,size=200M "$DISK"
	sleep 1.2 # a slab that could not grow is not tried again for 1 s
	check "once the disk has room, the slab grows" says ok write 40 "$MNT/h"
	check "unmount clean (5)" umount_fs
fi

# 3. The disk fills (by another file) while unmounted, every slab in place.
disk 64M
rm -rf "$T/meta"
mkdir -p "$T/meta"
conf "capacity = 32M" >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
check "write 8 MiB" says ok write 8 "$MNT/f"
sha256sum <"$MNT/f" >"$T/f.sum"
check "unmount clean (6)" umount_fs
head -c 64M /dev/zero >"$DISK/filler" 2>/dev/null
df -k "$DISK" | sed 's/^/# /'
check "remount on a full disk (was: the O_DIRECT probe's write failed it)" \
	mount_fs "$T/c.conf"
if mountpoint -q "$MNT"; then
	check "the file is intact (4)" sh -c "sha256sum <'$MNT/f' | cmp -s - '$T/f.sum'"
	check "its slab still takes writes" says ok write 8 "$MNT/g"
	check "unmount clean (7)" umount_fs
fi
check "the probe file is not left behind" test ! -e "$DISK/.odirect-probe"

# 4. slab_size left out: the tier keeps the 32M it was formatted with.
rm -f "$DISK/filler"
conf "capacity = 32M" | grep -v '^slab_size' >"$T/c.conf"
check "remount without the slab_size key (was: formatted with 32M, config says 1G)" \
	mount_fs "$T/c.conf"
if mountpoint -q "$MNT"; then
	check "the file is intact (5)" sh -c "sha256sum <'$MNT/f' | cmp -s - '$T/f.sum'"
	check "unmount clean (8)" umount_fs
fi

tap_exit
