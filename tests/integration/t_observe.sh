#!/usr/bin/env bash
# Placement is visible: user.tierfs.placement (TIER=BYTES ... summing to the
# non-hole bytes), user.tierfs.blocks (TIER:ranges ...), 1:1 striping of an
# 8-block file over two tiers, a path rule putting gradient files in RAM,
# user.tierfs.pin moving a file (and its new writes) and unpinning,
# user.tierfs.tiers on the root, and the read-only MNT/.tierfs/ view (stats,
# tiers/NAME/ listings, which name only what they list); a block list over
# the 64 KiB xattr limit, cut short per tier; the daemon's threads named.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY" getfattr setfattr
MiB=$((1 << 20))

two_tier_conf 1M "" "[rule grad]" "match = *_gradient_*.tensor.swp" "tier = ram" >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }

# Threads say what they are in `top -H` and perf: which one burns the CPU
# is the first question when a node is slow.
names=$(cat /proc/"$TIERFS_PID"/task/*/comm | sort -u | tr '\n' ' ')
echo "# threads: $names"
for want in tierfs-flush tierfs-prefetch tierfs-fuse tierfs-io-nvme0 tierfs-io-nvme1; do
	case " $names" in
	*" $want "*) ok "a thread named $want" ;;
	*) fail "no thread named $want" ;;
	esac
done

xa() { getfattr --only-values -n "$1" "$2" 2>/dev/null; }
# pl_check FILE WANT_SUM [ONLY_TIER]: placement well-formed, sums to WANT_SUM,
# and (if given) only ONLY_TIER holds bytes; blocks consistent with it
pl_check() {
	local f=$1 want=$2 only=${3:-}
	"$PY" - "$(xa user.tierfs.placement "$f")" "$(xa user.tierfs.blocks "$f")" "$want" "$only" "$MiB" <<'PYEOF'
import re, sys
pl, bl, want, only, bs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
print("# placement=%r blocks=%r" % (pl, bl))
if not re.fullmatch(r"[A-Za-z0-9_.-]+=\d+( [A-Za-z0-9_.-]+=\d+)*", pl):
    print("# placement not 'TIER=BYTES TIER=BYTES'"); sys.exit(1)
per = {}
for kv in pl.split():
    t, b = kv.split("=")
    per[t] = per.get(t, 0) + int(b)
nonzero = {t: b for t, b in per.items() if b}
if sum(per.values()) != want:
    print("# placement sums to %d, want %d" % (sum(per.values()), want)); sys.exit(1)
if only and set(nonzero) != {only}:
    print("# bytes on %s, want only %s" % (sorted(nonzero), only)); sys.exit(1)
if not re.fullmatch(r"[A-Za-z0-9_.-]+:\d+(-\d+)?(,\d+(-\d+)?)*( [A-Za-z0-9_.-]+:\d+(-\d+)?(,\d+(-\d+)?)*)*", bl):
    print("# blocks not 'TIER:0-3,8 TIER:4-7'"); sys.exit(1)
seen = {}
for part in bl.split():
    t, ranges = part.split(":")
    for r in ranges.split(","):
        a, _, b = r.partition("-")
        for i in range(int(a), int(b or a) + 1):
            if i in seen:
                print("# block %d listed twice" % i); sys.exit(1)
            seen[i] = t
for t, b in nonzero.items():
    n = sum(1 for x in seen.values() if x == t)
    if n == 0 or not ((n - 1) * bs < b <= n * bs):
        print("# tier %s: %d bytes but %d blocks" % (t, b, n)); sys.exit(1)
PYEOF
}
nblocks() { xa user.tierfs.blocks "$2" | tr ' ' '\n' | grep "^$1:" | cut -d: -f2 | tr ',' '\n' |
	awk -F- '{ n += ($2 == "" ? 1 : $2 - $1 + 1) } END { print n + 0 }'; }

# 8 full blocks, striped 1:1
head -c $((8 * MiB)) /dev/urandom >"$MNT/f8" && sync "$MNT/f8"
check "placement of an 8 MiB file: TIER=BYTES summing to 8 MiB" pl_check "$MNT/f8" $((8 * MiB))
n0=$(nblocks nvme0 "$MNT/f8") n1=$(nblocks nvme1 "$MNT/f8")
[ "$n0" = 4 ] && [ "$n1" = 4 ] && ok "stripe 1:1: 4 blocks on nvme0, 4 on nvme1" || fail "stripe 1:1: nvme0 $n0 blocks, nvme1 $n1"
getfattr -d -m user.tierfs "$MNT/f8" 2>/dev/null | grep -q '^user.tierfs.placement=' &&
	ok "getfattr -d -m user.tierfs shows placement" || fail "getfattr -d -m user.tierfs lists no placement"

# odd size and a sparse file: sums are the non-hole bytes
head -c $((3 * MiB + 5)) /dev/urandom >"$MNT/odd" && sync "$MNT/odd"
check "placement of a 3 MiB + 5 file sums to its size" pl_check "$MNT/odd" $((3 * MiB + 5))
truncate -s $((8 * MiB)) "$MNT/sparse"
head -c $((2 * MiB)) /dev/urandom | dd of="$MNT/sparse" conv=notrunc status=none
head -c $((1 * MiB)) /dev/urandom | dd of="$MNT/sparse" bs=1M seek=5 conv=notrunc status=none
sync "$MNT/sparse"
check "sparse 8 MiB file with 3 MiB written: placement sums to 3 MiB" pl_check "$MNT/sparse" $((3 * MiB))
bl=$(xa user.tierfs.blocks "$MNT/sparse")
"$PY" -c '
import sys
s = set()
for p in sys.argv[1].split():
    for r in p.split(":")[1].split(","):
        a, _, b = r.partition("-"); s |= set(range(int(a), int(b or a) + 1))
sys.exit(0 if s == {0, 1, 5} else 1)' "$bl" && ok "sparse file: block map holds blocks 0,1,5 only ($bl)" || fail "sparse file block map '$bl', want blocks 0,1,5"

# pin / unpin
check "setfattr user.tierfs.pin nvme1" setfattr -n user.tierfs.pin -v nvme1 "$MNT/f8"
check "pinned: all 8 MiB on nvme1" pl_check "$MNT/f8" $((8 * MiB)) nvme1
check "getfattr -d lists the pin" sh -c "getfattr -d '$MNT/f8' | grep -qx 'user.tierfs.pin=\"nvme1\"'"
head -c $((2 * MiB)) /dev/urandom >>"$MNT/f8" && sync "$MNT/f8"
check "pinned: appended blocks also on nvme1" pl_check "$MNT/f8" $((10 * MiB)) nvme1
cp "$MNT/f8" "$T/f8.copy"
check_fails "pin to a tier that does not exist fails" setfattr -n user.tierfs.pin -v nosuchtier "$MNT/f8"
check "unpin with -v \"\"" setfattr -n user.tierfs.pin -v "" "$MNT/f8"
check "an unpinned file lists no pin" sh -c "! getfattr -d '$MNT/f8' | grep -q tierfs.pin"
check "content unchanged by pin/unpin" cmp -s "$MNT/f8" "$T/f8.copy"
check "pin another file to ram" setfattr -n user.tierfs.pin -v ram "$MNT/odd"
check "pinned to ram: all bytes on ram" pl_check "$MNT/odd" $((3 * MiB + 5)) ram
cp "$MNT/odd" "$T/odd.copy"
# Out of RAM again: the blocks RAM held as their home go to the new one.
check "pin the RAM-pinned file to nvme1" setfattr -n user.tierfs.pin -v nvme1 "$MNT/odd"
check "pinned from ram to nvme1: all bytes on nvme1" pl_check "$MNT/odd" $((3 * MiB + 5)) nvme1
setfattr -n user.tierfs.pin -v ram "$MNT/odd"
check "unpin a RAM-pinned file" setfattr -n user.tierfs.pin -v "" "$MNT/odd"
sync "$MNT/odd"
check "unpinned from ram: no byte left on ram" sh -c "! getfattr --only-values -n user.tierfs.placement '$MNT/odd' | grep -q 'ram='"
check "content unchanged by the moves" cmp -s "$MNT/odd" "$T/odd.copy"

# rule: DeepSpeed gradient files in RAM
R=$MNT/zero_stage_3/optimizer/rank0
mkdir -p "$R"
head -c $((3 * MiB)) /dev/urandom >"$R/0_99_gradient_0_786432.tensor.swp"
head -c $((2 * MiB)) /dev/urandom >"$R/exp_avg-0_99.tensor.swp" && sync "$R/exp_avg-0_99.tensor.swp"
check "rule *_gradient_*.tensor.swp -> ram: all bytes on ram" pl_check "$R/0_99_gradient_0_786432.tensor.swp" $((3 * MiB)) ram
# Deeper than a path can name (520 levels): with rules on, a file is still
# created there, as a directory is; it simply matches no rule.
deep() {
	"$PY" - "$MNT" <<'PYEOF'
import os, sys
os.chdir(sys.argv[1])
os.mkdir("deep")
os.chdir("deep")
for _ in range(520):
    os.mkdir("d")
    os.chdir("d")
with open("f", "w") as f:
    f.write("x")
PYEOF
}
check "a file 520 directories deep is created with rules on" deep
rm -rf "$MNT/deep"
pl=$(xa user.tierfs.placement "$R/exp_avg-0_99.tensor.swp")
echo "$pl" | grep -qE '(^| )nvme[01]=[1-9]' && ok "non-matching file striped on nvme tiers ($pl)" || fail "exp_avg placement '$pl'"

# root: user.tierfs.tiers
tiers=$(xa user.tierfs.tiers "$MNT")
echo "$tiers" | sed 's/^/# tiers: /'
"$PY" - "$tiers" <<'PYEOF' && ok "user.tierfs.tiers: one 'NAME TYPE USED CAPACITY' line per tier" || fail "user.tierfs.tiers malformed"
import re, sys
lines = [l for l in sys.argv[1].splitlines() if l.strip()]
got = {}
for l in lines:
    f = l.split()
    if len(f) != 4 or not re.fullmatch(r"\d+[KMGT]?", f[2]) or not re.fullmatch(r"\d+[KMGT]?", f[3]):
        print("# bad line %r" % l); sys.exit(1)
    got[f[0]] = f[1]
if got != {"ram": "ram", "nvme0": "posix", "nvme1": "posix"}:
    print("# tiers %r" % got); sys.exit(1)
PYEOF

# .tierfs view
ls "$MNT/.tierfs" >"$T/ls" 2>&1
grep -qx stats "$T/ls" && grep -qx tiers "$T/ls" && ok "ls .tierfs lists stats and tiers" || fail "ls .tierfs: $(tr '\n' ' ' <"$T/ls")"
if cat "$MNT/.tierfs/stats" >"$T/stats" 2>&1 && [ -s "$T/stats" ]; then
	ok "cat .tierfs/stats"
	head -5 "$T/stats" | sed 's/^/# stats: /'
	for t in ram nvme0 nvme1; do grep -q "$t" "$T/stats" && ok "stats mention $t" || fail "stats do not mention $t"; done
else fail "cat .tierfs/stats: $(head -2 "$T/stats")"; fi
ls "$MNT/.tierfs/tiers" >"$T/ls" 2>&1
[ "$(sort "$T/ls" | tr '\n' ' ')" = "nvme0 nvme1 ram " ] && ok "ls .tierfs/tiers lists every tier" || fail "ls .tierfs/tiers: $(tr '\n' ' ' <"$T/ls")"
ls -l "$MNT/.tierfs/tiers/nvme0/" >"$T/ls0" 2>&1
ls -l "$MNT/.tierfs/tiers/nvme1/" >"$T/ls1" 2>&1
sed 's/^/# tiers\/nvme0: /' "$T/ls0" | head -8
grep -q sparse "$T/ls0" && ok "tiers/nvme0 lists a striped file" || fail "tiers/nvme0 does not list 'sparse'"
grep -q 'f8' "$T/ls1" && ok "tiers/nvme1 lists the file pinned there" || fail "tiers/nvme1 does not list f8"
want=$(xa user.tierfs.placement "$MNT/sparse" | tr ' ' '\n' | grep '^nvme0=' | cut -d= -f2)
got=$(awk '$NF ~ /sparse/ {print $5}' "$T/ls0")
[ -n "$want" ] && [ "$got" = "$want" ] && ok "ls -l tiers/nvme0 shows the bytes held there ($got)" || fail "ls -l size '$got', placement says '$want'"
grep -q 'gradient' "$T/ls0" && fail "gradient file (ram rule) listed under nvme0" || ok "gradient file not listed under nvme0"
gview=${R#"$MNT"}/0_99_gradient_0_786432.tensor.swp
check_fails "stat of the gradient file under tiers/nvme0 fails as ls says (ENOENT)" \
	stat "$MNT/.tierfs/tiers/nvme0$gview"
check "stat of the gradient file under tiers/ram works" stat "$MNT/.tierfs/tiers/ram$gview"
# A user's lseek to any byte of a tier listing: whole entries, names it holds.
names=$(ls -a "$MNT/.tierfs/tiers/nvme0/" | tr '\n' ' ')
len=$(ls -a "$MNT/.tierfs/tiers/nvme0/" | awk '{ n += int((24 + length($0) + 7) / 8) * 8 } END { print n }')
# shellcheck disable=SC2086 # one argument per name
check "tiers/nvme0: getdents after lseek to each of its $len bytes gives whole, known entries" \
	"$TESTBIN/seekdir" "$MNT/.tierfs/tiers/nvme0" "$len" $names

# read-only
for what in "write stats" "create file" "mkdir"; do
	case $what in
	"write stats") err=$( (echo x >"$MNT/.tierfs/stats") 2>&1) ;;
	"create file") err=$( (: >"$MNT/.tierfs/newfile") 2>&1) ;;
	mkdir) err=$(mkdir "$MNT/.tierfs/tiers/x" 2>&1) ;;
	esac
	if [ $? -ne 0 ] && echo "$err" | grep -qE 'Read-only file system|Permission denied'; then ok ".tierfs read-only: $what fails (EROFS/EACCES)"; else fail ".tierfs: $what: '$err'"; fi
done
check_fails "rm of a .tierfs entry fails" rm -f "$MNT/.tierfs/stats"

check "unmount clean" umount_fs
# placement survives remount
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
check "after remount: f8 still all on nvme1 and intact" sh -c "cmp -s '$MNT/f8' '$T/f8.copy'"
n0=$(nblocks nvme0 "$MNT/sparse") n1=$(nblocks nvme1 "$MNT/sparse")
[ $((n0 + n1)) = 3 ] && ok "after remount: sparse file's 3 blocks on nvme tiers" || fail "after remount: sparse blocks nvme0=$n0 nvme1=$n1"
check "unmount clean (2)" umount_fs

# A list of runs over the kernel's 64 KiB xattr limit: 4 KiB blocks striped
# 1:1, 64 MiB = 8192 one-block runs per tier. Each tier's list is cut short
# with "...(+N)", and what it shows is right.
rm -rf "$T/meta" "$T/nvme0" "$T/nvme1"
two_tier_conf 4K >"$T/c4k.conf"
mount_fs "$T/c4k.conf" || { fail "mount (4K blocks)"; tap_exit; exit 1; }
head -c $((64 * MiB)) /dev/urandom >"$MNT/long"
check "getfattr of a 16384-run block list works" getfattr -n user.tierfs.blocks "$MNT/long"
xa user.tierfs.blocks "$MNT/long" >"$T/long.blocks"
"$PY" - "$T/long.blocks" <<'PYEOF' && ok "cut lists: under 64 KiB, shown + left out = 8192 runs per tier, no block twice" || fail "cut block list wrong"
import re, sys
v = open(sys.argv[1]).read().strip()
if len(v) > 65536:
    print("# %d bytes" % len(v)); sys.exit(1)
seen = set()
for part in v.split(" "):
    name, runs = part.split(":", 1)
    m = re.fullmatch(r"((?:\d+,)*\d+),\.\.\.\(\+(\d+)\)", runs)
    if not m:
        print("# %s: not cut: %r" % (name, runs[-40:])); sys.exit(1)
    shown = [int(x) for x in m.group(1).split(",")]
    if len(shown) + int(m.group(2)) != 8192 or len({b % 2 for b in shown}) != 1:
        print("# %s: %d shown + %s left" % (name, len(shown), m.group(2))); sys.exit(1)
    if seen & set(shown):
        print("# a block on two tiers"); sys.exit(1)
    seen |= set(shown)
PYEOF
check "unmount clean (4K blocks)" umount_fs
tap_exit
