#!/usr/bin/env bash
# commit_interval = auto (the default): where the metadata disk syncs
# slowly, background commits space out so that they take a twentieth of
# the time at most, and they still come. Every sync of the daemon is made
# to take 0.4 s (syncdelay.so), as a disk whose flush waits on its host
# does:
#   - commit_every_ms shows the interval stretched to 20x what a commit
#     took, and no commit comes at the 5 s a fast disk would get;
#   - the stretched commit still comes, and makes a file written and never
#     fsync'd survive a kill -9;
#   - an interval given as a number is kept as given.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs

M=$((1 << 20))
head -c $((2 * M)) /dev/urandom >"$T/a.want"
head -c $((2 * M)) /dev/urandom >"$T/b.want"
commits() { stat_field cache commits; }
every_ms() { stat_field cache commit_every_ms; }
commits_above() { [ "$(commits)" -gt "$1" ]; }
export SYNCDELAY_US=400000

# 1. auto, slow syncs.
default_conf | mount_key 'flush_interval = 0.05' >"$T/auto.conf"
mount_shimmed syncdelay "$T/auto.conf" || { fail mount; tap_exit; exit 1; }
check "commit_every_ms is 5 s before any commit ($(every_ms))" test "$(every_ms)" = 5000
c0=$(commits)
cp "$T/a.want" "$MNT/a"
check "a: written back" wait_for nothing_dirty
check "a: a background commit ran" wait_for commits_above "$c0"
t1=$(date +%s%N)
c1=$(commits)
e=$(every_ms)
check "the interval stretched to 20x a 0.4 s commit: $e ms >= 8000" test "$e" -ge 8000
check "and no further than 30 s: $e ms" test "$e" -le 30000
cp "$T/b.want" "$MNT/b"
check "b: written back" wait_for nothing_dirty
# The commit of a began about 0.4 s before it was seen; unstretched, the
# next would come at 4.6 s from here.
rem=$((t1 + 5500000000 - $(date +%s%N)))
[ $rem -le 0 ] || sleep "$(printf '%d.%09d' $((rem / 1000000000)) $((rem % 1000000000)))"
check "no commit 5.5 s after the last ($c1 then $(commits))" test "$(commits)" = "$c1"
check "the stretched commit comes" wait_for commits_above "$c1"
check "kill -9" crash_fs
mount_fs "$T/auto.conf" || { fail "remount after kill -9"; tap_exit; exit 1; }
check "a intact after the crash" cmp "$T/a.want" "$MNT/a"
check "b intact after the crash (the stretched commit, no fsync)" cmp "$T/b.want" "$MNT/b"
check "unmount clean" umount_fs

# 2. A number, slow syncs: kept as given.
default_conf | mount_key 'flush_interval = 0.05' | mount_key 'commit_interval = 5' >"$T/five.conf"
mount_shimmed syncdelay "$T/five.conf" || { fail "mount (commit_interval = 5)"; tap_exit; exit 1; }
c0=$(commits)
cp "$T/a.want" "$MNT/c"
check "c: written back" wait_for nothing_dirty
check "c: a background commit ran" wait_for commits_above "$c0"
check "commit_interval = 5 stays 5 s ($(every_ms))" test "$(every_ms)" = 5000
check "unmount clean (commit_interval = 5)" umount_fs
tap_exit
