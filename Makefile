# tierfs — top-level build.
#
#   make            build/tierfs and every tool and test program
#   make deps       install the Debian packages the project needs (idempotent)
#   make test       deps, normal build, ASan+UBSan build, run every test
#   make demo       deps, build, run the demo on a built-in default setup
#   make bench      deps, build, run the update-phase benchmarks
#   make fuzz       deps + clang, run each fuzz harness for a bounded time
#   make e2e        deps, build, train with real DeepSpeed on a mount and on a plain directory, compare
#   make SAN=1 ...  the same targets built with AddressSanitizer+UBSan in build-san/
#   make format     apply .clang-format
#
# Modules with their own rules (the updater, the bench) keep them in a
# module.mk beside their sources; this file includes them.

SAN ?= 0
ifeq ($(SAN),1)
BUILD ?= build-san
# The sanitizer build also checks every lock's owner and order (fs/lock.h).
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LOCKFLAGS := -DTIERFS_LOCK_CHECKS
OPT := -O1
else
BUILD ?= build
SANFLAGS :=
LOCKFLAGS :=
OPT := -O2
endif

CC ?= gcc
PKGS := fuse3 liburing lmdb inih libxxhash liblz4 libcrypto libcurl libmicrohttpd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CFLAGS := -std=gnu11 $(OPT) -g -Wall -Wextra -Werror -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
	  -I. $(PKG_CFLAGS) $(SANFLAGS) $(LOCKFLAGS) -pthread -MMD -MP
LDFLAGS := $(SANFLAGS) -pthread
LIBS := $(PKG_LIBS) -lm

# Modules may keep their files in a folder of their own (fs/cache/, ...).
CORE_SRC := $(sort $(wildcard tiers/*.c tiers/*/*.c policy/*.c policy/*/*.c) \
	      $(filter-out fs/main.c,$(wildcard fs/*.c fs/*/*.c)))
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)

ITEST_SRC := $(wildcard tests/integration/*.c)
ITEST_BIN := $(ITEST_SRC:tests/integration/%.c=$(BUILD)/tests/bin/%)

# Shims that tests LD_PRELOAD into the daemon; built without sanitizers,
# which only the daemon's own code needs.
PRELOAD_SRC := $(wildcard tests/integration/preload/*.c)
PRELOAD_LIB := $(PRELOAD_SRC:tests/integration/preload/%.c=$(BUILD)/tests/lib/%.so)

ALL_TARGETS := $(BUILD)/tierfs $(UNIT_BIN) $(ITEST_BIN) $(PRELOAD_LIB)

.PHONY: all deps test demo bench fuzz e2e format clean check-format install uninstall
PREFIX ?= /usr/local
MANDIR ?= $(PREFIX)/share/man
EXAMPLEDIR ?= $(PREFIX)/share/doc/tierfs/examples
all: $(BUILD)/tierfs $(UNIT_BIN) $(ITEST_BIN) $(PRELOAD_LIB) module-all

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libtierfs.a: $(CORE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# --help names where `make install` puts the example configs.
$(BUILD)/obj/fs/main.o: CFLAGS += -DTIERFS_EXAMPLES='"$(EXAMPLEDIR)"'

$(BUILD)/tierfs: $(BUILD)/obj/fs/main.o $(BUILD)/libtierfs.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/unit/%: tests/unit/%.c $(BUILD)/libtierfs.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtierfs.a $(LIBS) $(shell pkg-config --libs cmocka)

# powerfs is a FUSE file system of its own (t_powercut's disk).
$(BUILD)/tests/bin/powerfs: tests/integration/powerfs.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) $(shell pkg-config --libs fuse3)

$(BUILD)/tests/bin/%: tests/integration/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) -laio -luring -lxxhash -lm

$(BUILD)/tests/lib/%.so: tests/integration/preload/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -fPIC -shared -o $@ $< -ldl

# Module makefiles add their targets to MODULE_ALL.
MODULE_ALL :=
-include cuda_update/module.mk
-include tests/bench/module.mk
-include tests/fuzz/module.mk
module-all: $(MODULE_ALL)
.PHONY: module-all

deps:
	@scripts/deps.sh

# The two builds' tests run side by side (tests/run.sh: one lane each).
# DeepSpeed's venv and JIT-built ops are made first (cached; minutes on a
# new machine), outside the DeepSpeed test's time limit; that test SKIPs
# if they could not be made. They are made while the two builds compile:
# the venv's download then costs no time of its own.
test: deps
	@mkdir -p build
	@echo "test: preparing DeepSpeed's venv and ops beside the builds (log: build/e2e-prepare.log)"
	@scripts/e2e/run.sh --prepare >build/e2e-prepare.log 2>&1 & prep=$$!; \
	$(MAKE) --no-print-directory -j$$(nproc) all && \
	$(MAKE) --no-print-directory -j$$(nproc) SAN=1 all; rc=$$?; \
	wait $$prep; echo "test: DeepSpeed prepare exited $$?:"; tail -3 build/e2e-prepare.log; \
	exit $$rc
	tests/run.sh build build-san

demo: deps
	$(MAKE) --no-print-directory -j$$(nproc) all
	scripts/demo.sh

bench: deps
	$(MAKE) --no-print-directory -j$$(nproc) all
	scripts/bench.sh

# Searches with libFuzzer for FUZZ_SECONDS (default 60) per harness; not
# part of `make test`, which replays the stored inputs only.
fuzz: deps
	scripts/fuzz.sh

# DeepSpeed and torch come from PyPI into a cached venv (scripts/pyenv.sh).
e2e: deps
	$(MAKE) --no-print-directory -j$$(nproc) all
	scripts/e2e/run.sh

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu')

check-format:
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h' '*.cu')

# /usr/local/bin is on the fixed PATH mount(8) gives mount.fuse3, so fstab
# lines "CONFIG MOUNTPOINT fuse.tierfs defaults 0 0" find the daemon there.
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include
	install -m 755 build/tierfs build/tierfs-update $(DESTDIR)$(PREFIX)/bin/
	install -m 644 build/libtierfs_update.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 cuda_update/tierfs_update.h $(DESTDIR)$(PREFIX)/include/
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		   $(DESTDIR)$(EXAMPLEDIR)
	install -m 644 docs/man/tierfs-update.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 docs/man/tierfs.conf.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 644 docs/man/tierfs.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 644 scripts/conf/*.conf $(DESTDIR)$(EXAMPLEDIR)/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/tierfs $(DESTDIR)$(PREFIX)/bin/tierfs-update \
	      $(DESTDIR)$(PREFIX)/lib/libtierfs_update.so $(DESTDIR)$(PREFIX)/include/tierfs_update.h \
	      $(DESTDIR)$(MANDIR)/man1/tierfs-update.1 $(DESTDIR)$(MANDIR)/man5/tierfs.conf.5 \
	      $(DESTDIR)$(MANDIR)/man8/tierfs.8
	rm -rf $(DESTDIR)$(EXAMPLEDIR)

clean:
	rm -rf build build-san build-fuzz

-include $(CORE_OBJ:.o=.d) $(BUILD)/obj/fs/main.d $(UNIT_BIN:=.d)
