#!/usr/bin/env bash
# t_fsx's random operations (fsx.c: writes, reads, truncates, holes, fsyncs,
# reopens, fallocate) over a mount whose only persistent tier is s3 on a
# real S3 server (SeaweedFS), with RAM for a fraction of the files, so that
# every operation meets write-back to s3 and reads back from it; each read
# checked against shadow files on a plain directory, then a remount and a
# full compare, and more operations on the remounted files; lz4 on. The s3 tier's
# stats line must show the traffic (PUTs and GETs really happened).
# FSX_SEED picks the seed (printed), S3_FSX_OPS the number of operations.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/../s3/lib.sh"
require_tierfs fsx
require_weed
trap s3_cleanup EXIT
weed_start "$T/weed" || { echo "# SKIP: the S3 server did not start (log above)"; exit 77; }
SEED=${FSX_SEED:-$((RANDOM * 32768 + RANDOM))}
echo "# fsx seed $SEED (replay: FSX_SEED=$SEED), SeaweedFS at $S3_ENDPOINT"
FSX=$TESTBIN/fsx
OPS=${S3_FSX_OPS:-10000}

# 64 KiB blocks, 20 MiB of RAM (the least the daemon takes at that block
# size) against 6 files of up to 64 MiB.
# lz4 on: compressed blocks of every length, partial ones too.
S3_TIER_EXTRA="compress = lz4" s3_conf 64K 20M >"$T/c.conf"
mkdir -p "$T/shadow"
mount_fs "$T/c.conf" || { fail "mount on s3 alone"; tap_exit; exit 1; }
mkdir -p "$MNT/fsx"
check "$OPS random ops on 6 files, RAM short, s3 the only persistent tier" \
	"$FSX" -q -c -d "$MNT/fsx" -S "$T/shadow" -n "$OPS" -f 6 -m $((64 << 20)) -l $((1 << 20)) -s "$SEED"
ev=$(stat_field cache evictions)
mi=$(stat_field cache misses)
line=$(grep '^tier s3 ' "$MNT/.tierfs/stats")
wr=$(echo "$line" | tr ' ' '\n' | sed -n 's/^writes=//p')
rd=$(echo "$line" | tr ' ' '\n' | sed -n 's/^reads=//p')
echo "# $ev evictions, $mi misses; tier s3: $wr writes, $rd reads"
echo "# ${line:0:400}"
check "RAM was short: blocks evicted ($ev) and read back ($mi misses)" test "${ev:-0}" -ge 40 -a "${mi:-0}" -ge 15
check "blocks written to s3 ($wr) and read from it ($rd)" test "${wr:-0}" -ge 100 -a "${rd:-0}" -ge 15
check "unmount clean" umount_fs
if mount_fs "$T/c.conf"; then
	check "full compare after remount (every block from s3)" "$FSX" -q -V -d "$MNT/fsx" -S "$T/shadow" -f 6 -l $((1 << 20))
	check "more ops after remount" "$FSX" -q -d "$MNT/fsx" -S "$T/shadow" -n 1000 -f 6 -m $((64 << 20)) \
		-l $((1 << 20)) -s $((SEED + 1))
	check "unmount clean (2)" umount_fs
	mount_fs "$T/c.conf" && check "full compare after the second remount" \
		"$FSX" -q -V -d "$MNT/fsx" -S "$T/shadow" -f 6 -l $((1 << 20))
	check "unmount clean (3)" umount_fs
else
	fail "remount"
fi
tap_exit
