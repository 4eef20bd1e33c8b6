#!/usr/bin/env bash
# kill -9 while a block that was already fsync'd is rewritten and fsync'd
# again, then remount: the file reads without I/O errors and every page
# holds what its last acknowledged write put there, or a later write. A
# write-back over the block's only durable copy, whose new checksum was
# not committed yet, would make the whole block unreadable (EIO), the
# parts fsync'd long ago included.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"

PAGEGEN=$(dirname "$0")/pagegen.py

default_conf >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
init() { "$PY" "$PAGEGEN" init "$MNT/f"; }
check "4 blocks written and fsync'd" init
for round in 1 2 3 4 5 6; do
	"$PY" "$PAGEGEN" write "$MNT/f" "$round" 1 >"$T/acked$round" 2>/dev/null &
	w=$!
	sleep "0.$((RANDOM % 4 + 2))"
	check "round $round: kill -9 while rewriting" crash_fs
	wait $w 2>/dev/null
	check "round $round: remount" mount_fs "$T/c.conf"
	check "round $round: every page readable, none older than acknowledged" \
		"$PY" "$PAGEGEN" check "$MNT/f" "$T"/acked?
done
check "unmount" umount_fs
tap_exit
