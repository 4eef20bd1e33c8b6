#!/usr/bin/env bash
# Inode attributes that other operations move, compared with a plain
# directory: setxattr and removexattr move ctime (backups that use find
# -cnewer, rsync or tar --xattrs rely on it); a write keeps a
# set-group-ID bit without group execute (it marks mandatory locking, not
# a privilege); a write or truncate by an unprivileged user clears
# set-user-ID and set-group-ID, one by root keeps them, and chown clears
# them whoever calls it. atime follows relatime, or -o noatime.
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
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
modes() { # DIR: modes after writes, truncates and chowns of set-ID files
	local f=$1/s
	echo a >"$f"
	chmod 2644 "$f"
	echo b >>"$f"
	printf 'root-write-2644:%s ' "$(stat -c %a "$f")"
	chmod 6755 "$f"
	echo b >>"$f"
	printf 'root-write-6755:%s ' "$(stat -c %a "$f")"
	truncate -s 1 "$f"
	printf 'root-truncate-6755:%s ' "$(stat -c %a "$f")"
	chmod 6777 "$f"
	nobody sh -c "echo c >>'$f'"
	printf 'nobody-write-6777:%s ' "$(stat -c %a "$f")"
	chmod 6777 "$f"
	nobody truncate -s 0 "$f"
	printf 'nobody-truncate-6777:%s ' "$(stat -c %a "$f")"
	chmod 6755 "$f"
	chown 0:0 "$f"
	printf 'root-chown-6755:%s ' "$(stat -c %a "$f")"
	chmod 2745 "$f"
	chown 0:0 "$f"
	printf 'root-chown-2745:%s\n' "$(stat -c %a "$f")"
}
want=$(ctimes "$T/plain")
got=$(ctimes "$MNT")
echo "# plain: $want mount: $got"
check "xattr changes move ctime as on a plain directory" test "$got" = "$want"
want=$(modes "$T/plain")
got=$(modes "$MNT")
echo "# plain: $want mount: $got"
check "set-ID bits after writes as on a plain directory" test "$got" = "$want"

# atime: relatime, as Linux mounts by default; -o noatime leaves it.
atimes() { # FILE: whether a read after a write, then one more, moved atime
	local f=$1 a0 a1 a2
	echo x >"$f"
	a0=$(stat -c %x "$f")
	sleep 0.05
	cat "$f" >/dev/null
	a1=$(stat -c %x "$f")
	sleep 0.05
	cat "$f" >/dev/null
	a2=$(stat -c %x "$f")
	echo "read after write $([ "$a1" != "$a0" ] && echo moved || echo same)," \
		"read again $([ "$a2" != "$a1" ] && echo moved || echo same)"
}
got=$(atimes "$MNT/at")
check "relatime: a read after a write moves atime, the next read not ($got)" \
	test "$got" = "read after write moved, read again same"
check "unmount" umount_fs
mount_fs "$T/c.conf" -o noatime || { fail "mount -o noatime"; tap_exit; exit 1; }
got=$(atimes "$MNT/at")
check "-o noatime: reads leave atime ($got)" test "$got" = "read after write same, read again same"
check "unmount" umount_fs
# -o ro: nothing written, atime included (at was written after its last read).
mount_fs "$T/c.conf" -o ro || { fail "mount -o ro"; tap_exit; exit 1; }
a0=$(stat -c %x "$MNT/at")
sleep 0.05
cat "$MNT/at" >/dev/null
check "-o ro: a read leaves atime ($a0, then $(stat -c %x "$MNT/at"))" test "$(stat -c %x "$MNT/at")" = "$a0"
check "unmount" umount_fs
tap_exit
