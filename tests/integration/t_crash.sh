#!/usr/bin/env bash
# kill -9 of the daemon, then remount: every file whose fsync returned 0 is
# intact (checksum), the daemon starts cleanly on what the dead one left, and
# files that were being written at the moment of the crash read without I/O
# errors (whatever their content). Two rounds, the second on top of the
# first's survivors.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" sha256sum

default_conf >"$T/c.conf"
: >"$T/synced.sums"
for round in 1 2; do
	mount_fs "$T/c.conf" || { fail "round $round: mount"; break; }
	busy_writer "$MNT/busy$round" &
	bw=$!
	if [ $round -eq 1 ]; then
		# all fsyncs done, then the crash
		if synced_writer "$MNT/r$round" f 24 $round >"$T/r$round.sums"; then ok "round 1: 24 files written and fsynced"; else fail "round 1: synced writer failed"; fi
		sleep 0.3
	else
		# the crash lands while files are being written and fsynced: only
		# those whose fsync had returned (printed) count
		synced_writer "$MNT/r$round" f 400 $round >"$T/r$round.sums" 2>/dev/null &
		sw=$!
		sleep 1.5
	fi
	check "round $round: kill -9 and lazy unmount of the dead mount" crash_fs
	wait $bw 2>/dev/null
	[ $round -eq 2 ] && { wait $sw 2>/dev/null; echo "# round 2: $(wc -l <"$T/r$round.sums") files fsynced before the kill"; }
	sed "s|$MNT/|./|" "$T/r$round.sums" >>"$T/synced.sums"
	if mount_fs "$T/c.conf"; then
		ok "round $round: daemon starts cleanly after kill -9"
	else
		fail "round $round: remount after kill -9"
		break
	fi
	check_survivors $round "$MNT/busy$round"
	check "round $round: writable after restart" sh -c "echo after-crash >'$MNT/after$round' && sync '$MNT/after$round'"
	check "round $round: unmount clean" umount_fs
done
# finally a clean mount: everything still there
if mount_fs "$T/c.conf"; then
	(cd "$MNT" && sha256sum --quiet -c "$T/synced.sums") && ok "clean remount: fsynced files intact" || fail "clean remount: fsynced files damaged"
	check "unmount clean (final)" umount_fs
else
	fail "final mount"
fi
tap_exit
