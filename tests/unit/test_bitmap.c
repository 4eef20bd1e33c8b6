/*
 * tests/unit/test_bitmap.c — the slot allocator: exhaustion, free/reuse,
 * reserve errors, and concurrent allocation never handing out a slot twice.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tiers/bitmap.h"
#include "tiers/tier.h"

static void test_alloc_all(void **state)
{
	(void)state;
	/* 200 is not a multiple of 64: the tail word must not leak slots. */
	const uint64_t n = 200;
	struct bitmap b;
	assert_int_equal(bitmap_init(&b, n), 0);
	char *seen = calloc(n, 1);
	for (uint64_t i = 0; i < n; i++) {
		int64_t s = bitmap_alloc(&b);
		assert_true(s >= 0 && (uint64_t)s < n);
		assert_int_equal(seen[s], 0);
		seen[s] = 1;
	}
	assert_int_equal(bitmap_used(&b), n);
	assert_int_equal(bitmap_alloc(&b), -ENOSPC);
	/* A freed slot is found again even though it is behind the hint. */
	assert_int_equal(bitmap_free(&b, 5), 0);
	assert_int_equal(bitmap_free(&b, 150), 0);
	assert_int_equal(bitmap_used(&b), n - 2);
	int64_t a = bitmap_alloc(&b), c = bitmap_alloc(&b);
	assert_true((a == 5 && c == 150) || (a == 150 && c == 5));
	assert_int_equal(bitmap_alloc(&b), -ENOSPC);
	free(seen);
	bitmap_destroy(&b);
}

static void test_free_errors(void **state)
{
	(void)state;
	struct bitmap b;
	assert_int_equal(bitmap_init(&b, 64), 0);
	assert_int_equal(bitmap_free(&b, 3), -EINVAL);
	assert_int_equal(bitmap_free(&b, 64), -ERANGE);
	assert_int_equal(bitmap_alloc(&b), 0);
	assert_int_equal(bitmap_free(&b, 0), 0);
	assert_int_equal(bitmap_free(&b, 0), -EINVAL);
	assert_int_equal(bitmap_used(&b), 0);
	bitmap_destroy(&b);

	assert_int_equal(bitmap_init(&b, 0), 0);
	assert_int_equal(bitmap_alloc(&b), -ENOSPC);
	assert_int_equal(bitmap_reserve(&b, 0), -ERANGE);
	bitmap_destroy(&b);
}

static void test_reserve(void **state)
{
	(void)state;
	struct bitmap b;
	assert_int_equal(bitmap_init(&b, 100), 0);
	assert_int_equal(bitmap_reserve(&b, 0), 0);
	assert_int_equal(bitmap_reserve(&b, 99), 0);
	assert_int_equal(bitmap_reserve(&b, 99), -EEXIST);
	assert_int_equal(bitmap_reserve(&b, 100), -ERANGE);
	assert_int_equal(bitmap_used(&b), 2);
	/* Allocation skips reserved slots. */
	for (int i = 1; i < 99; i++)
		assert_int_equal(bitmap_alloc(&b), i);
	assert_int_equal(bitmap_alloc(&b), -ENOSPC);
	bitmap_destroy(&b);
}

/* The same checks through the public tier API on a RAM tier. */
static void test_tier_api(void **state)
{
	(void)state;
	struct tier_params p = {.name = "ram0",
				.kind = TIER_RAM,
				.capacity = 10 * 4096 + 100,
				.block_size = 4096,
				.queue_depth = 1};
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	assert_int_equal(tier_slots_total(t), 10);
	assert_int_equal(tier_reserve(t, 3), 0);
	assert_int_equal(tier_reserve(t, 3), -EEXIST);
	assert_int_equal(tier_reserve(t, 10), -ERANGE);
	for (int i = 0; i < 9; i++) {
		int64_t s = tier_alloc(t);
		assert_true(s >= 0 && s < 10 && s != 3);
	}
	assert_int_equal(tier_alloc(t), -ENOSPC);
	assert_int_equal(tier_slots_used(t), 10);
	tier_free(t, 3);
	assert_int_equal(tier_slots_used(t), 9);
	assert_int_equal(tier_alloc(t), 3);
	tier_close(t);
}

#define NTHREADS   2
#define PER_THREAD 200000

struct worker {
	struct bitmap *b;
	pthread_barrier_t *start;
	int64_t got[PER_THREAD];
	int n;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	/* Start together so the threads really race on the same words. */
	pthread_barrier_wait(w->start);
	/* Allocate, free every third slot again, allocate more: exercises the
	 * hint moving backwards while the other thread races forward. */
	for (int i = 0; i < PER_THREAD; i++) {
		int64_t s = bitmap_alloc(w->b);
		if (s < 0)
			break;
		if (i % 3 == 2 && bitmap_free(w->b, (uint64_t)s) == 0) {
			s = bitmap_alloc(w->b);
			if (s < 0)
				break;
		}
		w->got[w->n++] = s;
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	(void)state;
	const uint64_t n = NTHREADS * PER_THREAD;
	struct bitmap b;
	assert_int_equal(bitmap_init(&b, n), 0);
	struct worker *w = calloc(NTHREADS, sizeof(*w));
	pthread_t th[NTHREADS];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, NTHREADS);
	for (int i = 0; i < NTHREADS; i++) {
		w[i].b = &b;
		w[i].start = &start;
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);
	char *seen = calloc(n, 1);
	for (int i = 0; i < NTHREADS; i++) {
		assert_int_equal(w[i].n, PER_THREAD);
		for (int j = 0; j < w[i].n; j++) {
			int64_t s = w[i].got[j];
			assert_true(s >= 0 && (uint64_t)s < n);
			assert_int_equal(seen[s], 0); /* handed out twice */
			seen[s] = 1;
		}
	}
	assert_int_equal(bitmap_used(&b), n);
	assert_int_equal(bitmap_alloc(&b), -ENOSPC);
	free(seen);
	free(w);
	bitmap_destroy(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_alloc_all),  cmocka_unit_test(test_free_errors),
	    cmocka_unit_test(test_reserve),    cmocka_unit_test(test_tier_api),
	    cmocka_unit_test(test_concurrent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
