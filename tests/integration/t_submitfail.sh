#!/usr/bin/env bash
# The kernel refuses io_uring submissions for a while (submitfail.so):
# write-backs queued meanwhile stay in the ring, and once it takes them
# again they go without any other I/O to carry them, complete once, and
# the fsync waiting for them returns with the data intact. Completing a
# refused I/O as failed completed it twice, on freed memory; leaving it
# for the next submit hung an fsync that had no next submit.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"
require_cmd timeout

cat >"$T/write.py" <<'PYEOF'
import os, sys
path, byte = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
os.pwrite(fd, bytes([byte]) * (8 << 20), 0)
os.fsync(fd)
os.close(fd)
PYEOF
want() { # FILE BYTE
	"$PY" -c 'import sys; d=open(sys.argv[1],"rb").read(); sys.exit(d != bytes([int(sys.argv[2])])*(8<<20))' "$1" "$2"
}

default_conf >"$T/c.conf"
export SUBMITFAIL_FLAG="$T/refuse"
mount_shimmed submitfail "$T/c.conf" || { fail mount; tap_exit; exit 1; }

check "write and fsync 8 MiB" timeout 60 "$PY" "$T/write.py" "$MNT/f" 1
touch "$SUBMITFAIL_FLAG"
timeout 60 "$PY" "$T/write.py" "$MNT/f" 2 &
writer=$!
sleep 1.5
rm -f "$SUBMITFAIL_FLAG"
check "an fsync whose write-backs were refused for 1.5 s returns once they are taken" wait $writer
check "the file holds the new bytes" want "$MNT/f" 2
check "unmount clean" umount_fs
unset SUBMITFAIL_FLAG
check "remount" mount_fs "$T/c.conf"
check "after remount: the new bytes" want "$MNT/f" 2
check "unmount clean (2)" umount_fs
tap_exit
