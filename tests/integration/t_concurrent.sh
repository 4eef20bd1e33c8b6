#!/usr/bin/env bash
# 4 processes at once, each writing and reading back its own file and its own
# region of one shared file (1 MiB pwrites straddling blocks, 4 KiB pieces,
# O_DIRECT in one of them), verifying every read; then the parent checks the
# final content of every file, also after remount. No errors allowed.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"

cat >"$T/worker.py" <<'PYEOF'
import hashlib, mmap, os, random, sys
d, k, rounds, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
REG = 6 << 20           # each worker's region of the shared file
BASE = k * REG + 12345  # regions not block aligned: neighbours share blocks
rng = random.Random(k)

def pat(r, n, salt):
    h = hashlib.sha256(b"%d-%d-%s" % (k, r, salt)).digest()
    return (h * (n // 32 + 1))[:n]

def pread_all(fd, n, off):
    out = bytearray()
    while len(out) < n:
        b = os.pread(fd, n - len(out), off + len(out))
        if not b:
            break
        out += b
    return bytes(out)

own = os.open("%s/own%d" % (d, k), os.O_RDWR | os.O_CREAT, 0o644)
shared = os.open("%s/shared" % d, os.O_RDWR)
dfd = os.open("%s/own%d" % (d, k), os.O_RDWR | os.O_DIRECT) if k == 3 else -1
own_img = bytearray(4 << 20)
os.ftruncate(own, len(own_img))
sh_img = bytearray(REG)
for r in range(rounds):
    # own file: random pwrites, read back
    off = rng.randrange(0, len(own_img) - 1)
    n = min(rng.choice([1, 100, 4096, 65536, 1 << 20, (1 << 20) + 7]), len(own_img) - off)
    data = pat(r, n, b"own")
    if dfd >= 0 and r % 2 == 0:
        # O_DIRECT: aligned offset and length, aligned buffer
        off, n = (off // 4096) * 4096, max(4096, (n // 4096) * 4096)
        n = min(n, len(own_img) - off)
        buf = mmap.mmap(-1, n)
        data = pat(r, n, b"own")
        buf[:] = data
        assert os.pwritev(dfd, [buf], off) == n
        rb = mmap.mmap(-1, n)
        assert os.preadv(dfd, [rb], off) == n
        assert bytes(rb) == data, "O_DIRECT read back (round %d)" % r
    else:
        assert os.pwrite(own, data, off) == n
    own_img[off:off + n] = data
    got = pread_all(own, n, off)
    assert got == data, "own%d: read back at %d len %d (round %d)" % (k, off, n, r)
    # shared file, own region
    off = rng.randrange(0, REG - 1)
    n = min(rng.choice([1, 4096, 1 << 20, 2 << 20]), REG - off)
    data = pat(r, n, b"sh")
    assert os.pwrite(shared, data, BASE + off) == n
    sh_img[off:off + n] = data
    got = pread_all(shared, n, BASE + off)
    assert got == data, "shared: worker %d read back at %d len %d (round %d)" % (k, BASE + off, n, r)
    if r % 10 == 0:
        assert pread_all(own, len(own_img), 0) == bytes(own_img), "own%d: full compare (round %d)" % (k, r)
        assert pread_all(shared, REG, BASE) == bytes(sh_img), "shared: region %d full compare (round %d)" % (k, r)
        if r % 20 == 0:
            os.fsync(own)
open("%s/own%d.expect" % (mode, k), "wb").write(own_img)
open("%s/shared%d.expect" % (mode, k), "wb").write(sh_img)
PYEOF

verify_all() {
	"$PY" - "$1" "$T/exp" <<'PYEOF'
import sys
d, e = sys.argv[1], sys.argv[2]
REG = 6 << 20
bad = 0
sh = open(d + "/shared", "rb").read()
for k in range(4):
    if open("%s/own%d" % (d, k), "rb").read() != open("%s/own%d.expect" % (e, k), "rb").read():
        print("# own%d differs" % k); bad += 1
    base = k * REG + 12345
    if sh[base:base + REG] != open("%s/shared%d.expect" % (e, k), "rb").read():
        print("# shared region %d differs" % k); bad += 1
if sh[:12345] != bytes(12345):
    print("# shared head not zero"); bad += 1
if len(sh) != 4 * REG + 12345:
    print("# shared size %d" % len(sh)); bad += 1
sys.exit(1 if bad else 0)
PYEOF
}

default_conf >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
mkdir -p "$MNT/c" "$T/exp"
truncate -s $((4 * (6 << 20) + 12345)) "$MNT/c/shared"
ROUNDS=${CONC_ROUNDS:-150}
# a fifth process reads every file over and over meanwhile: reads must not fail
(
	while [ ! -e "$T/stop" ]; do
		for f in "$MNT"/c/own? "$MNT"/c/shared; do
			[ -e "$f" ] || continue
			cat "$f" >/dev/null || exit 1
		done
	done
) &
rd=$!
pids=()
for k in 0 1 2 3; do
	"$PY" "$T/worker.py" "$MNT/c" $k "$ROUNDS" "$T/exp" 2>"$T/w$k.err" &
	pids+=($!)
done
for k in 0 1 2 3; do
	if wait "${pids[$k]}"; then ok "worker $k: $ROUNDS rounds, every read verified"; else
		fail "worker $k failed"
		tail -3 "$T/w$k.err" | sed 's/^/# /'
	fi
done
touch "$T/stop"
check "concurrent reader saw no errors" wait $rd
check "final content of all files and regions" verify_all "$MNT/c"
check "unmount clean" umount_fs
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
check "final content after remount" verify_all "$MNT/c"
check "unmount clean (2)" umount_fs
tap_exit
