#!/usr/bin/env bash
# make e2e: real DeepSpeed training with nvme_path on a tierfs mount,
# against the same training on a plain directory.
#
# A small transformer LM (scripts/e2e/train.py) trains under DeepSpeed's
# ZeRO stage 3 with offload_optimizer and offload_param both on NVMe, two
# ranks on this node sharing the nvme_path (gloo on DeepSpeed's CPU
# accelerator, or NCCL and CUDA with a GPU per rank). The aio block_size
# is the mount's block size, and the RAM tier is smaller than the swapped
# state, so blocks are evicted and written back during the run. Each step's
# loss must equal the plain (tmpfs) directory's to the last bit and every swap file
# must be byte-identical at the end (read back after a remount, from disk).
# Then the same with offload_optimizer's pipeline_read and pipeline_write.
#
# "run.sh --prepare" only installs the venv and builds DeepSpeed's ops
# (make test does that before its tests, outside the test's time limit).
#
# Prints TAP lines (ok / not ok / # SKIP), DeepSpeed's version, both runs'
# losses and time per step. Exit 0 when all passed, 77 when DeepSpeed
# cannot be installed or built here (the reason is printed), 1 otherwise.
#
#   TIERFS_BIN      the daemon (default build/tierfs)
#   E2E_STEPS       training steps per run (default 20)
#   E2E_BLOCK       the mount's block size, DeepSpeed's aio block_size (1M)
#   E2E_RAM         the RAM tier's capacity (default 64M; the state is larger)
#   E2E_DIR         where the scratch directory goes (default /var/tmp)
#   E2E_PLAIN       where the plain directory of the reference run goes
#                   (default /dev/shm: see below why not a disk)
#   E2E_PIPELINE    "off on" (default), "off" or "on": which runs to make
#   E2E_MODEL       extra arguments to train.py (e.g. "--dim 512 --layers 8")
#   E2E_KEEP        set: keep the scratch directory (both runs' files, logs)
#   TIERFS_CACHE    where the venv and DeepSpeed's built ops are kept
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
TIERFS_BIN=${TIERFS_BIN:-$ROOT/build/tierfs}
STEPS=${E2E_STEPS:-20}
BS=${E2E_BLOCK:-1M}
RAM=${E2E_RAM:-64M}
MODES=${E2E_PIPELINE:-off on}
DS_VER=0.19.8
TORCH_VER=2.15.0

N=0 FAILS=0
ok() { N=$((N + 1)); echo "ok $N - $*"; }
fail() { N=$((N + 1)); FAILS=$((FAILS + 1)); echo "not ok $N - $*"; }
check() { local n=$1; shift; if "$@"; then ok "$n"; else fail "$n"; fi; }
skip_all() { echo "1..0 # SKIP $*"; exit 77; }
note() { sed 's/^/# /'; }

# --prepare runs while the daemon is still being built: it needs none.
[ "${1:-}" = --prepare ] || [ -x "$TIERFS_BIN" ] || skip_all "no daemon at $TIERFS_BIN (make all)"
[ -e /dev/fuse ] && command -v fusermount3 >/dev/null || skip_all "no /dev/fuse or fusermount3"

bytes() { numfmt --from=iec "$1"; }
BSB=$(bytes "$BS") || skip_all "E2E_BLOCK=$BS is not a size"

# The venv: torch and DeepSpeed from PyPI, cached between runs.
t0=$SECONDS
plog=$(mktemp)
venv=$(scripts/pyenv.sh ds "deepspeed==$DS_VER" "torch==$TORCH_VER" 2>"$plog")
rc=$?
note <"$plog"
rm -f "$plog"
[ $rc -eq 0 ] && [ -x "$venv/bin/python" ] ||
	skip_all "DeepSpeed $DS_VER and torch $TORCH_VER could not be installed from PyPI (scripts/pyenv.sh exit $rc)"
echo "# venv $venv ready in $((SECONDS - t0)) s"
PY=$venv/bin/python
cache=$(dirname "$venv")
export PATH=$venv/bin:$PATH # ninja for DeepSpeed's JIT builds
# DeepSpeed builds its aio and Adam ops on first use; keep them beside the
# venv, per version, so only the first run pays for the compiler.
export TORCH_EXTENSIONS_DIR=$cache/torch-extensions-ds$DS_VER-torch$TORCH_VER
export GLOO_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
# CUDA where torch sees a GPU per rank (NCCL takes one rank per GPU), else
# DeepSpeed's CPU accelerator (gloo).
if "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.device_count() >= 2 else 1)' 2>/dev/null; then
	export DS_ACCELERATOR=cuda
else
	export DS_ACCELERATOR=cpu
fi

t0=$SECONDS
if ! "$PY" - >"$TORCH_EXTENSIONS_DIR.log" 2>&1 <<'PYEOF'; then
from deepspeed.accelerator import get_accelerator
# The last two are the CPU accelerator's, built at its first use too.
for op in ("AsyncIOBuilder", "CPUAdamBuilder", "ShareMemCommBuilder", "PinMemoryBuilder"):
    b = get_accelerator().create_op_builder(op)
    if b is None or not b.is_compatible(verbose=True):
        if op in ("AsyncIOBuilder", "CPUAdamBuilder"):
            raise SystemExit(f"{op} cannot be built here (libaio-dev, a C++ compiler?)")
        continue
    b.load(verbose=False)
PYEOF
	tail -15 "$TORCH_EXTENSIONS_DIR.log" | note
	skip_all "DeepSpeed's aio and cpu_adam ops do not build here (log: $TORCH_EXTENSIONS_DIR.log)"
fi
echo "# DeepSpeed's ops ready in $((SECONDS - t0)) s ($TORCH_EXTENSIONS_DIR), accelerator $DS_ACCELERATOR"
[ "${1:-}" = --prepare ] && exit 0

W=$(mktemp -d "${E2E_DIR:-/var/tmp}/tierfs-e2e.XXXXXX")
MNT=$W/mnt
# The reference run's directory: tmpfs, which takes O_DIRECT at any
# alignment. On a disk file system DeepSpeed's aio gets wrong bytes for
# reads at offsets that are not sector multiples and never checks a
# request's result, so a plain ext4 directory is no reference (docs/e2e.md).
P=$(mktemp -d "${E2E_PLAIN:-/dev/shm}/tierfs-e2e-plain.XXXXXX")
PID=
cleanup() {
	if [ -n "${E2E_KEEP:-}" ]; then echo "# kept $P"; else rm -rf "$P"; fi
	if mountpoint -q "$MNT" 2>/dev/null; then fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null; fi
	[ -n "$PID" ] && { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }
	if [ -n "${E2E_KEEP:-}" ]; then echo "# kept $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$MNT"

mount_fs() {
	"$TIERFS_BIN" "$W/tierfs.conf" "$MNT" -f 2>>"$W/daemon.log" &
	PID=$!
	local i
	for i in $(seq 1 600); do
		mountpoint -q "$MNT" && return 0
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.05
	done
	note <"$W/daemon.log"
	PID=
	return 1
}
umount_fs() {
	fusermount3 -u "$MNT" || return 1
	local rc=0
	wait "$PID" || rc=$?
	PID=
	if grep -qE 'Sanitizer|runtime error' "$W/daemon.log"; then note <"$W/daemon.log"; rc=99; fi
	return $rc
}
stat_field() { grep "^$1 " "$W/stats" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# train DIR OUT [--pipeline]: both ranks, DIR as nvme_path; the ranks'
# output goes to OUT.rank0.log and OUT.rank1.log.
train() {
	local dir=$1 out=$2 r pids=() rc=0 port
	shift 2
	port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	for r in 0 1; do
		RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_PORT=$port \
			"$PY" scripts/e2e/train.py --nvme-path "$dir" --out-dir "$out" --steps "$STEPS" \
			--block-size "$BSB" ${E2E_MODEL:-} "$@" >"$out.rank$r.log" 2>&1 &
		pids+=($!)
	done
	# A rank that fails leaves the other waiting in a collective: stop it.
	local left=2 st
	while [ $left -gt 0 ]; do
		wait -n "${pids[@]}" 2>/dev/null # (a reaped pid: "no such job")
		st=$?
		left=$((left - 1))
		if [ $st -ne 0 ]; then
			rc=1
			kill "${pids[@]}" 2>/dev/null
		fi
	done
	if [ $rc -ne 0 ]; then
		grep -hE 'Error|error|Traceback' "$out".rank*.log | head -20 | note
		echo "# (logs: $out.rank0.log, $out.rank1.log)"
	fi
	return $rc
}

for mode in $MODES; do
	flag=
	[ "$mode" = on ] && flag=--pipeline
	tag="pipeline $mode"
	rm -rf "$W/meta" "$W/nvme0" "$P/plain" "$W"/out-*
	mkdir -p "$W/meta" "$W/nvme0" "$P/plain"
	cat >"$W/tierfs.conf" <<CONF
[mount]
metadata = $W/meta
block_size = $BS

# Smaller than the swapped state: blocks are evicted and written back.
[tier ram]
type = ram
capacity = $RAM

[tier nvme0]
type = posix
path = $W/nvme0
slab_size = 256M

[policy]
stripe = nvme0
CONF

	t0=$SECONDS
	if ! train "$P/plain" "$W/out-plain" $flag; then
		fail "$tag: training on a plain directory"
		continue
	fi
	echo "# $tag: plain directory run took $((SECONDS - t0)) s"
	mount_fs || { fail "$tag: mount"; continue; }
	t0=$SECONDS
	if ! train "$MNT/ds" "$W/out-tierfs" $flag; then
		fail "$tag: training on tierfs"
		umount_fs
		continue
	fi
	echo "# $tag: tierfs run took $((SECONDS - t0)) s"
	cp "$MNT/.tierfs/stats" "$W/stats"
	grep -E '^(cache|tier)' "$W/stats" | note
	ev=$(stat_field cache evictions) fl=$(stat_field cache flushes)
	wr=$(stat_field 'tier nvme0' bytes_written) rd=$(stat_field 'tier nvme0' bytes_read)
	check "$tag: blocks evicted during the run ($ev)" test "${ev:-0}" -gt 0
	check "$tag: blocks written back during the run ($fl write-backs, $wr bytes to nvme0)" \
		test "${fl:-0}" -gt 0 -a "${wr:-0}" -gt 0
	check "$tag: evicted blocks read back from nvme0 ($rd bytes)" test "${rd:-0}" -gt 0
	"$PY" scripts/e2e/compare.py times "$W/out-plain" "$W/out-tierfs"
	check "$tag: every step's loss bit-identical on both ranks" \
		"$PY" scripts/e2e/compare.py losses "$W/out-plain" "$W/out-tierfs"
	check "$tag: unmount clean" umount_fs
	# Read the files back after a remount: what the disk tier holds.
	if mount_fs; then
		check "$tag: every swap file byte-identical after a remount" \
			"$PY" scripts/e2e/compare.py files "$P/plain" "$MNT/ds"
		check "$tag: unmount clean (2)" umount_fs
	else
		fail "$tag: remount"
	fi
done
echo "1..$N"
[ $FAILS -eq 0 ]
