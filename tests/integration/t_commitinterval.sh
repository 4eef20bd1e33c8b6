#!/usr/bin/env bash
# commit_interval: write-back's metadata commits run in a thread of their
# own, at most one per commit_interval, so that a step's I/O never waits on
# the metadata disk's sync.
#   - a file written and never fsync'd survives a kill -9 once it has been
#     written back and one interval has passed (the background commit);
#   - under steady writes, commits that find work come no more often than
#     the interval allows;
#   - a kill -9 right after leaves every file whole or as last committed
#     (empty), never with blocks that were not committed; fsync'd files are
#     whole whatever the interval;
#   - a due commit waits for a moment when the tiers idle: while a capped
#     tier reads without a pause, commits still come (commits_forced counts
#     them), and once it idles they wait for that again.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"

M=$((1 << 20))
head -c $((3 * M)) /dev/urandom >"$T/a.want"
head -c $((2 * M)) /dev/urandom >"$T/c.want"
cat >"$T/fsync.py" <<'PYEOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, open(sys.argv[2], "rb").read())
os.fsync(fd)
os.close(fd)
PYEOF
commits() { stat_field cache commits; }

# 1. A short interval: the background commit makes a durable, no fsync.
default_conf | mount_key 'flush_interval = 0.05' | mount_key 'commit_interval = 0.2' >"$T/s.conf"
mount_fs "$T/s.conf" || { fail mount; tap_exit; exit 1; }
cp "$T/a.want" "$MNT/a"
check "a: written back" wait_for nothing_dirty
# The commit the write-back asked for is due within 0.2 s and takes up to
# 0.2 s on a busy disk: 3 s leave room for a sync stalled behind another
# test's I/O.
sleep 3
# Nothing else commits before the crash: an fsync here would commit a too.
check "kill -9" crash_fs
mount_fs "$T/s.conf" || { fail "remount after kill -9"; tap_exit; exit 1; }
check "a intact after the crash (background commit, no fsync)" cmp "$T/a.want" "$MNT/a"
check "c: written and fsync'd" "$PY" "$T/fsync.py" "$MNT/c" "$T/c.want"
check "kill -9 (2)" crash_fs
mount_fs "$T/s.conf" || { fail "remount after kill -9 (2)"; tap_exit; exit 1; }
check "c intact after the crash (fsync)" cmp "$T/c.want" "$MNT/c"
check "unmount clean" umount_fs

# 2. A long interval under steady writes: 30 files of 1 MiB, one per 100 ms,
#    each written back within a flush period.
rm -rf "$T/meta" "$T/nvme0"
default_conf | mount_key 'flush_interval = 0.05' | mount_key 'commit_interval = 2' >"$T/l.conf"
mount_fs "$T/l.conf" || { fail "mount (long interval)"; tap_exit; exit 1; }
cat >"$T/steady.py" <<'PYEOF'
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open("%s/f%02d" % (d, i), "wb") as f:
        f.write(bytes([i + 1]) * (1 << 20))
    time.sleep(0.1)
PYEOF
c0=$(commits)
t0=$(date +%s%N)
check "30 files written, one per 100 ms" "$PY" "$T/steady.py" "$MNT" 30
check "all written back" wait_for nothing_dirty
t1=$(date +%s%N)
c1=$(commits)
most=$(((t1 - t0) / 2000000000 + 1))
echo "# $((c1 - c0)) commits in $(((t1 - t0) / 1000000)) ms at commit_interval = 2 (at most $most)"
check "background commits happened ($c0 then $c1)" test "$c1" -gt "$c0"
check "no more than one per interval: $((c1 - c0)) <= $most" test $((c1 - c0)) -le "$most"
check "kill -9 right after (long interval)" crash_fs
mount_fs "$T/l.conf" || { fail "remount (long interval)"; tap_exit; exit 1; }
cat >"$T/whole.py" <<'PYEOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
bad, whole = [], 0
for i in range(n):
    p = "%s/f%02d" % (d, i)
    if not os.path.exists(p):
        continue
    b = open(p, "rb").read()
    if b == bytes([i + 1]) * (1 << 20):
        whole += 1
    elif b:
        bad.append("f%02d: %d bytes, not the ones written" % (i, len(b)))
print("# %d of %d files whole, the rest empty or absent" % (whole, n))
for x in bad:
    print("# " + x)
sys.exit(1 if bad else 0)
PYEOF
check "every file whole or as last committed, none half-committed" "$PY" "$T/whole.py" "$MNT" 30
check "unmount clean (long interval)" umount_fs
# 3. A tier kept busy: a 64 MiB file read back at 4 MiB/s, 15 s without a
#    pause (the cap lets a queue's worth through at once), while small
#    files are written (and written back) beside it: 4-5 s of the test's
#    own work on a fast machine, more under ASan on a loaded one (at 8
#    MiB/s the read had 7 s, short of the margin that wants).
rm -rf "$T/meta" "$T/nvme0"
default_conf | mount_key 'flush_interval = 0.05' | mount_key 'commit_interval = 0.3' |
	sed 's|^capacity = 2G$|&\nmax_bandwidth_read = 4M/s|' >"$T/b.conf"
mount_fs "$T/b.conf" || { fail "mount (busy tier)"; tap_exit; exit 1; }
head -c $((64 * M)) /dev/urandom >"$T/big.want"
check "big written and fsync'd" "$PY" "$T/fsync.py" "$MNT/big" "$T/big.want"
check "unmount (busy tier)" umount_fs
mount_fs "$T/b.conf" || { fail "remount (busy tier)"; tap_exit; exit 1; }
forced() { stat_field cache commits_forced; }
c0=$(commits) f0=$(forced)
dd if="$MNT/big" of=/dev/null bs=1M 2>/dev/null &
reader=$!
sleep 0.5
for i in $(seq 8); do
	head -c $M /dev/urandom >"$T/s$i.want"
	cp "$T/s$i.want" "$MNT/s$i"
	sleep 0.3
done
check "the small files written back" wait_for nothing_dirty
c1=$(commits) f1=$(forced)
busy=no
kill -0 $reader 2>/dev/null && busy=yes
echo "# $((c1 - c0)) commits, $((f1 - f0)) of them forced, while the tier read (still reading: $busy)"
check "the read was still going" test $busy = yes
check "commits went on while the tier never idled ($c0 then $c1)" test $((c1 - c0)) -ge 2
check "some went without a quiet moment ($f0 then $f1)" test "$f1" -gt "$f0"
check "the read finished" wait $reader
# A commit forced while the tier was busy may still be in its sync: read
# the count once it has held still for a second.
f2=$(forced)
for i in $(seq 10); do
	sleep 1
	f=$(forced)
	[ "$f" = "$f2" ] && break
	f2=$f
done
head -c $M /dev/urandom >"$T/s9.want"
cp "$T/s9.want" "$MNT/s9"
check "one more written back" wait_for nothing_dirty
sleep 3 # as in part 1: its commit has run
c3=$(commits) f3=$(forced)
check "once the tier idles, commits wait for it again ($f2 then $f3 forced)" test "$f3" = "$f2"
check "the last write-back was committed ($c1 then $c3)" test "$c3" -gt "$c1"
check "kill -9 (busy tier)" crash_fs
mount_fs "$T/b.conf" || { fail "remount after kill -9 (busy tier)"; tap_exit; exit 1; }
same=0
for i in $(seq 9); do cmp -s "$T/s$i.want" "$MNT/s$i" && same=$((same + 1)); done
check "the 9 small files intact after the crash ($same)" test $same = 9
check "unmount clean (busy tier)" umount_fs
tap_exit
