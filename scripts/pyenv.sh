#!/usr/bin/env bash
# Usage: scripts/pyenv.sh NAME REQUIREMENT...
#
# Create once, and print the path of, a Python venv holding REQUIREMENTs
# from PyPI, for test servers and clients that Debian does not package
# (Debian's pip refuses system-wide installs). Venvs live in a cache
# outside the tree, $TIERFS_CACHE (default ~/.cache/tierfs), so that a
# second run, or a second clone, reuses them; one is rebuilt when its
# requirement list changes. Prints progress on stderr, the path on stdout.
# Exit status 77 when PyPI cannot be reached and no venv exists yet, so a
# test can report SKIP with the reason.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 NAME REQUIREMENT..." >&2; exit 2; }
name=$1
shift
cache=${TIERFS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tierfs}
venv=$cache/venv-$name
want="$*"
stamp=$venv/.tierfs-requirements
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	echo "$venv"
	exit 0
fi
mkdir -p "$cache"
# One installer at a time per venv: the two test lanes may ask together.
exec 9>"$cache/.lock-$name"
flock 9
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	echo "$venv"
	exit 0
fi
echo "pyenv: installing $want into $venv" >&2
rm -rf "$venv"
python3 -m venv "$venv" >&2
t0=$SECONDS
if ! "$venv/bin/pip" install --disable-pip-version-check --progress-bar off -q "$@" >&2; then
	rm -rf "$venv"
	echo "pyenv: pip could not install $want" >&2
	exit 77
fi
echo "$want" >"$stamp"
echo "pyenv: $name ready in $((SECONDS - t0)) s" >&2
echo "$venv"
