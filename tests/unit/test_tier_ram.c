/*
 * tests/unit/test_tier_ram.c — the RAM tier: roundtrip, slot pointers,
 * inline completion, stats, parameter checks.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <xxhash.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tiers/tier.h"

#define BS (64 * 1024)

static struct tier *open_ram(uint64_t capacity)
{
	struct tier_params p = {.name = "ram",
				.kind = TIER_RAM,
				.capacity = capacity,
				.block_size = BS,
				.persistent = true, /* a RAM tier never is */
				.queue_depth = 4};
	struct tier *t = NULL;
	assert_int_equal(tier_open(&p, &t), 0);
	return t;
}

static void *block(unsigned seed)
{
	unsigned char *b = aligned_alloc(4096, BS);
	for (size_t i = 0; i < BS; i++)
		b[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 9));
	return b;
}

static void test_roundtrip(void **state)
{
	(void)state;
	struct tier *t = open_ram(8 * BS);
	assert_string_equal(tier_name(t), "ram");
	assert_int_equal(tier_kind(t), TIER_RAM);
	assert_false(tier_persistent(t));
	assert_false(tier_is_direct(t));
	assert_int_equal(tier_block_size(t), BS);
	void *in[8], *out = aligned_alloc(4096, BS);
	for (unsigned s = 0; s < 8; s++) {
		in[s] = block(s);
		assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_WRITEBACK, s, in[s], 0, NULL),
				 0);
	}
	for (unsigned s = 0; s < 8; s++) {
		memset(out, 0, BS);
		/* The checksum is ignored by RAM: a wrong one must not fail. */
		uint64_t bogus = 12345;
		assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, s, out, 0, &bogus), 0);
		assert_memory_equal(out, in[s], BS);
		assert_memory_equal(tier_ram_ptr(t, s), in[s], BS);
		free(in[s]);
	}
	free(out);
	tier_close(t);
}

static void test_ptr(void **state)
{
	(void)state;
	/* Capacity rounds down to whole blocks. */
	struct tier *t = open_ram(5 * BS + BS / 2);
	assert_int_equal(tier_slots_total(t), 5);
	char *p0 = tier_ram_ptr(t, 0);
	assert_non_null(p0);
	for (uint64_t s = 0; s < 5; s++) {
		char *p = tier_ram_ptr(t, s);
		assert_int_equal((uintptr_t)p % 4096, 0);
		assert_ptr_equal(p, p0 + s * (BS + TIER_RAM_HEADROOM));
		/* Writable and zero-filled. */
		assert_int_equal(p[0], 0);
		p[BS - 1] = 1;
	}
	/* The headroom before each slot and after the last is writable and
	 * touches no slot's data. */
	for (uint64_t s = 0; s < 5; s++) {
		char *p = tier_ram_ptr(t, s);
		memset(p - TIER_RAM_HEADROOM, 0x5a, TIER_RAM_HEADROOM);
		assert_int_equal(p[0], 0);
		if (s > 0)
			assert_int_equal((unsigned char)p[-(int)TIER_RAM_HEADROOM - 1], 1);
	}
	char *last = tier_ram_ptr(t, 4);
	memset(last + BS, 0x5a, TIER_RAM_HEADROOM);
	assert_int_equal((unsigned char)last[BS - 1], 1);
	assert_null(tier_ram_ptr(t, 5));
	/* Writing from the slot's own memory is a no-op copy. */
	char *p1 = tier_ram_ptr(t, 1);
	memset(p1, 0xab, BS);
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_WRITEBACK, 1, p1, 0, NULL), 0);
	assert_int_equal((unsigned char)p1[100], 0xab);
	tier_close(t);
}

static void done_cb(struct tier_io *io)
{
	int *n = io->priv;
	(*n)++;
}

static void test_async_and_stats(void **state)
{
	(void)state;
	struct tier *t = open_ram(4 * BS);
	void *b = block(7);
	int completed = 0;
	struct tier_io io = {
	    .op = TIER_OP_WRITE, .slot = 2, .buf = b, .done = done_cb, .priv = &completed};
	assert_int_equal(tier_submit(t, &io), 0);
	/* RAM completes inline. */
	assert_int_equal(completed, 1);
	assert_int_equal(io.result, 0);
	io.op = TIER_OP_READ;
	assert_int_equal(tier_submit(t, &io), 0);
	assert_int_equal(tier_submit(t, &io), 0);
	assert_int_equal(completed, 3);
	/* Rejected submissions do not call done and do not count. */
	io.slot = 4;
	assert_int_equal(tier_submit(t, &io), -ERANGE);
	io.slot = 0;
	io.buf = NULL;
	assert_int_equal(tier_submit(t, &io), -EINVAL);
	assert_int_equal(completed, 3);
	struct tier_stats st;
	tier_get_stats(t, &st);
	assert_int_equal(st.writes, 1);
	assert_int_equal(st.reads, 2);
	assert_int_equal(st.bytes_written, BS);
	assert_int_equal(st.bytes_read, 2 * BS);
	assert_int_equal(st.errors, 0);
	assert_int_equal(st.csum_errors, 0);
	/* The latency histogram counts each completed I/O once, in the
	 * bucket its time falls in. */
	for (int d = 0; d < 2; d++) {
		uint64_t n = 0;
		for (int k = 0; k <= TIER_LAT_BOUNDS; k++)
			n += st.lat[d][k];
		assert_int_equal(n, d == TIER_OP_READ ? st.reads : st.writes);
	}
	for (unsigned k = 1; k < TIER_LAT_BOUNDS; k++)
		assert_true(tier_lat_bound_ns(k) > tier_lat_bound_ns(k - 1));
	assert_int_equal(tier_lat_bound_ns(TIER_LAT_BOUNDS), UINT64_MAX);
	free(b);
	tier_close(t);
}

static void test_bad_params(void **state)
{
	(void)state;
	struct tier *t = (struct tier *)1;
	struct tier_params p = {
	    .name = "bad", .kind = TIER_RAM, .capacity = 0, .block_size = BS, .queue_depth = 1};
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	assert_null(t);
	p.capacity = BS - 1;
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	p.capacity = BS;
	p.block_size = 3000;
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	p.block_size = 2048;
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	p.block_size = BS;
	p.queue_depth = 0;
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	p.queue_depth = 1;
	p.name = "a-name-much-longer-than-thirty-two-characters";
	assert_int_equal(tier_open(&p, &t), -EINVAL);
}

static void test_checksum(void **state)
{
	(void)state;
	void *a = block(1), *b = block(1);
	assert_true(tier_checksum(a, BS) == tier_checksum(b, BS));
	((char *)b)[BS / 2] ^= 1;
	assert_true(tier_checksum(a, BS) != tier_checksum(b, BS));
	/* Checksums are stored in the metadata: whatever implementation
	 * tier_checksum dispatches to must give the portable XXH3-64 of
	 * the library (this file does not include the dispatcher), at every
	 * length and alignment. */
	assert_true(tier_checksum("", 0) == 0x2D06800538D394C2ULL);
	for (size_t i = 0; i < BS; i++)
		((unsigned char *)a)[i] = (unsigned char)(i * 131 + (i >> 9));
	const size_t lens[] = {1, 3, 16, 17, 128, 129, 240, 241, 1000, 4096, 65537, BS - 7, BS};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		assert_true(tier_checksum(a, lens[i]) == XXH3_64bits(a, lens[i]));
		assert_true(tier_checksum((char *)a + 7, lens[i] - (lens[i] > 7 ? 7 : 0)) ==
			    XXH3_64bits((char *)a + 7, lens[i] - (lens[i] > 7 ? 7 : 0)));
	}
	free(a);
	free(b);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* max_bandwidth is the posix scheduler's (test_tier_posix.c): RAM ignores
 * it, so 11 blocks at a "100 blocks/s" cap do not take the 100 ms that pacing
 * would impose. */
static void test_bandwidth_cap(void **state)
{
	(void)state;
	struct tier_params p = {.name = "slow",
				.kind = TIER_RAM,
				.capacity = 4 * BS,
				.block_size = BS,
				.queue_depth = 1,
				.max_bandwidth = {100 * BS, 100 * BS}};
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	void *b = block(2);
	double t0 = now_s();
	for (int i = 0; i < 11; i++)
		assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_WRITEBACK, 0, b, 0, NULL), 0);
	double dt = now_s() - t0;
	assert_true(dt < 0.099);
	free(b);
	tier_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip),	    cmocka_unit_test(test_ptr),
	    cmocka_unit_test(test_async_and_stats), cmocka_unit_test(test_bad_params),
	    cmocka_unit_test(test_checksum),	    cmocka_unit_test(test_bandwidth_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
