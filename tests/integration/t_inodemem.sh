#!/usr/bin/env bash
# The daemon's memory does not grow with every file ever touched. Each
# inode the kernel had looked up stayed in the inode table for the life of
# the mount, with its block map loaded (a 16 KiB chunk for a one-block
# file): 20000 small files written, or merely listed with `ls -l` after a
# remount, cost the daemon ~17 KiB each (340 MB), and dropping the kernel's
# caches (which FORGETs every inode) gave none of it back.
# Now: a forgotten, idle inode gives back its block map, and its table
# entry when nothing about it is pending; st_blocks of a file whose map is
# not loaded comes from the metadata without loading it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
N=${INODEMEM_FILES:-5000}

# 4K blocks, a small RAM tier and two workers: the cache keeps the maps of
# at most ~1000 files, the rest of the growth is the inode table's.
default_conf | sed 's/^block_size = .*/block_size = 4K\nthreads = 2/; s/^capacity = 256M/capacity = 4M/' \
	>"$T/c.conf"
sed -i 's/^stripe = nvme0$/stripe = nvme0\nlearn = no/' "$T/c.conf"
# Forgotten inodes leave the table at the commit after the FORGET (the
# sweep runs there): a commit a second, not the default one per 5 s, so
# that settle's 5 s always hold one, even with a slow metadata sync.
sed -i 's/^\[mount\]$/[mount]\ncommit_interval = 1/' "$T/c.conf"
grep -q '^commit_interval = 1$' "$T/c.conf" || { fail "config edit"; tap_exit; exit 1; }

# Under ASan the daemon's RSS says more about the sanitizer's quarantine
# and shadow memory than about the inode table: there only the table and
# map counts of .tierfs/stats are checked.
SAN=no
ldd "$TIERFS_BIN" 2>/dev/null | grep -q libasan && SAN=yes
check_rss() { # NAME BYTES_PER_FILE
	if [ $SAN = yes ]; then skip "$1" "RSS under ASan"; else check "$1 (want < 4096)" test "$2" -lt 4096; fi
}
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$TIERFS_PID/status"; }
# settle: let the flusher write back and commit (commit_interval above),
# and the kernel FORGET what it no longer caches.
settle() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
	sleep 3
	echo 3 >/proc/sys/vm/drop_caches
	sleep 2
}

stat_of() { grep -oE " $1=[0-9]+" "$MNT/.tierfs/stats" | head -1 | cut -d= -f2; }
write_files() { # DIR
	mkdir "$MNT/$1" && (cd "$MNT/$1" && for i in $(seq 1 "$N"); do printf x >"f$i" || exit 1; done)
}

mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
# A first round warms the heap up: memory the daemon frees goes back to
# its allocator, not to the system, so growth is measured over a second
# round of as many new files.
check "$N files written" write_files d1
settle
r1=$(rss_kb)
check "$N more files written" write_files d2
settle
grown=$(($(rss_kb) - r1))
per=$((grown * 1024 / N))
echo "# $N more one-block files written, caches dropped: daemon RSS +${grown} KiB (${per} B/file)"
grep '^inodes' "$MNT/.tierfs/stats" | sed 's/^/# /'
check_rss "memory grows by ${per} B per file written and forgotten" "$per"
maps=$(stat_of maps)
check "block maps in memory: ${maps:-none}, not one per file ever written" \
	test -n "$maps" -a "${maps:-0}" -lt $((N / 2))
# A file's fsync covers every write-back before it: then nothing keeps the
# forgotten inodes in the table.
$PY -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.close(fd)' "$MNT/d2/f1"
settle
table=$(stat_of table)
check "inode table after an fsync and dropped caches: ${table:-?} inodes (want < $((N / 2)))" \
	test -n "$table" -a "${table:-0}" -lt $((N / 2))

# Still all there and right after the inodes left the table.
bad=$(cd "$MNT" && for i in 1 2 $((N / 2)) "$N"; do for d in d1 d2; do [ "$(cat "$d/f$i")" = x ] || echo "$d/f$i"; done; done)
check "files read back after their inodes were forgotten" test -z "$bad"
blk=$(stat -c '%h %s %b' "$MNT/d1/f1")
check "stat after forget: nlink 1, size 1, 8 sectors (says $blk)" test "$blk" = "1 1 8"

check "unmount" umount_fs
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
base=$(rss_kb)
n=$(ls -l "$MNT/d1" | grep -c '^-')
check "ls -l after remount lists $N files (lists $n)" test "$n" = "$N"
blocks=$(du -s --block-size=1 "$MNT/d1" | awk '{print $1}')
check "du after remount counts every file's block ($blocks bytes)" test "$blocks" -ge $((N * 4096))
grown=$(($(rss_kb) - base))
per=$((grown * 1024 / N))
echo "# ls -l and du of $N files after a remount: daemon RSS +${grown} KiB (${per} B/file)"
check_rss "memory after ls -l of $N files: ${per} B/file" "$per"
maps=$(stat_of maps)
check "block maps in memory after ls -l and du: ${maps:-none} (want < $((N / 2)))" \
	test -n "$maps" -a "${maps:-0}" -lt $((N / 2))
check "unmount (2)" umount_fs
tap_exit
