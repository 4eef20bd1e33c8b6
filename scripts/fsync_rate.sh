#!/usr/bin/env bash
# scripts/fsync_rate.sh — concurrent fsync rate through a tierfs mount, the
# case of many ranks closing or checkpointing files at once (group commit of
# tier syncs). Each of PROCS processes rewrites 1 MiB of its own file and
# fsyncs it, N times; prints fsyncs per second for each tierfs binary
# given, in rounds that alternate between them (the disk here is noisy).
#
#   scripts/fsync_rate.sh [TIERFS_BIN...]      default: build/tierfs
#
# Environment: FSYNC_PROCS [16], FSYNC_N [60], FSYNC_ROUNDS [3],
# FSYNC_DIR (the posix tier's parent directory, on the disk) [/var/tmp].
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(build/tierfs)
procs=${FSYNC_PROCS:-16} n=${FSYNC_N:-60} rounds=${FSYNC_ROUNDS:-3}
work=$(mktemp -d /tmp/tierfs-fsync.XXXXXX)
tier=$(mktemp -d "${FSYNC_DIR:-/var/tmp}/tierfs-fsync-tier.XXXXXX")
trap 'fusermount3 -u "$work/mnt" 2>/dev/null || true; rm -rf "$work" "$tier"' EXIT

cat >"$work/w.py" <<'PYEOF'
import os, sys, time, multiprocessing as mp
mnt, nproc, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
buf = os.urandom(1 << 20)
def w(k):
    fd = os.open(f"{mnt}/f{k}", os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(n):
        os.pwrite(fd, buf, (i % 16) << 20)
        os.fsync(fd)
    os.close(fd)
t = time.time()
ps = [mp.Process(target=w, args=(k,)) for k in range(nproc)]
for p in ps: p.start()
for p in ps:
    p.join()
    if p.exitcode: sys.exit(p.exitcode)
print(f"{nproc * n / (time.time() - t):.0f}")
PYEOF

for r in $(seq 1 "$rounds"); do
	for bin in "${bins[@]}"; do
		rm -rf "$work/meta" "${tier:?}"/* && mkdir -p "$work/meta" "$work/mnt"
		cat >"$work/c.conf" <<CONF
[mount]
metadata = $work/meta
[tier ram]
type = ram
capacity = 256M
[tier disk]
type = posix
path = $tier
capacity = 2G
bandwidth = 1G/s
CONF
		"$bin" "$work/c.conf" "$work/mnt" -f 2>>"$work/log" &
		pid=$!
		for _ in $(seq 1 100); do mountpoint -q "$work/mnt" && break; sleep 0.05; done
		mountpoint -q "$work/mnt" || { cat "$work/log" >&2; exit 1; }
		rate=$(python3 "$work/w.py" "$work/mnt" "$procs" "$n")
		fusermount3 -u "$work/mnt"
		wait "$pid"
		echo "round $r: $bin: $procs procs x $n fsyncs: $rate fsync/s"
	done
done
