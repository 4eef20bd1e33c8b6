#!/usr/bin/env bash
# Power loss under the daemon: the tiers and the metadata live on powerfs, a
# disk whose write cache loses every write not fsync'd (or, in later
# rounds, a random share of them) when the power goes. kill -9 of the
# daemon, then the cut, then a remount on what the disk kept:
#   - every file whose fsync returned 0 is intact;
#   - a file overwritten after its fsync, and never fsync'd again, reads
#     block by block as its old or its new version, never an I/O error;
#   - files being written at the crash read without I/O errors;
#   - the daemon starts cleanly, and a clean unmount leaves nothing but
#     LMDB's lock file unsynced, and every file and directory it made
#     synced into its directory.
# Two tiers, striped. Background commits (commit_interval = 1) and
# write-back under a small RAM tier run throughout, so the cut lands
# between them.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" sha256sum
powerfs_setup nvme0 nvme1

# heavy_writer DIR: keep rewriting 8 files of 16 MiB, unsynced, twice what
# the RAM tier holds, so that write-backs, slot frees and commits go on
# until the mount dies.
heavy_writer() {
	mkdir -p "$1"
	while head -c $((16 << 20)) /dev/urandom >"$1/h.$((RANDOM % 8))" 2>/dev/null; do :; done
}

# pf_mount KEEP SEED: the disk comes up; KEEP% of its unsynced pages will
# survive the next cut.
pf_mount() { powerfs_mount POWERFS_KEEP="$1" POWERFS_SEED="$2"; }

# pf_cut: the power goes; its log joins the others.
pf_cut() {
	powerfs_cut
	local rc=$?
	cat "$T/pf.log" >>"$T/pf.all"
	return $rc
}

# cut_lost: how many pages the last cut undid.
cut_lost() { sed -n 's/^powerfs: power cut: .*: \([0-9]*\) lost.*/\1/p' "$T/pf.log"; }

# overwriter DIR N SEED: N files of 3 MiB + 5 bytes written and fsync'd
# (version 1), then each overwritten whole with version 2 and not fsync'd.
# Prints "PATH BLOCK SHA1 SHA2" per 1 MiB block once version 1 is durable,
# then "done" once version 2 is written.
overwriter() {
	"$PY" - "$@" <<'PYEOF'
import hashlib, os, sys
d, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(d, exist_ok=True)
size, bs = (3 << 20) + 5, 1 << 20
def ver(i, v):
    return (hashlib.sha256(b"%d-%d-%d" % (seed, i, v)).digest() * (size // 32 + 1))[:size]
for i in range(n):
    p = "%s/o%d" % (d, i)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, ver(i, 1))
    os.fsync(fd)
    os.close(fd)
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(dfd)
os.close(dfd)
for i in range(n):
    a, b = ver(i, 1), ver(i, 2)
    for k in range(0, size, bs):
        print("%s/o%d %d %s %s" % (d, i, k // bs, hashlib.sha256(a[k:k + bs]).hexdigest(),
                                   hashlib.sha256(b[k:k + bs]).hexdigest()))
for i in range(n):
    fd = os.open("%s/o%d" % (d, i), os.O_WRONLY)
    os.pwrite(fd, ver(i, 2), 0)
    os.close(fd)
print("done", flush=True)
PYEOF
}

# check_versions LIST: each block listed reads as one of its two versions.
check_versions() {
	"$PY" - "$1" "$MNT" <<'PYEOF'
import hashlib, sys
bad = 0
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) != 4:
        continue
    path = f[0].replace("@MNT@", sys.argv[2])
    try:
        with open(path, "rb") as h:
            h.seek(int(f[1]) << 20)
            got = hashlib.sha256(h.read(1 << 20)).hexdigest()
    except OSError as e:
        print("# %s block %s: %s" % (path, f[1], e))
        bad += 1
        continue
    if got not in (f[2], f[3]):
        print("# %s block %s: neither version" % (path, f[1]))
        bad += 1
sys.exit(1 if bad else 0)
PYEOF
}

# Two tiers, striped: each is synced on its own (powerfs's model is per
# file, as two disks would be).
two_tier_conf 1M | sed "s|$T/meta|$DISK/meta|; s|$T/nvme|$DISK/nvme|; s|^capacity = 256M|capacity = 64M|" |
	mount_key 'commit_interval = 1' >"$T/c.conf"
: >"$T/synced.sums"
: >"$T/versions"
check "powerfs is built ($POWERFS)" test -x "$POWERFS"
# round: KEEP% of unsynced pages survive; in round 3 the crash lands while
# files are being written and fsync'd.
for round in 1 2 3; do
	keep=$((round == 1 ? 0 : round == 2 ? 50 : 90))
	pf_mount $keep $round || { fail "round $round: powerfs mount"; break; }
	mount_fs "$T/c.conf" || { fail "round $round: mount"; break; }
	busy_writer "$MNT/busy$round" &
	bw=$!
	heavy_writer "$MNT/heavy$round" &
	hw=$!
	if [ $round -lt 3 ]; then
		if synced_writer "$MNT/r$round" f 16 $round >"$T/r$round.sums"; then ok "round $round: 16 files written and fsync'd"; else fail "round $round: synced writer failed"; fi
		overwriter "$MNT/o$round" 6 $round >"$T/o$round.list"
		check "round $round: 6 files fsync'd, then overwritten unsynced" grep -qx done "$T/o$round.list"
		sed "s|^$MNT/|@MNT@/|" "$T/o$round.list" >>"$T/versions"
		# write-backs and background commits of the unsynced data
		sleep 3
	else
		synced_writer "$MNT/r$round" f 400 $round >"$T/r$round.sums" 2>/dev/null &
		sw=$!
		sleep 3
	fi
	check "round $round: kill -9 and lazy unmount of the daemon" crash_fs
	wait $bw $hw 2>/dev/null
	[ $round -eq 3 ] && { wait $sw 2>/dev/null; echo "# round 3: $(wc -l <"$T/r$round.sums") files fsync'd before the kill"; }
	sed "s|$MNT/|./|" "$T/r$round.sums" >>"$T/synced.sums"
	check "round $round: the power goes ($keep% of unsynced pages kept)" pf_cut
	lost=$(cut_lost)
	echo "# round $round: the cut undid ${lost:-?} pages"
	# How much is unsynced at the cut is up to the timing of write-back and
	# of the background commits, which sync the tiers: over 58 runs of the
	# suite round 1 undid 2 to 94000 pages, round 2 0 to 61000 (0 once, in
	# a CI run), round 3 0 to 314. Round 1 keeps no unsynced page, so its
	# cut shows that powerfs undoes what was not synced: the test tests
	# something. The later rounds' cuts may find nothing to undo.
	[ $round -eq 1 ] && check "round 1: the cut undid writes (the test tests something)" test "${lost:-0}" -gt 0
	pf_mount 0 0 || { fail "round $round: powerfs remount"; break; }
	if mount_fs "$T/c.conf"; then
		ok "round $round: daemon starts cleanly after the power cut"
	else
		fail "round $round: mount after the power cut"
		break
	fi
	check_survivors $round "$MNT/busy$round" "$MNT/heavy$round"
	check "round $round: files overwritten after their fsync read as old or new, block by block" \
		check_versions "$T/versions"
	check "round $round: writable after the restart" sh -c "echo after-cut >'$MNT/after$round' && sync '$MNT/after$round'"
	check "round $round: unmount clean" umount_fs
	check "round $round: the disk unmounts" pf_cut
	left=$(grep -E '^powerfs: (unsynced|not durable):' "$T/pf.log" | grep -v '/lock.mdb:')
	[ -z "$left" ] && ok "round $round: a clean unmount leaves nothing unsynced but LMDB's lock file" ||
		{ fail "round $round: a clean unmount left writes or names unsynced"; echo "$left" | sed 's/^/# /'; }
done
tap_exit
