#!/usr/bin/env bash
# The page cache under concurrent opens: writers of 1 MiB unaligned buffered
# pwrites (one also writing O_DIRECT between them) read every write back
# while cat loops open and read the same files; a read-back with old bytes
# fails. A drop of the cache while a write-through write is on its way
# lets a reader cache the old bytes: a race, so this runs for a bounded
# time and may pass by luck where the cache is wrong, never fail where it
# is right. Then deterministic checks that what changes behind the page
# cache (O_TRUNC through another open, fallocate zero and punch, an
# O_DIRECT write) shows through a descriptor that has the pages cached.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" cat

cat >"$T/writer.py" <<'PYEOF'
import hashlib, mmap, os, random, sys, time
path, k, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
SIZE = 2 << 20
rng = random.Random(k)
fd = os.open(path, os.O_RDWR)
dfd = os.open(path, os.O_RDWR | os.O_DIRECT) if k == 0 else -1
end = time.monotonic() + secs
r = bad = 0
while time.monotonic() < end:
    r += 1
    if dfd >= 0 and r % 2 == 0:
        off = rng.randrange(0, SIZE - 65536) // 4096 * 4096
        buf = mmap.mmap(-1, 65536)
        buf[:] = hashlib.sha256(b"d%d" % r).digest() * 2048
        assert os.pwritev(dfd, [buf], off) == 65536
        if os.pread(fd, 65536, off) != bytes(buf):
            print("# writer %d round %d: buffered read after O_DIRECT write at %d" % (k, r, off))
            bad += 1
        continue
    n = 1 << 20
    off = rng.randrange(0, SIZE - n)
    data = (hashlib.sha256(b"%d-%d" % (k, r)).digest() * (n // 32))[:n]
    assert os.pwrite(fd, data, off) == n
    got = os.pread(fd, n, off)
    if got != data:
        idx = [i for i in range(0, n, 4096) if got[i:i + 4096] != data[i:i + 4096]]
        print("# writer %d round %d: read back at %d: %d pages old, from file offset %d"
              % (k, r, off, len(idx), off + idx[0]))
        bad += 1
print("# writer %d: %d rounds, %d bad" % (k, r, bad))
sys.exit(1 if bad else 0)
PYEOF

cat >"$T/coherent.py" <<'PYEOF'
import ctypes, mmap, os, sys
d = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE = 1, 2, 16
p = d + "/coh"
with open(p, "wb") as f:
    f.write(b"a" * (1 << 20))
r = os.open(p, os.O_RDONLY)
assert os.pread(r, 1 << 20, 0) == b"a" * (1 << 20)  # cached now
# O_TRUNC through another open, then new bytes
w = os.open(p, os.O_WRONLY | os.O_TRUNC)
assert os.write(w, b"b" * 5000) == 5000
os.close(w)
assert os.pread(r, 1 << 20, 0) == b"b" * 5000, "O_TRUNC through another open"
# fallocate zero range and punch hole through another open
with open(p, "wb") as f:
    f.write(b"c" * (1 << 20))
assert os.pread(r, 1 << 20, 0) == b"c" * (1 << 20)
w = os.open(p, os.O_RDWR)
if libc.fallocate(w, FALLOC_FL_ZERO_RANGE, 8192, 8192) != 0:
    print("# zero range: %s" % os.strerror(ctypes.get_errno()))
    sys.exit(1)
got = os.pread(r, 1 << 20, 0)
assert got == b"c" * 8192 + bytes(8192) + b"c" * ((1 << 20) - 16384), "zero range"
if libc.fallocate(w, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 65536, 4096) != 0:
    print("# punch hole: %s" % os.strerror(ctypes.get_errno()))
    sys.exit(1)
got = os.pread(r, 1 << 20, 0)
assert got[65536:69632] == bytes(4096) and got[69632:] == b"c" * ((1 << 20) - 69632), "punch hole"
os.close(w)
# an O_DIRECT write, seen through the cached descriptor and a mapping
m = mmap.mmap(r, 1 << 20, prot=mmap.PROT_READ)
dfd = os.open(p, os.O_WRONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
buf[:] = b"d" * 4096
assert os.pwritev(dfd, [buf], 4096) == 4096
os.close(dfd)
assert os.pread(r, 4096, 4096) == b"d" * 4096, "O_DIRECT write, buffered read"
assert m[4096:8192] == b"d" * 4096, "O_DIRECT write, mapping"
m.close()
os.close(r)
PYEOF

default_conf >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
SECS=${PAGERACE_SECS:-20}
for k in 0 1 2; do truncate -s $((2 << 20)) "$MNT/w$k"; done
for c in 1 2 3; do
	( while [ ! -e "$T/stop" ]; do cat "$MNT"/w? >/dev/null || exit 1; done ) &
	rds+=($!)
done
pids=()
for k in 0 1 2; do
	"$PY" "$T/writer.py" "$MNT/w$k" $k "$SECS" >"$T/w$k.out" 2>&1 &
	pids+=($!)
done
for k in 0 1 2; do
	if wait "${pids[$k]}"; then ok "writer $k: every read-back had its bytes"; else
		fail "writer $k read back old bytes"
	fi
	tail -5 "$T/w$k.out"
done
touch "$T/stop"
rdok=0
for p in "${rds[@]}"; do wait "$p" || rdok=1; done
check "readers saw no errors" [ $rdok -eq 0 ]
check "changes behind the page cache show through cached pages" "$PY" "$T/coherent.py" "$MNT"
check "unmount clean" umount_fs
tap_exit
