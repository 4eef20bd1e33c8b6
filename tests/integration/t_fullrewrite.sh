#!/usr/bin/env bash
# kill -9 while blocks already on a nearly full tier are rewritten and
# written back, then remount: the file reads without I/O errors and every
# page holds what its last acknowledged write put there, or a later write.
# A rewrite goes to a new slot and the old one is freed by the next commit;
# on a tier short of free slots, a write-back over the block's durable copy
# would leave it unreadable after a crash before the commit of its new
# checksum, so the commit that frees the earlier copies' slots comes first,
# and where the live blocks leave less than the reserve kept for new blocks
# free, a rewrite takes a slot of that reserve. Background commits are kept
# out of the way (commit_interval = 600): only fsyncs and the tier's
# shortness commit. And a file pinned to a tier that is full: its blocks
# cannot move there and are rewritten where they are, on new slots too.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" setfattr

PAGEGEN=$(dirname "$0")/pagegen.py

# rewrite_conf NVME0_KIB [NVME1_KIB]: a fresh tier (and metadata) of that
# size in KiB, with a second one, not in the stripe, where given; the log
# and the acknowledged writes of the case before are cleared. RAM of 64
# blocks (the least for 2 threads is 48): write-back starts with a quarter
# of it dirty, so the rewrites keep writing back.
rewrite_conf() {
	rm -rf "$T/nvme0" "$T/nvme1" "$T/meta" "$T"/acked*
	mkdir -p "$T/nvme0" "$T/meta"
	: >"$T/daemon.log"
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
capacity = ${1}K

[policy]
stripe = nvme0
CONF
	[ -z "${2:-}" ] && return
	mkdir -p "$T/nvme1"
	cat >>"$T/c.conf" <<CONF

[tier nvme1]
type = posix
path = $T/nvme1
capacity = ${2}K
CONF
}

# 64 blocks of 64K in the file; the disk has 144 slots, 64 of them the
# reserve for new blocks, so 16 rewrites in a row fit beside the live
# copies before the tier runs short, or 100, where the live blocks alone
# leave less than the reserve free.
for slots in 144 100; do
	rewrite_conf $((slots * 64))
	mount_fs "$T/c.conf" || { fail "$slots slots: mount"; continue; }
	check "$slots slots: 64 blocks written and fsync'd" "$PY" "$PAGEGEN" init "$MNT/f"
	rewrite_crash_rounds "$T/c.conf" 4 64 '1.$((RANDOM % 5))'
	grep -q 'short of free slots' "$T/daemon.log" &&
		ok "$slots slots: the tier ran short of slots (the case under test)" ||
		fail "$slots slots: the tier never ran short of slots: the test does not test its case"
	check "$slots slots: unmount" umount_fs
done

# The pin tier, 16 slots, is filled by a file pinned there; the file under
# test lives on the other tier, and is then pinned to the full one.
rewrite_conf $((16 << 10)) 1024
mount_fs "$T/c.conf" || { fail "pin: mount"; tap_exit; exit 1; }
fill_pinned() {
	touch "$MNT/filler" && setfattr -n user.tierfs.pin -v nvme1 "$MNT/filler" &&
		head -c 1M /dev/urandom >"$MNT/filler" && sync "$MNT/filler"
}
check "pin: a file pinned to nvme1 fills it" fill_pinned
check "pin: 64 blocks written and fsync'd" "$PY" "$PAGEGEN" init "$MNT/f"
check_fails "pin: pinning them to the full tier says ENOSPC" \
	setfattr -n user.tierfs.pin -v nvme1 "$MNT/f"
rewrite_crash_rounds "$T/c.conf" 4 64 '1.$((RANDOM % 5))'
check "pin: unmount" umount_fs
tap_exit
