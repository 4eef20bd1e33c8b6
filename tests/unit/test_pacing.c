/*
 * tests/unit/test_pacing.c — read-ahead pacing (policy/pacing.c).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "policy/pacing.h"

#define MAX UINT64_MAX
#define W   PACING_WINDOW

static void test_window_pays(void **state)
{
	(void)state;
	struct pacing p = {0};
	/* within a window: no judgement, the window stays open */
	assert_true(pacing_pays(&p, 10, W - 1, 0, 1000));
	assert_true(pacing_pays(&p, 10, 0, W - 1, 1000));
	assert_int_equal(p.used0, 0);
	assert_int_equal(p.wasted0, 0);
	/* a full window with as many used as wasted pays: the next begins */
	assert_true(pacing_pays(&p, 20, W / 2, W / 2, 1000));
	assert_int_equal(p.used0, W / 2);
	assert_int_equal(p.wasted0, W / 2);
	assert_int_equal(p.pause_until, 0);
	/* the next window counts from there */
	assert_true(pacing_pays(&p, 30, W / 2, W / 2 + W - 1, 1000));
	assert_int_equal(p.wasted0, W / 2);
}

static void test_window_pauses(void **state)
{
	(void)state;
	struct pacing p = {.used0 = 100, .wasted0 = 200};
	/* more wasted than used: pause for a cycle */
	assert_false(pacing_pays(&p, 5000, 100 + W / 2 - 1, 200 + W / 2 + 1, 1000));
	assert_int_equal(p.pause_until, 6000);
	assert_int_equal(p.used0, 100 + W / 2 - 1);
	assert_int_equal(p.wasted0, 200 + W / 2 + 1);
	/* during the pause, whatever the counts */
	assert_false(pacing_pays(&p, 5999, 10000, 0, 1000));
	/* then it tries again, from the counts at the window's end */
	assert_true(pacing_pays(&p, 6000, 100 + W / 2 - 1, 200 + W / 2 + 1, 1000));
	assert_int_equal(p.pause_until, 6000);
	/* and a good window keeps it going */
	assert_true(pacing_pays(&p, 6100, 100 + W / 2 - 1 + W, 200 + W / 2 + 1, 1000));
}

static void test_restart(void **state)
{
	(void)state;
	struct pacing p = {.used0 = 1, .wasted0 = 2, .pause_until = 9000};
	assert_false(pacing_pays(&p, 100, 1, 2, 1000));
	/* an idle stretch read ahead with the pause lifted: judge afresh */
	pacing_restart(&p, 50, 500);
	assert_int_equal(p.pause_until, 0);
	assert_int_equal(p.used0, 50);
	assert_int_equal(p.wasted0, 500);
	assert_true(pacing_pays(&p, 100, 50, 500 + W - 1, 1000));
	assert_false(pacing_pays(&p, 100, 50, 500 + W, 1000));
	assert_int_equal(p.pause_until, 1100);
}

static void test_crowds_and_room(void **state)
{
	(void)state;
	/* RAM with room: never crowded */
	assert_false(pacing_crowds(999, 1000, 1000, 32));
	/* full: half the queue of unused read-ahead crowds it */
	assert_false(pacing_crowds(1000, 1000, 15, 32));
	assert_true(pacing_crowds(1000, 1000, 16, 32));
	assert_true(pacing_crowds(1000, 1000, 3, 5)); /* half, rounded up */
	assert_false(pacing_crowds(1000, 1000, 2, 5));
	assert_true(pacing_crowds(1001, 1000, 16, 32));

	assert_true(pacing_room(31, 32, false, false));
	assert_false(pacing_room(32, 32, false, false)); /* queue full */
	assert_false(pacing_room(0, 32, false, true));	 /* crowded */
	assert_true(pacing_room(0, 32, true, true));	 /* idle disks: crowding is fine */
	assert_false(pacing_room(32, 32, true, false));
}

static void test_wanted(void **state)
{
	(void)state;
	unsigned depth = 64;
	assert_true(pacing_wanted(10, 10, 0, depth));
	/* its next access overwrites it: no read */
	assert_false(pacing_wanted(10, 5, 0, depth));
	assert_false(pacing_wanted(MAX, 5, 0, depth));
	/* its read is far beyond its place: read already by a rank ahead */
	assert_true(pacing_wanted(74, 74, 10, depth));
	assert_false(pacing_wanted(75, 75, 10, depth));
}

static void test_none_after(void **state)
{
	(void)state;
	uint64_t none = MAX;
	assert_false(pacing_skip(100, none));
	none = pacing_none_after(none, -ENOSPC, 100); /* no victim for 100 */
	assert_int_equal(none, 100);
	assert_true(pacing_skip(100, none));
	assert_true(pacing_skip(150, none)); /* nor for later */
	assert_false(pacing_skip(99, none));
	assert_int_equal(pacing_none_after(none, 0, 99), 100); /* nothing started */
	assert_int_equal(pacing_none_after(none, -EIO, 99), 100);
	assert_int_equal(pacing_none_after(none, 1, 99), MAX); /* a read started */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_window_pays), cmocka_unit_test(test_window_pauses),
	    cmocka_unit_test(test_restart),	cmocka_unit_test(test_crowds_and_room),
	    cmocka_unit_test(test_wanted),	cmocka_unit_test(test_none_after),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
