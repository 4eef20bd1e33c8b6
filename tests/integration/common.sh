# Helpers shared by the integration scripts tests/integration/t_*.sh (sourced
# after tests/lib.sh). Not a test itself: run.sh only runs t_*.sh.

PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# require_tierfs: skip the whole test (exit 77) when the daemon, its test
# clients or FUSE are missing; a test that cannot run must not pass.
require_tierfs() {
	if [ ! -x "$TIERFS_BIN" ]; then
		echo "# SKIP: no daemon at $TIERFS_BIN"
		exit 77
	fi
	if [ ! -e /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
		echo "# SKIP: no /dev/fuse or fusermount3"
		exit 77
	fi
	local b
	for b in "$@"; do
		if [ ! -x "$TESTBIN/$b" ]; then
			echo "# SKIP: test client $TESTBIN/$b not built (make $TESTBIN/$b)"
			exit 77
		fi
	done
}

# require_cmd CMD...: skip when a tool is missing.
require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || { echo "# SKIP: $c not installed"; exit 77; }
	done
}

# two_tier_conf BLOCK_SIZE [EXTRA...]: RAM tier + nvme0 + nvme1 both striped
# 1:1; each extra argument is appended as one line (e.g. a [rule] section).
two_tier_conf() {
	local bs=$1; shift
	mkdir -p "$T/nvme0" "$T/nvme1" "$T/meta"
	conf_head "$bs" 256M
	cat <<CONF
[tier nvme0]
type = posix
path = $T/nvme0
capacity = 2G
weight = 1

[tier nvme1]
type = posix
path = $T/nvme1
capacity = 2G
weight = 1

[policy]
stripe = nvme0, nvme1
CONF
	local l
	for l in "$@"; do echo "$l"; done
}

# remount CONF: unmount (daemon must exit 0, no sanitizer report) and mount
# again with the same config.
remount() {
	local rc=0
	umount_fs || rc=$?
	[ $rc -eq 0 ] || { echo "# umount_fs returned $rc" >&2; return $rc; }
	mount_fs "$1"
}

# tree_sums DIR: one line per entry under DIR, sorted, that changes when any
# content, size, mode, owner, mtime (seconds), type, symlink target, user
# xattr or directory changes. Skips the .tierfs control view and tierfs's own
# user.tierfs.* attributes.
tree_sums() {
	(
		cd "$1" || exit 1
		find . -mindepth 1 ! -path './.tierfs*' \( -type d -printf 'd %m %U:%G %p\n' \) -o \
			\( -type l -printf 'l %p -> %l\n' \) -o -printf '%y %m %s %Ts %U:%G %p\n' | sort
		find . -type f ! -path './.tierfs*' -print0 | sort -z | xargs -0 -r sha256sum
		find . -mindepth 1 ! -path './.tierfs*' ! -type l -print0 | sort -z |
			xargs -0 -r getfattr -h -d -e hex 2>/dev/null | grep -v '^user\.tierfs\.'
	)
}

# crash_fs: kill -9 the daemon and lazily unmount what it leaves.
crash_fs() {
	kill -9 "$TIERFS_PID"
	wait "$TIERFS_PID" 2>/dev/null
	TIERFS_PID=
	fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	! mountpoint -q "$MNT"
}

# mount_key 'KEY = VALUE': a filter adding a [mount] key to a config from
# default_conf or two_tier_conf (after its block_size line).
mount_key() { sed "s/^\(block_size = .*\)$/\1\n$1/"; }

# small_ram_conf FILE: default_conf with 64 KiB blocks and a 20 MiB RAM
# tier (320 blocks, near the least the daemon takes), so that evict_ram's
# 64 MiB push a file out of RAM; 0, or 1 after a failed TAP line.
small_ram_conf() {
	default_conf | sed 's/^capacity = 256M/capacity = 20M/; s/^block_size = 1M/block_size = 64K/' >"$1"
	grep -q "capacity = 20M" "$1" && grep -q "block_size = 64K" "$1" ||
		{ fail "could not shrink the RAM tier and the block"; return 1; }
}
evict_ram() { dd if=/dev/zero of="$MNT/filler" bs=1M count=64 conv=fsync status=none && rm -f "$MNT/filler"; }

# replay_conf BLOCK_SIZE RAM [LINE...]: the bench's setup for tierfs-replay,
# small: a RAM tier of RAM, one disk tier (nvme0), the gradient files kept
# in RAM by a rule (not persistent), and each LINE added to [policy], the
# last section. mount_key and nvme0_key add keys to the others.
replay_conf() {
	local bs=$1 ram=$2 l
	shift 2
	mkdir -p "$T/nvme0" "$T/meta"
	conf_head "$bs" "$ram"
	cat <<CONF
[tier nvme0]
type = posix
path = $T/nvme0
capacity = 4G

[rule gradients]
match = *_gradient_*.tensor.swp
tier = ram
persistent = no

[policy]
stripe = nvme0
CONF
	for l in "$@"; do echo "$l"; done
}

# nvme0_key 'KEY = VALUE': a filter adding a key to replay_conf's nvme0.
nvme0_key() { sed "s|^\(path = $T/nvme0\)$|\1\n$1|"; }

# mount_shimmed NAME CONF: mount_fs with BUILD/tests/lib/NAME.so (from
# tests/integration/preload/) preloaded into the daemon, after a check that
# it is built. The shim has no ASan of its own, so ASan must not insist on
# coming first in the link order.
mount_shimmed() {
	local shim="$TIERFS_BUILD/tests/lib/$1.so"
	check "the $1 shim is built ($shim)" test -f "$shim"
	ASAN_OPTIONS="$ASAN_OPTIONS:verify_asan_link_order=0" LD_PRELOAD="$shim" mount_fs "$2"
}

# wait_for CMD...: up to 20 s for CMD to succeed.
wait_for() {
	local i
	for i in $(seq 400); do "$@" && return 0; sleep 0.05; done
	return 1
}

# stat_field LINE KEY: KEY's value on the line of MNT/.tierfs/stats that
# starts with LINE ("cache", "tier nvme0", ...); snap_field FILE LINE KEY:
# the same in FILE, a copy of the stats (tierfs-replay --stats-out).
snap_field() { grep "^$2 " "$1" | tr ' ' '\n' | sed -n "s/^$3=//p"; }
stat_field() { snap_field "$MNT/.tierfs/stats" "$@"; }

# nothing_dirty: the cache holds no dirty block.
nothing_dirty() { grep -q '^cache .* dirty=0 ' "$MNT/.tierfs/stats"; }

# write_fsync_py: $T/fsync.py FILE [MARK] opens FILE, creates MARK (once
# FILE is open), fsyncs, and prints ok or the errno's name.
write_fsync_py() {
	cat >"$T/fsync.py" <<'PYEOF'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
if len(sys.argv) > 2:
    open(sys.argv[2], "w").close()
try:
    os.fsync(fd)
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PYEOF
}

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

# busy_writer DIR: keep writing unsynced data into DIR until the mount dies.
busy_writer() {
	local d=$1
	mkdir -p "$d"
	while :; do
		head -c $((2 << 20)) /dev/urandom >"$d/busy.$((RANDOM % 4))" 2>/dev/null || break
		dd if=/dev/urandom of="$d/busy.grow" bs=64k count=4 oflag=append conv=notrunc status=none 2>/dev/null || break
	done
}

# check_survivors ROUND DIR...: after a crash and a remount, every file in
# $T/synced.sums (sha256sum lines, paths relative to MNT) is intact, and
# every file in the DIRs, written during the crash, reads without I/O
# errors, whatever its content.
check_survivors() {
	local round=$1 d f bad=0
	shift
	if (cd "$MNT" && sha256sum --quiet -c "$T/synced.sums"); then
		ok "round $round: every fsync'd file intact ($(wc -l <"$T/synced.sums") files)"
	else
		fail "round $round: fsync'd data lost or damaged"
	fi
	for d in "$@"; do
		for f in "$d"/*; do
			[ -e "$f" ] || continue
			cat "$f" >/dev/null || { bad=1; echo "# read error on $f"; }
		done
	done
	[ $bad -eq 0 ] && ok "round $round: files written during the crash read without I/O errors" ||
		fail "round $round: files written during the crash give I/O errors"
}

# ---- powerfs (t_powercut, t_slabsync, t_commitfit): a disk that loses power ----
# powerfs_setup sets POWERFS (the binary), BACK (its backing directory) and
# DISK (its mount point), and traps EXIT with powerfs_cleanup.
PF_PID=

# powerfs_setup TIER...: the disk's directories, with a directory on the
# backing side for each tier (there before the first mount, as an admin
# makes them; tierfs makes the metadata directory itself, and must sync it).
powerfs_setup() {
	POWERFS=$TESTBIN/powerfs
	BACK=$T/back
	DISK=$T/disk
	local t
	for t in "$@"; do mkdir -p "$BACK/$t"; done
	mkdir -p "$DISK"
	trap powerfs_cleanup EXIT
}

# powerfs_cleanup: what the EXIT trap of a powerfs test does: the mount on
# the disk, then the disk, then the test directory.
powerfs_cleanup() {
	if mountpoint -q "$MNT" 2>/dev/null; then fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null; fi
	[ -n "$TIERFS_PID" ] && wait "$TIERFS_PID" 2>/dev/null
	if mountpoint -q "$DISK" 2>/dev/null; then fusermount3 -u "$DISK" 2>/dev/null || umount -l "$DISK" 2>/dev/null; fi
	[ -n "$PF_PID" ] && wait "$PF_PID" 2>/dev/null
	rm -rf "$T"
}

# powerfs_mount [VAR=VALUE ...]: the disk comes up, with those POWERFS_*
# settings (powerfs.c); its log goes to $T/pf.log.
powerfs_mount() {
	: >"$T/pf.log"
	env "$@" "$POWERFS" "$BACK" "$DISK" -f 2>"$T/pf.log" &
	PF_PID=$!
	local i
	for i in $(seq 200); do
		mountpoint -q "$DISK" && return 0
		kill -0 "$PF_PID" 2>/dev/null || break
		sleep 0.05
	done
	cat "$T/pf.log" >&2
	return 1
}

# powerfs_cut: the power goes (powerfs undoes at unmount what was never
# fsync'd, and prints what in $T/pf.log). The dead daemon's files may take
# a moment to close.
powerfs_cut() {
	local i
	for i in $(seq 200); do
		fusermount3 -u "$DISK" 2>/dev/null && break
		sleep 0.05
	done
	wait "$PF_PID"
	local rc=$?
	PF_PID=
	[ $rc -eq 0 ] && grep -q '^powerfs: power cut:' "$T/pf.log"
}

# rewrite_crash_rounds CONF ROUNDS EVERY SECS: with the mount of CONF up and
# $MNT/f made by pagegen.py init, ROUNDS times: pagegen.py rewrites $MNT/f
# (an fsync every EVERY writes) for SECS seconds, an expression expanded
# anew each round (e.g. '0.$((RANDOM % 4 + 2))'), the daemon is killed,
# the mount comes back, and every page must read whole and no older than
# acknowledged (pagegen.py check).
rewrite_crash_rounds() {
	local conf=$1 rounds=$2 every=$3 secs=$4 round w
	local pagegen
	pagegen=$(dirname "${BASH_SOURCE[0]}")/pagegen.py
	for round in $(seq "$rounds"); do
		"$PY" "$pagegen" write "$MNT/f" "$round" "$every" >"$T/acked$round" 2>/dev/null &
		w=$!
		sleep "$(eval "echo $secs")"
		check "round $round: kill -9 while rewriting" crash_fs
		wait $w 2>/dev/null
		check "round $round: remount" mount_fs "$conf"
		check "round $round: every page readable, none older than acknowledged" \
			"$PY" "$pagegen" check "$MNT/f" "$T"/acked*
	done
}
