#!/usr/bin/env bash
# The inode sweep (cache.c inode_sweep) under load: several processes write,
# read, truncate, rename, link, unlink, pin and fsync their own files while
# the kernel's caches are dropped every ~0.2 s (every dropped inode is a
# FORGET, and the next commit may give back its map or the inode itself).
# Each process checks what it reads, st_size, st_blocks and its pins as it
# goes against its own shadow copy; at the end every file is checked
# again, and once more after a remount. The daemon log must hold no
# sanitizer report. SWEEP_SECS (default 12), SWEEP_PROCS (4).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" setfattr
SECS=${SWEEP_SECS:-12}
PROCS=${SWEEP_PROCS:-4}

# 16K blocks, a RAM tier just above the cache's minimum: blocks are evicted
# all the time and the sweep finds idle inodes after every commit.
# SWEEP_TWO=1 (default): two striped tiers (pins move blocks between them);
# SWEEP_SOC=1: sync_on_close; SWEEP_LEARN=yes: the order learner on.
if [ "${SWEEP_TWO:-1}" = 1 ]; then
	two_tier_conf 16K | sed 's/^block_size = 16K/block_size = 16K\nthreads = 4/; s/^capacity = 256M/capacity = 6M/' >"$T/c.conf"
	PINS=nvme0,nvme1,ram,
else
	default_conf | sed 's/^block_size = .*/block_size = 16K\nthreads = 4/; s/^capacity = 256M/capacity = 6M/' >"$T/c.conf"
	PINS=nvme0,ram,,nvme0
fi
[ "${SWEEP_SOC:-0}" = 1 ] && sed -i 's/^threads = 4$/threads = 4\nsync_on_close = yes/' "$T/c.conf"
sed -i "s/^stripe = \(.*\)$/stripe = \1\nlearn = ${SWEEP_LEARN:-no}/" "$T/c.conf"

cat >"$T/worker.py" <<'PYEOF'
import errno, json, os, random, sys, time
d, k, secs, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
BS = 16384
rng = random.Random(1000 + k)
objs = {}    # id -> {"data": bytearray, "alloc": set of blocks, "pin": str, "names": set}
names = {}   # name -> id
nid = 0
errs = []

def err(msg):
    errs.append(msg)
    print("worker %d: %s" % (k, msg), file=sys.stderr, flush=True)

def path(n):
    return "%s/%s" % (d, n)

def pat(n):
    b = rng.randbytes(min(n, 4096)) if n else b""
    return (b * (n // max(len(b), 1) + 1))[:n]

def new_file():
    global nid
    nid += 1
    n = "w%d_%d" % (k, nid)
    fd = os.open(path(n), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
    os.close(fd)
    objs[nid] = {"data": bytearray(), "alloc": set(), "pin": "", "names": {n}}
    names[n] = nid

def expect_blocks(o):
    return len(o["alloc"]) * (BS // 512)

def check(n, where):
    o = objs[names[n]]
    try:
        st = os.stat(path(n))
    except OSError as e:
        err("%s: stat %s: %s" % (where, n, e)); return
    if st.st_size != len(o["data"]):
        err("%s: %s size %d, want %d" % (where, n, st.st_size, len(o["data"])))
    if st.st_nlink != len(o["names"]):
        err("%s: %s nlink %d, want %d" % (where, n, st.st_nlink, len(o["names"])))
    if st.st_blocks != expect_blocks(o):
        err("%s: %s st_blocks %d, want %d" % (where, n, st.st_blocks, expect_blocks(o)))
    try:
        pin = os.getxattr(path(n), "user.tierfs.pin").decode()
    except OSError as e:
        pin = "" if e.errno == errno.ENODATA else "?%s" % e
    if pin != o["pin"]:
        err("%s: %s pin %r, want %r" % (where, n, pin, o["pin"]))

def verify(n, where):
    o = objs[names[n]]
    with open(path(n), "rb") as f:
        got = f.read()
    if got != bytes(o["data"]):
        i = next((i for i in range(min(len(got), len(o["data"]))) if got[i] != o["data"][i]), min(len(got), len(o["data"])))
        err("%s: %s content differs at %d (len %d, want %d)" % (where, n, i, len(got), len(o["data"])))

def op_write(n):
    o = objs[names[n]]
    size = len(o["data"])
    off = rng.randrange(0, size + 3 * BS)
    ln = rng.choice([1, 100, 5000, BS, BS + 3, 3 * BS, 7 * BS + 11])
    if off + ln > 24 * BS:
        off = max(0, 24 * BS - ln)
    data = pat(ln)
    fd = os.open(path(n), os.O_RDWR)
    try:
        assert os.pwrite(fd, data, off) == ln
        if rng.random() < 0.5:
            got = os.pread(fd, ln, off)
            if got != data:
                err("write %s: read back at %d len %d differs" % (n, off, ln))
        if rng.random() < 0.2:
            os.fsync(fd)
    finally:
        os.close(fd)
    if off + ln > size:
        o["data"].extend(b"\0" * (off + ln - size))
    o["data"][off:off + ln] = data
    for b in range(off // BS, (off + ln - 1) // BS + 1):
        o["alloc"].add(b)

def op_truncate(n):
    o = objs[names[n]]
    old = len(o["data"])
    new = rng.choice([0, rng.randrange(0, old + 1) if old else 0, old + rng.randrange(0, 3 * BS)])
    os.truncate(path(n), new)
    if new < old:
        del o["data"][new:]
        keep = (new + BS - 1) // BS
        o["alloc"] = {b for b in o["alloc"] if b < keep}
        if new % BS:
            o["alloc"].add(new // BS)  # the cut block's tail is zeroed: written
    else:
        o["data"].extend(b"\0" * (new - old))

def op_rename(n):
    i = names[n]
    if rng.random() < 0.3 and len(names) > 2:
        tgt = rng.choice(sorted(names))
        if names[tgt] == i:
            return
    else:
        global nid
        nid += 1
        tgt = "w%d_r%d" % (k, nid)
    os.rename(path(n), path(tgt))
    if tgt in names:
        v = objs[names[tgt]]
        v["names"].discard(tgt)
        if not v["names"]:
            del objs[names[tgt]]
    del names[n]
    objs[i]["names"].discard(n)
    objs[i]["names"].add(tgt)
    names[tgt] = i

def op_link(n):
    global nid
    nid += 1
    tgt = "w%d_l%d" % (k, nid)
    os.link(path(n), path(tgt))
    i = names[n]
    objs[i]["names"].add(tgt)
    names[tgt] = i

def op_unlink(n):
    i = names[n]
    if len(objs) < 3 and len(objs[i]["names"]) == 1:
        return
    os.unlink(path(n))
    del names[n]
    objs[i]["names"].discard(n)
    if not objs[i]["names"]:
        del objs[i]

def op_pin(n):
    o = objs[names[n]]
    t = rng.choice(os.environ["PINS"].split(","))
    try:
        os.setxattr(path(n), "user.tierfs.pin", t.encode())
    except OSError as e:
        err("pin %s to %r: %s" % (n, t, e)); return
    o["pin"] = t

def op_fsync(n):
    fd = os.open(path(n), os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:
        err("fsync %s: %s" % (n, e))
    finally:
        os.close(fd)

ops = [(op_write, 40), (op_truncate, 8), (op_rename, 6), (op_link, 4), (op_unlink, 4),
       (op_pin, 5), (op_fsync, 6), (lambda n: check(n, "check"), 15), (lambda n: verify(n, "read"), 12)]
table = [f for f, w in ops for _ in range(w)]
for _ in range(6):
    new_file()
end = time.time() + secs
nops = 0
while time.time() < end and len(errs) < 20:
    if rng.random() < 0.03 or not names:
        new_file()
    n = rng.choice(sorted(names))
    f = rng.choice(table)
    try:
        f(n)
    except OSError as e:
        err("%s %s: %s" % (getattr(f, "__name__", "op"), n, e))
    nops += 1
    if rng.random() < 0.02:
        time.sleep(0.05)  # let the kernel forget, the flusher commit
for n in sorted(names):
    check(n, "end")
    verify(n, "end")
json.dump({n: {"sha": __import__("hashlib").sha256(bytes(objs[i]["data"])).hexdigest(),
               "size": len(objs[i]["data"]), "blocks": expect_blocks(objs[i]),
               "nlink": len(objs[i]["names"]), "pin": objs[i]["pin"]}
           for n, i in names.items()}, open(out, "w"))
print("worker %d: %d ops, %d files, %d errors" % (k, nops, len(objs), len(errs)), flush=True)
sys.exit(1 if errs else 0)
PYEOF

cat >"$T/final.py" <<'PYEOF'
import errno, glob, hashlib, json, os, sys
d, outs, where = sys.argv[1], sys.argv[2:-1], sys.argv[-1]
bad = 0
for o in outs:
    for n, w in json.load(open(o)).items():
        p = "%s/%s" % (d, n)
        st = os.stat(p)
        got = (hashlib.sha256(open(p, "rb").read()).hexdigest(), st.st_size, st.st_blocks, st.st_nlink)
        try:
            pin = os.getxattr(p, "user.tierfs.pin").decode()
        except OSError as e:
            pin = "" if e.errno == errno.ENODATA else "?"
        want = (w["sha"], w["size"], w["blocks"], w["nlink"])
        if got != want or pin != w["pin"]:
            bad += 1
            print("%s: %s: got size %d blocks %d nlink %d pin %r%s, want size %d blocks %d nlink %d pin %r"
                  % (where, n, got[1], got[2], got[3], pin, "" if got[0] == want[0] else " (content differs)",
                     want[1], want[2], want[3], w["pin"]), file=sys.stderr)
print("%s: %d files differ" % (where, bad))
sys.exit(1 if bad else 0)
PYEOF

mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
mkdir "$MNT/d"
( end=$((SECONDS + SECS + 2)); while [ $SECONDS -lt $end ]; do echo 3 >/proc/sys/vm/drop_caches; sleep 0.2; done ) &
DROP=$!
( end=$((SECONDS + SECS)); while [ $SECONDS -lt $end ]; do ls -l "$MNT/d" >/dev/null 2>&1; du -s "$MNT/d" >/dev/null 2>&1; sleep 0.1; done ) &
LS=$!
# What the sweep does meanwhile: the table and map counts, every 5 s.
( end=$((SECONDS + SECS)); while [ $SECONDS -lt $end ]; do sleep 5; grep '^inodes' "$MNT/.tierfs/stats" | sed 's/^/# during: /'; done ) &
SAMPLE=$!
export PINS
pids=()
for k in $(seq 1 "$PROCS"); do
	$PY "$T/worker.py" "$MNT/d" "$k" "$SECS" "$T/out$k.json" &
	pids+=($!)
done
wrc=0
for p in "${pids[@]}"; do wait "$p" || wrc=1; done
wait $LS
wait $SAMPLE
wait $DROP
check "$PROCS workers for ${SECS}s under drop_caches: no wrong byte, size, st_blocks, nlink or pin" test $wrc = 0
grep '^inodes' "$MNT/.tierfs/stats" | sed 's/^/# /'
outs=()
for k in $(seq 1 "$PROCS"); do outs+=("$T/out$k.json"); done
echo 3 >/proc/sys/vm/drop_caches
sleep 2.5
echo 3 >/proc/sys/vm/drop_caches
check "every file right after the caches were dropped" $PY "$T/final.py" "$MNT/d" "${outs[@]}" dropped
check "unmount (no sanitizer report)" umount_fs
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
check "every file right after a remount" $PY "$T/final.py" "$MNT/d" "${outs[@]}" remount
check "unmount (2)" umount_fs
if grep -qE 'Sanitizer|runtime error' "$T/daemon.log"; then
	fail "sanitizer report in the daemon log"
	grep -B2 -A30 -E 'Sanitizer|runtime error' "$T/daemon.log" | head -80 >&2
fi
tap_exit
