#!/usr/bin/env bash
# make fuzz: build every harness in tests/fuzz/ with clang's libFuzzer and
# let each search for FUZZ_SECONDS (default 60), starting from its stored
# corpus. New inputs it keeps go to build-fuzz/corpus/NAME (copy the good
# ones into tests/fuzz/corpus/NAME); an input that crashes goes to
# build-fuzz/crashes/NAME/ and makes this script fail. Fix the bug, then
# store the input as tests/fuzz/regress/NAME/WHAT-IT-BROKE, so that
# `make test` replays it from then on.
#
#   FUZZ_SECONDS=600 make fuzz      longer runs
#   FUZZ_ONLY=config make fuzz      one harness
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
scripts/deps.sh clang
B=build-fuzz
names=()
for src in tests/fuzz/fuzz_*.c; do
	n=$(basename "$src" .c)
	n=${n#fuzz_}
	[[ -z ${FUZZ_ONLY:-} || $n == "$FUZZ_ONLY" ]] || continue
	names+=("$n")
done
targets=()
for n in "${names[@]}"; do targets+=("$B/tests/fuzz/lf_$n"); done
echo "fuzz: building ${names[*]} with libFuzzer + ASan + UBSan in $B/"
# The library too is built for coverage, with the lock-order checks of the
# sanitizer build.
make --no-print-directory -j"$(nproc)" CC=clang BUILD=$B OPT=-O1 LOCKFLAGS=-DTIERFS_LOCK_CHECKS \
	SANFLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	"${targets[@]}" >"$B.log" 2>&1 || { tail -30 "$B.log"; exit 1; }

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=0
printf '%-8s %12s %10s %8s %8s  %s\n' harness executions exec/s corpus crashes result
for n in "${names[@]}"; do
	corpus=$B/corpus/$n crashes=$B/crashes/$n
	mkdir -p "$corpus" "$crashes"
	cp -n tests/fuzz/corpus/"$n"/* "$corpus"/ 2>/dev/null || true
	[ -d tests/fuzz/regress/"$n" ] && cp -n tests/fuzz/regress/"$n"/* "$corpus"/ 2>/dev/null || true
	log=$B/fuzz-$n.log
	echo "fuzz: $n for ${SECONDS_EACH}s (log: $log)" >&2
	rc=0
	# -close_fd_mask=2: the daemon's own log lines (refused keys, bad tier
	# names) would drown libFuzzer's progress; its reports still show.
	"$B/tests/fuzz/lf_$n" "$corpus" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
		-artifact_prefix="$crashes/" -close_fd_mask=2 -rss_limit_mb=4096 -timeout=20 \
		>"$log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	ncorpus=$(find "$corpus" -type f | wc -l)
	ncrash=$(find "$crashes" -type f | wc -l)
	result=ok
	if [ "$rc" -ne 0 ] || [ "$ncrash" -gt 0 ]; then
		result="FAILED (rc $rc): see $log and $crashes/"
		failed=1
		grep -E 'ERROR|SUMMARY|check failed|runtime error' "$log" | head -5 >&2 || true
	fi
	printf '%-8s %12s %10s %8s %8s  %s\n' "$n" "${execs:-?}" "${rate:-?}" "$ncorpus" "$ncrash" "$result"
done
exit $failed
