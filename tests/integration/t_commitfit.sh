#!/usr/bin/env bash
# With a learned order, a due background commit waits for an idle stretch
# that can hold it: one that ran on past the stretch stalled the next
# update phase. The tier lives on powerfs whose fsyncs take 1 s, so a
# commit of written-back blocks takes at least that: longer than any stall
# of a client on a loaded machine (with 300 ms, a CI run found all 6
# commits of the 50 ms phase in stretches as long). A client repeats one
# step (read and rewrite 24 files of 4 MiB, twice the RAM tier) until the
# order is learned, then:
#   - with 50 ms pauses between steps, too short for a commit: the commits
#     still come, within the seven intervals commit_interval promises
#     (commits_forced counts them), none in a pause;
#   - with 2 s pauses, long enough: once a pause has shown that, they
#     come in the pauses again, none forced;
#   - after a remount every file holds what the last step wrote.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"
powerfs_setup nvme0

# nvme0 has room for the copies of 60 steps' rewrites: each takes a new
# slot until the commit after it, and with 2G (20 steps' worth) a fast
# run of the 50 ms phase ran short of slots, its write-backs stalled for
# commits, and those stalls looked like idle stretches a commit fits in
# (2 of 3-4 commits in them, on the old code as on the new).
default_conf | sed "s|^path = $T/nvme0$|path = $DISK/nvme0|; s|^capacity = 256M|capacity = 64M|; s|^capacity = 2G|capacity = 6G|" |
	mount_key 'commit_interval = 1' >"$T/c.conf"

# steps.py DIR PAUSE SECONDS VERSION: repeat the step for SECONDS, PAUSE s
# between steps; the files end up holding VERSION's bytes.
cat >"$T/steps.py" <<'PYEOF'
import os, sys, time
d, pause, secs, ver = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
os.makedirs(d, exist_ok=True)
n, size = 24, 4 << 20
def data(i):
    return (b"%08d:%08d;" % (ver, i)) * (size // 18) + b"\0" * (size % 18)
end = time.monotonic() + secs
while True:
    for i in range(n):
        p = "%s/f%02d" % (d, i)
        # read, then overwrite in place: no truncate, as DeepSpeed
        with open(p, "r+b" if os.path.exists(p) else "w+b") as f:
            f.read()
            f.seek(0)
            f.write(data(i))
    if time.monotonic() >= end:
        break
    time.sleep(pause)
PYEOF

check "powerfs is built ($POWERFS)" test -x "$POWERFS"
powerfs_mount POWERFS_FSYNC_MS=1000 || { fail "powerfs mount"; tap_exit; exit; }
mount_fs "$T/c.conf" || { fail "mount"; tap_exit; exit; }
ok "mounted with the tier on a disk whose fsyncs take 1 s"
# Until the order is learned any quiet moment holds a commit, and one
# that holds the tier for 1 s slows the client's first steps: 2 s at a
# time, up to 20 s.
for _ in $(seq 10); do
	"$PY" "$T/steps.py" "$MNT/s" 0.05 2 1
	[ "$(stat_field order learned)" = yes ] && break
done
check "the step's order is learned" test "$(stat_field order learned)" = yes

# phase PAUSE SECONDS VERSION: commits, forced commits and relearns made
# meanwhile; what the committer measured goes to the TAP log.
phase() {
	local c0 f0 r0
	c0=$(stat_field cache commits)
	f0=$(stat_field cache commits_forced)
	r0=$(stat_field order relearns)
	"$PY" "$T/steps.py" "$MNT/s" "$1" "$2" "$3"
	echo "# $1 s pauses: learned=$(stat_field order learned)" \
		"commit_quiet_ms=$(stat_field cache commit_quiet_ms)" \
		"commit_gap_ms=$(stat_field cache commit_gap_ms)" >&2
	echo "$(($(stat_field cache commits) - c0)) $(($(stat_field cache commits_forced) - f0))" \
		"$(($(stat_field order relearns) - r0))"
}
# 10 s: more than the seven intervals a due commit waits at most (one, then
# six for a stretch that never fits), wherever the last commit fell; with
# 6 s, one that fell just before the phase came after it (ASan build).
read -r c f r <<<"$(phase 0.05 10 2)"
echo "# 50 ms pauses: $c commits, $f forced"
check "50 ms pauses: the order stays learned ($r relearns)" \
	test "$(stat_field order learned)" = yes -a "$r" -eq 0
check "50 ms pauses: commits still come ($c)" test "$c" -ge 1
check "50 ms pauses: every one forced, none in a pause ($f of $c)" test "$f" -eq "$c"
check_fails "nvme0 did not run short of slots (stalls for commits are not pauses)" \
	grep -q "short of free slots" "$T/daemon.log"
# The first pause of 2 s shows the stretch; a commit due before it waits
# for it or goes forced.
phase 2 4 3 >/dev/null
read -r c f r <<<"$(phase 2 8 4)"
echo "# 2 s pauses: $c commits, $f forced"
check "2 s pauses: commits come ($c)" test "$c" -ge 1
check "2 s pauses: in the pauses, none forced ($f)" test "$f" -eq 0

check "unmount" umount_fs
check "remount" mount_fs "$T/c.conf"
check "every file holds the last step's bytes" "$PY" -c '
import sys
d = sys.argv[1]
size = 4 << 20
for i in range(24):
    want = (b"%08d:%08d;" % (4, i)) * (size // 18) + b"\0" * (size % 18)
    if open("%s/f%02d" % (d, i), "rb").read() != want:
        sys.exit("f%02d differs" % i)
' "$MNT/s"
check "unmount clean" umount_fs
check "the disk unmounts" powerfs_cut
tap_exit
