#!/usr/bin/env bash
# t_wbstorm with a learned order: the learned flusher chooses by farthest
# next use (and writes back strays), not by LRU, and a tier failing every
# write must be retried at a bounded rate there too. A writer rewrites 8
# files of 16 blocks (64 KiB) in the same order, round after round, through
# 3 MiB of RAM until the order is learned; then the tier fails every write
# (iofail.so) for 2 s. Without a back-off the learned flusher retried
# 54966 failed writes in those 2 s; with it, a handful. The order stays
# learned. Once the disk works again the writer goes on, every file holds
# its last round whole, fsync returns 0, and a remount keeps it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"


default_conf | sed 's/^block_size = 1M/block_size = 64K\nthreads = 2/
	s/^capacity = 256M/capacity = 3M/; s/^capacity = 2G/capacity = 64M/' >"$T/c.conf"
grep -q '^threads = 2' "$T/c.conf" || fail "config edit"
export IOFAIL_EIO="$T/eio"
mount_shimmed iofail "$T/c.conf" || { fail mount; tap_exit; exit 1; }

# step.py DIR STOP: round r writes byte r % 251 over all of g0..g7; ends
# after a round without a failed write once STOP exists, so that its last
# round is whole. Prints the rounds and the failed file writes.
cat >"$T/step.py" <<'PYEOF'
import os, sys
d, stop = sys.argv[1], sys.argv[2]
r = errs = 0
while True:
    buf, failed = bytes([r % 251]) * 65536, False
    for i in range(8):
        try:
            fd = os.open("%s/g%d" % (d, i), os.O_WRONLY | os.O_CREAT)
            try:
                for k in range(16):
                    os.pwrite(fd, buf, k * 65536)
            finally:
                os.close(fd)
        except OSError:
            errs, failed = errs + 1, True
    r += 1
    if not failed and os.path.exists(stop):
        break
print(r, errs)
PYEOF
"$PY" "$T/step.py" "$MNT" "$T/stop" >"$T/step.out" &
pid=$!
learned() { test "$(stat_field order learned)" = yes; }
check "the order is learned" wait_for learned
touch "$IOFAIL_EIO"
waiting() { grep -q '^cache .* dirty=48 ' "$MNT/.tierfs/stats"; }
check "every RAM block dirty: the writer waits for write-back" wait_for waiting
e0=$(stat_field 'tier nvme0' errors)
sleep 2
e1=$(stat_field 'tier nvme0' errors)
n=$((e1 - e0))
grep -E '^(cache|order)' "$MNT/.tierfs/stats" | sed 's/^/# /'
check "failed writes in 2 s bounded ($n, at most 300)" test "$n" -le 300
check "the order is still learned" learned
rm -f "$IOFAIL_EIO"
touch "$T/stop"
check "once the disk works, the writer finishes" wait $pid
read -r rounds errs <"$T/step.out"
echo "# $rounds rounds, $errs failed file writes"
want() { # every g holds byte (rounds - 1) % 251
	"$PY" - "$MNT" $(((rounds - 1) % 251)) <<'PYEOF'
import sys
d, b = sys.argv[1], int(sys.argv[2])
sys.exit(any(open("%s/g%d" % (d, i), "rb").read() != bytes([b]) * (1 << 20) for i in range(8)))
PYEOF
}
check "every file holds its last round" want
check "fsync: 0" "$PY" -c 'import os, sys
for i in range(8):
    fd = os.open("%s/g%d" % (sys.argv[1], i), os.O_WRONLY); os.fsync(fd); os.close(fd)' "$MNT"
check "unmount" umount_fs
unset IOFAIL_EIO
check "remount" mount_fs "$T/c.conf"
check "after remount: every file holds its last round" want
check "unmount (2)" umount_fs
tap_exit
