#!/usr/bin/env bash
# scripts/s3_figures.sh — the s3 tier's throughput against a client nobody
# here wrote, on the same server at the same concurrency (a benchmark, not a
# test: it prints figures and asserts nothing).
#
#   tierfs: fio, 1 MiB O_DIRECT, libaio at iodepth QD, through a mount whose
#           only persistent tier is s3 (queue_depth = QD) under a small RAM
#           tier: a sequential write of SIZE ended by fsync (so the time
#           covers the write-back to the store), then, after a remount (RAM
#           empty), a read of it back;
#   boto3:  python3-boto3, a thread pool of QD threads, SIZE/1 MiB PUTs of
#           1 MiB objects, then GETs of them.
# Both against one SeaweedFS (tests/s3/lib.sh) on 127.0.0.1, its data on
# S3FIG_DIR (tmpfs by default, so that neither side waits on a disk).
# Each side runs S3FIG_REPEAT times, alternating; the best run of each is
# reported (the host is shared), with every run's figure beside it.
#
# Environment: S3FIG_SIZE [1G], S3FIG_QD [16], S3FIG_RAM (the RAM tier)
# [256M], S3FIG_REPEAT [2], S3FIG_DIR [/dev/shm/tierfs-s3fig],
# S3FIG_OPTS (more lines for the s3 tier, e.g. "compress = lz4"),
# TIERFS_BIN [build/tierfs]. Writes build/s3fig/figures.json.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
TIERFS=${TIERFS_BIN:-$BUILD/tierfs}
SIZE=${S3FIG_SIZE:-1G}
QD=${S3FIG_QD:-16}
RAM=${S3FIG_RAM:-256M}
REPEAT=${S3FIG_REPEAT:-2}
W=${S3FIG_DIR:-/dev/shm/tierfs-s3fig}
OUT=$BUILD/s3fig

say() { printf '[s3fig %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "error: $*"; exit 1; }
SIZE_B=$(numfmt --from=iec "$SIZE") || die "S3FIG_SIZE=$SIZE is not a size"
[ -x "$TIERFS" ] || die "$TIERFS not built (make all)"
command -v fio >/dev/null || die "fio not installed (make deps)"

T=$W
MNT=$W/mnt
TIERFS_PID=
. "$ROOT/tests/s3/lib.sh"
cleanup() {
	if mountpoint -q "$MNT" 2>/dev/null; then fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT"; fi
	[ -n "$TIERFS_PID" ] && wait "$TIERFS_PID" 2>/dev/null
	weed_stop
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
rm -rf "$W"
mkdir -p "$W" "$MNT" "$OUT"
require_weed # exits 77 with the reason when SeaweedFS cannot be had
weed_start "$W/weed" || die "SeaweedFS did not start"
say "SeaweedFS at $S3_ENDPOINT (data on $W), $SIZE in 1 MiB pieces at concurrency $QD, $REPEAT runs each"

conf() { # PREFIX
	cat <<EOF
[mount]
metadata = $W/meta-$1
block_size = 1M

[tier ram]
type = ram
capacity = $RAM

[tier s3]
type = s3
endpoint = $S3_ENDPOINT
bucket = $S3_BUCKET
prefix = $1/
region = $S3_REGION
queue_depth = $QD
capacity = 64G
${S3FIG_OPTS:-}

[policy]
stripe = s3
EOF
}
mount_it() { # CONF
	"$TIERFS" "$1" "$MNT" -f 2>>"$W/daemon.log" &
	TIERFS_PID=$!
	local i
	for i in $(seq 600); do
		mountpoint -q "$MNT" && return 0
		kill -0 "$TIERFS_PID" 2>/dev/null || break
		sleep 0.05
	done
	tail -5 "$W/daemon.log" >&2
	die "mount failed"
}
umount_it() {
	fusermount3 -u "$MNT" && wait "$TIERFS_PID"
	local rc=$?
	TIERFS_PID=
	return $rc
}
now() { date +%s.%N; }
gbps() { python3 -c "import sys; print('%.3f' % ($SIZE_B / (float(sys.argv[2]) - float(sys.argv[1])) / 1e9))" "$1" "$2"; }

tierfs_run() { # N: prints "WRITE_GBps READ_GBps"
	local c=$W/c$1.conf t0 t1 t2 t3
	conf "tierfs$1" >"$c"
	mount_it "$c"
	t0=$(now)
	fio --name=w --filename="$MNT/f" --rw=write --bs=1M --size="$SIZE_B" --direct=1 --ioengine=libaio \
		--iodepth="$QD" --end_fsync=1 --output="$W/fio-w$1.txt" >/dev/null || die "fio write failed"
	t1=$(now)
	grep '^tier s3 ' "$MNT/.tierfs/stats" >"$OUT/stats-write-$1.txt"
	umount_it || die "unmount failed"
	mount_it "$c"
	t2=$(now)
	fio --name=r --filename="$MNT/f" --rw=read --bs=1M --size="$SIZE_B" --direct=1 --ioengine=libaio \
		--iodepth="$QD" --output="$W/fio-r$1.txt" >/dev/null || die "fio read failed"
	t3=$(now)
	grep '^tier s3 ' "$MNT/.tierfs/stats" >"$OUT/stats-read-$1.txt"
	umount_it || die "unmount failed"
	echo "$(gbps "$t0" "$t1") $(gbps "$t2" "$t3")"
}

boto3_run() { # N: prints "WRITE_GBps READ_GBps"
	python3 - "$1" "$SIZE_B" "$QD" <<'PYEOF'
import os, sys, time
from concurrent.futures import ThreadPoolExecutor
import boto3
from botocore.config import Config
n, size, qd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name=os.environ["S3_REGION"],
                 config=Config(max_pool_connections=qd, retries={"max_attempts": 3}))
bucket, count = os.environ.get("S3_BUCKET", "tierfs"), size >> 20
block = os.urandom(1 << 20)
keys = ["boto%s/%06d" % (n, i) for i in range(count)]
def put(k):
    c.put_object(Bucket=bucket, Key=k, Body=block)
def get(k):
    assert len(c.get_object(Bucket=bucket, Key=k)["Body"].read()) == 1 << 20
with ThreadPoolExecutor(qd) as ex:
    t0 = time.time(); list(ex.map(put, keys)); t1 = time.time()
    t2 = time.time(); list(ex.map(get, keys)); t3 = time.time()
print("%.3f %.3f" % (size / (t1 - t0) / 1e9, size / (t3 - t2) / 1e9))
PYEOF
}

export S3_BUCKET
: >"$OUT/runs.txt"
for n in $(seq "$REPEAT"); do
	r=$(tierfs_run "$n") || exit 1
	say "tierfs run $n: write $(echo $r | cut -d' ' -f1) GB/s, read $(echo $r | cut -d' ' -f2) GB/s"
	echo "tierfs $r" >>"$OUT/runs.txt"
	r=$(boto3_run "$n") || die "boto3 run failed"
	say "boto3 run $n: write $(echo $r | cut -d' ' -f1) GB/s, read $(echo $r | cut -d' ' -f2) GB/s"
	echo "boto3 $r" >>"$OUT/runs.txt"
done
python3 - "$OUT" "$SIZE" "$QD" "$RAM" "${S3FIG_OPTS:-}" <<'PYEOF'
import json, sys
out, size, qd, ram, opts = sys.argv[1:6]
runs = {"tierfs": [], "boto3": []}
for line in open(out + "/runs.txt"):
    who, w, r = line.split()
    runs[who].append((float(w), float(r)))
best = {k: (max(x[0] for x in v), max(x[1] for x in v)) for k, v in runs.items()}
fig = {"size": size, "qd": qd, "ram": ram, "s3_opts": opts, "runs": runs,
       "write_GBps": {k: v[0] for k, v in best.items()}, "read_GBps": {k: v[1] for k, v in best.items()},
       "write_ratio": best["tierfs"][0] / best["boto3"][0], "read_ratio": best["tierfs"][1] / best["boto3"][1]}
json.dump(fig, open(out + "/figures.json", "w"), indent=1)
print("s3 tier vs boto3 (%s in 1 MiB pieces, concurrency %s, SeaweedFS on 127.0.0.1; best of %d runs)"
      % (size, qd, len(runs["tierfs"])))
print("%-6s %14s %14s %7s" % ("", "tierfs GB/s", "boto3 GB/s", "ratio"))
for i, what in enumerate(("write", "read")):
    print("%-6s %14.3f %14.3f %6.0f%%  (runs: tierfs %s; boto3 %s)" % (
        what, best["tierfs"][i], best["boto3"][i], 100 * best["tierfs"][i] / best["boto3"][i],
        " ".join("%.3f" % x[i] for x in runs["tierfs"]), " ".join("%.3f" % x[i] for x in runs["boto3"])))
PYEOF
say "figures: $OUT/figures.json"
