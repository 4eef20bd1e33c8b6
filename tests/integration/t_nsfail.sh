#!/usr/bin/env bash
# A namespace operation whose metadata commit fails changes nothing. While
# txnfail.so makes every LMDB commit of the daemon fail, link, unlink,
# mkdir, rmdir and rename must fail and leave the link counts, the names
# and the data as they were; an unlink whose commit failed once left the
# count at 0 in memory, and the next close deleted the file that still had
# its name. After the disk recovers, everything is as before, and stays so
# across a remount.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs

default_conf >"$T/c.conf"
export TXNFAIL_FLAG="$T/fail"
mount_shimmed txnfail "$T/c.conf" || { fail mount; tap_exit; exit 1; }

mkdir "$MNT/d" "$MNT/d/sub"
head -c 3145728 /dev/urandom >"$T/want"
cp "$T/want" "$MNT/d/f"
sync "$MNT/d/f"
links() { stat -c %h "$1"; }
is() { # WHAT GOT WANT
	[ "$2" = "$3" ] || { echo "# $1: $2, want $3"; return 1; }
}
state() { # the names, link counts and data that must not change
	is "names in d" "$(ls "$MNT/d" | tr '\n' ' ')" "f sub " &&
		is "links of d/f" "$(links "$MNT/d/f")" 1 &&
		is "links of d" "$(links "$MNT/d")" 3 &&
		is "links of d/sub" "$(links "$MNT/d/sub")" 2 &&
		cmp "$T/want" "$MNT/d/f"
}
check "before: names, links and data" state

touch "$TXNFAIL_FLAG"
# Opens and closes after each: the last close deletes a file whose count
# is 0 in memory.
try() { # WHAT CMD...: must fail and change nothing
	local what=$1
	shift
	check_fails "$what fails" "$@"
	cat "$MNT/d/f" >/dev/null
	check "after the failed $what: names, links and data unchanged" state
}
try unlink rm "$MNT/d/f"
try link ln "$MNT/d/f" "$MNT/d/g"
try mkdir mkdir "$MNT/d/new"
try rmdir rmdir "$MNT/d/sub"
try rename mv "$MNT/d/f" "$MNT/d/h"
try "rename of a directory" mv "$MNT/d/sub" "$MNT/sub2"
rm -f "$TXNFAIL_FLAG"
cat "$MNT/d/f" >/dev/null
check "once commits work: names, links and data unchanged" state
check "a rename now works" mv "$MNT/d/f" "$MNT/d/h"
check "and back" mv "$MNT/d/h" "$MNT/d/f"
check "unmount clean" umount_fs
unset TXNFAIL_FLAG
check "remount" mount_fs "$T/c.conf"
check "after remount: names, links and data unchanged" state
check "unmount clean (2)" umount_fs
tap_exit
