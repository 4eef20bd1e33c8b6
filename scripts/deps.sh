#!/usr/bin/env bash
# Install every Debian package tierfs needs to build, test, demo and bench.
# Idempotent and quiet when everything is already there.
set -euo pipefail
PKGS=(
	build-essential pkg-config
	libfuse3-dev fuse3            # the FUSE daemon (low-level API)
	liburing-dev                  # posix tier I/O, test clients
	liblmdb-dev                   # namespace and block maps
	libinih-dev                   # config parsing
	libxxhash-dev                 # block checksums
	liblz4-dev libssl-dev libcurl4-openssl-dev  # codecs and the s3 tier
	libmicrohttpd-dev             # the Prometheus /metrics endpoint
	mandoc                        # man pages: rendering and lint
	libcmocka-dev                 # unit tests
	libaio-dev                    # DeepSpeed-like libaio test client and bench
	fio attr                      # throughput figures, getfattr/setfattr
	gnuplot-nox                   # bench plot
	python3 python3-venv          # test helpers; venvs for PyPI test servers (scripts/pyenv.sh)
	python3-dev                   # Python.h for DeepSpeed's JIT-built ops (make e2e)
	python3-boto3 python3-prometheus-client  # S3 and metrics test clients
	procps                        # pgrep/pkill in the integration tests
)
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
