# tests/fuzz: fuzz harnesses (tests/fuzz/fuzz.h says how one is written).
#
# Every build links each harness with replay.c into tests/fuzz/fuzz_NAME,
# which tests/fuzz/run-tests.sh runs over the stored inputs in `make test`.
# `make fuzz` (scripts/fuzz.sh) builds them again with clang's libFuzzer
# into build-fuzz/ (FUZZ=1) and lets each search for a bounded time.

FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_LIB_OBJ := $(addprefix $(BUILD)/obj/tests/fuzz/,common.o fsbox.o)
FUZZ_REPLAY := $(FUZZ_NAMES:%=$(BUILD)/tests/fuzz/fuzz_%)

MODULE_ALL += $(FUZZ_REPLAY)

$(BUILD)/obj/tests/fuzz/%.o: tests/fuzz/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/tests/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/obj/tests/fuzz/replay.o \
		$(FUZZ_LIB_OBJ) $(BUILD)/libtierfs.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

# libFuzzer binaries: clang, with the library built for coverage
# (scripts/fuzz.sh passes CC=clang and -fsanitize=fuzzer-no-link).
$(BUILD)/tests/fuzz/lf_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ) $(BUILD)/libtierfs.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LIBS)

-include $(FUZZ_NAMES:%=$(BUILD)/obj/tests/fuzz/fuzz_%.d) $(FUZZ_LIB_OBJ:.o=.d) \
	 $(BUILD)/obj/tests/fuzz/replay.d
