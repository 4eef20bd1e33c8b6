#!/usr/bin/env bash
# A failed tier flush is never forgotten. While syncfail.so makes every
# fdatasync of the daemon fail, an fsync must return EIO; and once the
# disk flushes again, the fsync of a file whose write-back that flush
# covered must still return EIO (the kernel dropped the pages, a retried
# fdatasync returns 0, and the bytes may be gone), while a file written
# after it is durable as usual. A truncate to 0 and a rewrite end it.
# With two tiers, only the files written back to the failing one are
# charged: the fsync of a file on the other tier still returns 0.
# A tier directory removed while mounted (rm -rf) fails fsync the same
# way: fdatasync of the unlinked slabs succeeds, but no mount finds them.
# A failing metadata flush makes namespace changes fail, never half-land.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"

# write.py FILE BYTE [trunc]: write 3 MiB of BYTE, fsync; prints the errno.
cat >"$T/write.py" <<'PYEOF'
import errno, os, sys
path, byte = sys.argv[1], int(sys.argv[2])
flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if len(sys.argv) > 3 else 0)
fd = os.open(path, flags, 0o644)
if byte >= 0:
    os.pwrite(fd, bytes([byte]) * (3 << 20), 0)
try:
    os.fsync(fd)
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PYEOF
fsync_says() { # WANT FILE BYTE [trunc]
	local want=$1 got
	shift
	got=$("$PY" "$T/write.py" "$@")
	[ "$got" = "$want" ] || { echo "# fsync said '$got', want '$want'"; return 1; }
}
want_file() { # FILE BYTE
	"$PY" -c 'import sys; d=open(sys.argv[1],"rb").read(); sys.exit(d != bytes([int(sys.argv[2])])*(3<<20))' "$1" "$2"
}

default_conf >"$T/c.conf"
export SYNCFAIL_FLAG="$T/fail"
mount_shimmed syncfail "$T/c.conf" || { fail mount; tap_exit; exit 1; }

check "fsync with a good disk: 0" fsync_says ok "$MNT/a" 1
touch "$SYNCFAIL_FLAG"
check "fsync while the disk's flush fails: EIO" fsync_says EIO "$MNT/a" 2
rm -f "$SYNCFAIL_FLAG"
check "fsync again once the disk flushes: still EIO (the bytes may be lost)" \
	fsync_says EIO "$MNT/a" -1
check "fsync of a file written after the failure: 0" fsync_says ok "$MNT/b" 3
check "truncate to 0, rewrite, fsync: 0" fsync_says ok "$MNT/a" 4 trunc
check "unmount clean" umount_fs
unset SYNCFAIL_FLAG
check "remount" mount_fs "$T/c.conf"
check "after remount: the rewritten file holds its last bytes" want_file "$MNT/a" 4
check "after remount: the file written after the failure is whole" want_file "$MNT/b" 3
check "unmount clean (2)" umount_fs

# Two tiers; rules put /zero* on nvme0 and /one* on nvme1; nvme1's disk fails.
rm -rf "$T/meta" "$T/nvme0"
two_tier_conf 1M "[rule zero]" "match = /zero*" "tier = nvme0" \
	"[rule one]" "match = /one*" "tier = nvme1" >"$T/c2.conf"
export SYNCFAIL_FLAG="$T/fail" SYNCFAIL_PATH="/nvme1/"
mount_shimmed syncfail "$T/c2.conf" || { fail "mount (two tiers)"; tap_exit; exit 1; }
check "two tiers, good disks: fsync of a file on nvme0: 0" fsync_says ok "$MNT/zero" 5
check "two tiers, good disks: fsync of a file on nvme1: 0" fsync_says ok "$MNT/one" 5
touch "$SYNCFAIL_FLAG"
check "nvme1 fails: fsync of a file on nvme1: EIO" fsync_says EIO "$MNT/one" 6
check "nvme1 fails: fsync of a file on nvme0: 0" fsync_says ok "$MNT/zero" 6
rm -f "$SYNCFAIL_FLAG"
check "nvme1 flushes again: the file on nvme1 still says EIO" fsync_says EIO "$MNT/one" -1
check "nvme1 flushes again: the file on nvme0 says 0" fsync_says ok "$MNT/zero" -1
check "unmount clean (3)" umount_fs
unset SYNCFAIL_FLAG SYNCFAIL_PATH
check "remount (two tiers)" mount_fs "$T/c2.conf"
check "after remount: the file on the good tier is whole" want_file "$MNT/zero" 6
check "unmount clean (4)" umount_fs

# A file truncated to 0 is no longer charged for its old bytes' tier: x's
# bytes went to nvme1 in an idle write-back, then x was cut to 0, then
# nvme1's flush failed once; x's fsync says 0.
export SYNCFAIL_FLAG="$T/fail" SYNCFAIL_PATH="/nvme1/"
mount_shimmed syncfail "$T/c2.conf" || { fail "mount (truncated file)"; tap_exit; exit 1; }
check "pin x to nvme1" sh -c ": >'$MNT/x' && setfattr -n user.tierfs.pin -v nvme1 '$MNT/x'"
"$PY" -c "import os; fd = os.open('$MNT/x', os.O_WRONLY); os.pwrite(fd, b'a' * (3 << 20), 0)"
# The idle write-back (flush_interval 1 s), with no tier sync: else the
# truncate below would find x's bytes still in RAM and test nothing.
check "x written back to nvme1" wait_for nothing_dirty
check "truncate x to 0" truncate -s 0 "$MNT/x"
touch "$SYNCFAIL_FLAG"
check "nvme1 fails: fsync of a file on nvme0 runs a sync round: 0" fsync_says ok "$MNT/zero" 7
rm -f "$SYNCFAIL_FLAG"
check "x, truncated to 0 before the failure: fsync 0" fsync_says ok "$MNT/x" -1
check "unmount clean (5)" umount_fs

# One slow flush of nvme1 that fails, and a file whose write-back lands
# while it runs: that flush covered it and the kernel reports the failure
# once, so its fsync must say EIO, then and later. The flush lasts 6 s: the
# second writer must start, write and be written back within it, on a
# machine perhaps busy with another test lane.
export SYNCFAIL_ONCE_MS=6000
mount_shimmed syncfail "$T/c2.conf" || { fail "mount (slow flush)"; tap_exit; exit 1; }
touch "$SYNCFAIL_FLAG"
fsync_says EIO "$MNT/one" 8 >"$T/one.out" 2>&1 &
first=$!
sleep 0.5
check "a write-back during the failing flush: fsync EIO" fsync_says EIO "$MNT/one2" 9
wait "$first"
check "the file whose fsync began the failing flush: EIO" test ! -s "$T/one.out"
check "the write-back during the failing flush: still EIO" fsync_says EIO "$MNT/one2" -1
check "unmount clean (6)" umount_fs
unset SYNCFAIL_FLAG SYNCFAIL_PATH SYNCFAIL_ONCE_MS

# The metadata disk's flush fails: a commit syncs its LMDB pages before the
# page that points to them (else a power loss could leave a tree of pages
# never written), so the create fails rather than lands unflushed.
export SYNCFAIL_FLAG="$T/fail" SYNCFAIL_PATH="$T/meta/"
mount_shimmed syncfail "$T/c2.conf" || { fail "mount (metadata flush fails)"; tap_exit; exit 1; }
touch "$SYNCFAIL_FLAG"
check_fails "metadata flush fails: a create fails" touch "$MNT/new"
check_fails "metadata flush fails: no file left by the failed create" test -e "$MNT/new"
rm -f "$SYNCFAIL_FLAG"
check "metadata flushes again: the create works" touch "$MNT/new2"
check "unmount clean (7)" umount_fs
unset SYNCFAIL_FLAG SYNCFAIL_PATH
check "remount (after the metadata failures)" mount_fs "$T/c2.conf"
check_fails "after remount: no file from the failed create" test -e "$MNT/new"
check "after remount: the later create is there" test -e "$MNT/new2"
check "unmount clean (8)" umount_fs

rm -rf "$T/meta" "$T/nvme0" "$T/nvme1"
default_conf >"$T/c.conf"
check "mount (tier to be removed)" mount_fs "$T/c.conf"
check "fsync before the tier directory is removed: 0" fsync_says ok "$MNT/a" 1
rm -rf "$T/nvme0"
check "tier directory removed: fsync of a new file: EIO (was 0)" fsync_says EIO "$MNT/b" 2
check "tier directory removed: rewrite and fsync: EIO (was 0)" fsync_says EIO "$MNT/a" 3
check "the log names the removed directory" \
	grep -qF "tier nvme0: $T/nvme0 was removed while mounted" "$T/daemon.log"
fusermount3 -u "$MNT"
wait "$TIERFS_PID"
echo "# daemon exit status after its tier was removed: $?"
TIERFS_PID=
check "no sanitizer report" sh -c "! grep -qE 'Sanitizer|runtime error' '$T/daemon.log'"
tap_exit
