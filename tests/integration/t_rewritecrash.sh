#!/usr/bin/env bash
# kill -9 while a block that was already fsync'd is rewritten and fsync'd
# again, then remount: the file reads without I/O errors and every page
# holds what its last acknowledged write put there, or a later write. A
# write-back over the block's only durable copy, whose new checksum was
# not committed yet, would make the whole block unreadable (EIO), the
# parts fsync'd long ago included.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"

cat >"$T/writer.py" <<'PYEOF'
import os, random, struct, sys
# Pages of 4 blocks rewritten at random, each write fsync'd; prints
# "page gen" once fsync returned.
path, seed = sys.argv[1], int(sys.argv[2])
PG, NPG = 4096, 4 * 256
fd = os.open(path, os.O_RDWR)
rng = random.Random(seed)
gen = seed << 20
while True:
    p = rng.randrange(NPG)
    gen += 1
    os.pwrite(fd, struct.pack("<2I", p, gen) * (PG // 8), p * PG)
    os.fsync(fd)
    print(p, gen, flush=True)
PYEOF

cat >"$T/check.py" <<'PYEOF'
import struct, sys
path, acked = sys.argv[1], sys.argv[2:]
PG, NPG = 4096, 4 * 256
want = {}
for f in acked:
    for line in open(f):
        parts = line.split()
        if len(parts) == 2:
            want[int(parts[0])] = int(parts[1])
data = open(path, "rb").read()  # an I/O error raises here
if len(data) != NPG * PG:
    sys.exit("size %d" % len(data))
for p in range(NPG):
    recs = set(struct.iter_unpack("<2I", data[p * PG:(p + 1) * PG]))
    if len(recs) != 1:
        sys.exit("page %d torn: %d different records" % (p, len(recs)))
    (pp, gen), = recs
    if pp != p or gen < want.get(p, 0):
        sys.exit("page %d holds page %d gen %d, acknowledged gen %d" % (p, pp, gen, want.get(p, 0)))
print("# %d pages checked, %d acknowledged writes" % (NPG, sum(1 for f in acked for _ in open(f))))
PYEOF

default_conf >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
init() {
	"$PY" - "$MNT/f" <<'PYEOF'
import os, struct, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for p in range(4 * 256):
    os.write(fd, struct.pack("<2I", p, 0) * 512)
os.fsync(fd)
PYEOF
}
check "4 blocks written and fsync'd" init
for round in 1 2 3 4 5 6; do
	"$PY" "$T/writer.py" "$MNT/f" "$round" >"$T/acked$round" 2>/dev/null &
	w=$!
	sleep "0.$((RANDOM % 4 + 2))"
	check "round $round: kill -9 while rewriting" crash_fs
	wait $w 2>/dev/null
	check "round $round: remount" mount_fs "$T/c.conf"
	check "round $round: every page readable, none older than acknowledged" \
		"$PY" "$T/check.py" "$MNT/f" "$T"/acked?
done
check "unmount" umount_fs
tap_exit
