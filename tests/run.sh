#!/usr/bin/env bash
# Run every test of tierfs for each build directory given (default: build).
#
# A test is a program: tests/unit/test_* (cmocka, built into BUILD/tests/unit/)
# and tests/integration/t_*.sh (shell, against a real mount of BUILD/tierfs).
# A program that prints TAP lines ("ok N - name", "not ok N - name",
# "ok N - name # SKIP why") is counted line by line; otherwise by its exit
# status: 0 passed, 77 skipped, anything else failed.
# Ends with one line: "N passed, N failed, N skipped".
#
# Each build directory is a lane of its own, and the lanes run side by side
# (TEST_LANES=1 runs them one after the other): the tests of one build wait
# on the disk and on sleeps more than on the CPU (about a third of two
# cores in use), so two lanes take about two thirds of the time of one
# after the other. Within a lane the tests run one at a time, as timing-
# tolerant as they were written to be under ASan.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
[ $# -gt 0 ] || set -- build
# The lanes of this run, first one first: a test too costly for every lane
# runs in the first only.
export TEST_BUILDS="$*"
FILTER=${TEST_FILTER:-}
PASS=0 FAIL=0 SKIP=0
FAILED=()
LOGDIR=$(mktemp -d /tmp/tierfs-test-logs.XXXXXX)
# Generous per-program limit; a hung mount must not hang CI.
LIMIT=${TEST_TIMEOUT:-600}

run_one() { # build label cmd...
	local build=$1 label=$2; shift 2
	local log="$LOGDIR/$(echo "$build-$label" | tr '/' '_').log"
	local t0=$SECONDS
	TIERFS_BUILD="$ROOT/$build" TIERFS_BIN="$ROOT/$build/tierfs" TESTBIN="$ROOT/$build/tests/bin" \
		CMOCKA_MESSAGE_OUTPUT=TAP timeout -k 10 "$LIMIT" "$@" >"$log" 2>&1
	local rc=$? p f s
	# cmocka's skip() prints "not ok N # SKIP": a skip all the same (TAP).
	local oks skips nots
	oks=$(grep -cE '^ok [0-9]+' "$log" | head -1)
	skips=$(grep -cE '^ok [0-9]+.*# *SKIP' "$log" | head -1)
	nots=$(grep -cE '^not ok [0-9]+.*# *SKIP' "$log" | head -1)
	f=$(grep -cE '^not ok [0-9]+' "$log" | head -1)
	p=$((oks - skips)) s=$((skips + nots)) f=$((f - nots))
	if [ $((p + f + s)) -eq 0 ]; then
		case $rc in
		0) p=1 ;; 77) s=1 ;; *) f=1 ;;
		esac
	elif [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ "$f" -eq 0 ]; then
		f=1 # crashed or exited non-zero after printing only passes
	fi
	PASS=$((PASS + p)) FAIL=$((FAIL + f)) SKIP=$((SKIP + s))
	local status="ok"
	[ "$f" -gt 0 ] && status="FAIL" && FAILED+=("$build:$label")
	printf '%-5s %-48s %3d passed %2d failed %2d skipped  (%ds)\n' "$status" "$build:$label" "$p" "$f" "$s" $((SECONDS - t0))
	if [ "$f" -gt 0 ]; then
		grep -E '^not ok|ERROR|error|FAIL|Assert|Sanitizer|runtime error' "$log" | head -20 | sed 's/^/      /'
		echo "      (full log: $log)"
	fi
}

run_build() { # build: every test of one build directory
	local build=$1 t name mk
	for t in "$build"/tests/unit/test_*; do
		[ -x "$t" ] || continue
		name=unit/$(basename "$t")
		[[ -z $FILTER || $name == *$FILTER* ]] || continue
		run_one "$build" "$name" "$t"
	done
	for t in tests/integration/t_*.sh; do
		[ -f "$t" ] || continue
		name=integration/$(basename "$t" .sh)
		[[ -z $FILTER || $name == *$FILTER* ]] || continue
		run_one "$build" "$name" bash "$t"
	done
	for mk in cuda_update tests/bench tests/fuzz; do
		[ -x "$mk/run-tests.sh" ] || continue
		[[ -z $FILTER || $mk == *$FILTER* ]] || continue
		run_one "$build" "$mk" "$mk/run-tests.sh"
	done
}

if [ $# -gt 1 ] && [ "${TEST_LANES:-2}" != 1 ]; then
	# A lane hands its counts back through a file; its result lines go
	# straight to our stdout, one write each, so lanes interleave by line.
	lanes=()
	for build in "$@"; do
		res="$LOGDIR/lane-$(echo "$build" | tr '/' '_').res"
		(
			run_build "$build"
			echo "$PASS $FAIL $SKIP ${FAILED[*]}" >"$res"
		) &
		lanes+=("$!:$build:$res")
	done
	for lane in "${lanes[@]}"; do
		IFS=: read -r pid build res <<<"$lane"
		wait "$pid"
		if read -r p f s failed <"$res" 2>/dev/null; then
			PASS=$((PASS + p)) FAIL=$((FAIL + f)) SKIP=$((SKIP + s))
			[ -n "$failed" ] && FAILED+=($failed)
		else
			FAIL=$((FAIL + 1)) FAILED+=("$build:(lane died before its counts)")
		fi
	done
else
	for build in "$@"; do
		run_build "$build"
	done
fi

if [ ${#FAILED[@]} -gt 0 ]; then
	echo "failed: ${FAILED[*]}"
fi
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" -eq 0 ]
