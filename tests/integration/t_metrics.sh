#!/usr/bin/env bash
# tests/integration/t_metrics.sh — [mount] metrics: the Prometheus endpoint
# and .tierfs/metrics, read by a real client (prometheus_client's parser):
# every line parses, every family has HELP and TYPE, histograms are whole;
# the counters move as I/O runs; bad requests get 4xx and the server keeps
# answering; it listens where the config says (loopback) and nowhere else;
# a port in use and a bad address stop the mount with a clear message.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd dd ss

# Debian's python3-prometheus-client lives in the system Python; a python3
# of another install on PATH may lack it.
PYM=
for p in /usr/bin/python3 python3; do
	if "$p" -c 'import prometheus_client.parser' 2>/dev/null; then PYM=$p; break; fi
done
[ -n "$PYM" ] || { echo "# SKIP: no python3 with prometheus_client (apt-get install python3-prometheus-client)"; exit 77; }
MC() { "$PYM" "$HERE/metrics_client.py" "$@"; }

# A port free now (the kernel's pick); taken by someone else before the
# mount, the mount fails and says so.
PORT=$("$PYM" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT/metrics

small_ram_conf "$T/m.conf.in" || { tap_exit; exit 1; }
mount_key "metrics = 127.0.0.1:$PORT" <"$T/m.conf.in" >"$T/m.conf"
mount_fs "$T/m.conf" || { fail mount; tap_exit; exit 1; }
check "the log says where metrics are served" grep -q "serving $URL" "$T/daemon.log"
# answers: the server replies 200 to a scrape (whatever the text holds:
# that is the parse checks' business).
answers() { [ "$(MC status "$PORT" 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n' 2>/dev/null)" = 200 ]; }
wait_for answers

parses() { MC parse "$1" >/dev/null; }
check "/metrics: every line parses, every family has HELP and TYPE" parses "$URL"
MC parse "$URL" >"$T/http.fams" 2>/dev/null
MC parse "$MNT/.tierfs/metrics" >"$T/file.fams" 2>"$T/file.err"
check ".tierfs/metrics parses too" test -s "$T/file.fams" -a ! -s "$T/file.err"
check ".tierfs/metrics has the families of /metrics" cmp -s "$T/http.fams" "$T/file.fams"
check ".tierfs is listed with metrics" grep -qx metrics <(ls "$MNT/.tierfs")
for f in "tierfs_tier_read_bytes counter" "tierfs_tier_write_bytes counter" \
	"tierfs_tier_checksum_errors counter" "tierfs_tier_busy_seconds counter" \
	"tierfs_tier_slots_used gauge" "tierfs_cache_blocks gauge" "tierfs_cache_dirty_bytes gauge" \
	"tierfs_cache_ram_used_bytes gauge" "tierfs_cache_hits counter" \
	"tierfs_tier_io_latency_seconds histogram" "tierfs_learner_learned gauge" \
	"tierfs_learner_cycle_accesses gauge"; do
	check "family $f" grep -qx "$f" "$T/http.fams"
done

# Values move: bytes written to nvme0 by an fsync'd write, bytes read from
# it by a read of a file pushed out of RAM, latency counted for both.
v() { MC value "$URL" "$@" 2>>"$T/mc.err" || echo -1; }
w0=$(v tierfs_tier_write_bytes_total tier=nvme0)
wc0=$(v tierfs_tier_io_latency_seconds_count tier=nvme0 op=write)
dd if=/dev/urandom of="$MNT/f" bs=1M count=8 conv=fsync status=none
w1=$(v tierfs_tier_write_bytes_total tier=nvme0)
wc1=$(v tierfs_tier_io_latency_seconds_count tier=nvme0 op=write)
echo "# nvme0 write bytes $w0 -> $w1, write latency count $wc0 -> $wc1"
check "write bytes grow by the file's 8 MiB or more" test "$w0" -ge 0 -a "$w1" -ge $((w0 + 8388608))
check "write latency histogram counts the writes" test "$wc0" -ge 0 -a "$wc1" -gt "$wc0"
evict_ram
r0=$(v tierfs_tier_read_bytes_total tier=nvme0)
rc0=$(v tierfs_tier_io_latency_seconds_count tier=nvme0 op=read)
m0=$(v tierfs_cache_misses_total)
cat "$MNT/f" >/dev/null
r1=$(MC value "$MNT/.tierfs/metrics" tierfs_tier_read_bytes_total tier=nvme0 || echo -1)
rc1=$(v tierfs_tier_io_latency_seconds_count tier=nvme0 op=read)
m1=$(v tierfs_cache_misses_total)
echo "# nvme0 read bytes $r0 -> $r1 (.tierfs/metrics), read latency count $rc0 -> $rc1, misses $m0 -> $m1"
check "read bytes grow as the evicted file is read" test "$r0" -ge 0 -a "$r1" -gt "$r0"
check "read latency histogram counts the reads" test "$rc0" -ge 0 -a "$rc1" -gt "$rc0"
check "cache misses grow" test "$m0" -ge 0 -a "$m1" -gt "$m0"
check "still parses after I/O" parses "$URL"

# Bad requests: a status each, and the server still answers after each.
req() {
	local want=$1 what=$2 got
	got=$(MC status "$PORT" "$3" 2>&1)
	if [[ $got =~ ^($want)$ ]]; then ok "$what: $got"; else fail "$what: got '$got', want $want"; fi
	check "answers after: $what" answers
}
req 404 "unknown path" 'GET /nope HTTP/1.1\r\nHost: x\r\n\r\n'
req 404 "path under /metrics" 'GET /metrics/x HTTP/1.1\r\nHost: x\r\n\r\n'
req 405 "POST" 'POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello'
req 405 "DELETE" 'DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n'
req "4[0-9][0-9]" "64 KiB header" 'GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n'
req "4[0-9][0-9]" "64 KiB path" 'GET /{big} HTTP/1.1\r\nHost: x\r\n\r\n'
req "4[0-9][0-9]|closed" "garbage" '\x00\xff\x01 nonsense\r\n\r\n'
req 200 "HEAD" 'HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n'
# Clients that go away mid-request.
for i in 1 2 3; do
	"$PYM" -c "import socket; c=socket.create_connection(('127.0.0.1', $PORT)); c.send(b'GET /met'); c.close()"
done
check "answers after clients left mid-request" answers

# Where it listens: 127.0.0.1 only, not every address.
ss -ltnH "sport = :$PORT" >"$T/ss"
sed 's/^/#   ss: /' "$T/ss"
check "listens on 127.0.0.1:$PORT" grep -q " 127.0.0.1:$PORT " "$T/ss"
check "and on no other address" test "$(wc -l <"$T/ss")" -eq 1
other=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -v '^127\.' | grep -v : | head -1)
if [ -n "$other" ]; then
	check_fails "not reachable on $other:$PORT" "$PYM" -c \
		"import socket; socket.create_connection(('$other', $PORT), timeout=5)" 2>/dev/null
else
	skip "not reachable on another address" "this host has no other IPv4 address"
fi

# A second mount asking for the same port: fails, saying why.
mkdir -p "$T/n2" "$T/meta2" "$T/mnt2"
sed "s#$T/nvme0#$T/n2#; s#$T/meta#$T/meta2#" "$T/m.conf" >"$T/m2.conf"
rc=0
timeout -k 5 60 "$TIERFS_BIN" "$T/m2.conf" "$T/mnt2" -f 2>"$T/m2.err" || rc=$?
sed 's/^/#   /' "$T/m2.err"
check "a port in use fails the mount (status $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "and says the address is in use" grep -q "127.0.0.1:$PORT: Address already in use" "$T/m2.err"
check_fails "and mounts nothing" mountpoint -q "$T/mnt2"
check "the first mount still answers" answers

check "unmount clean" umount_fs
check_fails "nothing listens after unmount" answers

# A bare port means loopback.
mount_key "metrics = $PORT" <"$T/m.conf.in" >"$T/m3.conf"
mount_fs "$T/m3.conf" || fail "mount with a bare port"
wait_for answers
check "a bare port serves on 127.0.0.1" grep -q " 127.0.0.1:$PORT " <(ss -ltnH "sport = :$PORT")
check "unmount clean (2)" umount_fs

# Bad addresses: a config error at mount, FILE:LINE: key 'metrics'.
for bad in 999.1.1.1:80 127.0.0.1:0 127.0.0.1:70000 "127.0.0.1:" ":80" "[::1]80" nvme0.example:80 yes; do
	mount_key "metrics = $bad" <"$T/m.conf.in" >"$T/bad.conf"
	line=$(grep -n '^metrics = ' "$T/bad.conf" | cut -d: -f1)
	rc=0
	timeout -k 5 20 "$TIERFS_BIN" "$T/bad.conf" "$MNT" -f 2>"$T/bad.err" || rc=$?
	if [ "$rc" -eq 2 ] && grep -q "^tierfs: $T/bad.conf:$line: key 'metrics': " "$T/bad.err"; then
		ok "metrics = $bad: $(head -1 "$T/bad.err" | sed "s#^tierfs: $T/##")"
	else
		fail "metrics = $bad: status $rc, want 2 and a FILE:LINE: key 'metrics' line"
		sed 's/^/#   /' "$T/bad.err"
	fi
done
tap_exit
