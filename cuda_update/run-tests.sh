#!/usr/bin/env bash
# cuda_update/run-tests.sh — runs the updater's tests from $TIERFS_BUILD (set by
# tests/run.sh: the absolute build or build-san directory) and prints one TAP
# line per test case, renumbered across programs: the cmocka programs
# (kernels vs float64, the pipeline's results, the files it is given and
# what a crash leaves, CUDA), then command-line checks of
# tierfs-update. cmocka 1.1.5 prints skips as "not ok N # SKIP name"; they are
# rewritten as "ok N - name # SKIP". A program exiting 77 is one skipped case.
# Exit status non-zero when any case failed.
set -u
cd "$(dirname "$0")/.."
B=${TIERFS_BUILD:-$PWD/build}
export CMOCKA_MESSAGE_OUTPUT=TAP
N=0 FAILED=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tu-run.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

tap() { # status name [directive]
	N=$((N + 1))
	if [ "$1" = ok ]; then
		echo "ok $N - $2${3:+ # $3}"
	else
		echo "not ok $N - $2"
		FAILED=$((FAILED + 1))
	fi
}

run_prog() { # name
	local prog=$B/tests/cuda_update/$1 out rc
	if [ ! -x "$prog" ]; then
		tap fail "$1 (not built: $prog)"
		return
	fi
	out=$(TMPDIR=$TMP "$prog" 2>&1)
	rc=$?
	if [ $rc -eq 77 ]; then
		tap ok "$1" "SKIP $(echo "$out" | sed -n 's/^# skipped: //p' | head -1)"
		return
	fi
	local seen=0
	while IFS= read -r line; do
		case $line in
		"not ok "*"# SKIP"*)
			seen=1
			tap ok "$1: ${line##*# SKIP }" "SKIP CPU lacks this instruction set" ;;
		"not ok "*)
			seen=1
			tap fail "$1: ${line#not ok * - }" ;;
		"ok "*)
			seen=1
			tap ok "$1: ${line#ok * - }" ;;
		"#"*) [ "${line#\# }" != "${line#\# ok}" ] || [ "${line#\# }" != "${line#\# not ok}" ] || echo "$line" ;;
		*) echo "# $line" ;;
		esac
	done <<<"$out"
	if [ $rc -ne 0 ] && [ $seen -eq 0 ]; then
		tap fail "$1 (exit $rc)"
	elif [ $rc -ne 0 ] && [ $FAILED -eq 0 ]; then
		tap fail "$1 (exit $rc after its cases)"
	fi
}

run_prog test_kernels
run_prog test_pipeline
run_prog test_pipeline_files
run_prog test_pipeline_crash
run_prog test_cuda

# Command line: usage, errors and exit codes.
U=$B/tierfs-update
check() { # name expected-rc pattern cmd...
	local name=$1 want=$2 pat=$3 out rc
	shift 3
	out=$("$@" 2>&1)
	rc=$?
	if [ $rc -eq "$want" ] && grep -qE -- "$pat" <<<"$out"; then
		tap ok "cli: $name"
	else
		echo "# got rc $rc: $(head -3 <<<"$out")"
		tap fail "cli: $name"
	fi
}
D=$TMP/model
check "--help documents every step option" 0 'weight-decay.*' "$U" --help
for o in --first-step --extra-buffers --optimizer --lr --beta1 --beta2 --eps --weight-decay --order --keep --device --threads --layout --grad-dtype --subgroup --params; do
	grep -q -- "$o" <<<"$("$U" --help)" || { echo "# --help lacks $o"; tap fail "cli: --help lists $o"; }
done
check "unknown option exits 2" 2 'unknown option' "$U" step "$D" --steps 1 --frobnicate
check "bad value exits 2" 2 "--order: 'sideways'" "$U" step "$D" --steps 1 --order sideways
# Values past INT_MAX wrapped to small ones (4294967297 -> 1) and ran.
for o in --threads --keep --extra-buffers --rank; do
	check "$o 4294967297 is out of range" 2 "$o: '4294967297': expected" \
		"$U" step "$TMP/nope" --steps 1 $o 4294967297
done
check "init native" 0 'wrote 10007 params in 4 sub-groups' "$U" init "$D" --params 10007 --subgroup 2600
check "step prints a summary per step" 0 '^step 2: 4 sub-groups.*GB/s' "$U" step "$D" --steps 2 --order alternating --keep 1
check "header step persists" 0 '^step 4: ' "$U" step "$D" --steps 2
# The native state file is replaced by a new one every step: attributes set
# on it (a tierfs pin, user.* xattrs) must carry over, not vanish after one
# step.
if setfattr -n user.tu_test -v kept "$D/sg-00001.state" 2>/dev/null; then
	"$U" step "$D" --steps 1 >/dev/null 2>&1
	if [ "$(getfattr --only-values -n user.tu_test "$D/sg-00001.state" 2>/dev/null)" = kept ]; then
		tap ok "cli: user xattrs of a state file survive a step"
	else
		echo "# getfattr after step: $(getfattr -d "$D/sg-00001.state" 2>&1 | tr '\n' ' ')"
		tap fail "cli: user xattrs of a state file survive a step"
	fi
else
	tap ok "cli: user xattrs of a state file survive a step" "SKIP no user xattrs on $TMP"
fi
check "missing directory exits 2 naming it" 2 "$TMP/nope.*No such file" "$U" step "$TMP/nope" --steps 1
truncate -s 100 "$D/sg-00002.grad"
check "mis-sized file: name, found, expected" 2 'sg-00002.grad: size 100 bytes, expected 5200' "$U" step "$D" --steps 1
"$U" init "$TMP/bad" --params 4096 --subgroup 2048 >/dev/null
printf '\x80' | dd of="$TMP/bad/sg-00001.state" bs=1 seek=23 conv=notrunc status=none # numel bit 63
check "corrupted numel exits 2 naming the file" 2 'sg-00001.state: header says .* params, not in' \
	"$U" step "$TMP/bad" --steps 1
if [[ $B == *-san ]]; then
	tap ok "cli: out of memory is reported" "SKIP ASan reserves more address space than ulimit -v allows"
else
	"$U" init "$TMP/big" --params 3M --subgroup 3M >/dev/null
	check "out of memory is reported" 2 'out of memory: 4 buffers of 40.1 MiB' \
		bash -c "ulimit -v 100000; exec \"$U\" step \"$TMP/big\" --steps 1"
	rm -rf "$TMP/big"
fi
check "init deepspeed" 0 'deepspeed' "$U" init "$TMP/ds" --params 10007 --subgroup 5000 --layout deepspeed
check "deepspeed without --first-step exits 2" 2 'deepspeed needs --first-step' \
	"$U" step "$TMP/ds" --layout deepspeed --steps 1
# An empty rank directory (wrong --rank, or DeepSpeed has not swapped yet):
# qsort(NULL, 0) was undefined behaviour, the sanitizer build aborted.
mkdir -p "$TMP/dsempty/zero_stage_3/optimizer/rank0"
check "empty deepspeed rank directory exits 2 naming it" 2 'rank0: no sub-group files' \
	"$U" step "$TMP/dsempty" --layout deepspeed --steps 1 --first-step 1
check "step deepspeed" 0 '^step 7: 3 sub-groups' "$U" step "$TMP/ds" --layout deepspeed --steps 1 --first-step 7
if grep -q 'nvcc was not found\|sanitizer build' <<<"$("$U" step "$TMP/ds" --layout deepspeed --steps 1 --first-step 8 --device cuda 2>&1)"; then
	check "--device cuda without CUDA build" 2 'built without CUDA support' "$U" step "$TMP/ds" --layout deepspeed --steps 1 --first-step 8 --device cuda
else
	out=$("$U" step "$TMP/ds" --layout deepspeed --steps 1 --first-step 8 --device cuda 2>&1)
	rc=$?
	if [ $rc -eq 2 ] && grep -q 'no CUDA device: ' <<<"$out"; then
		tap ok "cli: --device cuda without a GPU exits 2 with the reason"
	elif [ $rc -eq 0 ]; then
		tap ok "cli: --device cuda runs on the GPU"
	else
		echo "# rc $rc: $out"
		tap fail "cli: --device cuda"
	fi
fi

# bench: the medians take every steady-state step of every run (3 runs of
# each kind, steps 2..4); the counts it prints show how many it used.
# bench --dir works in a private directory inside DIR and removes only that:
# a model and other files already in DIR stay as they were.
"$U" init "$TMP/bench" --params 1000 --subgroup 1000 >/dev/null
echo keep >"$TMP/bench/unrelated.txt"
sum0=$(cksum <"$TMP/bench/sg-00000.state")
check "bench medians use every run" 0 'medians of .*: 9 I/O-only and 9 full steps' \
	"$U" bench --params 64k --threads 1 --dir "$TMP/bench"
if [ -f "$TMP/bench/unrelated.txt" ] && [ "$(cksum <"$TMP/bench/sg-00000.state" 2>&1)" = "$sum0" ] &&
	[ -z "$(find "$TMP/bench" -name 'tierfs-update-bench.*')" ]; then
	tap ok "cli: bench --dir leaves the directory's files alone"
else
	echo "# $TMP/bench after bench: $(ls "$TMP/bench" 2>&1 | tr '\n' ' ')"
	tap fail "cli: bench --dir leaves the directory's files alone"
fi
check "bench --dir missing names it" 2 "bench: --dir $TMP/nope: cannot create" \
	"$U" bench --params 64k --threads 1 --dir "$TMP/nope"

echo "1..$N"
[ $FAILED -eq 0 ]
