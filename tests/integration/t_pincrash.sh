#!/usr/bin/env bash
# kill -9 while user.tierfs.pin moves a file to another tier, then remount:
# the file, fsync'd before the pin, is intact. A pin rewrites every block
# to the pinned tier; the block map must point at the old copy until the
# new one is written, or a commit in between leaves a hole.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" sha256sum setfattr

two_tier_conf 1M | mount_key 'flush_interval = 0.005' | mount_key 'commit_interval = 0.005' >"$T/c.conf"
: >"$T/sums"
round=0
for delay in 0.005 0.01 0.02 0.04 0.08; do
	round=$((round + 1))
	mount_fs "$T/c.conf" || { fail "round $round: mount"; break; }
	check "round $round: 48 MiB written and fsync'd" "$PY" - "$MNT/f$round" <<'PYEOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
data = os.urandom(48 << 20)
assert os.write(fd, data) == len(data)
os.fsync(fd)
PYEOF
	(cd "$MNT" && sha256sum "f$round") >>"$T/sums"
	# Earlier rounds' files, pinned or not, go to the other tier too.
	for f in "$MNT"/f*; do
		setfattr -n user.tierfs.pin -v nvme1 "$f" 2>/dev/null &
	done
	sleep "$delay"
	check "round $round: kill -9 $delay s into the pin" crash_fs
	wait
	check "round $round: remount" mount_fs "$T/c.conf"
	check "round $round: every file intact" sh -c "cd '$MNT' && sha256sum --quiet -c '$T/sums'"
	check "round $round: unmount" umount_fs
done
tap_exit
