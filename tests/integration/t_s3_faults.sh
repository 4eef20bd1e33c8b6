#!/usr/bin/env bash
# The s3 tier behind a fault proxy (tests/s3/faultproxy.py) in front of a
# real S3 server: a share of requests answered 503 or SlowDown (503 and
# 429), others delayed, connections cut half way through a response or
# dropped before it. Files written and fsync'd, pushed out of RAM, read
# back from s3 and compared; after a remount again. The proxy's counters
# say each fault happened; the tier's stats line counts the retries. Then
# an outage: every request refused for a few seconds while a file is
# written and fsync'd; once the store answers again the data goes out, and
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

S3_CONF_ENDPOINT=$PROXY_ENDPOINT s3_conf 64K 20M >"$T/c.conf"
mount_fs "$T/c.conf" || { fail "mount through the proxy"; tap_exit; exit 1; }
check "faults on: 10% 503, 5% SlowDown, 3% 429, 10% delayed, 5% cut, 2% dropped" \
	proxy_set error=0.10 slowdown=0.05 throttle=0.03 delay=0.10 delay_ms=150 cut=0.05 drop=0.02

mkdir -p "$T/src"
for i in $(seq 0 11); do head -c $(((i % 4 + 1) * 1000000 + i)) /dev/urandom >"$T/src/f$i"; done
copy_sync() {
	local f
	for f in "$T"/src/f*; do
		cp "$f" "$MNT/" && sync "$MNT/$(basename "$f")" || return 1
	done
}
check "12 files (about 30 MB) written and fsync'd through the faults" copy_sync
check "RAM emptied of them (a 64 MiB file written past it)" evict_ram
same() { local f; for f in "$T"/src/f*; do cmp -s "$f" "$MNT/$(basename "$f")" || { echo "# $f differs"; return 1; }; done; }
check "every file reads back from s3, through the faults, intact" same
check "unmount clean, through the faults" umount_fs
mount_fs "$T/c.conf" || { fail "remount through the proxy"; tap_exit; exit 1; }
check "after remount, every file intact" same

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
sleep 4
check "outage over" proxy_set error=0
wait $fp
echo "# fsync during the outage said: $(cat "$T/outage.fsync")"
fsync_ok() { [ "$("$PY" "$T/fsync.py" "$MNT/outage")" = ok ]; }
check "fsync after the outage: the data goes out" fsync_ok
check "unmount clean after the outage" umount_fs
mount_fs "$T/c.conf" || { fail "remount after the outage"; tap_exit; exit 1; }
check "after remount, the file written during the outage is intact" cmp -s "$T/outage.src" "$MNT/outage"
check "and the others too" same
check "unmount clean (3)" umount_fs
tap_exit
