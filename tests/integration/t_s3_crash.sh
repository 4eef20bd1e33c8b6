#!/usr/bin/env bash
# The S3 server killed (-9) in the middle of write-back and started again on
# the same directory and port: a writer fsyncs files one after another
# through the outage (a file counts as acknowledged only when its fsync
# returned 0), another writes without fsync to keep write-back busy; the
# server comes back, the writer finishes, and then the daemon itself is
# killed -9, so that only what is on the server remains. After a remount
# every acknowledged file is intact, and the files written during the
# outage read without I/O errors. Two rounds, with lz4 and AES-256-GCM on.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/../s3/lib.sh"
require_tierfs
require_cmd sha256sum
require_weed
trap s3_cleanup EXIT
weed_start "$T/weed" || { echo "# SKIP: the S3 server did not start (log above)"; exit 77; }
echo "# SeaweedFS at $S3_ENDPOINT"

# writer DIR PREFIX SECS SEED: files of assorted sizes, each fsync'd (and its
# directory); "sha256  path" printed only after both fsyncs returned 0.
writer() {
	"$PY" - "$@" <<'PYEOF'
import errno, hashlib, os, sys, time
d, prefix, secs, seed = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
os.makedirs(d, exist_ok=True)
sizes = [1, 65536, 65537, 1 << 20, (3 << 20) - 7, 200000, 4096]
t_end, i, failed = time.time() + secs, 0, 0
while time.time() < t_end:
    p = "%s/%s%d" % (d, prefix, i)
    size = sizes[(i + seed) % len(sizes)]
    data = (hashlib.sha256(b"%d-%d" % (seed, i)).digest() * (size // 32 + 1))[:size]
    i += 1
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        off = 0
        while off < size:
            off += os.write(fd, data[off:])
        os.fsync(fd)
        os.close(fd)
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(dfd)
        os.close(dfd)
    except OSError as e:
        failed += 1
        print("# %s: %s" % (p, errno.errorcode.get(e.errno, e.errno)), file=sys.stderr, flush=True)
        continue
    print("%s  %s" % (hashlib.sha256(data).hexdigest(), os.path.relpath(p, sys.argv[5] if len(sys.argv) > 5 else "/")), flush=True)
print("# writer: %d files, %d failed" % (i, failed), file=sys.stderr)
PYEOF
}

# 64 KiB blocks and the least RAM the daemon takes: write-back all along.
# The killed daemon's lease stays behind: a daemon of the same host whose
# owner is gone takes it over at once.
# The codec on (lz4, then AES-256-GCM): the stored lengths must survive
# the crashes with the blocks.
head -c 32 /dev/urandom >"$T/key" && chmod 600 "$T/key"
S3_TIER_EXTRA="compress = lz4
encrypt = aes-256-gcm
key_file = $T/key" s3_conf 64K 20M >"$T/c.conf"

mount_fs "$T/c.conf" || { fail "mount on s3"; tap_exit; exit 1; }
: >"$T/synced.sums"
for round in 1 2; do
	busy_writer "$MNT/busy$round" &
	bw=$!
	writer "$MNT/r$round" f 8 "$round" "$MNT" >>"$T/synced.sums" 2>"$T/writer$round.log" &
	w=$!
	sleep 1.5
	dirty=$(stat_field cache dirty)
	check "round $round: kill -9 the S3 server with $dirty blocks dirty" weed_stop -9
	sleep 2
	check "round $round: the server starts again on the same directory and port" weed_start "$T/weed"
	wait $w
	kill $bw 2>/dev/null
	wait $bw 2>/dev/null
	sed 's/^/# /' "$T/writer$round.log" | tail -3
	n=$(wc -l <"$T/synced.sums")
	check "round $round: files acknowledged through the outage ($n in all)" test "$n" -ge $((round * 3))
	check "round $round: kill -9 the daemon" crash_fs
	mount_fs "$T/c.conf" || { fail "round $round: remount at once after kill -9"; break; }
	check "round $round: the dead daemon's lease taken over" \
		test "$(grep -c "taking over the .*lease" "$T/daemon.log")" -eq "$round"
	check_survivors "$round" "$MNT/busy$round"
done
check "unmount clean" umount_fs
mount_fs "$T/c.conf" && check "after a clean remount: every acknowledged file intact" \
	sh -c "cd '$MNT' && sha256sum --quiet -c '$T/synced.sums'"
check "unmount clean (2)" umount_fs
if [ $TAP_FAILS -gt 0 ]; then
	echo "# daemon log:"
	sed 's/^/#   /' "$T/daemon.log" | tail -60
fi
tap_exit
