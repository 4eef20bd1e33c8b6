#!/usr/bin/env bash
# The per-block codec on posix tiers: with compress = lz4, encrypt =
# aes-256-gcm, and both, files of zeros, text, random bytes and a partial
# last block round-trip and survive a remount; encrypted slabs never hold
# the plaintext; a remount that turns encryption off is refused with a
# message. Then, on the encrypted tier: a byte flipped in a slab behind
# tierfs's back reads as EIO (never wrong bytes) with a log line naming
# the tier, the slot, the file and the block; and a wrong key_file at
# remount gives EIO on every read, with the tag failure logged. Last, fsx's
# random operations over two coded tiers with little RAM.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/key" && echo >>"$T/key"
chmod 600 "$T/key"

# conf MODE DIR [KEY]: the default setup (1 MiB blocks) with DIR as tier
# nvme0 and the codec keys of MODE.
conf() {
	local key=${3:-$T/key} extra
	case $1 in
	lz4) extra="compress = lz4" ;;
	aes) extra="encrypt = aes-256-gcm\nkey_file = $key" ;;
	both) extra="compress = lz4\nencrypt = aes-256-gcm\nkey_file = $key" ;;
	none) extra="" ;;
	esac
	default_conf | sed "s|^path = $T/nvme0\$|path = $2|; s|^capacity = 2G\$|capacity = 2G\n$extra|"
}

# make_files DIR: the files, fsync'd; their sums in $T/sums.
make_files() {
	"$PY" - "$1" <<'PYEOF'
import os, sys
d = sys.argv[1]
MB = 1 << 20
text = b"".join(b"tierfs-codec-%010d\n" % i for i in range(3 * MB // 24 + 1))[:3 * MB]
files = {
    "zeros": bytes(2 * MB),
    "text": text,
    "random": os.urandom(2 * MB),
    "tail": text[:MB] + os.urandom(MB // 2 + 1234),  # partial last block
    "small": b"hello codec\n",
}
for name, data in files.items():
    fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    assert os.write(fd, data) == len(data)
    os.fsync(fd)
    os.close(fd)
PYEOF
	(cd "$1" && sha256sum zeros text random tail small) >"$T/sums"
}

# sums_ok MODE: the files match the sums made_files took under MODE.
sums_ok() { (cd "$MNT" && sha256sum -c --quiet "$T/sums-$1"); }

for mode in lz4 aes both; do
	dir=$T/nvme0-$mode
	mkdir -p "$dir"
	rm -rf "$T/meta"
	conf $mode "$dir" >"$T/$mode.conf"
	grep -q "^path = $dir\$" "$T/$mode.conf" || { fail "$mode: config not made"; continue; }
	mount_fs "$T/$mode.conf" || { fail "$mode: mount"; continue; }
	make_files "$MNT"
	mv "$T/sums" "$T/sums-$mode"
	check "$mode: files read back before remount" sums_ok $mode
	check "$mode: remount" remount "$T/$mode.conf"
	check "$mode: files intact after remount" sums_ok $mode
	check "$mode: unmount clean" umount_fs
	if [ $mode != lz4 ]; then
		if grep -q "tierfs-codec-0000000100" "$dir"/slab-*.dat; then
			fail "$mode: the plaintext is in the slab files"
		else
			ok "$mode: no plaintext in the slab files"
		fi
		grep -q '^slot_size=1052672$' "$dir/tier.info" && ok "$mode: tier.info records the larger slots" ||
			fail "$mode: tier.info: $(tr '\n' ' ' <"$dir/tier.info")"
	fi
	cp -a "$T/meta" "$T/meta-$mode"
done

# Encryption turned off on a tier made with it: refused, said why.
rm -rf "$T/meta" && cp -a "$T/meta-aes" "$T/meta"
conf none "$T/nvme0-aes" >"$T/off.conf"
: >"$T/daemon.log"
if mount_fs "$T/off.conf" 2>/dev/null; then
	fail "a mount with encryption off on an encrypted tier was allowed"
	umount_fs
else
	grep -q "formatted with encrypt = aes-256-gcm" "$T/daemon.log" && ok "encryption off: refused with the reason" ||
		fail "encryption off: refused without the reason: $(tail -3 "$T/daemon.log")"
fi

# read_all: each file in 64 KiB pieces; each piece either EIO or the right
# bytes (from a plain copy in $T/want); prints "eio=N wrong=M".
read_all() {
	"$PY" - "$MNT" "$T/want" <<'PYEOF'
import errno, os, sys
eio = wrong = 0
for name in sorted(os.listdir(sys.argv[2])):
    want = open(os.path.join(sys.argv[2], name), "rb").read()
    fd = os.open(os.path.join(sys.argv[1], name), os.O_RDONLY)
    for off in range(0, len(want), 65536):
        try:
            got = os.pread(fd, 65536, off)
            if got != want[off:off + 65536]:
                wrong += 1
        except OSError as e:
            if e.errno == errno.EIO:
                eio += 1
            else:
                wrong += 1
    os.close(fd)
print("eio=%d wrong=%d" % (eio, wrong))
PYEOF
}

# A flipped byte in the encrypted, compressed tier's first slots.
rm -rf "$T/meta" && cp -a "$T/meta-both" "$T/meta"
mount_fs "$T/both.conf" || { fail "both: mount for the copy"; tap_exit; exit 1; }
mkdir -p "$T/want" && cp "$MNT"/zeros "$MNT"/text "$MNT"/random "$MNT"/tail "$MNT"/small "$T/want/"
check "both: unmount clean" umount_fs
"$PY" - "$T/nvme0-both/slab-00000.dat" <<'PYEOF' | sed 's/^/# /'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
SLOT = (1 << 20) + 4096
for slot in range(4):
    o = slot * SLOT + 40  # inside the first page: the header or the payload
    b = os.pread(fd, 1, o)
    os.pwrite(fd, bytes([b[0] ^ 0x04]), o)
os.fsync(fd)
os.close(fd)
print("flipped one byte in each of slots 0-3")
PYEOF
: >"$T/daemon.log"
mount_fs "$T/both.conf" || { fail "both: remount after the flip"; tap_exit; exit 1; }
res=$(read_all)
echo "# after the flip: $res"
case $res in
eio=0\ *) fail "flipped byte: no EIO" ;;
*\ wrong=0) ok "flipped byte: EIO, never wrong bytes" ;;
*) fail "flipped byte: wrong bytes returned ($res)" ;;
esac
check "flipped byte: the daemon exits cleanly" umount_fs
grep -E 'tier nvme0: slot [0-9]+: (AES-256-GCM tag mismatch|not a codec frame|codec frame)' "$T/daemon.log" | head -2 | sed 's/^/# log: /'
grep -qE 'tier nvme0: slot [0-9]+: (AES-256-GCM tag mismatch|not a codec frame|codec frame)' "$T/daemon.log" &&
	ok "flipped byte: log names tier and slot" || fail "flipped byte: no codec line in the log"
grep -qE '/(zeros|text|random|tail|small): block [0-9]+ on tier nvme0 slot [0-9]+: read failed' "$T/daemon.log" &&
	ok "flipped byte: log names file and block" || fail "flipped byte: no line naming file and block"

# Another key at remount: the mount comes up, every read of the encrypted
# tier is EIO, logged.
head -c 32 /dev/urandom >"$T/key2" && chmod 600 "$T/key2"
rm -rf "$T/meta" && cp -a "$T/meta-aes" "$T/meta"
conf aes "$T/nvme0-aes" "$T/key2" >"$T/wrongkey.conf"
: >"$T/daemon.log"
mount_fs "$T/wrongkey.conf" || { fail "wrong key: mount"; tap_exit; exit 1; }
res=$(read_all)
echo "# with another key: $res"
case $res in
eio=0\ *) fail "wrong key: no EIO" ;;
*\ wrong=0) ok "wrong key: EIO, never bytes" ;;
*) fail "wrong key: bytes returned ($res)" ;;
esac
cat "$MNT/small" >/dev/null 2>"$T/cat.err" && fail "wrong key: cat succeeded" ||
	{ grep -q 'Input/output error' "$T/cat.err" && ok "wrong key: cat says Input/output error" || fail "wrong key: $(cat "$T/cat.err")"; }
check "wrong key: unmount clean" umount_fs
grep -q 'tier nvme0: slot [0-9]*: AES-256-GCM tag mismatch' "$T/daemon.log" && ok "wrong key: tag failure logged" ||
	fail "wrong key: no tag failure in the log"

# And the right key again: everything reads.
mount_fs "$T/aes.conf" || { fail "right key: mount"; tap_exit; exit 1; }
check "right key again: files intact" sums_ok aes
check "right key again: unmount clean" umount_fs

# Random operations under memory pressure (fsx, as t_fsx's small-RAM run,
# shorter): 64 KiB blocks striped over an encrypted, compressed tier and a
# compressed one (their bandwidth probed through the codec at mount), RAM
# for a sixth of the files, so that every operation meets write-back and
# reads back from the coded tiers; then a remount and a full compare.
if [ -x "$TESTBIN/fsx" ]; then
	rm -rf "$T/meta" "$T/nvme0" "$T/nvme1"
	two_tier_conf 64K | sed "s/^capacity = 256M\$/capacity = 20M/;
		s|^path = $T/nvme0\$|path = $T/nvme0\ncompress = lz4\nencrypt = aes-256-gcm\nkey_file = $T/key|;
		s|^path = $T/nvme1\$|path = $T/nvme1\ncompress = lz4|" >"$T/fsx.conf"
	seed=${FSX_SEED:-$((RANDOM * 32768 + RANDOM))}
	echo "# fsx seed $seed (replay: FSX_SEED=$seed)"
	mkdir -p "$T/shadow"
	if grep -q 'encrypt' "$T/fsx.conf" && mount_fs "$T/fsx.conf"; then
		mkdir -p "$MNT/fsx"
		check "fsx: ${CODEC_FSX_OPS:-10000} random ops under memory pressure" "$TESTBIN/fsx" -q -c \
			-d "$MNT/fsx" -S "$T/shadow" -n "${CODEC_FSX_OPS:-10000}" -f 6 -m $((64 << 20)) \
			-l $((1 << 20)) -s "$seed"
		ev=$(grep -o 'evictions=[0-9]*' "$MNT/.tierfs/stats" | cut -d= -f2)
		echo "# fsx: ${ev:-0} evictions"
		check "fsx: RAM was short (evictions ${ev:-0} >= 100)" test "${ev:-0}" -ge 100
		check "fsx: unmount clean" umount_fs
		if mount_fs "$T/fsx.conf"; then
			check "fsx: full compare after remount" "$TESTBIN/fsx" -q -V -d "$MNT/fsx" \
				-S "$T/shadow" -f 6 -l $((1 << 20))
			check "fsx: unmount clean (2)" umount_fs
		else
			fail "fsx: remount"
		fi
	else
		fail "fsx: config or mount"
	fi
else
	skip "fsx under memory pressure" "fsx not built"
fi
tap_exit
