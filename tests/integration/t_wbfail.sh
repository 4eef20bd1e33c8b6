#!/usr/bin/env bash
# A write-back that fails is never reported as durable. The flusher starts
# the write-back of a file's only dirty block; iofail.so holds it in the
# ring, so an fsync arriving meanwhile finds the block being written back,
# not dirty. Then the disk fails the write (EIO): the block is dirty again,
# and the fsync must not return 0, which says the bytes are on disk. Once
# the disk works again, an fsync writes the block back and returns 0, and
# the bytes are there after a remount. An unmount while the disk fails
# every write gives up on the blocks it cannot write, saying so, rather
# than retry them for ever: the daemon exits.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"
require_cmd timeout

write_fsync_py
# in_fsync PID: PID waits for the daemon's answer to a FUSE request.
in_fsync() { grep -q request_wait_answer "/proc/$1/stack" 2>/dev/null || grep -q request_wait_answer "/proc/$1/wchan" 2>/dev/null; }
want_file() { # FILE BYTE
	"$PY" -c 'import sys; d=open(sys.argv[1],"rb").read(); sys.exit(d != bytes([int(sys.argv[2])])*(1<<20))' "$1" "$2"
}

# write_1m FILE BYTE: 1 MiB of BYTE in one FUSE request. A buffer that does
# not start on a page boundary (a Python bytes object's) reaches FUSE as two
# requests, 1 MiB less its offset in the page and then the rest, and the
# flusher could take the block between them: the second then waited for the
# held write-back, and the test for the second (a hang, once under ASan).
write_1m() {
	"$PY" -c 'import mmap, os, sys
m = mmap.mmap(-1, 1 << 20)
m.write(bytes([int(sys.argv[2])]) * (1 << 20))
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
assert os.write(fd, m) == 1 << 20
os.close(fd)' "$1" "$2"
}

default_conf | mount_key 'flush_interval = 0.05' >"$T/c.conf"
export IOFAIL_HOLD="$T/hold" IOFAIL_EIO="$T/eio"
mount_shimmed iofail "$T/c.conf" || { fail mount; tap_exit; exit 1; }

touch "$IOFAIL_HOLD"
write_1m "$MNT/f" 1
check "the flusher takes the dirty block (its write-back held)" wait_for nothing_dirty
"$PY" "$T/fsync.py" "$MNT/f" "$T/opened" >"$T/said" &
pid=$!
fsync_sent() { test -e "$T/opened" && in_fsync $pid; }
check "fsync sent while the write-back is under way" wait_for fsync_sent
sleep 0.2 # the daemon gets to wait for the write-back
touch "$IOFAIL_EIO"
rm -f "$IOFAIL_HOLD"
wait $pid
said=$(cat "$T/said")
echo "# fsync said: $said"
check "fsync while that write-back fails: EIO, not 0" test "$said" = EIO
rm -f "$IOFAIL_EIO"
said=$("$PY" "$T/fsync.py" "$MNT/f" "$T/opened2")
echo "# fsync said: $said"
check "fsync once the disk works again: 0" test "$said" = ok
check "nothing left dirty" nothing_dirty
check "unmount clean" umount_fs
unset IOFAIL_HOLD IOFAIL_EIO
check "remount" mount_fs "$T/c.conf"
check "after remount: the bytes" want_file "$MNT/f" 1
check "unmount clean (2)" umount_fs

# daemon_exits: the daemon ends within 20 s of the unmount (else killed).
daemon_exits() {
	fusermount3 -u "$MNT" || return 1
	local i
	for i in $(seq 400); do
		kill -0 "$TIERFS_PID" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$TIERFS_PID" 2>/dev/null; then
		kill -9 "$TIERFS_PID"
		wait "$TIERFS_PID" 2>/dev/null
		TIERFS_PID=
		return 1
	fi
	wait "$TIERFS_PID"
	TIERFS_PID=
}
export IOFAIL_HOLD="$T/hold" IOFAIL_EIO="$T/eio"
mount_shimmed iofail "$T/c.conf" || { fail mount; tap_exit; exit 1; }
# Failing before the write: the flusher's periodic trickle could otherwise
# write g back, successfully, before the unmount tries.
touch "$IOFAIL_EIO"
write_1m "$MNT/g" 2
check "unmount while every write fails: the daemon exits" daemon_exits
check "it says the write-back failed" grep -q 'unmount: write-back failed' "$T/daemon.log"
rm -f "$IOFAIL_EIO"
unset IOFAIL_HOLD IOFAIL_EIO
check "remount (2)" mount_fs "$T/c.conf"
check "after remount: the file written back before is whole" want_file "$MNT/f" 1
check "unmount clean (3)" umount_fs
tap_exit
