#!/usr/bin/env bash
# A tierfs pin (user.tierfs.pin) on a native state file of the updater
# survives update steps. The updater writes each state file anew and
# renames it over the old one, so the pin must be listed (listxattr) for
# the updater to carry it over: before, it was not, and a pinned sub-group
# fell back to the default stripe after one step.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd getfattr setfattr
UPD=$(dirname "$TIERFS_BIN")/tierfs-update
[ -x "$UPD" ] || { echo "# SKIP: $UPD not built"; exit 77; }

two_tier_conf 1M >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
M=$MNT/m
check "init a native model of 4 sub-groups" "$UPD" init "$M" --params 8M --subgroup 2M
check "pin sub-group 1 to nvme1" setfattr -n user.tierfs.pin -v nvme1 "$M/sg-00001.state"
check "getfattr -d lists the pin" sh -c "getfattr -d '$M/sg-00001.state' | grep -qx 'user.tierfs.pin=\"nvme1\"'"
check "an unpinned file lists no pin" sh -c "! getfattr -d '$M/sg-00002.state' | grep -q tierfs.pin"
check "two update steps" "$UPD" step "$M" --steps 2
check "the state file written by the steps is still pinned to nvme1" \
	test "$(getfattr --only-values -n user.tierfs.pin "$M/sg-00001.state")" = nvme1
check "all of its bytes are on nvme1" sh -c \
	"getfattr --only-values -n user.tierfs.placement '$M/sg-00001.state' | grep -Eqx 'nvme1=[0-9]+'"
check "the unpinned one is striped over both tiers" sh -c \
	"getfattr --only-values -n user.tierfs.placement '$M/sg-00002.state' | grep -Eq 'nvme0=[0-9]+ nvme1=[0-9]+'"
check "unpin" setfattr -n user.tierfs.pin -v "" "$M/sg-00001.state"
check "an unpinned file no longer lists the pin" sh -c "! getfattr -d '$M/sg-00001.state' | grep -q tierfs.pin"
check "unmount" umount_fs
tap_exit
