#!/usr/bin/env bash
# kill -9 after truncations that were not fsync'd, then remount: the file
# is the old one or the new one, never the new size over old blocks; and
# when it grows again, the region past the size it had reads as zeros.
# A rename persisted the in-memory size of an O_TRUNC without the deletion
# of the blocks it cut; an ftruncate committed the new size while the
# zeroed tail of the cut block was still only in RAM.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"

M=$((1 << 20))
cat >"$T/before.py" <<'PYEOF'
import os, sys
case, p = sys.argv[1], sys.argv[2]
fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"\xAA" * (3 << 20))
os.fsync(fd)
os.close(fd)
if case in ("otrunc", "otrunc_write"):
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    if case == "otrunc_write":
        os.write(fd, b"B" * 100)
    os.close(fd)
    os.rename(p, p + ".moved")
else:  # cut block 1 in the middle
    fd = os.open(p, os.O_RDWR)
    os.ftruncate(fd, (1 << 20) + (1 << 19))
    os.close(fd)
PYEOF
cat >"$T/after.py" <<'PYEOF'
import os, sys
case, p = sys.argv[1], sys.argv[2]
if case.startswith("otrunc"):
    p += ".moved"
size = os.stat(p).st_size
data = open(p, "rb").read()
ok = {"otrunc": [b"", b"\xAA" * (3 << 20)],
      "otrunc_write": [b"", b"B" * 100, b"\xAA" * (3 << 20)],
      "cut": [b"\xAA" * ((1 << 20) + (1 << 19)), b"\xAA" * (3 << 20)],
      "cut_write": [b"\xAA" * ((1 << 20) + (1 << 19)), b"\xAA" * (3 << 20)]}[case]
if data not in ok:
    sys.exit("after remount: %d bytes, %d of them 0xAA: neither the old nor the new file"
             % (len(data), data.count(b"\xAA")))
# Grow it again: what lies past the size it had must read as zeros.
if case == "cut_write":
    fd = os.open(p, os.O_WRONLY)
    os.pwrite(fd, b"C", (5 << 20) // 2)
    os.close(fd)
else:
    os.truncate(p, 3 << 20)
data = open(p, "rb").read()
tail = data[size:(5 << 20) // 2] if case == "cut_write" else data[size:]
bad = len(tail) - tail.count(0)
if bad:
    sys.exit("grown from %d bytes: %d old bytes came back past the old size" % (size, bad))
print("# size %d after remount, %d bytes past it read as zeros" % (size, len(tail)))
PYEOF

default_conf >"$T/c.conf"
for c in otrunc otrunc_write cut cut_write; do
	mount_fs "$T/c.conf" || { fail "mount ($c)"; continue; }
	check "$c: write, fsync, truncate" "$PY" "$T/before.py" "$c" "$MNT/$c"
	check "$c: kill -9" crash_fs
	mount_fs "$T/c.conf" || { fail "remount ($c)"; continue; }
	check "$c: after remount the old or the new file; grown, zeros past its size" \
		"$PY" "$T/after.py" "$c" "$MNT/$c"
	check "$c: unmount clean" umount_fs
done
tap_exit
