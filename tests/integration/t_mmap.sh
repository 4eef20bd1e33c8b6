#!/usr/bin/env bash
# Shared mmap and the page cache beside O_DIRECT: a read-only shared
# mapping (Python's mmap, as numpy.memmap and torch.load(mmap=True) use
# it) reads the file's bytes; a shared writable mapping survives msync and
# a remount; fsync of a file written only through a mapping makes those
# bytes durable (kill -9 after it, remount); a buffered reader and an
# existing mapping see what an O_DIRECT writer wrote once its write
# returned, and an O_DIRECT reader what a buffered writer wrote; a truncate
# through one open shows in the other's reads. 1 MiB blocks, so the
# ranges cross block boundaries.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"

default_conf >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }

# py NAME CODE: run CODE with F (a file on the mount) and helpers; ok when
# it exits 0, its own message otherwise.
py() {
	local name=$1 code=$2 out
	if out=$("$PY" - "$MNT" 2>&1 <<PYEOF
import mmap, os, sys
M = sys.argv[1]
MB = 1 << 20
def pattern(n, seed):
    # bytes that differ at every offset and between seeds
    return bytes((i * 7 + seed + (i >> 12)) & 0xff for i in range(n))
def aligned(n):
    return mmap.mmap(-1, n)  # page-aligned, as O_DIRECT wants
def dread(path, off, n):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = aligned(n)
    got = os.preadv(fd, [buf], off)
    os.close(fd)
    return bytes(buf[:got])
def dwrite(path, off, data):
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    buf = aligned(len(data))
    buf[:] = data
    assert os.pwritev(fd, [buf], off) == len(data)
    os.close(fd)
def check(what, got, want):
    if got != want:
        k = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), None)
        sys.exit("%s: %d bytes, want %d; first difference at %s" % (what, len(got), len(want), k))
$code
PYEOF
	); then
		ok "$name"
	else
		echo "$out" | sed 's/^/# /'
		fail "$name"
	fi
}

py "read-only shared mapping reads the file" '
F = M + "/ro"
data = pattern(3 * MB + 123, 1)
with open(F, "wb") as f:
    f.write(data)
with open(F, "rb") as f:
    m = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
    check("whole mapping", m[:], data)
    check("across a block boundary", m[MB - 100:MB + 100], data[MB - 100:MB + 100])
    m.close()'

py "shared writable mapping, msync" '
F = M + "/rw"
with open(F, "wb") as f:
    f.truncate(3 * MB)
fd = os.open(F, os.O_RDWR)
m = mmap.mmap(fd, 3 * MB, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[MB - 4096:MB + 4096] = pattern(8192, 2)
m[2 * MB + 5:2 * MB + 1005] = pattern(1000, 3)
m.flush()
m.close()
os.close(fd)
# the daemon has them: an O_DIRECT read passes the page cache
got = dread(F, MB - 4096, 8192)
check("O_DIRECT read after msync", got, pattern(8192, 2))'

check "unmount after msync" umount_fs
if mount_fs "$T/c.conf"; then
	py "mapped bytes after remount" '
F = M + "/rw"
with open(F, "rb") as f:
    d = f.read()
want = bytearray(3 * MB)
want[MB - 4096:MB + 4096] = pattern(8192, 2)
want[2 * MB + 5:2 * MB + 1005] = pattern(1000, 3)
check("file after remount", d, bytes(want))'
else
	fail "remount after msync"
fi

# fsync (no msync) of a file changed only through a mapping: the kernel
# writes the dirty pages back before the fsync reaches the daemon.
py "fsync writes a mapping's dirty pages" '
F = M + "/fs"
with open(F, "wb") as f:
    f.truncate(2 * MB)
fd = os.open(F, os.O_RDWR)
m = mmap.mmap(fd, 2 * MB, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[100:100 + MB] = pattern(MB, 4)
os.fsync(fd)
check("O_DIRECT read after fsync", dread(F, 0, 2 * MB)[100:100 + MB], pattern(MB, 4))
m.close()
os.close(fd)'
check "kill -9 after the fsync" crash_fs
if mount_fs "$T/c.conf"; then
	py "fsynced mapped bytes after kill -9" '
with open(M + "/fs", "rb") as f:
    d = f.read()
check("file after kill -9", d[100:100 + MB], pattern(MB, 4))
check("its size", bytes([len(d) == 2 * MB]), b"\x01")'
else
	fail "remount after kill -9"
fi

py "buffered reader and mapping see an O_DIRECT write" '
F = M + "/mix"
with open(F, "wb") as f:
    f.write(pattern(2 * MB, 5))
fd = os.open(F, os.O_RDONLY)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ)
check("mapping before", m[MB - 8192:MB + 8192], pattern(2 * MB, 5)[MB - 8192:MB + 8192])
check("pread before", os.pread(fd, 16384, MB - 8192), pattern(2 * MB, 5)[MB - 8192:MB + 8192])
new = pattern(16384, 6)
dwrite(F, MB - 8192, new)
# the mapping first: a read(2) would check the attributes and drop
# every page of the file, mapped ones too, whatever the write did
check("mapping after the O_DIRECT write", m[MB - 8192:MB + 8192], new)
check("pread after the O_DIRECT write", os.pread(fd, 16384, MB - 8192), new)
m.close()
os.close(fd)'

py "O_DIRECT reader sees a buffered write" '
F = M + "/mix2"
fd = os.open(F, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, pattern(MB + 4096, 7), 0)
check("O_DIRECT read", dread(F, 0, MB + 4096), pattern(MB + 4096, 7))
os.pwrite(fd, pattern(4096, 8), MB)
check("O_DIRECT read of the rewrite", dread(F, MB, 4096), pattern(4096, 8))
os.close(fd)'

py "a truncate through another open shows in buffered reads" '
F = M + "/tr"
with open(F, "wb") as f:
    f.write(pattern(2 * MB, 9))
fd = os.open(F, os.O_RDONLY)
check("pread before", os.pread(fd, 8192, MB), pattern(2 * MB, 9)[MB:MB + 8192])
g = os.open(F, os.O_RDWR | os.O_DIRECT)
os.ftruncate(g, MB + 4096)
os.ftruncate(g, 2 * MB)
os.close(g)
check("pread after truncate down and up", os.pread(fd, 8192, MB),
      pattern(2 * MB, 9)[MB:MB + 4096] + bytes(4096))
os.close(fd)'

check "unmount" umount_fs
tap_exit
