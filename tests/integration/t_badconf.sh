#!/usr/bin/env bash
# tests/integration/t_badconf.sh — a bad config must stop the mount with one
# clear message: exit status 2, a stderr line "tierfs: CONFIG:LINE: ..." with
# the line of the offending key (or section header), and nothing mounted.
#
# Each case is checked three ways, so a missing or broken daemon fails every
# check rather than passing them vacuously.
source "$(dirname "$0")/../lib.sh"

mkdir -p "$T/nvme0" "$T/nvme1"
BAD=$T/bad.conf

# expect NAME LINE WHAT: run the daemon on $BAD (written by the caller) and
# check status 2, the "tierfs: $BAD:LINE: WHAT" prefix, and no mount.
expect() {
	local name=$1 line=$2 what=$3 rc=0
	local prefix="tierfs: $BAD:$line: $what"
	if [ ! -x "$TIERFS_BIN" ]; then
		echo "# $TIERFS_BIN: not built" >&2
	fi
	timeout -k 5 20 "$TIERFS_BIN" "$BAD" "$MNT" >"$T/out" 2>"$T/err" || rc=$?
	if [ "$rc" -eq 2 ]; then ok "$name: exit status 2"; else
		fail "$name: exit status $rc, want 2"
		sed 's/^/#   /' "$T/err"
	fi
	# index(): the prefix holds paths and brackets, so no regex matching.
	if awk -v p="$prefix" 'index($0, p) == 1 { found = 1 } END { exit !found }' "$T/err" &&
		! grep -qE 'Sanitizer|runtime error' "$T/err"; then
		ok "$name: message at line $line"
	else
		fail "$name: no stderr line starting with '$prefix'"
		sed 's/^/#   /' "$T/err"
	fi
	if mountpoint -q "$MNT"; then
		fail "$name: $MNT got mounted"
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	else
		ok "$name: nothing mounted"
	fi
}

cat >"$BAD" <<CONF
[mount]
block_size = 1M
colour = blue
[tier nvme0]
type = posix
path = $T/nvme0
CONF
expect "unknown key" 3 "key 'colour': "

cat >"$BAD" <<CONF
[tier nvme0]
type = posix
path = $T/nvme0

[tiers fast]
type = ram
CONF
expect "unknown section" 5 "section [tiers fast]: "

cat >"$BAD" <<CONF
[tier nvme0]
type = posix
path = $T/nvme0
weight = 2
weight = 3
CONF
expect "key given twice" 5 "key 'weight': "

cat >"$BAD" <<CONF
[tier ram]
type = ram
capacity = 8 gigabytes
[tier nvme0]
type = posix
path = $T/nvme0
CONF
expect "bad size" 3 "key 'capacity': "

cat >"$BAD" <<CONF
[tier nvme0]
type = posix
path = $T/nvme0
[mount]
block_size = 1000K
CONF
expect "block_size not a power of two" 5 "key 'block_size': "

cat >"$BAD" <<CONF
[tier nvme0]
type = posix
path = $T/nvme0
[tier bucket]
type = s3
endpoint = http://127.0.0.1:1
CONF
expect "s3 tier without a bucket" 4 "section [tier bucket]: missing required key 'bucket'"

cat >"$BAD" <<CONF
[tier nvme0]
type = posix
# the directory is not there
path = $T/does-not-exist
CONF
expect "missing tier directory" 4 "key 'path': $T/does-not-exist: No such file or directory"

cat >"$BAD" <<CONF
[tier nvme0]
type = posix
path = $T/nvme0
[tier ram]
type = ram
capacity = 1G
persistent = yes
CONF
expect "persistent ram tier" 7 "key 'persistent': a ram tier cannot be persistent"

cat >"$BAD" <<CONF
[tier nvme0]
type = posix
path = $T/nvme0

[tier nvme0]
type = posix
path = $T/nvme1
CONF
expect "duplicate tier name" 5 "section [tier nvme0]: "

cat >"$BAD" <<CONF
[tier r1]
type = ram
capacity = 1G
[tier r2]
type = ram
capacity = 1G
[tier nvme0]
type = posix
path = $T/nvme0
CONF
expect "two ram tiers" 4 "section [tier r2]: only one ram tier is supported"

cat >"$BAD" <<CONF
[policy]
stripe = nvme0, nvme9
[tier nvme0]
type = posix
path = $T/nvme0
CONF
expect "stripe over unknown tier" 2 "key 'stripe': no tier named 'nvme9'"

cat >"$BAD" <<CONF
[tier nvme0]
type = posix
path = $T/nvme0
[rule gradients]
match = *_gradient_*.tensor.swp
tier = fast
persistent = no
CONF
expect "rule with unknown tier" 6 "key 'tier': rule 'gradients': no tier named 'fast'"

cat >"$BAD" <<CONF
[tier ram]
type = ram
capacity = 1G
CONF
expect "ram only without metadata" 1 "key 'metadata': "

cat >"$BAD" <<CONF
[tier nvme0]
type = posix
path = $T/nvme0
this line is not ini
CONF
expect "syntax error" 4 ""

cat >"$BAD" <<CONF

[tier nvme0]
path = $T/nvme0
CONF
expect "missing type" 2 "section [tier nvme0]: "

cat >"$BAD" <<CONF
[tier nvme0]
type = posix
path = $T/nvme0
[mount]
threads = 0
CONF
expect "threads out of range" 5 "key 'threads': "

# An unreadable config file: the same exit status, and the file named.
rc=0
timeout -k 5 20 "$TIERFS_BIN" "$T/none.conf" "$MNT" >"$T/out" 2>"$T/err" || rc=$?
check "missing config: exit status 2" test "$rc" -eq 2
check "missing config: message" grep -qF "tierfs: $T/none.conf: cannot read: " "$T/err"
check_fails "missing config: nothing mounted" mountpoint -q "$MNT"

# A tier inside the mount point: the daemon would do its I/O through its
# own mount and hang there, unkillable.
cat >"$BAD" <<CONF
[tier ram]
type = ram
capacity = 64M
[tier inside]
type = posix
path = $MNT
CONF
expect "tier path is the mount point" 4 "section [tier inside]: path $MNT is inside the mount point"

# A RAM tier too small for what the FUSE workers hold at once: said with
# the line, not by the mount after its bandwidth probes.
cat >"$BAD" <<CONF
[mount]
threads = 256
[tier ram]
type = ram
capacity = 64M
[tier nvme0]
type = posix
path = $T/nvme0
CONF
expect "ram tier too small for the threads" 3 "section [tier ram]: capacity 64 MiB is too small"

# The rest are not config lines; each is run the same way.
run_daemon() { # CONF [ARGS...]: exit status in $rc, stderr in $T/err
	local c=$1
	shift
	rc=0
	timeout -k 5 20 "$TIERFS_BIN" "$c" "$MNT" "$@" >"$T/out" 2>"$T/err" || rc=$?
	if mountpoint -q "$MNT"; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
		return 1
	fi
	# (a WARNING that an allocation failed is what the test asks for)
	! grep -qE 'ERROR: [A-Za-z]*Sanitizer|runtime error' "$T/err"
}
cat >"$T/good.conf" <<CONF
[tier ram]
type = ram
capacity = 64M
[tier nvme0]
type = posix
path = $T/nvme0
CONF
check "-o max_read=4096: nothing mounted" run_daemon "$T/good.conf" -o max_read=4096
check "-o max_read=4096: exit status 2 (was 0)" test "$rc" -eq 2
check "-o max_read=4096: message" grep -qF "tierfs: -o max_read=4096: " "$T/err"
touch "$T/plainfile"
rc=0
timeout -k 5 20 "$TIERFS_BIN" "$T/good.conf" "$T/plainfile" >"$T/out" 2>"$T/err" || rc=$?
check "mount point a regular file: exit status 2" test "$rc" -eq 2
check "mount point a regular file: message" grep -qF "tierfs: mount point $T/plainfile: not a directory" "$T/err"

# A tier that cannot open after the metadata did (a slot map too large to
# allocate): a clean exit with the reason, never a crash on the way out.
mkdir -p "$T/nvme2"
cat >"$T/huge.conf" <<CONF
[tier ram]
type = ram
capacity = 64M
[tier nvme2]
type = posix
path = $T/nvme2
capacity = 18446744073709551615
CONF
check "tier fails to open: nothing mounted, no sanitizer report" run_daemon "$T/huge.conf" -f
check "tier fails to open: exit status 1 (was 139, a crash)" test "$rc" -eq 1
check "tier fails to open: message" grep -qF "tierfs: $T/huge.conf: cannot start: " "$T/err"

# A second daemon (its own metadata) on a tier directory that a mounted one
# uses: refused, naming the tier and the directory, not mounted.
mkdir -p "$T/mnt2" "$T/meta1" "$T/meta2"
for k in 1 2; do
	sed "s|^\[tier ram\]|[mount]\nmetadata = $T/meta$k\n&|" "$T/good.conf" >"$T/share$k.conf"
done
check "a daemon on the tier directory" mount_fs "$T/share1.conf"
rc=0
timeout -k 5 20 "$TIERFS_BIN" "$T/share2.conf" "$T/mnt2" >"$T/out" 2>"$T/err" || rc=$?
check "a second daemon on the same tier directory: nothing mounted" sh -c "! mountpoint -q '$T/mnt2'"
mountpoint -q "$T/mnt2" && { fusermount3 -u "$T/mnt2" || umount -l "$T/mnt2"; }
check "a second daemon on the same tier directory: exit status 1 (was 0)" test "$rc" -eq 1
check "a second daemon on the same tier directory: message" \
	grep -qF "tierfs: tier nvme0: $T/nvme0 is in use by another tierfs" "$T/err"
check "the first daemon unmounts clean" umount_fs
check "once it is gone, the second daemon mounts" mount_fs "$T/share2.conf"
check "and unmounts clean" umount_fs

# A key under its old name ([policy] gap_plan, now an [expert] key) is no
# error: the mount goes on as before, with one warning line that names the
# file, the line and the key's new place.
sed "s|^\[tier ram\]|[policy]\ngap_plan = no\n&|" "$T/good.conf" >"$T/moved.conf"
: >"$T/daemon.log"
check "a key under its old name: mounts" mount_fs "$T/moved.conf"
check "a key under its old name: one warning line" test "$(grep -cF \
	"tierfs: $T/moved.conf:2: key 'gap_plan': deprecated in [policy], read as [expert] gap_plan" \
	"$T/daemon.log")" -eq 1
check "a key under its old name: it takes effect" grep -qE '^order .* gap_plan=no ' "$MNT/.tierfs/stats"
check "a key under its old name: unmounts clean" umount_fs

tap_exit
