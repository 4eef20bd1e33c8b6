#!/usr/bin/env bash
# DeepSpeed ZeRO-Infinity's swap I/O on the mount: O_DIRECT opens (no O_TRUNC,
# mode 0600), 1 MiB requests at queue depth 8 through libaio and io_uring,
# page-aligned buffers (reads also 4-byte aligned only, as DeepSpeed's
# gradient reads), the real file names, sizes that are multiples of 1024
# but not of 1 MiB, stat before every read (offset+bytes <= st_size), every
# byte verified; an overwrite pass (new content, same files), a remount, and
# the resulting tree compared with the same run on a plain directory.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs ds_aio
DS=$TESTBIN/ds_aio
RANK=zero_stage_3/optimizer/rank0

run_conf() { # name conf
	local name=$1 conf=$2
	if ! mount_fs "$conf"; then
		fail "$name: mount"
		return
	fi
	check "$name: libaio qd8 1MiB write+read+verify" "$DS" -d "$MNT" -e aio -n 4 -g 1
	check "$name: io_uring qd8 overwrite (no O_TRUNC) + verify" "$DS" -d "$MNT" -e uring -n 4 -g 2
	check "$name: libaio reads back io_uring's data" "$DS" -d "$MNT" -e aio -n 4 -g 2 -r
	# DeepSpeed reads gradients into buffers aligned to 4 bytes only.
	check "$name: O_DIRECT reads into buffers 468 bytes past a page" "$DS" -d "$MNT" -e aio -n 4 -g 2 -r -u 468
	check "$name: the same through io_uring" "$DS" -d "$MNT" -e uring -n 4 -g 2 -r -u 1020
	check_fails "$name: old generation no longer readable (test can fail)" "$DS" -d "$MNT" -e aio -n 4 -g 1 -r 2>/dev/null
	check "$name: unmount clean" umount_fs
	if mount_fs "$conf"; then
		check "$name: after remount io_uring read+verify" "$DS" -d "$MNT" -e uring -n 4 -g 2 -r
		local a b
		a=$(cd "$MNT/$RANK" && ls -l --time-style=+ | awk 'NR>1{print $1,$5,$NF}' && sha256sum *)
		b=$(cd "$T/plain/$RANK" && ls -l --time-style=+ | awk 'NR>1{print $1,$5,$NF}' && sha256sum *)
		if [ "$a" = "$b" ]; then ok "$name: names, modes, sizes, sha256 equal to a plain directory"; else
			fail "$name: tree differs from a plain directory"
			diff <(echo "$a") <(echo "$b") | head -20 | sed 's/^/# /'
		fi
		check "$name: unmount clean (2)" umount_fs
	else
		fail "$name: remount"
	fi
}

# the oracle: the same client on a plain directory of the host
mkdir -p "$T/plain"
"$DS" -d "$T/plain" -e aio -n 4 -g 1 >/dev/null && "$DS" -d "$T/plain" -e uring -n 4 -g 2 >/dev/null ||
	echo "# note: plain directory run failed (O_DIRECT unsupported on $T?)"

default_conf >"$T/c1.conf"
run_conf "1M blocks" "$T/c1.conf"
rm -rf "$T/meta" "$T/nvme0" "$T/nvme1"
two_tier_conf 64K >"$T/c2.conf"
run_conf "64K blocks, 2 tiers" "$T/c2.conf"
tap_exit
