#!/usr/bin/env bash
# Inode attributes that other operations move, compared with a plain
# directory: setxattr and removexattr move ctime (backups that use find
# -cnewer, rsync or tar --xattrs rely on it); a write keeps a
# set-group-ID bit without group execute (it marks mandatory locking, not
# a privilege), and a write by an unprivileged user clears set-user-ID and
# set-group-ID.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd setfattr setpriv stat
[ "$(id -u)" = 0 ] || { echo "# SKIP: needs root"; exit 77; }

# allow_other: the unprivileged writer must reach the mount.
default_conf | sed 's/^\[mount\]$/[mount]\nallow_other = yes/' >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
mkdir -p "$T/plain"
chmod 755 "$T"
ctimes() { # DIR: whether each xattr change moved ctime, for a file and a directory
	local d=$1 f out=
	for f in "$d/file" "$d/dir"; do
		if [ "$f" = "$d/file" ]; then echo x >"$f"; else mkdir "$f"; fi
		local c0 c1 c2
		c0=$(stat -c %z "$f")
		sleep 0.05
		setfattr -n user.k -v v "$f"
		c1=$(stat -c %z "$f")
		sleep 0.05
		setfattr -x user.k "$f"
		c2=$(stat -c %z "$f")
		out+="${f##*/}: set $([ "$c1" != "$c0" ] && echo moved || echo same)"
		out+=" remove $([ "$c2" != "$c1" ] && echo moved || echo same); "
	done
	echo "$out"
}
modes() { # DIR: modes after root's write to 2644, and nobody's to 6777
	local f=$1/s
	echo a >"$f"
	chmod 2644 "$f"
	echo b >>"$f"
	printf '%s ' "$(stat -c %a "$f")"
	chmod 6777 "$f"
	setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo c >>'$f'"
	stat -c %a "$f"
}
want=$(ctimes "$T/plain")
got=$(ctimes "$MNT")
echo "# plain: $want mount: $got"
check "xattr changes move ctime as on a plain directory" test "$got" = "$want"
want=$(modes "$T/plain")
got=$(modes "$MNT")
echo "# plain: $want mount: $got"
check "set-ID bits after writes as on a plain directory" test "$got" = "$want"
check "unmount" umount_fs
tap_exit
