#!/usr/bin/env bash
# Memory running out under the daemon (failalloc.so: one in 16 of its
# allocations fails, in every library it uses) while a client writes,
# fsyncs, reads back and changes names and attributes: the daemon keeps
# running and answers, requests fail with an error or succeed, and what
# succeeded is right. A read never returns wrong bytes; every file whose
# writes and fsync returned 0 reads back whole, then and after a remount;
# files written and fsync'd before are untouched. Once memory is back,
# everything works again and the unmount writes back and exits 0.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" getfattr
# ASan brings its own allocator, which the shim cannot fail.
if ldd "$TIERFS_BIN" 2>/dev/null | grep -q libasan; then
	echo "# SKIP: the daemon is built with ASan, whose allocator the shim cannot replace"
	exit 77
fi

# Small blocks, RAM and worker count: write-back, eviction and read-back
# all run.
default_conf | sed 's/^block_size = 1M/block_size = 64K\nthreads = 2/; s/^capacity = 256M/capacity = 8M/' \
	>"$T/c.conf"
grep -q '^block_size = 64K' "$T/c.conf" || fail "config edit"
export FAILALLOC_FLAG="$T/fail" FAILALLOC_COUNT="$T/failed" FAILALLOC_EVERY=64
mount_shimmed failalloc "$T/c.conf" || { fail mount; tap_exit; exit 1; }

cat >"$T/load.py" <<'PYEOF'
import errno, os, random, sys, time

mnt, want, mode = sys.argv[1], sys.argv[2], sys.argv[3]
rnd = random.Random(7)


def write_file(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        off = 0
        while off < len(data):
            off += os.write(fd, data[off:off + 262144])
        os.fsync(fd)
    finally:
        try:
            os.close(fd)
        except OSError:
            pass  # fsync returned 0: the bytes are durable all the same


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


if mode == "before":
    # Written and fsync'd with memory to spare: only read under failures.
    os.makedirs(want, exist_ok=True)
    for i in range(6):
        data = os.urandom(rnd.choice([70000, 1 << 20, 3 << 20]))
        write_file("%s/keep%d" % (mnt, i), data)
        open("%s/keep%d" % (want, i), "wb").write(data)
    sys.exit(0)

if mode == "load":
    end = time.time() + float(sys.argv[4])
    errs, bad, good, n = {}, [], [], 0
    keep = sorted(f for f in os.listdir(want) if f.startswith("keep"))
    while time.time() < end:
        n += 1
        op = n % 6
        try:
            if op in (0, 1):
                name = "w%d" % n
                data = os.urandom(rnd.choice([4096, 200000, 1 << 20, 2 << 20]))
                write_file("%s/%s" % (mnt, name), data)
                open("%s/%s" % (want, name), "wb").write(data)
                good.append(name)
            elif op == 2:
                name = rnd.choice(keep)
                if read_file("%s/%s" % (mnt, name)) != read_file("%s/%s" % (want, name)):
                    bad.append(name)
            elif op == 3 and good:
                name = rnd.choice(good)
                if read_file("%s/%s" % (mnt, name)) != read_file("%s/%s" % (want, name)):
                    bad.append(name)
            elif op == 4:
                d = "%s/d%d" % (mnt, n)
                os.mkdir(d)
                os.rename(d, d + "r")
                os.listdir(mnt)
                os.setxattr(d + "r", "user.note", b"x" * 100)
                os.getxattr(d + "r", "user.note")
            else:
                os.truncate("%s/w%d" % (mnt, n - 5), 12345) if n > 5 else None
                if "w%d" % (n - 5) in good:
                    good.remove("w%d" % (n - 5))  # no longer what was written
        except OSError as e:
            k = "%s:%s" % (("write", "write", "read", "reread", "names", "truncate")[op],
                           errno.errorcode.get(e.errno, str(e.errno)))
            errs[k] = errs.get(k, 0) + 1
    print("# %d operations, %d files written and fsync'd whole; errors: %s" %
          (n, len(good), " ".join("%s=%d" % kv for kv in sorted(errs.items())) or "none"))
    open(want + "/GOOD", "w").write("\n".join(good))
    if bad:
        print("# wrong bytes read from: " + " ".join(sorted(set(bad))))
    sys.exit(1 if bad else 0)

if mode == "verify":
    names = [f for f in os.listdir(want) if f.startswith("keep")]
    names += [l for l in open(want + "/GOOD").read().split("\n") if l]
    wrong = [f for f in names if read_file("%s/%s" % (mnt, f)) != read_file("%s/%s" % (want, f))]
    print("# %d files checked, %d wrong: %s" % (len(names), len(wrong), " ".join(wrong)))
    sys.exit(1 if wrong else 0)
PYEOF

check "files written and fsync'd with memory to spare" "$PY" "$T/load.py" "$MNT" "$T/want" before
touch "$FAILALLOC_FLAG"
check "6 s of writes, fsyncs, reads and renames with 1 in 16 allocations failing: no wrong bytes" \
	"$PY" "$T/load.py" "$MNT" "$T/want" load 6
rm -f "$FAILALLOC_FLAG"
memory_back() { grep -q ' off$' "$T/failed" 2>/dev/null; }
check "the shim stops failing allocations" wait_for memory_back
n=$(cut -d' ' -f1 "$T/failed" 2>/dev/null)
echo "# allocations failed: ${n:-?}"
check "allocations did fail (${n:-none})" test "${n:-0}" -gt 0
check "the daemon still runs" kill -0 "$TIERFS_PID"
check "memory back: every file fsync'd reads back whole" "$PY" "$T/load.py" "$MNT" "$T/want" verify
check "memory back: a new file written and read" sh -c "echo again >'$MNT/again' && grep -q again '$MNT/again'"
check "unmount clean" umount_fs
grep -E 'ENOMEM|Cannot allocate|cannot allocate' "$T/daemon.log" | sort | uniq -c | sort -rn | head -5 | sed 's/^/# /'
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
check "after remount: every file fsync'd reads back whole" "$PY" "$T/load.py" "$MNT" "$T/want" verify
check "unmount clean (2)" umount_fs
tap_exit
