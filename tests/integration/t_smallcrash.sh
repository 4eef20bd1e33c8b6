#!/usr/bin/env bash
# kill -9 at 16 KiB blocks with a RAM tier of 8 MiB, so reclaim writes
# back all the time, while the kernel's caches are dropped (the inode sweep
# frees maps of files the writers closed) and the learned order runs; then
# remount. Random writers open, pwrite (512-byte units that name file,
# generation and unit), fsync, truncate, rename and unlink their own files,
# some matching a persistent = no rule; a step-like writer rewrites its
# files in order and fsyncs each; tierfs-replay runs DeepSpeed steps.
# Every acknowledged step is logged outside the mount. After each kill: a file whose last change was fsync'd holds
# exactly that; any other holds, per unit, its fsync'd data or a later
# write of its own (zeros only where it had none), never another file's or
# garbage; acknowledged renames and unlinks hold; persistent = no files are
# gone; reads during the run matched; what survived one kill is unchanged
# after the next. Three rounds, each on top of the last.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" sha256sum timeout

# writer.py DIR LOG WID SEED rand|step: log lines, each written before
# the operation or after its acknowledgement:
#   C fid name | W fid u0 n gen | T fid size | F fid (fsync returned 0)
#   R fid new | U fid | D fid (directory fsync after C, R or U returned 0)
#   X ... a read that did not match what was written
cat >"$T/writer.py" <<'PYEOF'
import os, random, struct, sys
d, logp, wid, seed, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
U = 512
rng = random.Random(seed)
log = open(logp, "a", buffering=1)
os.makedirs(d, exist_ok=True)
if not os.path.ismount(os.path.dirname(d)):
    sys.exit("writer: %s is not on the mount" % d)
unit = lambda fid, g, u: struct.pack("<IIQ", fid, g, u) * (U // 16)
files, nextfid, gen = {}, [wid * 100000 + seed * 1000], [seed * 100000]

class F:
    fd = None

def dsync():
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)

def create():
    nextfid[0] += 1
    f = F()
    f.fid, f.nren, f.cur, f.size = nextfid[0], 0, {}, 0
    grad = mode == "rand" and rng.random() < 0.15
    f.name = ("w%d_f%d_gradient_0.tensor.swp" if grad else "w%d_f%d.0") % (wid, f.fid)
    log.write("C %d %s\n" % (f.fid, f.name))
    f.fd = os.open(os.path.join(d, f.name), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.fsync(f.fd)
    log.write("F %d\n" % f.fid)
    dsync()
    log.write("D %d\n" % f.fid)
    files[f.fid] = f
    if mode == "rand":
        os.close(f.fd)
        f.fd = None

def pwrite(f, u0, n):
    gen[0] += 1
    log.write("W %d %d %d %d\n" % (f.fid, u0, n, gen[0]))
    os.pwrite(f.fd, b"".join(unit(f.fid, gen[0], u) for u in range(u0, u0 + n)), u0 * U)
    for u in range(u0, u0 + n):
        f.cur[u] = gen[0]
    f.size = max(f.size, (u0 + n) * U)

def fsync(f):
    os.fsync(f.fd)
    log.write("F %d\n" % f.fid)

def readcheck(f, off, n):
    got = os.pread(f.fd, n, off)
    if len(got) < n:
        return  # the daemon died under a split read
    for i in range(0, n, U):
        g = f.cur.get((off + i) // U)
        want = unit(f.fid, g, (off + i) // U) if g is not None else b"\0" * U
        if got[i:i + U] != want:
            log.write("X fid %d %s off %d got %s want gen %s\n" % (
                f.fid, f.name, off + i, struct.unpack("<IIQ", got[i:i + 16]), g))
            return

try:
    for _ in range(6):
        create()
    while mode == "step":
        for f in files.values():
            readcheck(f, 0, f.size)
            for u0 in range(0, 4096, 128):
                pwrite(f, u0, 128)
            fsync(f)
    while True:
        f = files[rng.choice(list(files))]
        r = rng.random()
        if r < 0.95:
            f.fd = os.open(os.path.join(d, f.name), os.O_RDWR)
        if r < 0.55:
            pwrite(f, rng.randrange(4096), rng.choice([1, 3, 8, 32, 64, 200]))
        elif r < 0.75:
            fsync(f)
        elif r < 0.85:
            if f.size:
                off = rng.randrange(f.size) // U * U
                readcheck(f, off, min(f.size - off, rng.randrange(1, 200) * U))
        elif r < 0.9:
            size = rng.randrange(4096) * U
            log.write("T %d %d\n" % (f.fid, size))
            os.ftruncate(f.fd, size)
            f.cur = {u: g for u, g in f.cur.items() if u * U < size}
            f.size = size
        elif r < 0.95:
            if not f.name.endswith(".swp"):
                f.nren += 1
                new = "%s.%d" % (f.name.rsplit(".", 1)[0], f.nren)
                log.write("R %d %s\n" % (f.fid, new))
                os.rename(os.path.join(d, f.name), os.path.join(d, new))
                f.name = new
                dsync()
                log.write("D %d\n" % f.fid)
        else:
            log.write("U %d\n" % f.fid)
            os.unlink(os.path.join(d, f.name))
            dsync()
            log.write("D %d\n" % f.fid)
            del files[f.fid]
            create()
        if f.fd is not None:
            os.close(f.fd)
            f.fd = None
except OSError:
    pass  # the mount died
PYEOF

# check.py DIR LOG BLOCK_SIZE: DIR after the remount against LOG.
cat >"$T/check.py" <<'PYEOF'
import os, struct, sys
d, logp, bs = sys.argv[1], sys.argv[2], int(sys.argv[3])
U = 512
errs, st = [], {}

class S:
    pass

for line in open(logp):
    p = line.split()
    if not line.endswith("\n") or not p:
        continue  # cut by the kill
    k = p[0]
    if k == "X":
        errs.append("read during the run: " + line.strip())
        continue
    fid = int(p[1])
    if k == "C":
        s = st[fid] = S()
        s.name, s.names, s.cur, s.size = p[2], {p[2]}, {}, 0
        s.synced, s.post, s.pending, s.gone = ({}, 0), [], "C", False
        continue
    s = st[fid]
    if k == "W":
        u0, n, g = int(p[2]), int(p[3]), int(p[4])
        for u in range(u0, u0 + n):
            s.cur[u] = g
        s.size = max(s.size, (u0 + n) * U)
        s.post.append(("W", u0, n, g, s.size))
    elif k == "T":
        s.size = int(p[2])
        s.cur = {u: g for u, g in s.cur.items() if u * U < s.size}
        s.post.append(("T", s.size))
    elif k == "F":
        s.synced, s.post = (dict(s.cur), s.size), []
    elif k == "R":
        s.name = p[2]
        s.names.add(p[2])
        s.pending = "R"
    elif k == "U":
        s.names.add(None)
        s.pending = "U"
    elif k == "D":
        s.gone = s.pending == "U"
        s.names = {None} if s.gone else {s.name}
        s.pending = None

present = set(os.listdir(d))
claimed = set()
for fid, s in st.items():
    found = [n for n in s.names if n in present]
    claimed.update(found)
    if "_gradient_" in s.name:
        errs += ["persistent = no file survived: %s" % n for n in found]
        continue
    if len(found) > 1:
        errs.append("fid %d under two names: %s" % (fid, found))
    if not found:
        if None not in s.names and s.pending != "C":
            errs.append("fid %d lost (%s)" % (fid, s.name))
        continue
    name = found[0]
    try:
        data = open(os.path.join(d, name), "rb").read()
    except OSError as e:
        errs.append("%s: %s" % (name, e))
        continue
    scur, ssize = s.synced
    sizes = {ssize} | {e[-1] for e in s.post}
    # a write under way at the kill may have grown the size block by block
    if len(data) not in sizes and not any(
            e[0] == "W" and e[1] * U < len(data) < e[4] and len(data) % bs == 0 for e in s.post):
        errs.append("%s: size %d, fsync'd %d, %d changes after" % (name, len(data), ssize, len(s.post)))
        continue
    later = {}
    for e in s.post:
        if e[0] == "W":
            for u in range(e[1], e[1] + e[2]):
                later.setdefault(u, set()).add(e[3])
    cut = any(e[0] == "T" for e in s.post)
    for off in range(0, len(data), U):
        u = off // U
        c = data[off:off + U].ljust(U, b"\0")
        if c == b"\0" * U:
            got = None
        else:
            f2, got, u2 = struct.unpack("<IIQ", c[:16])
            if c != struct.pack("<IIQ", f2, got, u2) * (U // 16) or f2 != fid or u2 != u:
                errs.append("%s offset %d: not its own data (fid %d unit %d)" % (name, off, f2, u2))
                break
        ok = {scur.get(u) if off < ssize else None}
        if s.post:
            ok |= later.get(u, set())
            if cut or off >= ssize or u in later:
                ok.add(None)
        if got not in ok:
            errs.append("%s offset %d: generation %s, want one of %s" % (name, off, got, sorted(ok, key=str)))
            break
errs += ["unexpected file %s" % n for n in present - claimed]
for e in errs[:20]:
    print("#", e)
sys.exit(1 if errs else 0)
PYEOF

REPLAY=$(dirname "$TIERFS_BIN")/tierfs-replay
[ -x "$REPLAY" ] || { echo "# SKIP: $REPLAY not built"; exit 77; }
default_conf | sed 's/^block_size = .*/block_size = 16K\nthreads = 4/; s/^capacity = 256M/capacity = 8M/' >"$T/c.conf"
cat >>"$T/c.conf" <<'CONF'
learn = yes

[rule gradients]
match = *_gradient_*.tensor.swp
tier = ram
persistent = no
CONF
drop=0
[ -w /proc/sys/vm/drop_caches ] && drop=1
[ $drop = 1 ] || echo "# not root: the kernel's caches are not dropped"
round=0
# DELAY:WHO. The last round runs the step writer alone, which the access
# order learns: reclaim then writes back blocks the order keeps.
for spec in 0.7:all 1.4:all 4:step; do
	delay=${spec%:*} who=${spec#*:}
	round=$((round + 1))
	mount_fs "$T/c.conf" || { fail "round $round: mount"; break; }
	[ $round -gt 1 ] && check "round $round: what survived earlier kills is unchanged" \
		sh -c "cd '$MNT' && sha256sum --quiet -c '$T/frozen.sums'"
	pids="" writers=3
	if [ "$who" = all ]; then
		writers="1 2 3"
		for w in 1 2; do
			timeout 60 "$PY" "$T/writer.py" "$MNT/r$round.w$w" "$T/r$round.w$w.log" $w $round rand &
			pids="$pids $!"
		done
		# DeepSpeed-like steps beside them.
		"$REPLAY" --dir "$MNT/replay$round" --state-size 32M --steps 1000 >/dev/null 2>&1 &
		pids="$pids $!"
	fi
	timeout 60 "$PY" "$T/writer.py" "$MNT/r$round.w3" "$T/r$round.w3.log" 3 $round step &
	pids="$pids $!"
	dropper=
	if [ $drop = 1 ]; then
		(while sleep 0.1; do echo 2 >/proc/sys/vm/drop_caches; done) &
		dropper=$!
	fi
	# The delay counts from when every writer has its first file: a loaded
	# machine may take longer than that to start them.
	for _ in $(seq 600); do
		started=0
		for w in $writers; do grep -qs '^D ' "$T/r$round.w$w.log" && started=$((started + 1)); done
		[ "$started" -eq "$(echo $writers | wc -w)" ] && break
		sleep 0.05
	done
	sleep "$delay"
	echo "# $(grep -o 'flushes_reclaim=[0-9]*' "$MNT/.tierfs/stats"), $(grep -o 'learned=[a-z]*' "$MNT/.tierfs/stats")"
	check "round $round: kill -9 ${delay} s in" crash_fs
	[ -n "$dropper" ] && { kill "$dropper"; wait "$dropper" 2>/dev/null; }
	# shellcheck disable=SC2086
	wait $pids # each stops at its first call on the dead mount
	check "round $round: remount" mount_fs "$T/c.conf" || break
	for w in $writers; do
		check "round $round: writer $w: every file as acknowledged" \
			"$PY" "$T/check.py" "$MNT/r$round.w$w" "$T/r$round.w$w.log" 16384
	done
	(cd "$MNT" && find . -path ./.tierfs -prune -o -type f -print0 | sort -z | xargs -0 -r sha256sum) >"$T/frozen.sums"
	echo "# round $round: $(wc -l <"$T/frozen.sums") files survived"
	check "round $round: unmount clean" umount_fs
done
tap_exit
