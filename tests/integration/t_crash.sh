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

# synced_writer DIR PREFIX N SEED: write N files of assorted sizes, fsync each
# (and the directory), print "sha256  path" of each only after fsync returned 0.
synced_writer() {
	"$PY" - "$@" <<'PYEOF'
import hashlib, os, sys
d, prefix, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.makedirs(d, exist_ok=True)
sizes = [0, 1, 4096, 1 << 20, (1 << 20) + 1, (3 << 20) - 7, 5 << 20, 123457]
for i in range(n):
    p = "%s/%s%d" % (d, prefix, i)
    size = sizes[(i + seed) % len(sizes)]
    data = hashlib.sha256(b"%d-%d" % (seed, i)).digest() * (size // 32 + 1)
    data = data[:size]
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    off = 0
    while off < size:
        off += os.write(fd, data[off:])
    if i % 3 == 0:  # overwrite part of it, so the synced state is a second version
        os.pwrite(fd, b"V2" * 1000, size // 2)
        data = bytearray(data)
        data[size // 2:size // 2 + 2000] = (b"V2" * 1000)
        data = bytes(data)
    os.fsync(fd)
    os.close(fd)
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dfd)
    os.close(dfd)
    print("%s  %s" % (hashlib.sha256(data).hexdigest(), p), flush=True)
PYEOF
}

# busy writer: keeps writing unsynced data until the mount dies
busy_writer() {
	local d=$1
	mkdir -p "$d"
	while :; do
		head -c $((2 << 20)) /dev/urandom >"$d/busy.$((RANDOM % 4))" 2>/dev/null || break
		dd if=/dev/urandom of="$d/busy.grow" bs=64k count=4 oflag=append conv=notrunc status=none 2>/dev/null || break
	done
}

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
	if (cd "$MNT" && sha256sum --quiet -c "$T/synced.sums"); then
		ok "round $round: every fsynced file intact ($(wc -l <"$T/synced.sums") files)"
	else
		fail "round $round: fsynced data lost or damaged"
	fi
	bad=0
	for f in "$MNT/busy$round"/*; do
		[ -e "$f" ] || continue
		cat "$f" >/dev/null || { bad=1; echo "# read error on $f"; }
	done
	[ $bad -eq 0 ] && ok "round $round: files written during the crash read without I/O errors" ||
		fail "round $round: files written during the crash give I/O errors"
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
