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
rewrite_crash_rounds "$T/c.conf" 6 1 '0.$((RANDOM % 4 + 2))'
check "unmount" umount_fs
tap_exit
