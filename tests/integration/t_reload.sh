#!/usr/bin/env bash
# Live reload of the config (SIGHUP and .tierfs/reload): each live key,
# changed while a writer runs, takes effect (a write cap shows in the
# measured write-back rate, a new rule places a new file, log_level adds
# its lines, learn = no stops the learner, flush_interval and dirty_ratio
# start write-back); keys that need a remount are refused one by one,
# with their line, while the rest applies; a config with an error changes
# nothing; a storm of SIGHUPs under a writer loses no byte.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd getfattr

# gen VAR=VALUE...: the config, with these settings (defaults below).
gen() {
	local DR=25 FI=1 LL=info CAP=none LEARN=yes RULE=no BS=64K CAP1=2G BAD= PD=64
	local kv
	for kv in "$@"; do local "$kv"; done
	mkdir -p "$T/nvme0" "$T/nvme1" "$T/meta"
	cat <<CONF
[mount]
metadata = $T/meta
block_size = $BS
dirty_ratio = $DR
flush_interval = $FI
log_level = $LL
$BAD
[tier ram]
type = ram
capacity = 24M

[tier nvme0]
type = posix
path = $T/nvme0
capacity = 2G
max_bandwidth_write = $CAP

[tier nvme1]
type = posix
path = $T/nvme1
capacity = $CAP1

[policy]
stripe = nvme0, nvme1
learn = $LEARN

[expert]
prefetch_depth = $PD
CONF
	if [ "$RULE" = yes ]; then
		printf '\n[rule ckpt]\nmatch = *.ckpt\ntier = nvme1\n'
	fi
}

# reload_hup: SIGHUP, then wait for the reload's last line in the log.
reload_hup() {
	local n
	n=$(grep -c 'reload: .*: .* applied\|not applied' "$T/daemon.log")
	kill -HUP "$TIERFS_PID"
	wait_for eval '[ "$(grep -c "reload: .*: .* applied\|not applied" "$T/daemon.log")" -gt "$n" ]'
}
# log_since MARK: the daemon's log after line MARK.
log_since() { tail -n +"$(($1 + 1))" "$T/daemon.log"; }
mark() { wc -l <"$T/daemon.log"; }

# rate_nvme0 SECONDS: bytes/s nvme0 wrote over that long.
rate_nvme0() {
	local a b
	a=$(stat_field "tier nvme0" bytes_written)
	sleep "$1"
	b=$(stat_field "tier nvme0" bytes_written)
	echo $(((b - a) / $1))
}

gen >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }

# --- a writer runs through the live changes below --------------------
(while [ ! -e "$T/stop" ]; do
	dd if=/dev/zero of="$MNT/w" bs=1M count=48 conv=notrunc status=none || break
done) &
WRITER=$!

# max_bandwidth_write: a cap shows in the rate, lifting it lifts the rate.
CAP=$((4 * 1024 * 1024))
gen CAP=4M/s >"$T/c.conf"
m=$(mark)
reload_hup
log_since "$m" | grep -q "reload: \[tier nvme0\] max_bandwidth_write: none -> 4M/s" &&
	ok "cap change logged old -> new" || { fail "cap change logged"; log_since "$m" >&2; }
sleep 1
r=$(rate_nvme0 3)
echo "# nvme0 write-back under a 4M/s cap: $r bytes/s"
[ "$r" -le $((CAP * 3 / 2)) ] && ok "capped rate ($r B/s) within 1.5 x the cap" ||
	fail "capped rate $r B/s over 1.5 x $CAP"
gen >"$T/c.conf"
reload_hup
sleep 1
r2=$(rate_nvme0 3)
echo "# nvme0 write-back with the cap lifted: $r2 bytes/s"
[ "$r2" -gt $((CAP * 2)) ] && ok "cap lifted: rate $r2 B/s" || fail "cap lifted: rate still $r2 B/s"

# prefetch_depth: applied and logged (read-ahead along a learned order
# needs a learned training step, which t_replay and t_prefetchstat cover).
gen PD=0 >"$T/c.conf"
m=$(mark)
reload_hup
log_since "$m" | grep -q "reload: \[expert\] prefetch_depth: 64 -> 0" &&
	ok "prefetch_depth 64 -> 0 logged" || fail "prefetch_depth change"
gen >"$T/c.conf"
reload_hup

# learn = no: the learner sees no more accesses; yes again: it does.
acc() { grep '^order ' "$MNT/.tierfs/stats" | tr ' ' '\n' | sed -n 's/^accesses=//p'; }
gen LEARN=no >"$T/c.conf"
reload_hup
a1=$(acc)
sleep 1.5
a2=$(acc)
[ -n "$a1" ] && [ "$a1" = "$a2" ] && ok "learn = no: accesses stay at $a1" ||
	fail "learn = no: accesses $a1 -> $a2"
gen >"$T/c.conf"
reload_hup
a1=$(acc)
sleep 1.5
a2=$(acc)
[ -n "$a1" ] && [ "$a2" -gt "$a1" ] && ok "learn = yes: accesses grow ($a1 -> $a2)" ||
	fail "learn = yes: accesses $a1 -> $a2"

# A new rule places a new file on nvme1 alone; log_level = debug says so.
gen RULE=yes LL=debug >"$T/c.conf"
m=$(mark)
reload_hup
log_since "$m" | grep -q "reload: \[ckpt\] added\|reload: \[rule ckpt\] added" &&
	ok "rule added, logged" || fail "rule added, logged"
dd if=/dev/urandom of="$MNT/a.ckpt" bs=1M count=4 conv=fsync status=none
dd if=/dev/urandom of="$MNT/a.data" bs=1M count=4 conv=fsync status=none
p=$(getfattr -n user.tierfs.placement --only-values "$MNT/a.ckpt" 2>/dev/null)
echo "# a.ckpt placement: $p"
case " $p " in *" nvme1="[1-9]*) ok "new rule: a.ckpt on nvme1" ;; *) fail "new rule: a.ckpt on nvme1 ($p)" ;; esac
case " $p " in *" nvme0="[1-9]*) fail "new rule: a.ckpt also on nvme0 ($p)" ;; *) ok "new rule: nothing of a.ckpt on nvme0" ;; esac
p=$(getfattr -n user.tierfs.placement --only-values "$MNT/a.data" 2>/dev/null)
case " $p " in *" nvme0="[1-9]*) ok "a.data still striped" ;; *) fail "a.data striped ($p)" ;; esac
log_since "$m" | grep -q "create /a.ckpt: rule ckpt: tier nvme1" &&
	ok "log_level = debug: the create's rule logged" || fail "log_level = debug: no create line"
gen RULE=yes >"$T/c.conf"
m=$(mark)
reload_hup
dd if=/dev/zero of="$MNT/b.ckpt" bs=64K count=1 status=none
log_since "$m" | grep -q "create /b.ckpt" && fail "log_level = info: still a create line" ||
	ok "log_level = info: no create line"

# Keys that need a remount are refused with their line; the rest applies.
gen RULE=yes BS=128K CAP1=3G DR=30 >"$T/c.conf"
bl=$(grep -n '^block_size' "$T/c.conf" | cut -d: -f1)
cl=$(grep -n '^capacity = 3G' "$T/c.conf" | cut -d: -f1)
m=$(mark)
reload_hup
log_since "$m" | grep -qF "$T/c.conf:$bl: key 'block_size': needs a remount" &&
	ok "block_size refused at line $bl" || { fail "block_size refused"; log_since "$m" >&2; }
log_since "$m" | grep -qF "$T/c.conf:$cl: key 'capacity': needs a remount" &&
	ok "nvme1 capacity refused at line $cl" || fail "capacity refused"
log_since "$m" | grep -q "reload: \[mount\] dirty_ratio: 25 -> 30" &&
	ok "dirty_ratio applied beside the refusals" || fail "dirty_ratio not applied"
log_since "$m" | grep -q "1 change applied, 2 refused" && ok "summary: 1 applied, 2 refused" ||
	fail "summary line"

# A config with an error changes nothing, said in the mount's form; the
# control file's write fails.
gen RULE=no LL=debug BAD="threads = many" >"$T/c.conf"
tl=$(grep -n '^threads' "$T/c.conf" | cut -d: -f1)
m=$(mark)
check_fails "bad config: write to .tierfs/reload fails" sh -c "echo reload >'$MNT/.tierfs/reload'"
log_since "$m" | grep -qF "$T/c.conf:$tl: key 'threads': 'many' must be an integer" &&
	ok "bad config: error at line $tl" || { fail "bad config: error line"; log_since "$m" >&2; }
log_since "$m" | grep -q "not applied, nothing changed" && ok "bad config: nothing changed, said" ||
	fail "bad config: no 'nothing changed'"
dd if=/dev/urandom of="$MNT/c.ckpt" bs=1M count=2 conv=fsync status=none
p=$(getfattr -n user.tierfs.placement --only-values "$MNT/c.ckpt" 2>/dev/null)
case " $p " in *" nvme0="[1-9]*) fail "bad config: the rule went ($p)" ;; *) ok "bad config: the rule stays" ;; esac
log_since "$m" | grep -q "create /c.ckpt" && fail "bad config: log_level changed" ||
	ok "bad config: log_level unchanged"

# .tierfs/reload: a write reloads, and returns once it is done.
gen RULE=yes DR=30 >"$T/c.conf"
m=$(mark)
check "write to .tierfs/reload" sh -c "echo reload >'$MNT/.tierfs/reload'"
log_since "$m" | grep -q "reload (the control file)" && ok ".tierfs/reload reloads" ||
	fail ".tierfs/reload: no reload in the log"
check_fails ".tierfs/reload takes only 'reload'" sh -c "echo bogus >'$MNT/.tierfs/reload'"

touch "$T/stop"
wait "$WRITER"

# flush_interval and dirty_ratio: unsynced data stays dirty with long
# ones, and goes out once a reload shortens them. With learn = no: a
# learned order writes back in the disks' idle time whatever the two say.
gen LEARN=no RULE=yes DR=100 FI=3600 >"$T/c.conf"
reload_hup
sync "$MNT/w" 2>/dev/null || true
dd if=/dev/urandom of="$MNT/d1" bs=64K count=16 status=none
sleep 1
d=$(stat_field cache dirty)
[ "$d" -gt 0 ] && ok "flush_interval = 3600: $d blocks stay dirty" || fail "nothing dirty ($d)"
gen LEARN=no RULE=yes DR=100 FI=0.2 >"$T/c.conf"
reload_hup
check "flush_interval = 0.2: write-back starts" wait_for nothing_dirty
gen LEARN=no RULE=yes DR=100 FI=3600 >"$T/c.conf"
reload_hup
dd if=/dev/urandom of="$MNT/d2" bs=1M count=8 status=none
sleep 1
d=$(stat_field cache dirty)
[ "$d" -gt 20 ] && ok "dirty_ratio = 100: $d blocks dirty" || fail "dirty_ratio = 100: $d dirty"
gen LEARN=no RULE=yes DR=1 FI=3600 >"$T/c.conf"
reload_hup
few() { [ "$(stat_field cache dirty)" -le 8 ]; }
check "dirty_ratio = 1: write-back brings dirty down" wait_for few

# A storm: hundreds of SIGHUPs, flipping between two configs, while files
# are written; every byte is there, now and after a remount.
head -c $((3 * 1024 * 1024 + 4321)) /dev/urandom >"$T/data"
(for i in $(seq 12); do cp "$T/data" "$MNT/s$i.ckpt" && cp "$T/data" "$MNT/s$i.bin" || exit 1; done) &
W2=$!
gen RULE=no CAP=64M/s DR=30 >"$T/c.a"
gen RULE=yes DR=30 >"$T/c.b"
for i in $(seq 300); do
	if [ $((i % 2)) = 0 ]; then cp "$T/c.a" "$T/c.conf"; else cp "$T/c.b" "$T/c.conf"; fi
	kill -HUP "$TIERFS_PID" || break
done
check "storm: writer done" wait "$W2"
check "storm: daemon alive" kill -0 "$TIERFS_PID"
n=$(grep -c 'reload (SIGHUP)' "$T/daemon.log")
echo "# $n reloads ran for the storm and the test's 300 + SIGHUPs"
bad=0
for i in $(seq 12); do
	cmp -s "$T/data" "$MNT/s$i.ckpt" && cmp -s "$T/data" "$MNT/s$i.bin" || bad=$((bad + 1))
done
[ $bad = 0 ] && ok "storm: all 24 files intact" || fail "storm: $bad files differ"
cp "$T/c.b" "$T/c.conf"
check "unmount after the storm" umount_fs
mount_fs "$T/c.conf" || fail "remount"
bad=0
for i in $(seq 12); do
	cmp -s "$T/data" "$MNT/s$i.ckpt" && cmp -s "$T/data" "$MNT/s$i.bin" || bad=$((bad + 1))
done
[ $bad = 0 ] && ok "storm: all 24 files intact after remount" || fail "storm: $bad differ after remount"
check "unmount clean" umount_fs
tap_exit
