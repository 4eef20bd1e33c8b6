#!/usr/bin/env bash
# fallocate sets the space aside, as on ext4: once it returns, writes into
# the range never get ENOSPC, however full the tier becomes, and a remount
# (or kill -9 after the commit) keeps it. The range reads as zeros, even
# where its slots held a deleted file's bytes. PUNCH_HOLE frees the whole
# blocks of its range and zeros the rest; ZERO_RANGE zeros and sets aside.
# A range that does not fit gets ENOSPC and keeps nothing it took on the way.
# A pin moves what is set aside with the file (to RAM: gives it back).
# Mount: RAM 64 MiB, one 128 MiB posix tier, 1 MiB blocks.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd fallocate stat df cmp dd getfattr setfattr

default_conf | sed 's/^capacity = 256M/capacity = 64M/; s/^capacity = 2G/capacity = 128M/' >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
M=$((1 << 20))
avail() { local f; f=$(stat -f -c '%a * %S' "$MNT") && echo $((f)); }
blocks() { local f; f=$(stat -c '%b * %B' "$1") && echo $((f)); }
# avail_is N: df shows N bytes available (the frees of a delete show after
# its commit).
avail_is() { [ "$(avail)" = "$1" ]; }
# zeros FILE OFF LEN: LEN bytes of FILE from OFF are zeros. A pipeline, not
# cmp over <(dd ...): bash does not wait for a process substitution, and a
# dd still reading the file when the next command unmounted made that
# unmount fail with EBUSY (CI, once: the test then hung until its timeout).
zeros() { dd if="$1" bs=64K iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none | cmp -s -n "$3" - /dev/zero; }

# Fill the tier with a file's bytes and delete it: the slots fallocate gets
# next held them.
dd if=/dev/urandom of="$T/old" bs=1M count=120 status=none
check "a 120 MiB file written" cp "$T/old" "$MNT/old"
full=$(avail)
rm "$MNT/old"
check "its space comes back once the delete is committed" wait_for avail_is $((128 * M))

check "fallocate -l 100M succeeds" fallocate -l 100M "$MNT/pre"
check "... the file has its size" test "$(stat -c %s "$MNT/pre")" = $((100 * M))
check "... st_blocks counts the 100 MiB set aside (says $(blocks "$MNT/pre"))" \
	test "$(blocks "$MNT/pre")" = $((100 * M))
check "... df shows 100 MiB fewer available (says $(avail))" test "$(avail)" = $((28 * M))
check "... it reads as zeros, not the deleted file's bytes" zeros "$MNT/pre" 0 $((100 * M))
echo "# with the 120 MiB file: $full bytes available"

check_fails "another file takes the rest: ENOSPC" \
	dd if=/dev/zero of="$MNT/fill" bs=1M count=64 status=none
check "... after 28 MiB (says $(stat -c %s "$MNT/fill"))" \
	test "$(stat -c %s "$MNT/fill")" = $((28 * M))
dd if=/dev/urandom of="$T/data" bs=1M count=100 status=none
check "writing the 100 MiB into the range on the full mount succeeds, fsync too" \
	dd if="$T/data" of="$MNT/pre" bs=1M conv=notrunc,fsync status=none
check "... and reads back" cmp "$T/data" "$MNT/pre"
check "... in the same space (df: $(avail) available)" test "$(avail)" -lt "$M"

# Set aside, then remounted: the reservation is in the metadata.
rm "$MNT/fill" "$MNT/pre"
check "the space is back after deleting both" wait_for avail_is $((128 * M))
check "fallocate -l 40M" fallocate -l 40M "$MNT/r"
check "remount" remount "$T/c.conf"
check "after the remount: st_blocks still 40 MiB" test "$(blocks "$MNT/r")" = $((40 * M))
check "... df still shows it taken (says $(avail))" test "$(avail)" = $((88 * M))
check "... it reads as zeros" zeros "$MNT/r" 0 $((40 * M))
check_fails "a file filling the rest gets ENOSPC" \
	dd if=/dev/urandom of="$MNT/fill" bs=1M count=128 status=none
check "... and the 40 MiB still fit" dd if="$T/data" of="$MNT/r" bs=1M count=40 conv=notrunc,fsync status=none
check "... and read back" cmp -n $((40 * M)) "$T/data" "$MNT/r"
rm "$MNT/fill" "$MNT/r"
check "the space is back again" wait_for avail_is $((128 * M))

# kill -9 once the reservation is committed (fsync commits it): the range is
# still set aside and reads as zeros; what was written with fsync is there.
check "fallocate -l 16M and fsync" \
	sh -c "fallocate -l 16M '$MNT/k' && dd if='$T/data' of='$MNT/k' bs=1M count=4 conv=notrunc,fsync status=none"
check "kill -9" crash_fs
mount_fs "$T/c.conf" || fail "mount after kill -9"
check "after kill -9: the 4 MiB written with fsync" cmp -n $((4 * M)) "$T/data" "$MNT/k"
check "... the rest reads as zeros" zeros "$MNT/k" $((4 * M)) $((12 * M))
check "... st_blocks still 16 MiB" test "$(blocks "$MNT/k")" = $((16 * M))

# Written back in place but not yet committed, then kill -9: a commit is 60 s
# off, so the block map still says unwritten. Each block must read as the
# new bytes or as zeros, never EIO (the slot set aside has no old checksum
# to contradict the new bytes).
check "unmount" umount_fs
default_conf | sed 's/^capacity = 256M/capacity = 64M/; s/^capacity = 2G/capacity = 128M/' |
	mount_key 'flush_interval = 0.05' | mount_key 'commit_interval = 60' >"$T/slow.conf"
mount_fs "$T/slow.conf" || fail "mount with commit_interval = 60"
check "fallocate -l 32M, fsync" sh -c "fallocate -l 32M '$MNT/c' && sync '$MNT/c'"
check "32 MiB written into it, no fsync" \
	dd if="$T/data" of="$MNT/c" bs=1M count=32 conv=notrunc status=none
check "... written back" wait_for nothing_dirty
check "kill -9 before the commit" crash_fs
mount_fs "$T/slow.conf" || fail "mount after kill -9"
cat >"$T/blocks.py" <<'PYEOF'
import sys
f, d = open(sys.argv[1], "rb"), open(sys.argv[2], "rb")
new = zero = 0
for i in range(32):
    a, b = f.read(1 << 20), d.read(1 << 20)
    if a == b:
        new += 1
    elif a == bytes(1 << 20):
        zero += 1
    else:
        sys.exit("block %d is neither the new bytes nor zeros" % i)
print("# after kill -9: %d blocks new, %d zeros" % (new, zero))
PYEOF
check "... every block reads as the new bytes or as zeros" "$PY" "$T/blocks.py" "$MNT/c" "$T/data"
check "... and the space is still set aside" test "$(blocks "$MNT/c")" = $((32 * M))
check "unmount" umount_fs
mount_fs "$T/c.conf" || fail "mount"

# KEEP_SIZE: space beyond EOF, the size unchanged; truncate gives it back.
a0=$(avail)
check "fallocate -n -l 8M on an empty file" sh -c ": >'$MNT/n' && fallocate -n -l 8M '$MNT/n'"
check "... the size stays 0" test "$(stat -c %s "$MNT/n")" = 0
check "... st_blocks counts 8 MiB" test "$(blocks "$MNT/n")" = $((8 * M))
check "... df shows 8 MiB fewer available" test "$(avail)" = $((a0 - 8 * M))
check "... a write past EOF into it does not grow st_blocks" \
	sh -c "dd if='$T/data' of='$MNT/n' bs=1M count=3 conv=notrunc status=none &&
	       test \"\$(stat -c '%s %b' '$MNT/n')\" = '$((3 * M)) $((8 * M / 512))'"
check "... truncate to 0 frees it" sh -c "truncate -s 0 '$MNT/n' && test \$(stat -c %b '$MNT/n') = 0"
check "... and df shows it once committed" wait_for avail_is "$a0"

# PUNCH_HOLE: [1.5 MiB, 4.5 MiB) of an 8 MiB file. Blocks 2 and 3 go,
# 1 and 4 are zeroed in part; the size stays.
dd if="$T/data" of="$MNT/p" bs=1M count=8 status=none
b0=$(blocks "$MNT/p")
check "punch a hole at 1.5 MiB, 3 MiB long" fallocate -p -o $((3 * M / 2)) -l $((3 * M)) "$MNT/p"
check "... the size stays 8 MiB" test "$(stat -c %s "$MNT/p")" = $((8 * M))
check "... the range reads as zeros" zeros "$MNT/p" $((3 * M / 2)) $((3 * M))
check "... the bytes before and after are kept" \
	sh -c "cmp -n $((3 * M / 2)) '$T/data' '$MNT/p' && cmp -i $((9 * M / 2)) -n $((7 * M / 2)) '$T/data' '$MNT/p'"
check "... the two blocks it covered whole are freed ($b0 -> $(blocks "$MNT/p") bytes)" \
	test "$(blocks "$MNT/p")" = $((b0 - 2 * M))
check "... a remount keeps all that" remount "$T/c.conf"
check "... after it: zeros" zeros "$MNT/p" $((3 * M / 2)) $((3 * M))
check "... and the rest" \
	sh -c "cmp -n $((3 * M / 2)) '$T/data' '$MNT/p' && cmp -i $((9 * M / 2)) -n $((7 * M / 2)) '$T/data' '$MNT/p'"

# ZERO_RANGE: the same range zeroed, its whole blocks set aside; past EOF
# it grows the file (without -n).
dd if="$T/data" of="$MNT/z" bs=1M count=8 status=none
if fallocate -z -o $((3 * M / 2)) -l $((3 * M)) "$MNT/z" 2>"$T/zerr"; then
	ok "zero range at 1.5 MiB, 3 MiB long"
	check "... the range reads as zeros" zeros "$MNT/z" $((3 * M / 2)) $((3 * M))
	check "... the bytes before and after are kept" \
		sh -c "cmp -n $((3 * M / 2)) '$T/data' '$MNT/z' && cmp -i $((9 * M / 2)) -n $((7 * M / 2)) '$T/data' '$MNT/z'"
	check "... st_blocks unchanged" test "$(blocks "$MNT/z")" = $((8 * M))
	check "zero range past EOF grows the file" \
		sh -c "fallocate -z -o $((8 * M)) -l $((2 * M)) '$MNT/z' && test \$(stat -c %s '$MNT/z') = $((10 * M))"
	check "... and zeros the new part" zeros "$MNT/z" $((8 * M)) $((2 * M))
else
	# The kernel's FUSE passes ZERO_RANGE on since Linux 6.x; before,
	# it answers EOPNOTSUPP without asking the daemon.
	skip "zero range" "the kernel refused it: $(cat "$T/zerr")"
fi
check "unmount" umount_fs

# Free space the range cannot use: nvme1 is outside the stripe, so new
# blocks spill only within it (nvme0, 16 MiB). The free space of both
# passes the first check; the slots taken on the way go back.
rm -rf "$T/meta" "$T/nvme0" "$T/nvme1"
two_tier_conf 1M | sed 's/^stripe = nvme0, nvme1$/stripe = nvme0/' |
	awk '/^\[tier nvme0\]/ {t = 1} /^\[tier nvme1\]/ {t = 0} t && /^capacity/ {$0 = "capacity = 16M"} 1' \
		>"$T/split.conf"
mount_fs "$T/split.conf" || fail "mount with nvme1 outside the stripe"
a0=$(avail)
check_fails "fallocate of 32 MiB with 16 MiB of the stripe free: ENOSPC" \
	fallocate -l 32M "$MNT/big"
check "... sets nothing aside (st_blocks $(blocks "$MNT/big"))" test "$(blocks "$MNT/big")" = 0
check "... and the slots taken on the way come back" wait_for avail_is "$a0"
check "fallocate of 16 MiB fits" fallocate -l 16M "$MNT/fits"
check "... and 16 MiB of writes into it too" \
	dd if="$T/data" of="$MNT/fits" bs=1M count=16 conv=notrunc,fsync status=none

# A pin moves what is set aside with the file: to nvme1, each unwritten
# block takes a slot there and gives back its old one; to RAM, which has
# no durable slots, the space goes back.
placement() { getfattr --only-values -n user.tierfs.placement "$1" 2>/dev/null; }
rm -f "$MNT/big" "$MNT/fits"
check "fallocate -l 8M, 3 MiB of it written" sh -c "fallocate -l 8M '$MNT/pin' &&
	dd if='$T/data' of='$MNT/pin' bs=1M count=3 conv=notrunc,fsync status=none"
check "... on nvme0 ($(placement "$MNT/pin"))" test "$(placement "$MNT/pin")" = "nvme0=$((8 * M))"
check "pinned to nvme1" setfattr -n user.tierfs.pin -v nvme1 "$MNT/pin"
check "... all of it on nvme1 now ($(placement "$MNT/pin"))" \
	test "$(placement "$MNT/pin")" = "nvme1=$((8 * M))"
check "... st_blocks still 8 MiB" test "$(blocks "$MNT/pin")" = $((8 * M))
check "... the written part reads back, the rest as zeros" \
	sh -c "cmp -n $((3 * M)) '$T/data' '$MNT/pin' && cmp -s -n $((5 * M)) -i $((3 * M)):0 '$MNT/pin' /dev/zero"
check "... and after a remount, still on nvme1" remount "$T/split.conf"
check "... ($(placement "$MNT/pin"))" test "$(placement "$MNT/pin")" = "nvme1=$((8 * M))"
check "pinned to RAM" setfattr -n user.tierfs.pin -v ram "$MNT/pin"
check "... the 5 MiB set aside go back: st_blocks 3 MiB ($(blocks "$MNT/pin"))" \
	test "$(blocks "$MNT/pin")" = $((3 * M))
check "... the bytes are the same" \
	sh -c "cmp -n $((3 * M)) '$T/data' '$MNT/pin' && cmp -s -n $((5 * M)) -i $((3 * M)):0 '$MNT/pin' /dev/zero"
check "unmount" umount_fs
tap_exit
