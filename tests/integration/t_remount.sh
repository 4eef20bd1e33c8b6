#!/usr/bin/env bash
# Remount keeps everything: a tree of files (empty, tiny, block-sized,
# multi-block, sparse, odd sizes), modes, owners, mtimes, symlinks, user
# xattrs and empty/nested directories is written, the fs unmounted and mounted
# again (twice, with changes in between), and the whole tree (sha256 of every
# file, metadata list) compared with the copy made on a plain directory.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd getfattr setfattr sha256sum

make_tree() { # DIR
	local d=$1
	(
		set -e
		cd "$d"
		mkdir -p tree/a/b/c tree/empty tree/deep/1/2/3/4/5
		: >tree/zero
		printf x >tree/one
		head -c 4095 /dev/urandom >tree/a/odd
		head -c $((1 << 20)) /dev/urandom >tree/a/block
		head -c $((3 << 20 | 12345)) /dev/urandom >tree/a/b/multi
		truncate -s 10M tree/sparse && printf END | dd of=tree/sparse bs=1 seek=$((7 << 20)) conv=notrunc status=none
		for i in $(seq 1 50); do echo "file $i" >"tree/a/b/c/f$i"; done
		chmod 0600 tree/a/odd && chmod 0755 tree/a/block && chmod 0444 tree/one && chmod 0700 tree/a/b
		chown 1001:1002 tree/a/b/multi
		ln -s a/b/multi tree/lnk && ln -s /does/not/exist tree/dangling && ln -s ../.. tree/a/up
		setfattr -n user.k1 -v hello tree/a/block && setfattr -n user.k2 -v 0x00ff00 tree/a/block
		setfattr -n user.dir -v yes tree/a
		find tree ! -type l -exec touch -d "2022-05-06 07:08:09 UTC" {} +
	)
}
change_tree() { # DIR: changes between the two remounts
	(
		set -e
		cd "$1"
		rm tree/a/b/c/f7 && mv tree/a/b/c/f8 tree/empty/moved
		cat "$T/append.bin" >>tree/a/block
		truncate -s 1000 tree/a/b/multi
		setfattr -x user.k1 tree/a/block
		rmdir tree/deep/1/2/3/4/5
		touch -d "2023-01-01 00:00:00 UTC" tree/a/block tree/a/b/multi tree/empty/moved
	)
}

default_conf >"$T/c.conf"
head -c 100000 /dev/urandom >"$T/append.bin"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
mkdir -p "$T/plain"
check "tree written on the mount" make_tree "$MNT"
# the plain copy gets the same bytes: copy preserving everything
cp -a "$MNT/tree" "$T/plain/" 2>/dev/null || true
tree_sums "$MNT" >"$T/before"
tree_sums "$T/plain" >"$T/plain.sums"
if cmp -s "$T/before" "$T/plain.sums"; then ok "tree on the mount equals its copy on a plain directory"; else
	fail "mount differs from plain copy"
	diff "$T/plain.sums" "$T/before" | head -20 | sed 's/^/# /'
fi
blocks_of() { (cd "$MNT" && stat -c '%n %b' tree/a/block tree/a/b/multi tree/sparse); }
blocks_of >"$T/blocks.before"
check "unmount clean" umount_fs
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
# Before anything reads the files: st_blocks once counted only blocks in
# RAM, so du said 0 and tar --sparse stored the files as holes.
blocks_of >"$T/blocks.after"
sed 's/^/# st_blocks after remount: /' "$T/blocks.after"
check "remount: st_blocks of files not yet read is what it was" cmp -s "$T/blocks.before" "$T/blocks.after"
# df -i: inodes in use are every file, directory and link, and the root.
used=$(stat -f -c '%c %d' "$MNT" | awk '{print $1 - $2}')
want=$(($(find "$MNT/tree" | wc -l) + 1))
check "remount: df -i counts $want inodes in use (says $used)" test "$used" = "$want"
tree_sums "$MNT" >"$T/after"
if cmp -s "$T/before" "$T/after"; then ok "remount: content, sizes, modes, owners, mtimes, links, xattrs, dirs intact"; else
	fail "remount changed the tree"
	diff "$T/before" "$T/after" | head -20 | sed 's/^/# /'
fi
[ "$(readlink "$MNT/tree/lnk")" = a/b/multi ] && ok "symlink target after remount" || fail "symlink target"
[ "$(getfattr -n user.k2 -e hex "$MNT/tree/a/block" 2>/dev/null | grep '^user')" = user.k2=0x00ff00 ] &&
	ok "binary xattr after remount" || fail "binary xattr after remount"
check "changes after remount" change_tree "$MNT"
change_tree "$T/plain"
tree_sums "$MNT" >"$T/before2"
check "unmount clean (2)" umount_fs
mount_fs "$T/c.conf" || { fail "remount 2"; tap_exit; exit 1; }
tree_sums "$MNT" >"$T/after2"
if cmp -s "$T/before2" "$T/after2"; then ok "second remount: changes (unlink, rename, append, truncate, xattr remove, rmdir) kept"; else
	fail "second remount changed the tree"
	diff "$T/before2" "$T/after2" | head -20 | sed 's/^/# /'
fi
tree_sums "$T/plain" >"$T/plain2.sums"
if cmp -s "$T/after2" "$T/plain2.sums"; then ok "after the changes, mount equals the plain copy"; else
	fail "mount differs from plain copy after changes"
	diff "$T/plain2.sums" "$T/after2" | head -20 | sed 's/^/# /'
fi
check "unmount clean (3)" umount_fs
tap_exit
