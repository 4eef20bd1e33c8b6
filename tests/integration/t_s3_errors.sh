#!/usr/bin/env bash
# What goes wrong with an s3 tier, on a real S3 server (SeaweedFS):
# - at mount: wrong credentials (secret, then access key), a missing
#   bucket, an endpoint nobody listens on: the daemon exits 2 with a
#   message that says which, nothing is mounted, and the secret is in no
#   line it printed;
# - objects changed behind tierfs's back (with boto3): one overwritten with
#   other bytes of the same length, one cut short: reading that file gives
#   EIO (never wrong bytes) and a log line naming the file, the block and
#   the tier; a file on other objects still reads;
# - with encrypt = aes-256-gcm: a wrong key_file gives EIO and the log
#   line, the right one reads again; a flipped byte in an object, EIO.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/../s3/lib.sh"
require_tierfs
require_weed
trap s3_cleanup EXIT
weed_start "$T/weed" || { echo "# SKIP: the S3 server did not start (log above)"; exit 77; }
echo "# SeaweedFS at $S3_ENDPOINT"

# refused NAME REGEX CONF [VAR=VALUE...]: the daemon, started with CONF in
# that environment, exits 2, says something matching REGEX, mounts nothing.
refused() {
	local name=$1 re=$2 conf=$3 rc
	shift 3
	env "$@" timeout 180 "$TIERFS_BIN" "$conf" "$MNT" -f 2>"$T/refused.log"
	rc=$?
	if mountpoint -q "$MNT"; then
		fail "$name: mounted"
		fusermount3 -u "$MNT"
		return
	fi
	sed 's/^/#   /' "$T/refused.log" | head -4
	check "$name: exit 2 (was $rc), nothing mounted" test $rc -eq 2
	check "$name: the message says which ($re)" grep -qiE "$re" "$T/refused.log"
}

S3_PREFIX=t/
s3_conf 1M 64M >"$T/c.conf"
refused "wrong secret key" "SignatureDoesNotMatch|credential|signature" "$T/c.conf" \
	AWS_SECRET_ACCESS_KEY=wrong-secret-Zq8Xw
check "wrong secret key: the secret is in no message" sh -c "! grep -q Zq8Xw '$T/refused.log'"
refused "unknown access key" "InvalidAccessKeyId|access key|credential" "$T/c.conf" AWS_ACCESS_KEY_ID=NOSUCHKEY
refused "no credentials at all" "credential|AWS_ACCESS_KEY_ID" "$T/c.conf" -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY
sed 's/^bucket = .*/bucket = no-such-bucket/' "$T/c.conf" >"$T/nobucket.conf"
refused "missing bucket" "NoSuchBucket|bucket.*(not|no such|missing|exist)" "$T/nobucket.conf"
dead=$(free_ports 1)
sed "s|^endpoint = .*|endpoint = http://127.0.0.1:$dead|" "$T/c.conf" >"$T/dead.conf"
refused "endpoint nobody listens on" "endpoint http://127\.0\.0\.1:$dead unreachable" "$T/dead.conf"
check "endpoint nobody listens on: no line says 'No route to host'" \
	sh -c "! grep -qi 'no route to host' '$T/refused.log'"

# read_check FILE PATTERN BS: read FILE in BS pieces, buffered and O_DIRECT:
# every piece is EIO or the pattern's bytes, at least one is EIO.
read_check() {
	"$PY" - "$@" <<'PYEOF'
import errno, mmap, os, sys
want = open(sys.argv[2], "rb").read()
bs = int(sys.argv[3])
bad = 0
for direct in (0, os.O_DIRECT):
    fd = os.open(sys.argv[1], os.O_RDONLY | direct)
    buf = mmap.mmap(-1, bs)
    eio = wrong = 0
    for off in range(0, len(want), bs):
        try:
            n = os.preadv(fd, [buf], off)
            if bytes(buf[:n]) != want[off:off + n]:
                wrong += 1
        except OSError as e:
            if e.errno != errno.EIO:
                wrong += 1
            eio += 1
    os.close(fd)
    print("# %s: %d of %d pieces EIO, %d wrong" % ("O_DIRECT" if direct else "buffered", eio,
                                                   (len(want) + bs - 1) // bs, wrong))
    bad += wrong > 0 or eio == 0
sys.exit(1 if bad else 0)
PYEOF
}
slot_keys() { s3ctl ls "$S3_BUCKET" "$S3_PREFIX" | grep -E " ${S3_PREFIX}[0-9a-f]{2}/[0-9a-f]{16}\$" | awk '{print $2}' | sort; }
# tamper KEY HOW: overwrite the object with as many other bytes (flip: the
# same bytes but one), or cut it to half its length.
tamper() {
	s3ctl get "$S3_BUCKET" "$1" >"$T/obj" || return 1
	"$PY" - "$T/obj" "$2" <<'PYEOF' || return 1
import os, sys
p, how = sys.argv[1], sys.argv[2]
d = bytearray(open(p, "rb").read())
if how == "other":
    d = bytearray(os.urandom(len(d)))
elif how == "flip":
    d[len(d) // 3] ^= 0x20
else:
    d = d[:len(d) // 2]
open(p, "wb").write(d)
PYEOF
	s3ctl put "$S3_BUCKET" "$1" "$T/obj"
}
pattern() { "$PY" -c 'import sys; sys.stdout.buffer.write(b"".join(b"tierfs-s3-%010d\n" % i for i in range(int(sys.argv[1]) // 21 + 1))[:int(sys.argv[1])])' "$1"; }
logged() { grep -E "$1: block [0-9]+ on tier s3 .*(read failed|Input/output)" "$T/daemon.log" | head -2 | sed 's/^/# log: /' | grep -q .; }

# Objects changed behind tierfs's back, no codec: the checksum catches it.
pattern $((4 << 20)) >"$T/victim.src"
head -c $((3 << 20)) /dev/urandom >"$T/intact.src"
mount_fs "$T/c.conf" || { fail "mount"; tap_exit; exit 1; }
cp "$T/victim.src" "$MNT/victim" && sync "$MNT/victim"
check "unmount after writing the victim" umount_fs
slot_keys >"$T/keys.victim"
mount_fs "$T/c.conf" || { fail "remount"; tap_exit; exit 1; }
cp "$T/intact.src" "$MNT/intact" && sync "$MNT/intact"
check "unmount after writing the intact file" umount_fs
check "the victim's 4 blocks are 4 objects" test "$(wc -l <"$T/keys.victim")" -eq 4
check "overwrite one of its objects with other bytes (boto3)" tamper "$(sed -n 2p "$T/keys.victim")" other
check "cut another to half its length (boto3)" tamper "$(sed -n 4p "$T/keys.victim")" cut
: >"$T/daemon.log"
mount_fs "$T/c.conf" || { fail "remount after tampering"; tap_exit; exit 1; }
check "tampered objects: EIO, never wrong bytes" read_check "$MNT/victim" "$T/victim.src" $((1 << 20))
check "the log line names the file, the block and the tier" logged victim
check "a file on other objects reads intact" cmp -s "$T/intact.src" "$MNT/intact"
check "unmount clean" umount_fs

# With encryption: a wrong key, then a flipped byte.
S3_PREFIX=enc/
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/key1"
head -c 32 /dev/urandom >"$T/key2"
chmod 600 "$T/key1" "$T/key2"
rm -rf "$T/meta"
S3_TIER_EXTRA="compress = lz4
encrypt = aes-256-gcm
key_file = $T/key1" s3_conf 1M 64M >"$T/enc.conf"
sed "s|^key_file = .*|key_file = $T/key2|" "$T/enc.conf" >"$T/enc2.conf"
mount_fs "$T/enc.conf" || { fail "mount with encrypt = aes-256-gcm"; tap_exit; exit 1; }
cp "$T/victim.src" "$MNT/victim" && sync "$MNT/victim"
check "encrypted: the victim reads back" cmp -s "$T/victim.src" "$MNT/victim"
check "unmount clean (encrypted)" umount_fs
slot_keys >"$T/keys.enc"
mount_fs "$T/enc.conf" || { fail "remount (encrypted)"; tap_exit; exit 1; }
cp "$T/intact.src" "$MNT/intact" && sync "$MNT/intact"
check "unmount clean (encrypted, 2)" umount_fs
plain=0
for k in $(slot_keys); do s3ctl get "$S3_BUCKET" "$k" | grep -q "tierfs-s3-" && plain=1; done
check "no object holds the plaintext" test $plain -eq 0
: >"$T/daemon.log"
if mount_fs "$T/enc2.conf"; then
	check "wrong key_file: EIO, never wrong bytes" read_check "$MNT/victim" "$T/victim.src" $((1 << 20))
	check "wrong key_file: the log line names the file, the block and the tier" logged victim
	check "unmount clean (wrong key)" umount_fs
else
	ok "wrong key_file: the mount refuses it ($(tail -1 "$T/daemon.log"))"
fi
mount_fs "$T/enc.conf" || { fail "mount with the right key again"; tap_exit; exit 1; }
check "the right key reads both files again" sh -c "cmp -s '$T/victim.src' '$MNT/victim' && cmp -s '$T/intact.src' '$MNT/intact'"
check "unmount clean (right key)" umount_fs
check "flip one byte in one of the victim's objects" tamper "$(sed -n 3p "$T/keys.enc")" flip
: >"$T/daemon.log"
mount_fs "$T/enc.conf" || { fail "mount after the flip"; tap_exit; exit 1; }
check "flipped byte: EIO, never wrong bytes" read_check "$MNT/victim" "$T/victim.src" $((1 << 20))
check "flipped byte: the log line names the file, the block and the tier" logged victim
check "the intact file still reads" cmp -s "$T/intact.src" "$MNT/intact"
check "unmount clean (flipped)" umount_fs
tap_exit
