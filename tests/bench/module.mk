# tests/bench: the update-phase benchmark. `make bench` runs
# scripts/bench.sh, which drives these binaries:
#   tierfs-replay        DeepSpeed ZeRO-Infinity swap I/O replay + disk probe
#   tests/bench/passfs   a FUSE passthrough stand-in for the daemon, to test
#                        bench.sh's mounted phases without tierfs
#   tests/bench/growtime how long growing the order learner holds the lock
#   tests/bench/codecbench  what the per-block codec costs per core
#
# -fno-math-errno lets gcc vectorise sqrtf in the replay's Adam pass, as
# DeepSpeed's CPU Adam is vectorised; the pass should not be the bottleneck.

REPLAY_OBJ := $(addprefix $(BUILD)/obj/tests/bench/,replay.o replay_data.o replay_aio.o \
		replay_rank.o replay_probe.o replay_report.o)

MODULE_ALL += $(BUILD)/tierfs-replay $(BUILD)/tests/bench/passfs $(BUILD)/tests/bench/growtime \
	      $(BUILD)/tests/bench/codecbench

$(BUILD)/obj/tests/bench/%.o: tests/bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fno-math-errno -c $< -o $@

$(BUILD)/tierfs-replay: $(REPLAY_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ -laio -lm

$(BUILD)/tests/bench/passfs: $(BUILD)/obj/tests/bench/passfs.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs fuse3)

$(BUILD)/tests/bench/growtime: $(BUILD)/obj/tests/bench/growtime.o $(BUILD)/libtierfs.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/bench/codecbench: $(BUILD)/obj/tests/bench/codecbench.o $(BUILD)/libtierfs.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

-include $(BUILD)/obj/tests/bench/growtime.d $(BUILD)/obj/tests/bench/codecbench.d
-include $(REPLAY_OBJ:.o=.d) $(BUILD)/obj/tests/bench/passfs.d
