#!/usr/bin/env bash
# Whole-block writes whose data the FUSE loop receives straight into a RAM
# slot, which the block then takes (fs/loop.c): under load from writers and
# readers of the same blocks, with a RAM tier small enough that blocks are
# evicted and read back, every 4 KiB page a reader gets must be one that was
# written to that very page, never bytes of another request that landed in
# a reused slot (also at C speed: landrace.c). Then the final content, also
# after remount; the same workload with blocks smaller than a request,
# where nothing is taken; and that again with most blocks out of RAM.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs landrace
require_cmd "$PY"

cat >"$T/load.py" <<'PYEOF'
import mmap, os, random, struct, sys
d, role, k, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
MB, PG, FILES = 1 << 20, 4096, 3
BLOCKS = int(sys.argv[5]) if len(sys.argv) > 5 else 32  # the first BLOCKS of each file

def page(f, b, p, gen):
    # Each page names its file, block, page and the generation written.
    return struct.pack("<4I", f, b, p, gen) * (PG // 16)

def block(f, b, gen):
    return b"".join(page(f, b, p, gen) for p in range(MB // PG))

NREC = MB // 16
PIDX = bytes(p for p in range(MB // PG) for _ in range(PG // 16))
ZERO = bytes(NREC)

def check(buf, f, b, where):
    # Every 16-byte record must name this file, block and page. A read
    # that races a write of the same block may mix generations, which is
    # allowed; bytes from any other block never are.
    if buf[0::16] != bytes([f]) * NREC or buf[4::16] != bytes([b]) * NREC \
            or buf[8::16] != PIDX or any(buf[i::16] != ZERO for i in (1, 2, 3, 5, 6, 7, 9, 10, 11)):
        for i in range(NREC):
            ff, bb, pp, gen = struct.unpack_from("<4I", buf, i * 16)
            if (ff, bb, pp) != (f, b, i * 16 // PG):
                break
        sys.exit("%s: file %d block %d page %d holds file %d block %d page %d"
                 % (where, f, b, i * 16 // PG, ff, bb, pp))

rng = random.Random(k)
buf = mmap.mmap(-1, MB)
fds = [os.open("%s/f%d" % (d, f), os.O_RDWR | os.O_DIRECT) for f in range(FILES)]
if role == "i":
    # The first generation of every block, so that readers never see zeros.
    for f in range(FILES):
        for b in range(BLOCKS):
            buf[:] = block(f, b, 0)
            assert os.pwritev(fds[f], [buf], b * MB) == MB
    sys.exit(0)
for r in range(rounds):
    f, b = rng.randrange(FILES), rng.randrange(BLOCKS)
    if role == "w":
        # Writer k alone writes blocks b % 4 == k: no two writes of one
        # block at once, so each block ends whole from one write.
        b = (b & ~3) | (k & 3)
        buf[:] = block(f, b, k << 16 | r)
        assert os.pwritev(fds[f], [buf], b * MB) == MB
    else:
        assert os.preadv(fds[f], [buf], b * MB) == MB
        check(buf, f, b, "reader %d round %d" % (k, r))
PYEOF

cat >"$T/final.py" <<'PYEOF'
import struct, sys
d = sys.argv[1]
MB, PG = 1 << 20, 4096
for f in range(3):
    data = open("%s/f%d" % (d, f), "rb").read()
    if len(data) != 32 * MB:
        sys.exit("f%d: size %d" % (f, len(data)))
    for b in range(32):
        first = struct.unpack_from("<4I", data, b * MB)
        for p in range(MB // PG):
            if struct.unpack_from("<4I", data, b * MB + p * PG) != (f, b, p, first[3]):
                sys.exit("f%d block %d page %d: torn or foreign" % (f, b, p))
PYEOF

# run_load [BLOCKS] [ROUNDS]: 4 writers and 4 readers at once over the first
# BLOCKS blocks of each file; 0 when every read verified.
run_load() {
	local i pids=() rc=0
	for i in 0 1 2 3; do
		"$PY" "$T/load.py" "$MNT/d" w "$i" "${2:-100}" "${1:-32}" 2>"$T/w$i.err" &
		pids+=($!)
		"$PY" "$T/load.py" "$MNT/d" r "$i" "${2:-100}" "${1:-32}" 2>"$T/r$i.err" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	[ $rc -eq 0 ] || cat "$T"/[wr]?.err | sed 's/^/# /'
	return $rc
}

# init_files: 3 files of 32 blocks, every block written once.
init_files() {
	local f
	for f in 0 1 2; do
		dd if=/dev/zero of="$MNT/d/f$f" bs=1M count=32 status=none || return 1
	done
	"$PY" "$T/load.py" "$MNT/d" i 0 0
}

stat_of() { grep -oE "$1=[0-9]+" "$MNT/.tierfs/stats" | head -1 | cut -d= -f2; }

# 64 MiB of RAM for 96 MiB of files: blocks are evicted and read back
default_conf | sed 's/^capacity = 256M/capacity = 64M/' >"$T/l.conf"
mount_fs "$T/l.conf" || { fail mount; tap_exit; exit 1; }
mkdir -p "$MNT/d"
# The workers' slots are the daemon's own: users see the capacity they set.
ram_cap() { getfattr --only-values -n user.tierfs.tiers "$MNT" | awk '$1 == "ram" { print $4 }'; }
check "user.tierfs.tiers: ram capacity as configured ($(ram_cap))" test "$(ram_cap)" = $((64 << 20))
check ".tierfs/stats: ram capacity_blocks=64" grep -qE '^tier ram .* capacity_blocks=64 ' "$MNT/.tierfs/stats"
check "3 files of 32 blocks, written" init_files
check "4 writers and 4 readers of whole blocks: every page read is its own" run_load
# Few blocks: a write often meets a reader of its block, whose reply must
# keep the buffer it copies from.
check "the same on 4 blocks a file" run_load 4 300
# The same race at C speed: readers of 4 hot blocks while those are
# rewritten and 32 cold blocks flood the workers with whole-block writes.
mkdir -p "$MNT/race"
check "C clients, 3 s: every record of every hot read is its own" "$TESTBIN/landrace" "$MNT/race" 3
adopted=$(stat_of writes_adopted)
check "whole-block writes took their landing slot (writes_adopted=$adopted)" test "${adopted:-0}" -gt 0
check "final content: every block whole and its own" "$PY" "$T/final.py" "$MNT/d"
# A 1 MiB write not on a block boundary lands in the slot too, but spans two
# blocks: it must be copied, not taken.
unaligned_write() {
	"$PY" - "$MNT/d/f0" <<'PYEOF'
import mmap, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
MB = 1 << 20
buf = mmap.mmap(-1, MB)
buf[:] = bytes(range(256)) * 4096
assert os.pwritev(fd, [buf], 4096) == MB
d = open(sys.argv[1], "rb").read()
assert d[4096:4096 + MB] == bytes(range(256)) * 4096, "the write reads back"
# Page 0 of block 0 and the pages after the write in block 1 are untouched.
assert struct.unpack_from("<3I", d, 0) == (0, 0, 0), "block 0 page 0"
assert struct.unpack_from("<3I", d, MB + 4096) == (0, 1, 1), "block 1 page 1"
PYEOF
}
check "an unaligned 1 MiB write reads back and leaves the rest of both blocks" unaligned_write
sha_before=$(sha256sum "$MNT"/d/f? | sha256sum)
check "unmount clean" umount_fs
mount_fs "$T/l.conf" || { fail remount; tap_exit; exit 1; }
check "same content after remount" test "$(sha256sum "$MNT"/d/f? | sha256sum)" = "$sha_before"
check "unmount clean (2)" umount_fs

# Blocks smaller than a request: the workers read into buffers of their own.
rm -rf "$T/meta" "$T/nvme0"
default_conf | sed -e 's/^capacity = 256M/capacity = 64M/' -e 's/^block_size = 1M/block_size = 256K/' \
	>"$T/s.conf"
mount_fs "$T/s.conf" || { fail "mount (256K blocks)"; tap_exit; exit 1; }
mkdir -p "$MNT/d"
check "256 KiB blocks: 3 files of 32 blocks, written" init_files
check "256 KiB blocks: the same load, every page read is its own" run_load
check "256 KiB blocks: nothing taken (writes_adopted=$(stat_of writes_adopted))" \
	test "$(stat_of writes_adopted)" = 0
check "256 KiB blocks: final content" "$PY" "$T/final.py" "$MNT/d"
check "unmount clean (3)" umount_fs

# Most blocks out of RAM: nearly every whole-block write makes a new entry
# whose slot holds another block's bytes until the write's copy is in; a
# reader of that block must wait for the copy, not reply with them.
default_conf | sed -e 's/^capacity = 256M/capacity = 28M/' -e 's/^block_size = 1M/block_size = 256K/' \
	>"$T/c.conf"
mount_fs "$T/c.conf" || { fail "mount (28 MiB of RAM)"; tap_exit; exit 1; }
check "28 MiB of RAM for 96 MiB: reads of blocks being written anew are their own" run_load 32 300
check "28 MiB of RAM: final content" "$PY" "$T/final.py" "$MNT/d"
mkdir -p "$MNT/race"
check "28 MiB of RAM, C clients, 24 hot blocks: every record of every read is its own" \
	"$TESTBIN/landrace" "$MNT/race" 3 24
check "unmount clean (4)" umount_fs
tap_exit
