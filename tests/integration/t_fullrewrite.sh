#!/usr/bin/env bash
# kill -9 while blocks already on a nearly full tier are rewritten and
# written back, then remount: the file reads without I/O errors and every
# page holds what its last acknowledged write put there, or a later write.
# A rewrite goes to a new slot and the old one is freed by the next commit;
# on a tier short of free slots, a write-back over the block's durable copy
# would leave it unreadable after a crash before the commit of its new
# checksum, so the commit that frees the earlier copies' slots comes first.
# Background commits are kept out of the way (commit_interval = 600): only
# fsyncs and the tier's shortness commit.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"

cat >"$T/writer.py" <<'PYEOF'
import os, random, struct, sys
# Pages rewritten at random; every 64 writes an fsync, after which the
# writes it covered are printed as "page gen".
path, seed = sys.argv[1], int(sys.argv[2])
PG, NPG = 4096, 1024
fd = os.open(path, os.O_RDWR)
rng = random.Random(seed)
gen = seed << 20
done = []
while True:
    p = rng.randrange(NPG)
    gen += 1
    os.pwrite(fd, struct.pack("<2I", p, gen) * (PG // 8), p * PG)
    done.append((p, gen))
    if len(done) == 64:
        os.fsync(fd)
        for p, g in done:
            print(p, g)
        sys.stdout.flush()
        done = []
PYEOF

cat >"$T/check.py" <<'PYEOF'
import struct, sys
path, acked = sys.argv[1], sys.argv[2:]
PG, NPG = 4096, 1024
want = {}
for f in acked:
    for line in open(f):
        parts = line.split()
        if len(parts) == 2:
            want[int(parts[0])] = max(want.get(int(parts[0]), 0), int(parts[1]))
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

# 64 blocks of 64K in the file, 144 slots on the disk: 64 of them the
# reserve for new blocks, so 16 rewrites in a row fit beside the live
# copies before the tier runs short. RAM of 64 blocks (the least for 2 threads is 48), so that rewrites
# keep writing back.
mkdir -p "$T/nvme0" "$T/meta"
cat >"$T/c.conf" <<CONF
[mount]
metadata = $T/meta
block_size = 64K
threads = 2
commit_interval = 600

[tier ram]
type = ram
capacity = 4M

[tier nvme0]
type = posix
path = $T/nvme0
capacity = 9M

[policy]
stripe = nvme0
CONF
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
init() {
	"$PY" - "$MNT/f" <<'PYEOF'
import os, struct, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for p in range(1024):
    os.write(fd, struct.pack("<2I", p, 0) * 512)
os.fsync(fd)
PYEOF
}
check "64 blocks written and fsync'd" init
for round in 1 2 3 4; do
	"$PY" "$T/writer.py" "$MNT/f" "$round" >"$T/acked$round" 2>/dev/null &
	w=$!
	sleep "1.$((RANDOM % 5))"
	check "round $round: kill -9 while rewriting" crash_fs
	wait $w 2>/dev/null
	check "round $round: remount" mount_fs "$T/c.conf"
	check "round $round: every page readable, none older than acknowledged" \
		"$PY" "$T/check.py" "$MNT/f" "$T"/acked?
done
grep -q 'short of free slots' "$T/daemon.log" && ok "the tier ran short of slots (the case under test)" ||
	fail "the tier never ran short of slots: the test does not test its case"
check "unmount" umount_fs
tap_exit
