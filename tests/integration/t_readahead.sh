#!/usr/bin/env bash
# Sequential read-ahead with no learned order goes on once RAM is full: a
# cold read of a file four times the RAM tier reads ahead far more blocks
# than RAM holds (the blocks already read make room), and every byte read
# is right, also while another file is being read at random meanwhile.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" dd sha256sum

default_conf | sed 's/^capacity = 256M/capacity = 64M/' >"$T/r.conf"
mount_fs "$T/r.conf" || { fail mount; tap_exit; exit 1; }
"$PY" -c "
import os, random
r = random.Random(7)
with open('$MNT/big', 'wb') as f:
    for i in range(256):
        f.write(r.randbytes(1 << 20))
with open('$MNT/other', 'wb') as f:
    f.write(r.randbytes(16 << 20))
"
want=$(sha256sum <"$MNT/big")
want_other=$(sha256sum <"$MNT/other")
check "unmount clean" umount_fs
mount_fs "$T/r.conf" || { fail remount; tap_exit; exit 1; }

stat_of() { grep -oE " $1=[0-9]+" "$MNT/.tierfs/stats" | head -1 | cut -d= -f2; }
pf0=$(stat_of prefetches)
# Random 4 KiB reads of another file meanwhile, which must stay right too.
"$PY" - "$MNT/other" "$T/other.ok" <<'PYEOF' &
import os, random, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
ref = open(sys.argv[1], "rb").read()
r = random.Random(1)
for _ in range(2000):
    off = r.randrange(0, len(ref) - 4096)
    assert os.pread(fd, 4096, off) == ref[off:off + 4096]
open(sys.argv[2], "w").close()
PYEOF
rnd=$!
got=$(dd if="$MNT/big" bs=1M iflag=direct status=none | sha256sum)
wait $rnd
check "cold sequential read of 256 MiB through 64 MiB of RAM: right bytes" test "$got" = "$want"
check "random reads of another file meanwhile: right bytes" test -e "$T/other.ok"
pf=$(($(stat_of prefetches) - pf0))
check "read ahead went on once RAM was full: $pf blocks read ahead (RAM holds 64)" test "$pf" -gt 128
check "the other file unchanged" test "$(sha256sum <"$MNT/other")" = "$want_other"
check "unmount clean (2)" umount_fs
tap_exit
