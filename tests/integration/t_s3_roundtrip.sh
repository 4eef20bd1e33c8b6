#!/usr/bin/env bash
# An s3 tier on a real S3 server (SeaweedFS, tests/s3/lib.sh), striped with
# a posix tier under RAM: a tree of files of assorted sizes written, then
# unmounted and mounted twice (with changes between), every byte, size and
# name compared with a copy on a plain directory. Checked from outside with
# boto3: tierfs's objects exist under the prefix, named as docs/s3.md says
# (PREFIX, two hex digits, "/", the slot in 16 hex digits), each a whole
# block or less, nothing outside the prefix; a lease object is there while
# mounted; removed files' objects are deleted; an object under the prefix
# that no block names is swept away after mount. A second daemon on the
# same prefix is refused while the first holds it, and one on another
# prefix of the same bucket works beside it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/../s3/lib.sh"
require_tierfs
require_cmd sha256sum curl
require_weed
trap s3_cleanup EXIT
weed_start "$T/weed" || { echo "# SKIP: the S3 server did not start (log above)"; exit 77; }
echo "# SeaweedFS at $S3_ENDPOINT"

S3_PREFIX=node0/
mkdir -p "$T/nvme0"
# weights 1:1, so that the stripe does not follow the measured bandwidths
S3_TIER_EXTRA="weight = 1" s3_conf 1M 64M "[tier nvme0]" "type = posix" "path = $T/nvme0" "capacity = 2G" \
	"weight = 1" "" "[policy]" "stripe = nvme0, s3" >"$T/c.conf"

make_tree() { # DIR
	(
		set -e
		cd "$1"
		mkdir -p tree/a/b tree/empty
		: >tree/zero
		printf x >tree/one
		head -c 4095 "$T/rand" >tree/a/odd
		head -c $((1 << 20)) "$T/rand" >tree/a/block
		head -c $((9 << 20 | 12345)) "$T/rand" >tree/a/b/multi
		truncate -s 6M tree/sparse && printf END | dd of=tree/sparse bs=1 seek=$((5 << 20)) conv=notrunc status=none
		for i in $(seq 1 20); do echo "file $i" >"tree/a/b/f$i"; done
		head -c $((24 << 20)) "$T/rand" >tree/big
	)
}
sums() { (cd "$1" && find tree -type f -print0 | sort -z | xargs -0 sha256sum && find tree | sort); }
# slot objects: PREFIX + 2 hex + / + 16 hex
slot_re="^[0-9]+ ${S3_PREFIX}[0-9a-f]{2}/[0-9a-f]{16}\$"

head -c $((32 << 20)) /dev/urandom >"$T/rand"
mount_fs "$T/c.conf" || { fail "mount with an s3 tier"; tap_exit; exit 1; }
ok "mount with RAM + posix + s3 striped"
check "tree written" make_tree "$MNT"
mkdir -p "$T/plain" && make_tree "$T/plain"
check "tree on the mount equals the plain copy" cmp -s <(sums "$MNT") <(sums "$T/plain")
sync "$MNT/tree/big"

# While mounted: a lease object under the prefix, and a second daemon on
# the prefix refused; another prefix of the same bucket is fine.
s3ctl ls "$S3_BUCKET" >"$T/ls.mounted"
sed 's/^/# object: /' "$T/ls.mounted" | grep -vE ' [0-9a-f]{2}/[0-9a-f]{16}$' | head -5
lease=$(grep "^[0-9]* $S3_PREFIX" "$T/ls.mounted" | grep -vE "$slot_re" | head -1)
if [ -n "$lease" ]; then ok "a lease object under the prefix while mounted ($lease)"; else
	fail "no object under $S3_PREFIX other than slot objects (no lease)"
fi
mkdir -p "$T/mnt2" "$T/meta2"
s3_conf 1M 64M | sed "s|^metadata = .*|metadata = $T/meta2|" >"$T/c2.conf"
timeout 60 "$TIERFS_BIN" "$T/c2.conf" "$T/mnt2" -f 2>"$T/second.log"
rc=$?
if mountpoint -q "$T/mnt2"; then fusermount3 -u "$T/mnt2"; fi
check "a second daemon on prefix $S3_PREFIX is refused: exit 2 (was $rc)" test $rc -eq 2
sed 's/^/# second daemon: /' "$T/second.log" | head -3
check "its message names the prefix or the lease" grep -qiE "lease|prefix|in use" "$T/second.log"
sed -i "s|^prefix = .*|prefix = node1/|" "$T/c2.conf"
"$TIERFS_BIN" "$T/c2.conf" "$T/mnt2" -f 2>"$T/third.log" &
pid2=$!
if wait_for mountpoint -q "$T/mnt2"; then
	ok "a daemon on another prefix of the bucket mounts beside the first"
	head -c 3000000 "$T/rand" >"$T/mnt2/other" && sync "$T/mnt2/other"
	check "and its file reads back" cmp -s "$T/mnt2/other" <(head -c 3000000 "$T/rand")
	fusermount3 -u "$T/mnt2"
	wait $pid2
	check "and unmounts clean" test $? -eq 0
else
	fail "a daemon on prefix node1/ did not mount"
	sed 's/^/# /' "$T/third.log" | tail -5
	kill $pid2 2>/dev/null
	wait $pid2 2>/dev/null
fi

stats_line=$(grep '^tier s3 ' "$MNT/.tierfs/stats")
echo "# ${stats_line:0:400}"
check "the stats line of tier s3 counts requests" sh -c "echo '$stats_line' | grep -qE ' requests=[1-9]'"
check "unmount clean" umount_fs

# After unmount: the objects, as a client nobody here wrote sees them.
s3ctl ls "$S3_BUCKET" >"$T/ls.after"
n_slot=$(grep -cE "$slot_re" "$T/ls.after")
n_other=$(grep -v "^[0-9]* $S3_PREFIX" "$T/ls.after" | grep -vc "^[0-9]* node1/")
big=$(grep -E "$slot_re" "$T/ls.after" | awk '$1 > 1048576' | wc -l)
echo "# after unmount: $n_slot slot objects under $S3_PREFIX, $(wc -l <"$T/ls.after") objects in all"
check "blocks went to s3: slot objects under the prefix ($n_slot)" test "$n_slot" -ge 15
check "no slot object is larger than a block" test "$big" -eq 0
check "nothing outside the prefixes in use ($n_other)" test "$n_other" -eq 0
slabbytes=$(du -sb "$T/nvme0" | cut -f1)
check "and blocks went to the posix tier ($slabbytes bytes)" test "$slabbytes" -ge $((5 << 20))

mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
check "remount: tree intact" cmp -s <(sums "$MNT") <(sums "$T/plain")
pl=$(getfattr --only-values -n user.tierfs.placement "$MNT/tree/big" 2>/dev/null)
echo "# placement of tree/big: $pl"
check "a 24 MiB file lies on both nvme0 and s3, half and half" sh -c "echo '$pl' | grep -q 'nvme0=12582912' && echo '$pl' | grep -q 's3=12582912'"
s3ctl ls "$S3_BUCKET" "$S3_PREFIX" | grep -E "$slot_re" | awk '{print $2}' | sort >"$T/keys1"

# changes, then a second remount
(
	cd "$MNT" && rm tree/big && mv tree/a/b/f3 tree/empty/moved && truncate -s 1000 tree/a/b/multi &&
		head -c 777777 "$T/rand" >>tree/a/block
) && (
	cd "$T/plain" && rm tree/big && mv tree/a/b/f3 tree/empty/moved && truncate -s 1000 tree/a/b/multi &&
		head -c 777777 "$T/rand" >>tree/a/block
)
check "changes made (rm, mv, truncate, append)" test $? -eq 0
sync "$MNT" 2>/dev/null || sync
check "unmount clean (2)" umount_fs
mount_fs "$T/c.conf" || { fail "remount 2"; tap_exit; exit 1; }
check "second remount: the changed tree intact" cmp -s <(sums "$MNT") <(sums "$T/plain")
# the removed 24 MiB file's objects go (deferred DELETEs, off the I/O path)
keys_now() { s3ctl ls "$S3_BUCKET" "$S3_PREFIX" | grep -E "$slot_re" | awk '{print $2}' | sort; }
fewer() { [ "$(keys_now | wc -l)" -lt "$(wc -l <"$T/keys1")" ]; }
check "objects of the removed file deleted from the bucket" wait_for fewer
sleep 2
check "unmount clean (3)" umount_fs
keys_now >"$T/keys2"
comm -23 "$T/keys1" "$T/keys2" >"$T/gone"
echo "# $(wc -l <"$T/keys1") slot objects before the rm, $(wc -l <"$T/keys2") after"

# Orphans: objects named like slots that no block map names (a crash
# between a PUT and the metadata commit leaves those). Put back under the
# keys just deleted, they must be swept after mount, and nothing else.
head -c 1000 "$T/rand" >"$T/orphan"
# shellcheck disable=SC2046
s3ctl putmany "$S3_BUCKET" "$T/orphan" $(cat "$T/gone")
check "planted $(wc -l <"$T/gone") orphan objects" cmp -s <(keys_now) <(sort "$T/keys2" "$T/gone")
mount_fs "$T/c.conf" || { fail "remount 3"; tap_exit; exit 1; }
back_to_live() { [ "$(keys_now | wc -l)" -le "$(wc -l <"$T/keys2")" ]; }
check "the orphans are deleted after mount" wait_for back_to_live
sleep 1
check "and only they: the live objects are all there" cmp -s <(keys_now) "$T/keys2"
check "third remount: the tree intact" cmp -s <(sums "$MNT") <(sums "$T/plain")
check "unmount clean (4)" umount_fs
tap_exit
