#!/usr/bin/env bash
# Space freed by a removal is free while the commit that frees it runs.
# Slots of a deleted file come back once the removal is committed; a commit
# takes the list of them in hand, syncs the tiers, writes the metadata and
# only then frees them, so while it runs they are in neither the pending
# list nor the held one. A request for space in that window (fallocate, a
# write-back of a new block) found the tier full and nothing pending, and
# got ENOSPC, though the space came free a moment later.
#   - the tier lives on powerfs, whose fsyncs take FSYNC_MS: a commit that
#     syncs a slab runs that long;
#   - A fills the tier but a block and is fsync'd; A is removed; S, one
#     block, is written and goes back in the background, and the
#     background commit (commit_interval = 1) that follows syncs its slab
#     with A's slots in hand;
#   - in that commit, fallocate of B as large as A must succeed;
#   - the same again with D in A's place, and a write and fsync of C as
#     large as D in the fallocate's.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" getfattr
FSYNC_MS=3000
powerfs_setup nvme0

# The metadata stays off powerfs; the tier holds 17 blocks.
default_conf | sed "s|^path = $T/nvme0$|path = $DISK/nvme0\nslab_size = 4M|; s|^capacity = 2G|capacity = 17M|" |
	mount_key 'commit_interval = 1' >"$T/c.conf"

check "powerfs is built ($POWERFS)" test -x "$POWERFS"
powerfs_mount POWERFS_FSYNC_MS=$FSYNC_MS || { fail "powerfs mount"; tap_exit; exit; }
mount_fs "$T/c.conf" || { fail "mount"; tap_exit; exit; }
check "A: 16 MiB written and fsync'd" sh -c "head -c $((16 << 20)) /dev/urandom >'$MNT/A' && sync '$MNT/A'"
check "A removed" rm "$MNT/A"

# clean FILE: no byte of FILE waits in RAM for its write-back.
clean() { getfattr -n user.tierfs.cached --only-values "$1" 2>/dev/null | grep -q 'dirty=0$'; }
# into_commit WHAT: S (one block) is written, goes back in the background,
# and the caller is then in the commit that follows: it is due within a
# second of the last and syncs S's slab for FSYNC_MS.
into_commit() {
	check "S $1" sh -c "head -c $((1 << 20)) /dev/urandom >'$MNT/S'"
	local i
	for i in $(seq 100); do clean "$MNT/S" && break; sleep 0.1; done
	check "S went back in the background" clean "$MNT/S"
	sleep 1.5
}
into_commit "written: one block"
r=$("$PY" - "$MNT/B" <<'PYEOF'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
try:
    os.posix_fallocate(fd, 0, 16 << 20)
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PYEOF
)
check "fallocate of 16 MiB while the commit with A's slots runs: ok (got $r)" test "$r" = ok
grep -o 'commits=[0-9]* commit_ms=[0-9]*' "$MNT/.tierfs/stats" | sed 's/^/# /'
check "B removed" rm "$MNT/B"
check "D: 16 MiB written and fsync'd" sh -c "head -c $((16 << 20)) /dev/urandom >'$MNT/D' && sync '$MNT/D'"
check "D removed" rm "$MNT/D"
into_commit "rewritten"
write_fsync_py
head -c $((16 << 20)) /dev/urandom >"$T/c"
cp "$T/c" "$MNT/C"
r=$("$PY" "$T/fsync.py" "$MNT/C")
check "C: 16 MiB written and fsync'd while the commit with D's slots runs: ok (got $r)" test "$r" = ok
check "C reads back" cmp "$T/c" "$MNT/C"
check "unmount" umount_fs
check "the disk unmounts" powerfs_cut
tap_exit
