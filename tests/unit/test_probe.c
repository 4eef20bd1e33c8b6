/*
 * tests/unit/test_probe.c — tier_probe_bandwidth: sane figures on a disk
 * directory (/tmp) and on tmpfs (/dev/shm), slots given back, data already
 * on the tier untouched, fewer free slots than asked, -ENOSPC on a full
 * tier, -EINVAL on the RAM tier, a capped tier measured at its cap.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiers/probe.h"
#include "tiers/tier.h"

#define BS   (1024 * 1024)
#define SLAB (16ULL * BS)

static char dir[64];

static void remove_dir(void)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || e->d_name[1] == '.'))
			continue;
		char p[512];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

static int setup_in(const char *base)
{
	snprintf(dir, sizeof(dir), "%s/tierfs-probe-XXXXXX", base);
	return mkdtemp(dir) ? 0 : -1;
}

static int setup_tmp(void **state)
{
	(void)state;
	return setup_in("/tmp");
}

static int teardown(void **state)
{
	(void)state;
	remove_dir();
	return 0;
}

static struct tier *open_posix(uint64_t nblocks)
{
	struct tier_params p = {.name = "probe0",
				.kind = TIER_POSIX,
				.path = dir,
				.capacity = nblocks * BS,
				.block_size = BS,
				.persistent = true,
				.direct = -1,
				.queue_depth = 8,
				.slab_size = SLAB};
	struct tier *t = NULL;
	assert_int_equal(tier_open(&p, &t), 0);
	return t;
}

/* Probe a tier in dir that already holds 3 used slots, one with known
 * data; check the figures, the slot count and the data afterwards. */
static void probe_and_check(uint64_t nblocks, uint64_t bytes, uint64_t expect_blocks)
{
	struct tier *t = open_posix(nblocks);
	char *buf = aligned_alloc(4096, BS), *back = aligned_alloc(4096, BS);
	for (size_t i = 0; i < BS; i++)
		buf[i] = (char)(i * 7 + 3);
	uint64_t csum;
	for (int i = 0; i < 3; i++)
		assert_int_equal(tier_alloc(t), i);
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, 1, buf, 0, &csum), 0);
	struct tier_stats before, after;
	tier_get_stats(t, &before);

	uint64_t rd = 0, wr = 0;
	assert_int_equal(tier_probe_bandwidth(t, bytes, &rd, &wr), 0);
	print_message("# %s: %" PRIu64 " MiB: write %.0f MB/s, read %.0f MB/s (%s)\n", dir,
		      expect_blocks * BS >> 20, wr / 1e6, rd / 1e6,
		      tier_is_direct(t) ? "O_DIRECT" : "buffered");
	/* Sane: more than 1 MB/s, less than 1 TB/s. */
	assert_in_range(wr, 1000000, 1000000000000ULL);
	assert_in_range(rd, 1000000, 1000000000000ULL);
	/* It really moved the blocks through the tier, both ways: a warm-up
	 * pass and 1 to 16 timed passes over the same slots each way. */
	tier_get_stats(t, &after);
	uint64_t pass = expect_blocks * BS;
	uint64_t w = after.bytes_written - before.bytes_written;
	uint64_t r = after.bytes_read - before.bytes_read;
	assert_int_equal(w % pass, 0);
	assert_int_equal(r % pass, 0);
	assert_in_range(w / pass, 2, 17);
	assert_in_range(r / pass, 2, 17);
	assert_int_equal(after.errors, 0);
	/* Slots given back; the block already there is intact. */
	assert_int_equal(tier_slots_used(t), 3);
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, 1, back, 0, &csum), 0);
	assert_memory_equal(back, buf, BS);
	/* Freed means allocatable again, from the lowest. */
	assert_int_equal(tier_alloc(t), 3);
	tier_close(t);
	free(buf);
	free(back);
}

static void test_probe_tmp(void **state)
{
	(void)state;
	probe_and_check(64, 32ULL * BS, 32);
}

/* Fewer free slots than asked: it uses what there is. */
static void test_probe_few_free(void **state)
{
	(void)state;
	probe_and_check(10, 64ULL * BS, 7);
}

static void test_probe_shm(void **state)
{
	(void)state;
	remove_dir();
	if (setup_in("/dev/shm")) {
		assert_int_equal(setup_in("/tmp"), 0);
		skip();
	}
	probe_and_check(64, 32ULL * BS, 32);
}

static void test_probe_full(void **state)
{
	(void)state;
	struct tier *t = open_posix(6);
	for (int i = 0; i < 3; i++)
		assert_int_equal(tier_alloc(t), i);
	uint64_t rd = 7, wr = 7;
	/* 3 free slots: fewer than the 4 a measure needs. */
	assert_int_equal(tier_probe_bandwidth(t, 64ULL * BS, &rd, &wr), -ENOSPC);
	assert_int_equal(tier_slots_used(t), 3);
	assert_int_equal(rd, 7);
	assert_int_equal(wr, 7);
	/* A tiny request still measures 4 blocks. */
	tier_free(t, 2);
	tier_free(t, 1);
	assert_int_equal(tier_probe_bandwidth(t, 1, &rd, &wr), 0);
	assert_int_equal(tier_slots_used(t), 1);
	struct tier_stats st;
	tier_get_stats(t, &st);
	assert_int_equal(st.bytes_written % (4ULL * BS), 0);
	assert_true(st.bytes_written >= 8ULL * BS);
	tier_close(t);
}

/* A tier capped by max_bandwidth lets its first queue's worth through at
 * once (the scheduler's burst). A probe that timed that burst credited the
 * tier with about twice its cap and striped too many blocks onto it; the
 * untimed warm-up pass keeps the figure near the cap. Only the upper bound
 * is checked: a loaded machine may deliver less than the cap, never more. */
static void test_probe_capped(void **state)
{
	(void)state;
	remove_dir();
	if (setup_in("/dev/shm"))
		assert_int_equal(setup_in("/tmp"), 0);
	const uint64_t cap = 100ULL * 1000 * 1000;
	struct tier_params p = {.name = "capped",
				.kind = TIER_POSIX,
				.path = dir,
				.capacity = 64ULL * BS,
				.block_size = BS,
				.persistent = true,
				.direct = -1,
				.queue_depth = 8,
				.slab_size = SLAB,
				.max_bandwidth = {cap, cap}};
	struct tier *t = NULL;
	assert_int_equal(tier_open(&p, &t), 0);
	uint64_t rd = 0, wr = 0;
	assert_int_equal(tier_probe_bandwidth(t, 16ULL * BS, &rd, &wr), 0);
	print_message("# capped at %.0f MB/s: write %.0f MB/s, read %.0f MB/s\n", cap / 1e6,
		      wr / 1e6, rd / 1e6);
	assert_in_range(rd, 1, cap * 13 / 10);
	assert_in_range(wr, 1, cap * 13 / 10);
	tier_close(t);
}

static void test_probe_ram(void **state)
{
	(void)state;
	struct tier_params p = {.name = "ram",
				.kind = TIER_RAM,
				.capacity = 16ULL * BS,
				.block_size = BS,
				.queue_depth = 8};
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	uint64_t rd = 0, wr = 0;
	assert_int_equal(tier_probe_bandwidth(t, 8ULL * BS, &rd, &wr), -EINVAL);
	assert_int_equal(tier_slots_used(t), 0);
	tier_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_probe_tmp, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_probe_few_free, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_probe_shm, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_probe_full, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_probe_capped, setup_tmp, teardown),
	    cmocka_unit_test(test_probe_ram),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
