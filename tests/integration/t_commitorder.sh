#!/usr/bin/env bash
# Metadata commits land in the order they were taken. Every other LMDB
# write transaction of the daemon is made to start late (txndelay.so), the
# background commits come every 5 ms (flush_interval and commit_interval),
# and clients append with fsync and truncate and rewrite with fsync: a
# background commit that snapshotted a file's size, or a block record since
# deleted by a truncate, and committed after a newer commit would put the
# old state back — a shorter file after remount, or a slot mapped twice and
# a mount that fails.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"

cat >"$T/work.py" <<'PYEOF'
import os, sys
d, role, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
if role.startswith("append"):
    # 4 KiB appends, each made durable before the next.
    fd = os.open(d + "/" + role, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for r in range(rounds):
        os.write(fd, bytes([r % 251]) * 4096)
        os.fsync(fd)
else:
    # Truncate to nothing, rewrite 2 blocks and a bit, make it durable.
    fd = os.open(d + "/rewrite", os.O_WRONLY | os.O_CREAT, 0o644)
    for r in range(rounds):
        os.ftruncate(fd, 0)
        os.pwrite(fd, bytes([r % 253]) * ((2 << 20) + 8192), 0)
        os.fsync(fd)
os.close(fd)
PYEOF

# What the files must hold: the last round of each.
"$PY" - "$T" <<'PYEOF'
import sys
t = sys.argv[1]
with open(t + "/append.want", "wb") as f:
    for r in range(150):
        f.write(bytes([r % 251]) * 4096)
with open(t + "/rewrite.want", "wb") as f:
    f.write(bytes([99 % 253]) * ((2 << 20) + 8192))
PYEOF

default_conf | mount_key 'flush_interval = 0.005' | mount_key 'commit_interval = 0.005' >"$T/c.conf"
export TXNDELAY_US=20000
mount_shimmed txndelay "$T/c.conf" || { fail mount; tap_exit; exit 1; }

# Each appender's last commit is one chance for a stale one to overtake it.
run_work() {
	local i pids=() rc=0
	for i in 1 2 3 4 5 6; do
		"$PY" "$T/work.py" "$MNT" append$i 150 2>"$T/a$i.err" &
		pids+=($!)
	done
	"$PY" "$T/work.py" "$MNT" rewrite 100 2>"$T/r.err" || rc=1
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	[ $rc -eq 0 ] || sed 's/^/# /' "$T"/a?.err "$T/r.err"
	return $rc
}
check "6 clients of 150 fsync'd appends beside 100 fsync'd truncate-and-rewrites" run_work
check "unmount clean" umount_fs
unset TXNDELAY_US
check "remount: the block map is consistent" mount_fs "$T/c.conf"
for i in 1 2 3 4 5 6; do
	check "after remount: appended file $i is whole ($(stat -c %s "$MNT/append$i") bytes)" \
		cmp "$T/append.want" "$MNT/append$i"
done
check "after remount: the rewritten file holds its last round ($(stat -c %s "$MNT/rewrite") bytes)" \
	cmp "$T/rewrite.want" "$MNT/rewrite"
check "unmount clean (2)" umount_fs
tap_exit
