# tests/bench: the update-phase benchmark (issue 3). `make bench` runs
# scripts/bench.sh, which drives these binaries.
#
# -fno-math-errno lets gcc vectorise sqrtf in the replay's Adam pass, as
# DeepSpeed's CPU Adam is vectorised; the pass should not be the bottleneck.

BENCH_BIN := $(BUILD)/tierfs-replay
MODULE_ALL += $(BENCH_BIN)

$(BUILD)/obj/tests/bench/%.o: tests/bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fno-math-errno -c $< -o $@

$(BUILD)/tierfs-replay: $(BUILD)/obj/tests/bench/replay.o
	$(CC) $(LDFLAGS) -o $@ $^ -laio -lm

-include $(BUILD)/obj/tests/bench/replay.d
