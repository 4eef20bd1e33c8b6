#!/usr/bin/env bash
# A tier that fails every write is retried at a bounded rate, and says so
# without flooding the log. With 3 MiB of RAM (64 KiB blocks) and a writer
# writing 8 MiB, every RAM block is soon dirty and a request waits for RAM
# (reclaim) the whole time iofail.so fails the tier's writes (EIO): the
# flusher must not retry the failed blocks as fast as the I/O returns.
# Over 1.5 s a back-off (a delay that grows to about a second after each
# failure) makes tens of failed writes at most; without one it made tens of
# thousands. The bounds below are far from both. (Not longer: a request
# waiting for RAM gets EIO once no write-back has worked for 5 s, and the
# writer below must not; the back-off's last delay comes on top.) The log counts repeats
# instead of a line per failed I/O.
# Once the disk works again the writer finishes, the bytes are right,
# fsync returns 0 and a remount keeps them. A request for RAM while the
# disk fails for longer gets an error in bounded time rather than hang:
# after writeback_timeout (5 s, then 1.5 s).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"
require_cmd timeout cmp

fails() { grep -c "nvme0.*failed: Input/output error" "$T/daemon.log"; }

default_conf | sed 's/^block_size = 1M/block_size = 64K\nthreads = 2/
	s/^capacity = 256M/capacity = 3M/; s/^capacity = 2G/capacity = 64M/' >"$T/c.conf"
grep -q '^threads = 2' "$T/c.conf" || fail "config edit"
head -c $((8 << 20)) /dev/urandom >"$T/data"
export IOFAIL_EIO="$T/eio"
mount_shimmed iofail "$T/c.conf" || { fail mount; tap_exit; exit 1; }

touch "$IOFAIL_EIO"
"$PY" -c 'import shutil, sys; shutil.copyfile(sys.argv[1], sys.argv[2])' "$T/data" "$MNT/f" &
pid=$!
waiting() { test "$(stat_field cache reclaim_waits)" -gt 0; }
check "the writer waits for RAM" wait_for waiting
e0=$(stat_field 'tier nvme0' errors)
l0=$(fails)
# 1 s: the writer must not reach writeback_timeout (5 s) before the disk
# works again, even with the back-off's last delay and a busy machine.
sleep 1
e1=$(stat_field 'tier nvme0' errors)
l1=$(fails)
n=$((e1 - e0))
echo "# failed writes in 1 s: $n; log lines: $((l1 - l0))"
grep 'nvme0' "$T/daemon.log" | tail -3 | sed 's/^/# /'
check "failed writes in 1 s bounded ($n, at most 200)" test "$n" -le 200
check "they were retried ($n, at least 1)" test "$n" -ge 1
check "log lines bounded ($((l1 - l0)), at most 30)" test $((l1 - l0)) -le 30
rm -f "$IOFAIL_EIO"
check "once the disk works, the writer finishes" wait $pid
check "the file reads back right" cmp "$T/data" "$MNT/f"
check "fsync: 0" "$PY" -c 'import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY); os.fsync(fd)' "$MNT/f"
check "everything written back" wait_for nothing_dirty

# write.py SRC DST: copy SRC to DST in 64 KiB writes; prints ok, or the
# errno and the bytes written before it.
cat >"$T/write.py" <<'PYEOF'
import errno, os, sys
src = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
off = 0
try:
    while off < len(src):
        off += os.write(fd, src[off:off + 65536])
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno), off)
PYEOF
write_fsync_py
# A request FUSE has sent cannot be killed: the writer runs in the
# background, and the disk works again if it has not answered in 20 s.
touch "$IOFAIL_EIO"
"$PY" "$T/write.py" "$T/data" "$MNT/g" >"$T/wrote" &
pid=$!
answered() { test -s "$T/wrote"; }
wait_for answered
w=$(cat "$T/wrote")
echo "# writer while the disk fails: ${w:-no answer in 20 s}"
check "a write that cannot get RAM while the disk fails: EIO, not a hang" \
	test "${w%% *}" = EIO
"$PY" "$T/fsync.py" "$MNT/g" >"$T/said" &
pid2=$!
synced() { test -s "$T/said"; }
wait_for synced
said=$(cat "$T/said")
echo "# fsync while the disk fails: ${said:-no answer in 20 s}"
check "fsync while the disk fails: EIO" test "$said" = EIO
rm -f "$IOFAIL_EIO"
wait $pid $pid2
w=$(cat "$T/wrote")
n=${w#* }
prefix() { cmp -n "$1" "$T/data" "$MNT/g"; }
case "$n" in
[0-9]*) check "what the writer was told is written reads back ($n bytes)" prefix "$n" ;;
*) fail "what the writer was told is written reads back (no count)" ;;
esac
said=$("$PY" "$T/fsync.py" "$MNT/g")
check "fsync once the disk works again: 0 ($said)" test "$said" = ok
check "everything written back (2)" wait_for nothing_dirty
check "unmount clean" umount_fs
unset IOFAIL_EIO
check "remount" mount_fs "$T/c.conf"
check "after remount: the bytes" cmp "$T/data" "$MNT/f"
case "$n" in
[0-9]*) check "after remount: the bytes written before EIO" prefix "$n" ;;
esac
check "unmount clean (2)" umount_fs

# writeback_timeout: the time a request for RAM waits while write-back
# fails (5 s above, as the log says) is the config's.
check "the default wait before EIO: 5 s (daemon log)" \
	grep -q 'write-back has failed for 5 s' "$T/daemon.log"
sed -i 's/^\[mount\]$/&\nwriteback_timeout = 1.5/' "$T/c.conf"
grep -q '^writeback_timeout = 1.5$' "$T/c.conf" || fail "config edit"
: >"$T/daemon.log"
: >"$T/wrote"
export IOFAIL_EIO="$T/eio"
mount_shimmed iofail "$T/c.conf" || { fail "mount (writeback_timeout)"; tap_exit; exit 1; }
touch "$IOFAIL_EIO"
"$PY" "$T/write.py" "$T/data" "$MNT/h" >"$T/wrote" &
pid=$!
wait_for answered
w=$(cat "$T/wrote")
echo "# writer while the disk fails, writeback_timeout = 1.5: ${w:-no answer in 20 s}"
grep 'write-back has failed for' "$T/daemon.log" | head -1 | sed 's/^/# /'
check "writeback_timeout = 1.5: EIO" test "${w%% *}" = EIO
check "after 1.5 s, not 5 (daemon log)" grep -qE 'write-back has failed for [12] s' "$T/daemon.log"
rm -f "$IOFAIL_EIO"
wait $pid
check "unmount clean (3)" umount_fs
tap_exit
