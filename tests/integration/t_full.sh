#!/usr/bin/env bash
# A full tier spills to the next; ENOSPC only when all are full; nothing
# already written is lost. Tiers small (8M) and big (16M) both in the stripe:
# 20 MiB in files succeeds (spilled over both), then writing 10 MiB more fails
# with ENOSPC (at write, fsync or close), every earlier file is intact (also
# after remount), and deleting a file makes room again.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" getfattr sha256sum

mkdir -p "$T/small" "$T/big" "$T/meta"
cat >"$T/c.conf" <<CONF
[mount]
metadata = $T/meta
block_size = 1M

[tier ram]
type = ram
capacity = 64M

[tier small]
type = posix
path = $T/small
capacity = 8M
weight = 1

[tier big]
type = posix
path = $T/big
capacity = 16M
weight = 1

[policy]
stripe = small, big
CONF

# fill FILE MIB SEED: write MIB MiB in 1 MiB writes and fsync; prints the
# errno name of the first failure (or "ok") and the bytes written before it
fill() {
	"$PY" - "$@" <<'PYEOF'
import errno, hashlib, os, sys
p, mib, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3]
done = 0
try:
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for i in range(mib):
            chunk = hashlib.sha256(b"%s-%d" % (seed.encode(), i)).digest() * 32768
            n = os.write(fd, chunk)
            done += n
            if n != len(chunk):
                raise OSError(errno.ENOSPC, "short write")
        os.fsync(fd)
    finally:
        os.close(fd)
    print("ok", done)
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno), done)
PYEOF
}

mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
mkdir "$MNT/d"
r=""
for i in 1 2 3 4 5; do r="$r $(fill "$MNT/d/f$i" 4 "s$i" | cut -d' ' -f1)"; done
[ "$r" = " ok ok ok ok ok" ] && ok "20 MiB (5 x 4 MiB) written and fsynced on 8M + 16M tiers" || fail "writing 20 MiB: $r"
mkdir "$T/copy" && cp "$MNT"/d/f* "$T/copy/"
pl=$(cat "$MNT"/d/f* >/dev/null; for f in "$MNT"/d/f*; do getfattr --only-values -n user.tierfs.placement "$f" 2>/dev/null; echo; done)
echo "$pl" | sed 's/^/# placement: /'
echo "$pl" | grep -q 'big=' && echo "$pl" | grep -q 'small=' && ok "data spread over both tiers" || fail "placement does not show both tiers"
used_small=$(echo "$pl" | grep -o 'small=[0-9]*' | awk -F= '{s += $2} END {print s + 0}')
[ "$used_small" -gt 0 ] && [ "$used_small" -le $((8 << 20)) ] && ok "small tier holds > 0 and <= 8 MiB ($used_small)" ||
	fail "small tier holds $used_small bytes (want 1..8 MiB)"

out=$(fill "$MNT/d/overflow" 10 over)
echo "# overflow write: $out"
[ "${out%% *}" = ENOSPC ] && ok "writing 10 MiB more fails with ENOSPC" || fail "overflow gave '$out', want ENOSPC"
diff -r "$T/copy" "$MNT/d" -x overflow >/dev/null && ok "earlier files intact after ENOSPC" || fail "earlier files damaged by ENOSPC"
# overwriting an allocated block needs no new space
check "overwrite inside an existing file still works when full" \
	dd if=/dev/zero of="$MNT/d/f1" bs=4k seek=3 count=1 conv=notrunc,fsync status=none
dd if=/dev/zero of="$T/copy/f1" bs=4k seek=3 count=1 conv=notrunc status=none
rm -f "$MNT/d/overflow"
check "unmount clean" umount_fs
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
diff -r "$T/copy" "$MNT/d" >/dev/null && ok "earlier files intact after remount" || fail "files damaged after remount"
getfattr --only-values -n user.tierfs.tiers "$MNT" 2>/dev/null | sed 's/^/# tiers before delete: /'
rm -f "$MNT/d/f5" "$MNT/d/f4"
getfattr --only-values -n user.tierfs.tiers "$MNT" 2>/dev/null | sed 's/^/# tiers after delete: /'
out=$(fill "$MNT/d/again" 6 again)
[ "${out%% *}" = ok ] && ok "after deleting 8 MiB, a 6 MiB file fits again" || fail "after deleting: $out"

# A file's limit (2^24 blocks): a write, truncate or fallocate beyond it is
# EFBIG, never a block map as large as the offset (a 4 KiB write at 2^46
# once made the daemon allocate 2 GiB for it).
cat >"$T/big.py" <<'PYEOF'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
lim = (1 << 24) * (1 << 20)
def err(f, *a):
    try:
        f(*a)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
got = [err(os.pwrite, fd, b"x" * 4096, 1 << 46), err(os.ftruncate, fd, lim + 1),
       err(os.posix_fallocate, fd, lim, 4096), err(os.pwrite, fd, b"y" * 4096, lim - 4096)]
print(" ".join(got))
sys.exit(got != ["EFBIG", "EFBIG", "EFBIG", "ok"])
PYEOF
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$TIERFS_PID/status"; }
rss0=$(rss)
check "beyond 2^24 blocks: write, truncate, fallocate EFBIG; the last block writable" \
	"$PY" "$T/big.py" "$MNT/d/big"
rss1=$(rss)
echo "# daemon RSS ${rss0} KiB before, ${rss1} KiB after a write at the last block"
# A sparse block map: the write costs a chunk of records, not 2^24 of them
# (512 MiB, which the daemon once allocated here).
check "the write at the last block grew the daemon by < 64 MiB" \
	test $((rss1 - rss0)) -lt 65536
# Reading holes allocates no map: 1 byte every 2 GiB of a 16 TiB hole
# (8192 chunks of records, 128 MiB, before).
truncate -s 16T "$MNT/d/hole"
rss0=$(rss)
check "reads of a 16 TiB hole return zeros" "$PY" -c "
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
sys.exit(any(os.pread(fd, 1, i << 31) != b'\\0' for i in range(8192)))" "$MNT/d/hole"
rss1=$(rss)
echo "# daemon RSS ${rss0} KiB before, ${rss1} KiB after reading the hole"
check "reading the hole grew the daemon by < 64 MiB" test $((rss1 - rss0)) -lt 65536
rm -f "$MNT/d/hole"
check "its block list names the one block" \
	sh -c "getfattr --only-values -n user.tierfs.blocks '$MNT/d/big' | grep -qx '[a-z0-9]*:16777215'"
check "the mount still works" cmp -s "$T/copy/f1" "$MNT/d/f1"
rm -f "$MNT/d/big"
check "unmount clean (2)" umount_fs
tap_exit
