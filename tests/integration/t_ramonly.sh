#!/usr/bin/env bash
# A RAM-only mount (no persistent tier): files work like on tmpfs, fsync
# succeeds, a write past the RAM budget gets ENOSPC, and a remount removes
# the files (they were never durable), hard links included, instead of
# showing holes as data.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
sed "s#^metadata = .*#metadata = $T/meta#; s#^capacity = .*#capacity = 128M#" \
	"$ROOT/scripts/conf/ram-only.conf" >"$T/c.conf"
grep -q "metadata = $T/meta" "$T/c.conf" || { fail "could not adapt scripts/conf/ram-only.conf"; tap_exit; exit 1; }
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
head -c $((20 * 1024 * 1024 + 77)) /dev/urandom >"$T/data"
check "write 20 MiB with fsync" dd if="$T/data" of="$MNT/f" bs=1M conv=fsync status=none
check "read back equal" cmp "$T/data" "$MNT/f"
pl=$(getfattr --absolute-names --only-values -n user.tierfs.placement "$MNT/f")
[ "$pl" = "ram=$((20 * 1024 * 1024 + 77))" ] && ok "placement all in RAM ($pl)" || fail "placement '$pl'"
check_fails "writing past the RAM budget fails" dd if=/dev/zero of="$MNT/big" bs=1M count=200 status=none
err=$(dd if=/dev/zero of="$MNT/big2" bs=1M count=200 2>&1 >/dev/null)
echo "$err" | grep -q "No space left" && ok "the error is ENOSPC" || fail "error was: $err"
rm -f "$MNT/big" "$MNT/big2"
check "still readable after ENOSPC" cmp "$T/data" "$MNT/f"
# Hard links in other directories must go with the file.
check "hard links of f in two other directories" \
	sh -c "mkdir '$MNT/d2' '$MNT/d3' && ln '$MNT/f' '$MNT/d2/g' && ln '$MNT/f' '$MNT/d3/h'"
check "unmount clean" umount_fs
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
[ ! -e "$MNT/f" ] && ok "remount: the RAM-only file is gone, not a file of zeros" || fail "f survived a remount of a RAM-only fs"
check "remount: its hard links are gone too ($(find "$MNT/d2" "$MNT/d3" -mindepth 1 | tr '\n' ' '))" \
	test -z "$(find "$MNT/d2" "$MNT/d3" -mindepth 1)"
check "remount: the directories that held the links can be removed" rmdir "$MNT/d2" "$MNT/d3"
check "unmount clean" umount_fs
tap_exit
