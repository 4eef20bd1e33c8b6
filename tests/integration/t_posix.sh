#!/usr/bin/env bash
# POSIX behaviour of the mount compared with a plain directory on the host
# (ext4): posix_check.py runs the same checks on both (create/O_EXCL/O_TRUNC/
# O_APPEND/O_DIRECT, odd-offset pread/pwrite, holes, truncate, unlink of an
# open file, rename, mkdir/rmdir, 2000-entry readdir, chmod/chown/utimes,
# symlinks, statfs, fsync, fallocate, punched holes, SEEK_DATA/SEEK_HOLE,
# user xattrs, st_size under concurrent
# extenders); each must pass on the mount and observe what ext4 observes.
# Then the same through the usual tools (touch -d, chmod, stat, df,
# setfattr/getfattr).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" getfattr setfattr

mkdir -p "$T/plain"
"$PY" "$HERE/posix_check.py" "$T/plain" >"$T/plain.out" 2>&1
default_conf >"$T/c.conf"
mount_fs "$T/c.conf" || { fail "mount"; tap_exit; exit 1; }
mkdir "$MNT/p"
"$PY" "$HERE/posix_check.py" "$MNT/p" >"$T/mnt.out" 2>&1
while IFS=$'\t' read -r name res obs; do
	pobs=$(awk -F'\t' -v n="$name" '$1 == n {print $3}' "$T/plain.out")
	pres=$(awk -F'\t' -v n="$name" '$1 == n {print $2}' "$T/plain.out")
	if [ "$res" != pass ]; then
		fail "$name: $obs"
	elif [ "$pres" = pass ] && [ "$obs" != "$pobs" ]; then
		fail "$name: mount observed '$obs', plain directory '$pobs'"
	else
		ok "$name${pres:+ (plain: $pres)}"
	fi
done < <(grep -P '^\w+\t(pass|fail)\t' "$T/mnt.out")
n=$(grep -cP '\t(pass|fail)\t' "$T/mnt.out")
if [ "$n" -lt 18 ]; then
	fail "posix_check.py ran only $n checks on the mount"
	sed 's/^/# /' "$T/mnt.out" | tail -20
fi

# The same behaviours through the tools users type, mount vs plain.
tools() { # DIR: print observations
	local d=$1
	mkdir "$d/tools" && cd "$d/tools" || return 1
	echo hello >f
	touch -d "2021-02-03 04:05:06 UTC" f
	chmod 0751 f
	stat -c '%s %a %Y %F' f
	ln -s f link && readlink link && stat -L -c '%s' link
	setfattr -n user.color -v blue f && getfattr --only-values -n user.color f && echo
	getfattr -d f 2>/dev/null | grep '^user\.' | grep -vc '^user\.tierfs\.' # (count, without tierfs's own)
	setfattr -x user.color f && getfattr -n user.color f 2>&1 | grep -o 'No such attribute'
	mkdir sub && touch sub/x && { rmdir sub 2>&1 | grep -o 'Directory not empty'; }
	truncate -s 3000000 f && stat -c '%s' f && truncate -s 2 f && cat f | od -c | head -1
	cd - >/dev/null
}
a=$(tools "$MNT" 2>&1)
b=$(tools "$T/plain" 2>&1)
if [ "$a" = "$b" ]; then ok "tools: touch -d, chmod, stat, symlink, setfattr/getfattr, truncate like a plain dir"; else
	fail "tools differ from a plain directory"
	diff <(echo "$b") <(echo "$a") | sed 's/^/# /'
fi
size=$(df -B1 --output=size "$MNT" | tail -1 | tr -d ' ')
if [ "${size:-0}" -gt 0 ]; then ok "df shows size $size > 0"; else fail "df size '$size'"; fi
check "umount clean" umount_fs
tap_exit
