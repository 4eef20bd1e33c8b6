#!/usr/bin/env bash
# A flipped byte in a slab file gives EIO, never wrong bytes: one file of one
# 1 MiB block with a known pattern is written and fsynced to tier nvme0, the
# fs unmounted, a byte of that block flipped inside every slab file
# (nvme0/slab-NNNNN.dat), and after remount reading the file fails with EIO
# (buffered and O_DIRECT), no range returns bytes other than the pattern, the
# daemon log names the tier, and an intact file on the same tier still reads.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"

default_conf >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
# pattern: "tierfs-corrupt-test-NNNNNNNN\n" lines (so the block is findable
# in a slab when the tier stores it unencoded)
"$PY" - "$MNT/victim" "$T/pattern" <<'PYEOF'
import os, sys
data = b"".join(b"tierfs-corrupt-%010d\n" % i for i in range((1 << 20) // 26 + 1))[:1 << 20]
for p in sys.argv[1:]:
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    assert os.write(fd, data) == len(data)
    os.fsync(fd)
    os.close(fd)
PYEOF
head -c $((1 << 20)) /dev/urandom >"$MNT/intact" && sync "$MNT/intact"
sha_intact=$(sha256sum <"$MNT/intact")
check "victim reads back before corruption" cmp -s "$MNT/victim" "$T/pattern"
check "unmount clean" umount_fs

slabs=$(find "$T/nvme0" -name 'slab-*.dat' -type f | sort)
if [ -n "$slabs" ]; then ok "slab files exist in nvme0 ($(echo $slabs | wc -w))"; else fail "no slab-NNNNN.dat in $T/nvme0"; ls -laR "$T/nvme0" | sed 's/^/# /'; fi
# flip: where the pattern is found, a byte inside it; otherwise (encoded
# tier) one byte in every 4 KiB of the first MiB
"$PY" - $slabs <<'PYEOF' | sed 's/^/# /'
import os, sys
needle = b"tierfs-corrupt-0000000100\n"
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDWR)
    head = os.pread(fd, 64 << 20, 0)
    i = head.find(needle)
    offs = [i + 5] if i >= 0 else list(range(100, min(len(head), 1 << 20), 4096))
    for o in offs:
        b = os.pread(fd, 1, o)
        os.pwrite(fd, bytes([b[0] ^ 0x5A]), o)
    os.fsync(fd)
    os.close(fd)
    print("%s: flipped %d byte(s)%s" % (os.path.basename(p), len(offs), " at %d (pattern found)" % offs[0] if i >= 0 else " (pattern not found: blind)"))
PYEOF

mount_fs "$T/c.conf" || { fail "remount"; tap_exit; exit 1; }
# read in 4 KiB pieces, buffered and O_DIRECT: each piece either EIO or the
# pattern's bytes; at least one EIO
"$PY" - "$MNT/victim" "$T/pattern" <<'PYEOF'
import errno, mmap, os, sys
want = open(sys.argv[2], "rb").read()
fails = 0
for direct in (0, os.O_DIRECT):
    fd = os.open(sys.argv[1], os.O_RDONLY | direct)
    buf = mmap.mmap(-1, 4096)
    eio = wrong = 0
    for off in range(0, len(want), 4096):
        try:
            n = os.preadv(fd, [buf], off)
            if bytes(buf[:n]) != want[off:off + n]:
                wrong += 1
        except OSError as e:
            if e.errno != errno.EIO:
                print("# unexpected %s at %d" % (errno.errorcode[e.errno], off))
                wrong += 1
            eio += 1
    os.close(fd)
    name = "O_DIRECT" if direct else "buffered"
    if wrong == 0 and eio > 0:
        print("# %s read OK: EIO (%d of 256 pieces), no wrong bytes" % (name, eio))
    else:
        print("# %s read BAD: %d pieces with wrong bytes or errno, %d EIO" % (name, wrong, eio))
        fails += 1
sys.exit(1 if fails else 0)
PYEOF
rc=$?
[ $rc -eq 0 ] && ok "corrupted block: EIO and never wrong bytes" || fail "corrupted block: wrong bytes or no EIO"
if cat "$MNT/victim" >/dev/null 2>"$T/cat.err"; then fail "cat of the corrupted file succeeded"; else
	grep -q 'Input/output error' "$T/cat.err" && ok "cat reports Input/output error" || fail "cat error: $(cat "$T/cat.err")"
fi
grep -q nvme0 "$T/daemon.log" && ok "daemon log names the tier" || fail "daemon log does not name tier nvme0"
grep -iE 'checksum|corrupt|mismatch' "$T/daemon.log" | head -3 | sed 's/^/# log: /'
[ "$(sha256sum <"$MNT/intact")" = "$sha_intact" ] && ok "the intact file still reads correctly" || fail "intact file damaged"
check "unmount clean" umount_fs
tap_exit
