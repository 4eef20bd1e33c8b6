#!/usr/bin/env bash
# scripts/fio_figures.sh — throughput of each tier and of the mount, measured with fio.
#
# fio, 1 MiB requests, --mem_align=4096 --direct=1 --ioengine=io_uring
# --iodepth=8, sequential write then read, numjobs 1 and 2 (each job its own
# file; the total size stays FIO_SIZE), raw and tierfs runs interleaved
# (raw, tierfs, raw, tierfs, ...: the disk here is noisy), median reported:
#
#   ram:  tierfs on a RAM-only config vs fio on a tmpfs directory.
#         Time-based runs of FIO_RUNTIME s: writes after the first pass
#         rewrite in place, which is DeepSpeed's steady state.
#   disk: tierfs with a RAM cache of FIO_DISK_RAM over a posix tier in a
#         directory on local disk vs fio on that directory directly. The file
#         (FIO_DISK_SIZE, several times the RAM tier) is laid out once first,
#         unmeasured, on both sides: measured writes rewrite in place.
#         write        fio's rate; the RAM cache absorbs the first FIO_DISK_RAM,
#                      the rest runs at the write-back rate;
#         write+fsync  bytes / (fio time + `sync FILE`): everything durable;
#         read hot     right after the write (the cache may hold the tail);
#         read cold    after unmount + remount: every block comes from disk.
#         Raw reads use O_DIRECT, so they are always cold. Each round runs
#         the writes of both sides, then the reads, the side that goes first
#         alternating by round, so that no read directly follows its own
#         write (the virtual disk keeps draining writes after they end).
#
# Environment (sizes take K/M/G, powers of 1024):
#   FIO_PARTS      parts to run: "ram disk" [ram disk]
#   FIO_JOBS       numjobs values [1 2]
#   FIO_ROUNDS     raw/tierfs pairs per figure [2]
#   FIO_RUNTIME    seconds per time-based run in the ram part [3]
#   FIO_SIZE       file size in the ram part [2G]
#   FIO_SHM        tmpfs directory for the raw ram runs [/dev/shm/tierfs-fio]
#   FIO_DIR        directory on local disk [/var/tmp/tierfs-fio]
#   FIO_DISK_SIZE  file size in the disk part [2G]
#   FIO_DISK_RAM   RAM tier of the disk config [256M]
#   FIO_THREADS    tierfs [mount] threads (empty: the default)
#   TIERFS_BIN     the daemon [build/tierfs]
#   FIO_KEEP=1     keep the work directories
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TIERFS=${TIERFS_BIN:-$ROOT/build/tierfs}
FIO_PARTS=${FIO_PARTS:-ram disk}
FIO_JOBS=${FIO_JOBS:-1 2}
FIO_ROUNDS=${FIO_ROUNDS:-2}
FIO_RUNTIME=${FIO_RUNTIME:-3}
FIO_SIZE=${FIO_SIZE:-2G}
FIO_SHM=${FIO_SHM:-/dev/shm/tierfs-fio}
FIO_DIR=${FIO_DIR:-/var/tmp/tierfs-fio}
FIO_DISK_SIZE=${FIO_DISK_SIZE:-2G}
FIO_DISK_RAM=${FIO_DISK_RAM:-256M}
FIO_THREADS=${FIO_THREADS:-}
FIO_KEEP=${FIO_KEEP:-0}

say() { printf '[fio %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	say "error: $*"
	exit 1
}
bytes() { numfmt --from=iec "${1%B}"; }

command -v fio >/dev/null || die "fio is not installed"
command -v python3 >/dev/null || die "python3 is needed to read fio's JSON"
[ -x "$TIERFS" ] || die "$TIERFS not built (run: make build/tierfs)"
SIZE_B=$(bytes "$FIO_SIZE") || die "FIO_SIZE=$FIO_SIZE is not a size"
DSIZE_B=$(bytes "$FIO_DISK_SIZE") || die "FIO_DISK_SIZE=$FIO_DISK_SIZE is not a size"
DRAM_B=$(bytes "$FIO_DISK_RAM") || die "FIO_DISK_RAM=$FIO_DISK_RAM is not a size"

MNT=
TIERFS_PID=
WORK_LOG=$(mktemp /tmp/tierfs-fio-log.XXXXXX)
RESULTS=$(mktemp /tmp/tierfs-fio-results.XXXXXX)

# mount_tierfs CONF MNT: daemon in the foreground (so we own its pid), wait
# until the mount answers.
mount_tierfs() {
	mkdir -p "$2" || return 1
	"$TIERFS" "$1" "$2" -f 2>>"$WORK_LOG" &
	TIERFS_PID=$!
	MNT=$2
	for _ in $(seq 100); do
		mountpoint -q "$2" && return 0
		kill -0 "$TIERFS_PID" 2>/dev/null || break
		sleep 0.1
	done
	say "tierfs did not mount $1 on $2 (log: $WORK_LOG)"
	tail -5 "$WORK_LOG" >&2
	TIERFS_PID=
	return 1
}

# Unmount and wait for the daemon: it writes back every dirty block first.
umount_tierfs() {
	[ -n "$TIERFS_PID" ] || return 0
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	wait "$TIERFS_PID" 2>/dev/null
	TIERFS_PID=
}

cleanup() {
	umount_tierfs
	if [ "$FIO_KEEP" != 1 ]; then
		rm -rf "$FIO_SHM" "$FIO_DIR"
	fi
	rm -f "$RESULTS"
	[ -s "$WORK_LOG" ] || rm -f "$WORK_LOG"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# fio_run OUTJSON DIR RW NJOBS SIZE_PER_JOB [extra fio args...]
fio_run() {
	local out=$1 dir=$2 rw=$3 nj=$4 sz=$5
	shift 5
	fio --output-format=json --output="$out" --name=seq --directory="$dir" \
		--filename_format='f.$jobnum' --rw="$rw" --bs=1M --size="$sz" \
		--numjobs="$nj" --group_reporting --ioengine=io_uring --iodepth=8 \
		--direct=1 --mem_align=4096 --invalidate=0 "$@" >/dev/null 2>>"$WORK_LOG" ||
		{
			say "fio $rw on $dir failed (log: $WORK_LOG)"
			tail -3 "$WORK_LOG" >&2
			return 1
		}
}

# fio_bw JSON RW: aggregate bytes/s; fio_secs JSON RW: job runtime in s.
fio_field() {
	python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]]
print(j["bw_bytes"] if sys.argv[3] == "bw" else j["runtime"] / 1000.0 if sys.argv[3] == "secs" else j["io_bytes"])
' "$1" "$2" "$3"
}

# record PART FIGURE NJOBS SIDE BYTES_PER_S
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$RESULTS"; }

now() { date +%s.%N; }

# --------------------------------------------------------------- ram part
part_ram() {
	local per conf=$FIO_SHM/ram.conf cap
	# Room for the file plus the cache's own per-request reserve.
	cap=$(((SIZE_B * 5 / 4 + 512 * 1048576) / 1048576))M
	rm -rf "$FIO_SHM" && mkdir -p "$FIO_SHM/raw" "$FIO_SHM/mnt" || die "cannot make $FIO_SHM"
	cat >"$conf" <<EOF
[mount]
metadata = $FIO_SHM/meta
${FIO_THREADS:+threads = $FIO_THREADS}

[tier ram]
type = ram
capacity = $cap

# Without this rule a RAM-only mount answers ENOSPC to every write (blocks
# with no home look for a persistent tier; see the report of this script).
[rule all]
match = *
tier = ram
persistent = no
EOF
	mount_tierfs "$conf" "$FIO_SHM/mnt" || return 1
	local j r rw side dir
	for j in $FIO_JOBS; do
		per=$((SIZE_B / j))
		for r in $(seq "$FIO_ROUNDS"); do
			for side in raw tierfs; do
				[ $side = raw ] && dir=$FIO_SHM/raw || dir=$FIO_SHM/mnt
				for rw in write read; do
					fio_run "$FIO_SHM/out.json" "$dir" "$rw" "$j" "$per" \
						--time_based --runtime="$FIO_RUNTIME" || return 1
					local bw
					bw=$(fio_field "$FIO_SHM/out.json" "$rw" bw)
					record ram "$rw" "$j" $side "$bw"
					say "ram  jobs=$j round $r $side $rw: $(gbs "$bw") GB/s"
				done
			done
		done
		# Files stay between rounds (a rewrite is the steady state); the
		# next numjobs value uses other file sizes.
		rm -f "$FIO_SHM"/raw/f.* "$FIO_SHM"/mnt/f.*
	done
	umount_tierfs
}

# --------------------------------------------------------------- disk part
part_disk() {
	local conf=$FIO_DIR/disk.conf
	rm -rf "$FIO_DIR" && mkdir -p "$FIO_DIR/raw" "$FIO_DIR/tier" "$FIO_DIR/mnt" ||
		die "cannot make $FIO_DIR"
	say "disk: $(df -h --output=source,fstype,avail "$FIO_DIR" | tail -1)"
	cat >"$conf" <<EOF
[mount]
metadata = $FIO_DIR/meta
${FIO_THREADS:+threads = $FIO_THREADS}

[tier ram]
type = ram
capacity = $FIO_DISK_RAM

[tier disk]
type = posix
path = $FIO_DIR/tier
capacity = $((DSIZE_B * 2 / 1048576 + 2048))M
EOF
	local j r side dir per t0 t1 secs bytes bw sides
	for j in $FIO_JOBS; do
		per=$((DSIZE_B / j))
		# Lay out the files once, unmeasured, on both sides.
		fio_run "$FIO_DIR/out.json" "$FIO_DIR/raw" write "$j" "$per" || return 1
		mount_tierfs "$conf" "$FIO_DIR/mnt" || return 1
		fio_run "$FIO_DIR/out.json" "$FIO_DIR/mnt" write "$j" "$per" || return 1
		umount_tierfs
		for r in $(seq "$FIO_ROUNDS"); do
			# Alternate which side goes first, and never read right
			# after one's own write: the virtual disk drains writes
			# for a while after they complete.
			[ $((r % 2)) = 1 ] && sides="raw tierfs" || sides="tierfs raw"
			for side in $sides; do
				if [ $side = raw ]; then
					dir=$FIO_DIR/raw
				else
					dir=$FIO_DIR/mnt
					mount_tierfs "$conf" "$dir" || return 1
				fi
				fio_run "$FIO_DIR/out.json" "$dir" write "$j" "$per" || return 1
				t0=$(now)
				sync "$dir"/f.* || say "sync $dir failed"
				t1=$(now)
				bw=$(fio_field "$FIO_DIR/out.json" write bw)
				secs=$(fio_field "$FIO_DIR/out.json" write secs)
				bytes=$(fio_field "$FIO_DIR/out.json" write bytes)
				record disk write "$j" $side "$bw"
				local wf
				wf=$(python3 -c "print(int($bytes / ($secs + $t1 - $t0)))")
				record disk write+fsync "$j" $side "$wf"
				if [ $side = raw ]; then
					say "disk jobs=$j round $r raw write $(gbs "$bw") GB/s," \
						"with fsync $(gbs "$wf") GB/s"
					continue
				fi
				# Hot: right after the write, the RAM tier may hold the tail.
				fio_run "$FIO_DIR/out.json" "$dir" read "$j" "$per" || return 1
				local hot
				hot=$(fio_field "$FIO_DIR/out.json" read bw)
				record disk "read hot" "$j" tierfs "$hot"
				umount_tierfs
				say "disk jobs=$j round $r tierfs write $(gbs "$bw") GB/s," \
					"with fsync $(gbs "$wf") GB/s, read hot $(gbs "$hot") GB/s"
			done
			for side in $sides; do
				if [ $side = raw ]; then
					fio_run "$FIO_DIR/out.json" "$FIO_DIR/raw" read "$j" "$per" || return 1
					bw=$(fio_field "$FIO_DIR/out.json" read bw)
					# O_DIRECT: the raw read is both hot and cold.
					record disk "read hot" "$j" raw "$bw"
					record disk "read cold" "$j" raw "$bw"
					say "disk jobs=$j round $r raw read $(gbs "$bw") GB/s"
				else
					# Cold: a fresh mount has nothing cached.
					mount_tierfs "$conf" "$FIO_DIR/mnt" || return 1
					fio_run "$FIO_DIR/out.json" "$FIO_DIR/mnt" read "$j" "$per" || return 1
					bw=$(fio_field "$FIO_DIR/out.json" read bw)
					record disk "read cold" "$j" tierfs "$bw"
					umount_tierfs
					say "disk jobs=$j round $r tierfs read cold $(gbs "$bw") GB/s"
				fi
			done
		done
		rm -f "$FIO_DIR"/raw/f.*
		mount_tierfs "$conf" "$FIO_DIR/mnt" && rm -f "$FIO_DIR"/mnt/f.* && umount_tierfs
	done
}

gbs() { python3 -c "print(f'{$1 / 1e9:.2f}')"; }

say "load: $(uptime | sed 's/.*load/load/'); $(nproc) cpus; log $WORK_LOG"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for p in $FIO_PARTS; do
	case $p in
	ram) part_ram || say "ram part failed" ;;
	disk) part_disk || say "disk part failed" ;;
	*) die "unknown part $p (ram, disk)" ;;
	esac
	umount_tierfs
done

# ------------------------------------------------------------- the table
python3 - "$RESULTS" "$LOAD_BEFORE" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import statistics, sys
from collections import defaultdict
rows = defaultdict(list)
order = []
for line in open(sys.argv[1]):
    part, fig, nj, side, bw = line.rstrip("\n").split("\t")
    k = (part, fig, nj)
    if k not in order:
        order.append(k)
    rows[k + (side,)].append(int(bw))
target = {("ram", "read"): 1.00, ("ram", "write"): 0.80}
names = {"ram": "RAM tier vs tmpfs", "disk": "posix tier vs raw dir"}
print()
print(f"fio 1 MiB, io_uring, iodepth 8, direct=1, mem_align=4096; median of interleaved runs")
print(f"load average before: {sys.argv[2]}, after: {sys.argv[3]}")
print(f"{'figure':<24}{'jobs':>5}{'raw GB/s':>10}{'tierfs':>9}{'ratio':>8}{'target':>8}  runs (raw | tierfs)")
for part, fig, nj in order:
    raw = rows[(part, fig, nj, "raw")]
    tfs = rows[(part, fig, nj, "tierfs")]
    if not raw or not tfs:
        continue
    mr, mt = statistics.median(raw), statistics.median(tfs)
    t = target.get((part, fig), 0.90 if part == "disk" else None)
    ratio = mt / mr if mr else 0
    ok = "" if t is None else ("ok" if ratio >= t else "MISS")
    runs = " ".join(f"{x/1e9:.2f}" for x in raw) + " | " + " ".join(f"{x/1e9:.2f}" for x in tfs)
    label = f"{part} {fig}"
    print(f"{label:<24}{nj:>5}{mr/1e9:>10.2f}{mt/1e9:>9.2f}{ratio*100:>7.0f}%{(f'{t*100:.0f}%' if t else ''):>8} {ok:<4} {runs}")
print()
print("targets: RAM tier >= 100% of tmpfs read, >= 80% of tmpfs write;")
print("posix tier >= 90% of the raw directory for both (raw reads are O_DIRECT, i.e. cold).")
EOF
