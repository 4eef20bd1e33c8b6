#!/usr/bin/env bash
# The .tierfs control view against other users and against writes, on a
# mount with allow_other. The tier view (.tierfs/tiers/NAME/) answers each
# user as the tree does: another user's 0700 directory shows nothing there
# to an unprivileged user (no listing, no stat or getfattr of a name known
# from elsewhere, no listing of a subdirectory inside it), while its owner
# and root see it, with the real owner and mode. Operations on .tierfs and
# inside it answer a clear errno (EBUSY, EISDIR, EEXIST, EROFS, EACCES),
# never ENOENT for a name that stat finds.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd setpriv getfattr stat "$PY"
[ "$(id -u)" = 0 ] || { echo "# SKIP: needs root (to act as two other users)"; exit 77; }

default_conf | sed 's/^\[mount\]$/[mount]\nallow_other = yes/' >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
chmod 755 "$T"
as() { # UID CMD...: run CMD as user UID (group UID), no other groups
	local u=$1; shift
	setpriv --reuid="$u" --regid="$u" --clear-groups "$@"
}
OWNER=4242 OTHER=65534
V=$MNT/.tierfs/tiers/nvme0

# The owner's private tree: data flushed to nvme0 so the view lists it.
mkdir -m 755 "$MNT/home"
mkdir -m 700 "$MNT/home/priv"
mkdir -m 755 "$MNT/home/priv/sub"
head -c 100000 /dev/urandom >"$MNT/home/priv/secret-name"
head -c 100000 /dev/urandom >"$MNT/home/priv/sub/deeper"
head -c 100000 /dev/urandom >"$MNT/home/open-file"
chown -R "$OWNER:$OWNER" "$MNT/home/priv"
chmod 600 "$MNT/home/priv/secret-name"
sync "$MNT/home/priv/secret-name" "$MNT/home/priv/sub/deeper" "$MNT/home/open-file"

# ERR CMD...: the error CMD prints (its stderr), or "ok".
err() { local out; if out=$("$@" 2>&1 >/dev/null); then echo ok; else echo "$out"; fi; }

# An unprivileged user: the tree refuses, and so does the view.
t=$(err as $OTHER ls "$MNT/home/priv")
check "tree: other user cannot list the 0700 directory ($t)" grep -q "Permission denied" <<<"$t"
t=$(as $OTHER ls "$V/home" 2>&1)
check "view: other user lists the parent, with priv in it ($t)" grep -qx priv <<<"$t"
t=$(err as $OTHER ls "$V/home/priv")
check "view: other user cannot list the 0700 directory ($t)" grep -q "Permission denied" <<<"$t"
out=$(as $OTHER ls "$V/home/priv" 2>/dev/null)
check "view: no name shows to the other user" test -z "$out"
t=$(err as $OTHER stat "$V/home/priv/secret-name")
check "view: other user cannot stat a known name ($t)" grep -q "Permission denied" <<<"$t"
t=$(err as $OTHER getfattr -d "$V/home/priv/secret-name")
check "view: other user cannot getfattr a known name ($t)" grep -q "Permission denied" <<<"$t"
t=$(err as $OTHER ls "$V/home/priv/sub")
check "view: nor list a searchable directory inside it ($t)" grep -q "Permission denied" <<<"$t"
t=$(err as $OTHER cat "$V/home/priv/sub/deeper")
check "view: nor open a file below it ($t)" grep -q "Permission denied" <<<"$t"
# what the tree lets the other user see, the view shows too
t=$(as $OTHER stat -c %s "$V/home/open-file" 2>&1)
check "view: other user stats a file it may see in the tree ($t)" test "$t" = 100000

# The owner sees its own tree through the view, with the real owner and
# mode less the write bits; root sees everything.
t=$(as $OWNER ls "$V/home/priv" 2>&1 | tr '\n' ' ')
check "view: the owner lists its directory ($t)" test "$t" = "secret-name sub "
t=$(as $OWNER stat -c '%u %a %s' "$V/home/priv/secret-name" 2>&1)
check "view: the owner stats its file: owner, mode, bytes on the tier ($t)" \
	test "$t" = "$OWNER 400 100000"
t=$(stat -c '%u %a' "$V/home/priv" 2>&1)
check "view: the directory shows its owner and mode less write bits ($t)" test "$t" = "$OWNER 500"
t=$(ls "$V/home/priv/sub" 2>&1)
check "view: root lists below it ($t)" test "$t" = deeper

# Operations on the control view: a clear errno, never ENOENT for a name
# stat finds (root, which the kernel lets through to the daemon).
stat "$MNT/.tierfs" >/dev/null
errno_of() { # CODE: the errno name a Python OS call raises, or "ok"
	"$PY" - "$MNT" "$1" <<'PYEOF'
import errno, os, sys
M = sys.argv[1]
os.chdir(M)
try:
    exec(sys.argv[2])
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PYEOF
}
expect() { # WANT CODE: the call fails with one of WANT (a|b), never ENOENT
	local want=$1 code=$2 got
	got=$(errno_of "$code")
	if [[ "$got" =~ ^($want)$ ]]; then ok "$code: $got"; else fail "$code: $got, want $want"; fi
}
touch "$MNT/plain"
mkdir "$MNT/emptydir"
expect EBUSY 'os.rename(".tierfs", "x")'
expect EBUSY 'os.rename("emptydir", ".tierfs")'
expect 'EBUSY|EISDIR' 'os.rename("plain", ".tierfs")'
expect EBUSY 'os.rmdir(".tierfs")'
expect EISDIR 'os.unlink(".tierfs")'
expect EEXIST 'os.mkdir(".tierfs")'
expect EEXIST 'os.link("plain", ".tierfs")'
expect EEXIST 'os.symlink("plain", ".tierfs")'
expect EROFS 'os.rename(".tierfs/stats", "x")'
expect EROFS 'os.rename(".tierfs/tiers", ".tierfs/t2")'
expect EROFS 'os.rename("plain", ".tierfs/plain")'
expect EROFS 'os.rmdir(".tierfs/tiers")'
expect EROFS 'os.rmdir(".tierfs/tiers/nvme0/home")'
expect EROFS 'os.unlink(".tierfs/stats")'
expect EROFS 'os.unlink(".tierfs/tiers/nvme0/home/open-file")'
expect EROFS 'os.mkdir(".tierfs/new")'
expect EROFS 'os.mkdir(".tierfs/tiers/nvme0/new")'
expect EROFS 'os.close(os.open(".tierfs/new", os.O_CREAT | os.O_WRONLY, 0o644))'
expect EROFS 'os.mknod(".tierfs/fifo", 0o600 | __import__("stat").S_IFIFO)'
expect EROFS 'os.symlink("x", ".tierfs/ln")'
expect EROFS 'os.link("plain", ".tierfs/ln")'
expect EROFS 'os.link(".tierfs/stats", "ln")'
expect EROFS 'os.close(os.open(".tierfs/stats", os.O_WRONLY))'
expect EROFS 'os.truncate(".tierfs/stats", 0)'
expect EROFS 'os.chmod(".tierfs", 0o777)'
expect EROFS 'os.chmod(".tierfs/tiers/nvme0/home/open-file", 0o777)'
expect EROFS 'os.chown(".tierfs/stats", 1, 1)'
expect EROFS 'os.utime(".tierfs/stats", (1, 1))'
expect EROFS 'os.setxattr(".tierfs/stats", "user.k", b"v")'
expect 'EROFS|ENODATA' 'os.removexattr(".tierfs", "user.k")'
# and an unprivileged user meets the directory's permissions first
t=$(err as $OTHER mv "$MNT/.tierfs/stats" "$MNT/x")
check "other user: mv out of .tierfs is refused ($t)" grep -q "Permission denied\|Read-only" <<<"$t"
check "stats still there after all that" grep -q '^tier ' "$MNT/.tierfs/stats"
check "home still there after all that" test -f "$V/home/open-file"

check "unmount" umount_fs
tap_exit
