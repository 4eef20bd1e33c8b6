#!/usr/bin/env bash
# Randomized operation test (fsx): >= 100,000 random writes, reads, truncates,
# hole-creating writes, fsyncs, reopens and fallocates (space set aside, with
# and without --keep-size, punched holes, zeroed ranges) over 4+ files on the
# mount, each checked byte-for-byte against shadow files on a plain directory; then a
# remount and a full compare. Two configs: 1 MiB blocks on one tier, and
# 64 KiB blocks striped over two tiers (block boundaries crossed often);
# then the second with RAM for a sixth of the files (eviction all along).
# FSX_MODE1..3 add fsx flags per run: by default the first maps (-M: writes
# and reads through shared mappings beside read/write), the second opens
# O_DIRECT and maps a second, buffered open of each file (-M -D: page
# cache and direct I/O mixed on one file), the third opens O_DIRECT (-D),
# so that every read reaches the daemon's cache as the pressure wants.
# FSX_SEED picks the seed (printed, so a failure can be replayed).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs fsx
SEED=${FSX_SEED:-$((RANDOM * 32768 + RANDOM))}
echo "# fsx seed $SEED (replay: FSX_SEED=$SEED)"
FSX=$TESTBIN/fsx

run_fsx() { # name conf ops files maxsize maxlen seed [fsx flags]
	local name=$1 conf=$2 ops=$3 nf=$4 ms=$5 ml=$6 seed=$7 mode=${8:-}
	mkdir -p "$T/shadow-$name"
	if ! mount_fs "$conf"; then
		fail "$name: mount"
		return
	fi
	mkdir -p "$MNT/fsx"
	# shellcheck disable=SC2086 # MODE: flags, split on purpose
	check "$name: $ops random ops on $nf files${mode:+ ($mode)}" "$FSX" -q -c $mode -d "$MNT/fsx" \
		-S "$T/shadow-$name" -n "$ops" -f "$nf" -m "$ms" -l "$ml" -s "$seed"
	if [ -n "${EVICT_CHECK:-}" ]; then
		# the pressure is what this run is for: without it, it tests nothing new
		local ev mi
		ev=$(grep -o 'evictions=[0-9]*' "$MNT/.tierfs/stats" | cut -d= -f2)
		mi=$(grep -o ' misses=[0-9]*' "$MNT/.tierfs/stats" | cut -d= -f2)
		echo "# $name: $ev evictions, $mi misses"
		check "$name: RAM was short (evictions $ev >= 200, misses $mi >= 50)" \
			test "${ev:-0}" -ge 200 -a "${mi:-0}" -ge 50
	fi
	check "$name: unmount clean" umount_fs
	if mount_fs "$conf"; then
		check "$name: full compare after remount" "$FSX" -q -V -d "$MNT/fsx" -S "$T/shadow-$name" -f "$nf" -l "$ml"
		# a second short run on the remounted files, then compare again
		# shellcheck disable=SC2086
		check "$name: more ops after remount" "$FSX" -q $mode -d "$MNT/fsx" -S "$T/shadow-$name" \
			-n 2000 -f "$nf" -m "$ms" -l "$ml" -s $((seed + 1))
		check "$name: unmount clean (2)" umount_fs
	else
		fail "$name: remount"
	fi
}

default_conf >"$T/c1.conf"
run_fsx 1m-blocks "$T/c1.conf" "${FSX_OPS1:-50000}" 4 $((8 << 20)) $((2 << 20)) "$SEED" "${FSX_MODE1--M}"

rm -rf "$T/meta" "$T/nvme0" "$T/nvme1"
two_tier_conf 64K >"$T/c2.conf"
run_fsx 64k-blocks "$T/c2.conf" "${FSX_OPS2:-50000}" 6 $((4 << 20)) $((256 << 10)) $((SEED + 7)) "${FSX_MODE2--M -D}"

# The runs above fit their files in RAM: blocks leave it only at unmount.
# Here RAM holds a sixth of the files (20 MiB, the least that 64 KiB blocks
# and 16 FUSE threads allow, against 6 files of up to 64 MiB), so every
# operation races eviction, write-back and reads back from disk.
rm -rf "$T/meta" "$T/nvme0" "$T/nvme1"
two_tier_conf 64K | sed 's/^capacity = 256M$/capacity = 20M/' >"$T/c3.conf"
EVICT_CHECK=1 run_fsx small-ram "$T/c3.conf" "${FSX_OPS3:-20000}" 6 $((64 << 20)) $((1 << 20)) $((SEED + 13)) "${FSX_MODE3--D}"
tap_exit
