/*
 * tests/unit/test_wbhorizon.c — the write-back horizon, its reserve for
 * write bursts and the dirty limit (policy/wbhorizon.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy/keepplan.h"
#include "policy/wbhorizon.h"

#define MAX    UINT64_MAX
#define BEHIND WBHORIZON_PLAN_BEHIND

static void test_keep_until_plain(void **state)
{
	(void)state;
	uint64_t stale = 100;
	/* clean: until its next read; dirty: until its next access */
	assert_int_equal(wbhorizon_keep_until(300, 200, KEEPPLAN_NONE, false, false, false, stale),
			 300);
	assert_int_equal(wbhorizon_keep_until(300, 200, KEEPPLAN_NONE, true, false, false, stale),
			 200);
	/* a dead clean block never pays; a dirty one until it is overwritten */
	assert_int_equal(wbhorizon_keep_until(MAX, 200, KEEPPLAN_NONE, false, false, false, stale),
			 MAX);
	assert_int_equal(wbhorizon_keep_until(MAX, 200, KEEPPLAN_NONE, true, false, false, stale),
			 200);
	/* overdue: not needed soon, behind every live prediction */
	assert_int_equal(wbhorizon_keep_until(99, 99, KEEPPLAN_NONE, false, false, false, stale),
			 MAX - 1);
	assert_int_equal(wbhorizon_keep_until(100, 100, KEEPPLAN_NONE, false, false, false, stale),
			 100);
	assert_int_equal(wbhorizon_keep_until(300, 99, KEEPPLAN_NONE, true, false, false, stale),
			 MAX - 1);
	/* kept by the plan: as by next use */
	assert_int_equal(wbhorizon_keep_until(300, 300, KEEPPLAN_KEEP, true, false, false, stale),
			 300);
	assert_int_equal(wbhorizon_keep_until(300, 300, KEEPPLAN_KEEP, true, false, true, stale),
			 300);
}

static void test_keep_until_plan(void **state)
{
	(void)state;
	uint64_t stale = 100;
	/* written since its last read, read next, dropped by the plan: behind
	 * every kept block */
	assert_int_equal(wbhorizon_keep_until(300, 300, KEEPPLAN_DROP, true, false, false, stale),
			 300 + BEHIND);
	assert_int_equal(wbhorizon_keep_until(300, 300, KEEPPLAN_DROP, false, true, false, stale),
			 300 + BEHIND);
	/* clean and not written back since its write: not the plan's to rank */
	assert_int_equal(wbhorizon_keep_until(300, 300, KEEPPLAN_DROP, false, false, false, stale),
			 300);
	/* overwritten next (next use is a write): by next use */
	assert_int_equal(wbhorizon_keep_until(400, 300, KEEPPLAN_DROP, true, false, false, stale),
			 300);
	/* unknown and overdue stay so, never pushed further */
	assert_int_equal(wbhorizon_keep_until(MAX, MAX, KEEPPLAN_DROP, true, false, false, stale),
			 MAX);
	assert_int_equal(wbhorizon_keep_until(50, 50, KEEPPLAN_DROP, true, false, false, stale),
			 MAX - 1);
	assert_int_equal(
	    wbhorizon_keep_until(MAX - 1, MAX - 1, KEEPPLAN_DROP, true, false, false, stale),
	    MAX - 1);
	/* gap mode: a dirty block the tail plan drops is due at once ... */
	assert_int_equal(wbhorizon_keep_until(300, 300, KEEPPLAN_DROP, true, false, true, stale),
			 MAX - 1);
	/* ... a clean one written back ranks behind as outside it */
	assert_int_equal(wbhorizon_keep_until(300, 300, KEEPPLAN_DROP, false, true, true, stale),
			 300 + BEHIND);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void test_select_kth(void **state)
{
	(void)state;
	uint64_t one[] = {42};
	assert_int_equal(wbhorizon_select_kth(one, 1, 0), 42);
	srand(7);
	uint64_t a[97], b[97], s[97];
	for (int round = 0; round < 50; round++) {
		size_t n = 1 + (size_t)rand() % 97;
		for (size_t i = 0; i < n; i++)
			/* small range: many duplicates; some unknowns */
			a[i] = rand() % 8 == 0 ? MAX : (uint64_t)(rand() % 20);
		memcpy(s, a, n * sizeof(*a));
		qsort(s, n, sizeof(*s), cmp_u64);
		for (size_t k = 0; k < n; k++) {
			memcpy(b, a, n * sizeof(*a));
			assert_int_equal(wbhorizon_select_kth(b, n, k), s[k]);
		}
	}
}

static void test_room_and_budgets(void **state)
{
	(void)state;
	/* 1000 slots, 100 pinned, 32 write-backs, 16 workers */
	assert_int_equal(wbhorizon_keep_room(1000, 100, 32, 16), 852);
	assert_int_equal(wbhorizon_keep_room(100, 200, 0, 0), 0);  /* pinned over the cache */
	assert_int_equal(wbhorizon_keep_room(100, 52, 32, 16), 0); /* margin takes it all */
	assert_int_equal(wbhorizon_keep_room(100, 51, 32, 16), 1);
	assert_int_equal(wbhorizon_keep_budget(852, 52), 800);
	assert_int_equal(wbhorizon_keep_budget(852, 852), 0);
	assert_int_equal(wbhorizon_keep_budget(10, 20), 0);
	/* requests beyond one block each, and the read-ahead queue */
	assert_int_equal(wbhorizon_plan_budget(800, 16, 1, 32), 768);
	assert_int_equal(wbhorizon_plan_budget(800, 16, 5, 32), 704);
	assert_int_equal(wbhorizon_plan_budget(96, 16, 5, 32), 0);
	assert_int_equal(wbhorizon_plan_budget(97, 16, 5, 32), 1);
}

static void test_horizon_of(void **state)
{
	(void)state;
	uint64_t k[] = {50, 10, MAX, 30, 20, MAX - 1, 40};
	uint64_t c[7];
	memcpy(c, k, sizeof(k));
	assert_int_equal(wbhorizon_of(c, 7, 0), 0); /* nothing stays */
	memcpy(c, k, sizeof(k));
	assert_int_equal(wbhorizon_of(c, 7, 7), MAX); /* everything stays */
	memcpy(c, k, sizeof(k));
	assert_int_equal(wbhorizon_of(c, 7, 100), MAX);
	memcpy(c, k, sizeof(k));
	assert_int_equal(wbhorizon_of(c, 7, 3), 30); /* the third soonest */
	memcpy(c, k, sizeof(k));
	assert_int_equal(wbhorizon_of(c, 7, 6), MAX - 1);
	assert_int_equal(wbhorizon_of(c, 0, 1), MAX);
	/* all fit: MAX, not the largest keep time */
	uint64_t few[] = {5, 9, 7};
	assert_int_equal(wbhorizon_of(few, 3, 3), MAX);
	assert_int_equal(wbhorizon_of(few, 3, 2), 7);
}

static void test_due(void **state)
{
	(void)state;
	assert_false(wbhorizon_due(30, 30));
	assert_true(wbhorizon_due(31, 30));
	assert_false(wbhorizon_due(10, 30));
	/* unknown or overdue: due whatever the horizon */
	assert_true(wbhorizon_due(MAX, MAX));
	assert_true(wbhorizon_due(MAX - 1, MAX));
	assert_false(wbhorizon_due(MAX - 2, MAX));
	/* no budget: everything is due */
	assert_true(wbhorizon_due(1, 0));
}

static void test_dirty_over(void **state)
{
	(void)state;
	/* 25% of 1000 */
	assert_false(wbhorizon_dirty_over(1000, 0, 250, 25));
	assert_true(wbhorizon_dirty_over(1000, 0, 251, 25));
	/* RAM-homed blocks neither count nor leave room */
	assert_false(wbhorizon_dirty_over(1000, 200, 400, 25)); /* 200 of 800 */
	assert_true(wbhorizon_dirty_over(1000, 200, 401, 25));
	assert_false(wbhorizon_dirty_over(1000, 200, 100, 25)); /* pinned over dirty */
	assert_true(wbhorizon_dirty_over(100, 200, 201, 25));	/* no room at all */
	assert_false(wbhorizon_dirty_over(100, 200, 200, 25));
}

static void test_kept_limit(void **state)
{
	(void)state;
	assert_int_equal(wbhorizon_kept_limit(1, 32), 1);
	assert_int_equal(wbhorizon_kept_limit(64, 32), 32);
	assert_int_equal(wbhorizon_kept_limit(32, 32), 32);
	assert_int_equal(wbhorizon_kept_limit(0, 32), 0);
}

static void test_memo(void **state)
{
	(void)state;
	struct wbhorizon_memo m = {0};
	assert_true(wbhorizon_memo_stale(&m, 0, 0)); /* never computed */
	wbhorizon_memo_set(&m, 77, 1000);
	assert_int_equal(m.horizon, 77);
	/* at least 16 accesses */
	assert_false(wbhorizon_memo_stale(&m, 1015, 100));
	assert_true(wbhorizon_memo_stale(&m, 1016, 100));
	/* 1/64 of the entries ranked */
	assert_false(wbhorizon_memo_stale(&m, 1099, 6400));
	assert_true(wbhorizon_memo_stale(&m, 1100, 6400));
	wbhorizon_memo_invalidate(&m);
	assert_true(wbhorizon_memo_stale(&m, 1000, 100));
}

static void test_reserve_cycle(void **state)
{
	(void)state;
	struct wbreserve r = {.reserve = 10, .stalls = 100, .stall_clock = 1000};
	/* no learned cycle: nothing moves */
	assert_false(wbreserve_adjust(&r, 5000, 0, 1000, 2));
	assert_int_equal(r.stalls, 100);
	assert_int_equal(r.stall_clock, 1000);
	/* a cycle not yet over */
	assert_false(wbreserve_adjust(&r, 1499, 500, 1000, 2));
	assert_int_equal(r.reserve, 10);
	assert_int_equal(r.stalls, 100);
	/* over: grows by the stalls per burst, counts afresh */
	assert_true(wbreserve_adjust(&r, 1500, 500, 1000, 2));
	assert_int_equal(r.reserve, 60);
	assert_int_equal(r.stalls, 0);
	assert_int_equal(r.stall_clock, 1500);
	wbreserve_stall(&r);
	assert_int_equal(r.stalls, 1);
	wbreserve_restart(&r, 7);
	assert_int_equal(r.stalls, 0);
	assert_int_equal(r.stall_clock, 7);
	assert_int_equal(r.reserve, 60); /* a relearn keeps the reserve */
}

static void test_reserve_grow_hold_shrink(void **state)
{
	(void)state;
	struct wbreserve r = {.reserve = 32, .stalls = 8, .stall_clock = 0};
	/* 4 stalls per burst: grow by 4 */
	assert_true(wbreserve_adjust(&r, 100, 100, 1000, 2));
	assert_int_equal(r.reserve, 36);
	/* 3 per burst: hold (the pipelined order's one or two stay) */
	r.stalls = 7;
	assert_false(wbreserve_adjust(&r, 200, 100, 1000, 2));
	assert_int_equal(r.reserve, 36);
	/* as many stalls as bursts: hold */
	r.stalls = 2;
	assert_false(wbreserve_adjust(&r, 300, 100, 1000, 2));
	assert_int_equal(r.reserve, 36);
	/* fewer: shrink by a sixteenth, rounded up */
	r.stalls = 1;
	assert_true(wbreserve_adjust(&r, 400, 100, 1000, 2));
	assert_int_equal(r.reserve, 33);
	r.reserve = 1;
	assert_true(wbreserve_adjust(&r, 500, 100, 1000, 2));
	assert_int_equal(r.reserve, 0);
	assert_false(wbreserve_adjust(&r, 600, 100, 1000, 2)); /* stays 0 */
	assert_int_equal(r.reserve, 0);
	/* no bursts known: counted as one */
	r.stalls = 4;
	assert_true(wbreserve_adjust(&r, 700, 100, 1000, 0));
	assert_int_equal(r.reserve, 4);
	r.stalls = 0;
	assert_true(wbreserve_adjust(&r, 800, 100, 1000, 0));
	assert_int_equal(r.reserve, 3);
}

static void test_reserve_cap(void **state)
{
	(void)state;
	/* at most half the keep room */
	struct wbreserve r = {.reserve = 90, .stalls = 400, .stall_clock = 0};
	assert_true(wbreserve_adjust(&r, 100, 100, 200, 1));
	assert_int_equal(r.reserve, 100);
	r.stalls = 400;
	assert_false(wbreserve_adjust(&r, 200, 100, 200, 1));
	assert_int_equal(r.reserve, 100);
	/* a room that shrank pulls the reserve down even while it holds */
	r.stalls = 2;
	assert_true(wbreserve_adjust(&r, 300, 100, 101, 1));
	assert_int_equal(r.reserve, 50);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keep_until_plain),
	    cmocka_unit_test(test_keep_until_plan),
	    cmocka_unit_test(test_select_kth),
	    cmocka_unit_test(test_room_and_budgets),
	    cmocka_unit_test(test_horizon_of),
	    cmocka_unit_test(test_due),
	    cmocka_unit_test(test_dirty_over),
	    cmocka_unit_test(test_kept_limit),
	    cmocka_unit_test(test_memo),
	    cmocka_unit_test(test_reserve_cycle),
	    cmocka_unit_test(test_reserve_grow_hold_shrink),
	    cmocka_unit_test(test_reserve_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
