#!/usr/bin/env bash
# learn_max_cycle = auto: the learner grows with the data, so that a step
# over more blocks than its first size holds is still learned; a remount
# sizes it for the data at once; a fixed size that the data outgrows is
# said in the log at mount. 4 KiB blocks make 30,000 blocks of 117 MiB
# (a step of about 75,000 accesses, more than auto's first 65,536).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
NF=6 MB=20 # 6 files of 20 MiB: 30720 blocks

default_conf | sed 's/^block_size = 1M$/block_size = 4K/' >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
check "auto starts at 65536" test "$(stat_field order max_cycle)" = 65536
for i in $(seq $NF); do
	head -c $((MB << 20)) /dev/urandom >"$T/src$i"
	cp "$T/src$i" "$MNT/f$i"
done
# the learner checks its size every 4096 accesses: one more pass is plenty
for i in $(seq $NF); do cat "$MNT/f$i" >/dev/null; done
# 30720 blocks, 76800 accesses: 131072 (the copies in RAM are not counted).
# The planner thread grows it off the cache's lock: up to 10 s for that.
for _ in $(seq 100); do
	[ "$(stat_field order max_cycle)" = 131072 ] && break
	sleep 0.1
done
mc=$(stat_field order max_cycle)
check "grown for 30720 blocks ($mc)" test "$mc" = 131072
check "the log says it grew" grep -q "order learner: grown to $mc block accesses" "$T/daemon.log"
echo "# $(grep -o 'grown to .*' "$T/daemon.log" | head -1)"
# The same reads, step after step: a cycle of 30720 accesses.
for pass in 1 2 3 4; do
	for i in $(seq $NF); do dd if="$MNT/f$i" of=/dev/null bs=1M iflag=direct status=none; done
done
echo "# $(grep '^order' "$MNT/.tierfs/stats" | cut -d' ' -f2-6)"
check "the step is learned at the grown size" test "$(stat_field order learned)" = yes
cyc=$(stat_field order cycle)
check "its cycle is the 30720 blocks read ($cyc)" test "$cyc" -ge 30000 -a "$cyc" -le 31500
check "unmount" umount_fs

: >"$T/daemon.log"
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
check "a remount sizes it for the data at once" test "$(stat_field order max_cycle)" = 131072
ok=1
for i in $(seq $NF); do cmp -s "$T/src$i" "$MNT/f$i" || ok=0; done
check "the files read back" test $ok = 1
check "unmount (2)" umount_fs

sed 's/^stripe = nvme0$/stripe = nvme0\nlearn_max_cycle = 4096/' "$T/c.conf" >"$T/fixed.conf"
: >"$T/daemon.log"
mount_fs "$T/fixed.conf" || { fail "mount (fixed)"; tap_exit; exit 1; }
check "a fixed size stays" test "$(stat_field order max_cycle)" = 4096
check "the log names the size that would hold the step" \
	grep -q "more than the learner holds (4096, learn_max_cycle).*learn_max_cycle = 7[0-9]* in \[expert\] would hold it" "$T/daemon.log"
check "unmount (3)" umount_fs
tap_exit
