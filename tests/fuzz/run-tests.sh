#!/usr/bin/env bash
# Run every fuzz harness of one build over its seed corpus and the inputs
# that once crashed it (tests/fuzz/corpus/NAME, tests/fuzz/regress/NAME),
# one TAP line each. A harness that crashes or finds a wrong answer on any
# stored input fails here, so a fixed crash stays fixed.
set -u
cd "$(dirname "$0")/../.."
: "${TIERFS_BUILD:?run by tests/run.sh, which sets TIERFS_BUILD}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
n=0
for src in tests/fuzz/fuzz_*.c; do
	name=$(basename "$src" .c)
	name=${name#fuzz_}
	n=$((n + 1))
	bin=$TIERFS_BUILD/tests/fuzz/fuzz_$name
	dirs=()
	for d in tests/fuzz/corpus/$name tests/fuzz/regress/$name; do
		[ -d "$d" ] && dirs+=("$d")
	done
	if [ ! -x "$bin" ]; then
		echo "not ok $n - fuzz_$name: $bin not built"
		continue
	fi
	if [ ${#dirs[@]} -eq 0 ]; then
		echo "not ok $n - fuzz_$name: no stored inputs (tests/fuzz/corpus/$name)"
		continue
	fi
	log=$(mktemp)
	if out=$("$bin" "${dirs[@]}" 2>"$log"); then
		echo "ok $n - fuzz_$name over its stored inputs ($out)"
	else
		echo "not ok $n - fuzz_$name crashed or failed a check"
		grep -E '^replay: ' "$log" | tail -1 | sed 's/^/    last input: /'
		grep -vE '^replay: ' "$log" | tail -20 | sed 's/^/    /'
	fi
	rm -f "$log"
done
