#!/usr/bin/env bash
# The s3 tier behind a fault proxy (tests/s3/faultproxy.py) in front of a
# real S3 server: a share of requests answered 503 or SlowDown (503 and
# 429), others delayed, connections cut half way through a response or
# dropped before it. Files written and fsync'd, unmounted and mounted
# again through the faults, read back from s3 and compared. The proxy's counters
# say each fault happened; the tier's stats line counts the retries. Then
# an outage: every request refused for longer than retry_time while a file
# is written and fsync'd (the fsync may say EIO, nothing else); once the
# store answers again the data goes out, and
# after a remount the file holds every byte that write() acknowledged
# (whatever the fsync said during the outage).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/../s3/lib.sh"
require_tierfs
require_cmd sha256sum curl
require_weed
trap s3_cleanup EXIT
weed_start "$T/weed" || { echo "# SKIP: the S3 server did not start (log above)"; exit 77; }
proxy_start --seed "${FAULT_SEED:-$RANDOM}" || { fail "fault proxy did not start"; tap_exit; exit 1; }
echo "# SeaweedFS at $S3_ENDPOINT, fault proxy at $PROXY_ENDPOINT"

# retry_time bounds each request's retries: a short one, so that the
# outage below outlasts it and the write-back really fails.
S3_TIER_EXTRA="retry_time = 3" S3_CONF_ENDPOINT=$PROXY_ENDPOINT s3_conf 64K 20M >"$T/c.conf"
mount_fs "$T/c.conf" || { fail "mount through the proxy"; tap_exit; exit 1; }
check "faults on: 10% 503, 5% SlowDown, 3% 429, 10% delayed, 5% cut, 2% dropped" \
	proxy_set error=0.10 slowdown=0.05 throttle=0.03 delay=0.10 delay_ms=150 cut=0.05 drop=0.02

mkdir -p "$T/src"
for i in $(seq 0 7); do head -c $(((i % 4 + 1) * 1000000 + i)) /dev/urandom >"$T/src/f$i"; done
copy_sync() {
	local f
	for f in "$T"/src/f*; do
		cp "$f" "$MNT/" && sync "$MNT/$(basename "$f")" || return 1
	done
}
check "8 files (20 MB) written and fsync'd through the faults" copy_sync
same() { local f; for f in "$T"/src/f*; do cmp -s "$f" "$MNT/$(basename "$f")" || { echo "# $f differs"; return 1; }; done; }
check "unmount clean, through the faults" umount_fs
# the mount-time requests (bucket check, lease, listing) meet the faults too
if mount_fs "$T/c.conf" 2>"$T/mount.err"; then
	ok "remount through the faults"
else
	fail "remount through the faults: $(grep -v 'cannot start' "$T/mount.err" | tail -1)"
	proxy_set error=0 slowdown=0 throttle=0 drop=0 cut=0
	mount_fs "$T/c.conf" || { fail "remount with the faults off"; tap_exit; exit 1; }
	proxy_set error=0.10 slowdown=0.05 throttle=0.03 cut=0.05 drop=0.02
fi
check "after remount, every file reads back from s3, through the faults, intact" same

sed 's/^/# proxy: /' "$T/proxy.stats" | tr '\n' ' ' | fold -w 200
echo
for k in errors_503 slowdowns throttles delays cuts drops; do
	check "the proxy did it: $k=$(proxy_stat $k)" test "$(proxy_stat $k)" -gt 0
done
line=$(grep '^tier s3 ' "$MNT/.tierfs/stats")
echo "# ${line:0:500}"
retries=$(echo "$line" | tr ' ' '\n' | sed -n 's/^retries=//p')
injected=$(($(proxy_stat errors_503) + $(proxy_stat slowdowns) + $(proxy_stat throttles)))
echo "# tierfs counted $retries retries; the proxy refused $injected requests, cut $(proxy_stat cuts), dropped $(proxy_stat drops) (since this mount: counters restart)"
check "the tier's stats line counts retries ($retries)" test "${retries:-0}" -gt 0

# An outage: every request refused while a file is written and fsync'd.
check "outage: every request answered 503" proxy_set error=1 slowdown=0 throttle=0 delay=0 cut=0 drop=0
head -c $((5 << 20)) /dev/urandom >"$T/outage.src"
write_fsync_py
cp "$T/outage.src" "$MNT/outage" && ok "write() of 5 MiB during the outage acknowledged" || fail "write during the outage"
"$PY" "$T/fsync.py" "$MNT/outage" >"$T/outage.fsync" 2>&1 &
fp=$!
sleep 6
check "outage over" proxy_set error=0
wait $fp
echo "# fsync during the outage said: $(cat "$T/outage.fsync")"
check "fsync during the outage: ok or EIO, nothing else" grep -qxE 'ok|EIO' "$T/outage.fsync"
fsync_ok() { [ "$("$PY" "$T/fsync.py" "$MNT/outage")" = ok ]; }
check "fsync after the outage: the data goes out" fsync_ok
check "unmount clean after the outage" umount_fs
mount_fs "$T/c.conf" || { fail "remount after the outage"; tap_exit; exit 1; }
check "after remount, the file written during the outage is intact" cmp -s "$T/outage.src" "$MNT/outage"
check "and the others too" same
check "unmount clean (3)" umount_fs
tap_exit
