/*
 * tests/unit/test_gap.c — gap mode and the idle-stretch record
 * (policy/gap.c). Times in ms are written MS(n); learner clocks are plain
 * counts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "policy/gap.h"

#define MAX   UINT64_MAX
#define MS(n) ((uint64_t)(n)*1000000ULL)
#define T0    MS(100000) /* a tier clock well past 0 */

static void test_idle_after(void **state)
{
	(void)state;
	struct gapmode g = {0};
	assert_int_equal(gapmode_idle_after(&g), GAPMODE_IDLE_NS);
	g.short_ns = MS(10); /* a quarter more is still below the floor */
	assert_int_equal(gapmode_idle_after(&g), GAPMODE_IDLE_NS);
	g.short_ns = MS(400);
	assert_int_equal(gapmode_idle_after(&g), MS(500));
}

static void test_disk_idle(void **state)
{
	(void)state;
	struct gapmode g = {0};
	assert_int_equal(gapmode_idle_known(&g, true, true), 0); /* no request yet */
	g.demand_ns = T0;
	assert_int_equal(gapmode_idle_known(&g, false, true), 0);
	assert_int_equal(gapmode_idle_known(&g, true, false), 0);
	assert_int_equal(gapmode_idle_known(&g, true, true), -1);
	/* long enough since the request and on the tiers */
	assert_false(gapmode_quiet_long(&g, T0 + MS(19), MAX));
	assert_true(gapmode_quiet_long(&g, T0 + MS(20), MAX));
	assert_false(gapmode_quiet_long(&g, T0 + MS(50), MS(19)));
	assert_true(gapmode_quiet_long(&g, T0 + MS(50), MS(20)));
	/* the work starts from the later of the request and the tiers' I/O */
	gapmode_work_begins(&g, T0 + MS(50), MS(30));
	assert_int_equal(g.from_ns, T0 + MS(20));
	assert_int_equal(gapmode_idle_known(&g, true, true), 1); /* until the next request */
	g.from_ns = 0;
	gapmode_work_begins(&g, T0 + MS(50), MAX); /* tiers never busy */
	assert_int_equal(g.from_ns, T0);
	/* with auto's threshold raised */
	g.from_ns = 0;
	g.short_ns = MS(400);
	assert_false(gapmode_quiet_long(&g, T0 + MS(499), MAX));
	assert_true(gapmode_quiet_long(&g, T0 + MS(500), MAX));
}

static void test_work(void **state)
{
	(void)state;
	assert_true(gapmode_idle_done(false, false, 0));
	assert_false(gapmode_idle_done(true, false, 0));
	assert_false(gapmode_idle_done(false, true, 0));
	assert_false(gapmode_idle_done(false, false, 1));
	/* before the tiers have rates, no work is known */
	assert_int_equal(gapmode_work_ns(-1, 2, 100, 1000), 0);
	assert_int_equal(gapmode_work_ns(1, -2, 100, 1000), 0);
	assert_int_equal(gapmode_work_ns(0, 2, 100, 1000), 0);
	assert_int_equal(gapmode_work_ns(1, 0, 100, 1000), 0);
	/* 100 blocks of 1000 bytes read at 1 B/ns and written at 2 B/ns */
	assert_int_equal(gapmode_work_ns(1, 2, 100, 1000), 150000);
	assert_int_equal(gapmode_work_ns(1, 2, 0, 1000), 0);
	/* a quarter to spare */
	assert_true(gapmode_fits(125, 100));
	assert_false(gapmode_fits(124, 100));
	assert_true(gapmode_fits(0, 0)); /* nothing to do fits anywhere */
}

static void test_stretch_ended(void **state)
{
	(void)state;
	struct gapmode g = {0};
	uint64_t quiet = 1, from = 1;
	/* before the plan's first request: nothing */
	assert_int_equal(gapmode_stretch_ended(&g, T0, &quiet, &from), 0);
	g.demand_ns = T0;
	assert_int_equal(gapmode_stretch_ended(&g, T0 + MS(19), &quiet, &from), 0);
	assert_int_equal(gapmode_stretch_ended(&g, T0 + MS(20), &quiet, &from), GAPMODE_STRETCH);
	assert_int_equal(quiet, 1); /* untouched: not worked */
	g.from_ns = T0 + MS(20);
	assert_int_equal(gapmode_stretch_ended(&g, T0 + MS(700), &quiet, &from),
			 GAPMODE_STRETCH | GAPMODE_WORKED);
	assert_int_equal(quiet, MS(680));
	assert_int_equal(from, T0 + MS(20));
	assert_int_equal(g.from_ns, 0); /* worked no more */
	/* worked, yet the request came soon after the last (a short one) */
	g.from_ns = T0 + MS(5);
	assert_int_equal(gapmode_stretch_ended(&g, T0 + MS(10), &quiet, &from), GAPMODE_WORKED);
}

static void test_judge_done(void **state)
{
	(void)state;
	struct gapmode g = {0};
	/* finished, and gap mode's own work fits too */
	assert_false(gapmode_judge(&g, 500, MS(700), T0, true, true, 0, 0, true));
	assert_int_equal(g.ok_clock, 501);
	/* finished the keep plan's work only */
	assert_false(gapmode_judge(&g, 600, MS(700), T0, true, false, 0, 0, true));
	assert_int_equal(g.ok_clock, 0);
	assert_int_equal(g.short_ns, 0);
}

static void test_judge_unjudged(void **state)
{
	(void)state;
	uint64_t from = T0;
	/* a commit still running when the stretch ended */
	struct gapmode g = {.ok_clock = 7};
	assert_false(gapmode_judge(&g, 500, MS(300), from, false, false, T0 + 5, T0 - 5, true));
	assert_int_equal(g.ok_clock, 7); /* off: stays as it was */
	assert_int_equal(g.short_ns, 0);
	/* a commit that ended within the stretch */
	g.on = true;
	g.on_ns = T0 - MS(1000);
	assert_false(gapmode_judge(&g, 500, MS(300), from, false, false, T0 - 5, T0 + 5, true));
	assert_int_equal(g.ok_clock, 501); /* on: stays on */
	/* gap mode that came on within the stretch */
	g.on_ns = T0 + 1;
	g.ok_clock = 0;
	assert_false(gapmode_judge(&g, 600, MS(300), from, false, false, 0, 0, true));
	assert_int_equal(g.ok_clock, 601);
	assert_int_equal(g.short_ns, 0);
	/* came on at the stretch's start exactly: judged */
	g.on_ns = T0;
	assert_true(gapmode_judge(&g, 700, MS(300), from, false, false, 0, 0, true));
	assert_int_equal(g.ok_clock, 0);
	/* a commit that ended at the stretch's start: judged */
	g.short_ns = 0;
	g.ok_clock = 9;
	assert_true(gapmode_judge(&g, 700, MS(300), from, false, false, T0 - 9, T0, true));
	assert_int_equal(g.ok_clock, 0);
}

static void test_judge_short(void **state)
{
	(void)state;
	struct gapmode g = {.ok_clock = 42, .on = true, .on_ns = 1};
	/* ended before its work: gap mode goes off, auto raises its threshold */
	assert_true(gapmode_judge(&g, 500, MS(300), T0, false, false, 0, 0, true));
	assert_int_equal(g.ok_clock, 0);
	assert_int_equal(g.short_ns, MS(300));
	assert_int_equal(gapmode_idle_after(&g), MS(375));
	/* not longer than the longest such: no change */
	assert_false(gapmode_judge(&g, 500, MS(300), T0, false, false, 0, 0, true));
	assert_false(gapmode_judge(&g, 500, MS(200), T0, false, false, 0, 0, true));
	assert_int_equal(g.short_ns, MS(300));
	/* gap_plan = yes: every stretch is worked, the threshold never moves */
	struct gapmode y = {.ok_clock = 42};
	assert_false(gapmode_judge(&y, 500, MS(300), T0, false, false, 0, 0, false));
	assert_int_equal(y.ok_clock, 0);
	assert_int_equal(y.short_ns, 0);
}

static void test_holds_and_set(void **state)
{
	(void)state;
	struct gapmode g = {0};
	assert_false(gapmode_holds(&g, 10, 100)); /* no stretch did its work */
	gapmode_mark_ok(&g, 0);
	assert_int_equal(g.ok_clock, 1);
	/* a cycle and a quarter */
	assert_true(gapmode_holds(&g, 125, 100));
	assert_false(gapmode_holds(&g, 126, 100));
	assert_false(gapmode_holds(&g, 1, 0)); /* no cycle: no gap mode */
	assert_true(gapmode_holds(&g, 0, 0));

	assert_true(gapmode_set(&g, true, T0));
	assert_true(g.on);
	assert_int_equal(g.on_ns, T0);
	assert_false(gapmode_set(&g, true, T0 + 5)); /* no change */
	assert_int_equal(g.on_ns, T0);
	assert_true(gapmode_set(&g, false, T0 + 9));
	assert_false(g.on);
	assert_int_equal(g.on_ns, T0); /* when it last came on */
	assert_false(gapmode_set(&g, false, T0 + 10));
}

static void test_plan_dropped(void **state)
{
	(void)state;
	struct gapmode g = {.on = true,
			    .on_ns = T0,
			    .demand_ns = T0 + 1,
			    .from_ns = T0 + 2,
			    .ok_clock = 5,
			    .short_ns = MS(300),
			    .seen_ns = MS(80)};
	gapmode_plan_dropped(&g);
	assert_false(g.on);
	assert_int_equal(g.demand_ns, 0);
	assert_int_equal(g.from_ns, 0);
	assert_int_equal(gapmode_idle_known(&g, true, true), 0);
	/* what the stretches taught stays */
	assert_int_equal(g.ok_clock, 5);
	assert_int_equal(g.short_ns, MS(300));
	assert_int_equal(g.seen_ns, MS(80));
	assert_int_equal(g.on_ns, T0);
}

static void test_progress(void **state)
{
	(void)state;
	struct gapmode g = {0};
	assert_false(gapmode_may_progress(&g, true)); /* no stretch worked */
	g.from_ns = T0;
	assert_false(gapmode_may_progress(&g, false)); /* work left */
	assert_true(gapmode_may_progress(&g, true));
	g.on = true;
	assert_false(gapmode_may_progress(&g, true)); /* on already */
	g.on = false;
	/* the stretch so far, or the longest seen lately */
	assert_int_equal(gapmode_progress_len(&g, T0 + MS(300)), MS(300));
	g.seen_ns = MS(900);
	assert_int_equal(gapmode_progress_len(&g, T0 + MS(300)), MS(900));
}

static void test_seen(void **state)
{
	(void)state;
	struct gapmode g = {0};
	/* the first request measures nothing */
	gapmode_seen(&g, T0, 10, MAX, 0, 0, 0);
	assert_false(g.measured);
	assert_int_equal(g.seen_ns, 0);
	assert_int_equal(g.req_ns, T0);
	gapmode_demand_begin(&g);
	assert_true(gapmode_demand_done(&g, true)); /* the last one served */
	gapmode_stretch_starts(&g, T0 + MS(10));
	assert_int_equal(g.req_ns, T0 + MS(10));
	/* the next: a stretch of 50 ms with the tiers idle throughout */
	gapmode_seen(&g, T0 + MS(60), 20, MAX, 0, 0, 0);
	assert_true(g.measured);
	assert_int_equal(g.seen_ns, MS(50));
	assert_int_equal(g.seen_clock, 20);
	/* a request while another is served ends no stretch */
	gapmode_demand_begin(&g);
	gapmode_seen(&g, T0 + MS(500), 30, MAX, 0, 0, 0);
	gapmode_demand_begin(&g);
	assert_int_equal(g.seen_ns, MS(50));
	assert_false(gapmode_demand_done(&g, true));
	assert_false(gapmode_demand_done(&g, false)); /* not counted */
	assert_true(gapmode_demand_done(&g, true));
	gapmode_stretch_starts(&g, T0 + MS(700));
	/* a stretch counts only as long as the tiers idled in it */
	gapmode_seen(&g, T0 + MS(900), 40, MS(80), 0, 0, 0);
	assert_int_equal(g.seen_ns, MS(80));
	/* shorter ones do not replace it */
	g.req_ns = T0 + MS(900);
	gapmode_seen(&g, T0 + MS(960), 41, MAX, 0, 0, 0);
	assert_int_equal(g.seen_ns, MS(80));
	assert_int_equal(g.seen_clock, 40);
	/* a longer stretch whose idle time only equals the longest: no news */
	gapmode_seen(&g, T0 + MS(1200), 42, MS(80), 0, 0, 0);
	assert_int_equal(g.seen_ns, MS(80));
	assert_int_equal(g.seen_clock, 40);
}

static void test_seen_commit(void **state)
{
	(void)state;
	/* a commit wholly in the stretch held the tiers' I/O: the stretch
	 * counts from the commit's start at least */
	struct gapmode g = {.req_ns = T0, .measured = true};
	gapmode_seen(&g, T0 + MS(500), 10, MS(5), 0, T0 + MS(100), T0 + MS(400));
	assert_int_equal(g.seen_ns, MS(400));
	/* one still running, or begun before the stretch, does not */
	struct gapmode h = {.req_ns = T0, .measured = true};
	gapmode_seen(&h, T0 + MS(500), 10, MS(5), 0, T0 + MS(100), T0 + MS(50));
	assert_int_equal(h.seen_ns, MS(5));
	struct gapmode k = {.req_ns = T0, .measured = true};
	gapmode_seen(&k, T0 + MS(500), 10, MS(5), 0, T0 - 1, T0 + MS(400));
	assert_int_equal(k.seen_ns, MS(5));
	struct gapmode m = {.req_ns = T0, .measured = true};
	gapmode_seen(&m, T0 + MS(500), 10, MS(5), 0, T0 + MS(100), T0 + MS(501));
	assert_int_equal(m.seen_ns, MS(5));
	/* the bounds: a commit from the stretch's start to its end, or of no
	 * time at all, is in it */
	struct gapmode b = {.req_ns = T0, .measured = true};
	gapmode_seen(&b, T0 + MS(500), 10, MS(5), 0, T0, T0 + MS(500));
	assert_int_equal(b.seen_ns, MS(500));
	struct gapmode z = {.req_ns = T0, .measured = true};
	gapmode_seen(&z, T0 + MS(500), 10, MS(5), 0, T0 + MS(300), T0 + MS(300));
	assert_int_equal(z.seen_ns, MS(200));
}

static void test_seen_window(void **state)
{
	(void)state;
	/* the longest within two cycles; after that the window starts afresh
	 * and the old longest is kept as the previous one */
	struct gapmode g = {.req_ns = T0, .seen_ns = MS(300), .seen_clock = 1000};
	gapmode_seen(&g, T0 + MS(100), 1200, MAX, 100, 0, 0);
	assert_int_equal(g.seen_ns, MS(300)); /* 2 cycles exactly: not expired */
	g.req_ns = T0;
	gapmode_seen(&g, T0 + MS(100), 1201, MAX, 100, 0, 0);
	assert_int_equal(g.seen_ns, MS(100));
	assert_int_equal(g.prev_ns, MS(300));
	assert_int_equal(g.seen_clock, 1201);
	assert_int_equal(gapmode_commit_gap(&g), MS(300));
	/* a request while another is served ends the window as 0 */
	gapmode_demand_begin(&g);
	gapmode_seen(&g, T0 + MS(200), 1402, MAX, 100, 0, 0);
	assert_int_equal(g.seen_ns, 0);
	assert_int_equal(g.prev_ns, MS(100));
	/* before a cycle is learned nothing expires */
	struct gapmode n = {.req_ns = T0, .seen_ns = MS(300), .seen_clock = 0};
	gapmode_seen(&n, T0 + MS(100), 1u << 30, MAX, 0, 0, 0);
	assert_int_equal(n.seen_ns, MS(300));
}

static void test_commit_fits(void **state)
{
	(void)state;
	struct gapmode g = {.seen_ns = MS(300), .prev_ns = MS(500), .measured = true};
	assert_int_equal(gapmode_commit_gap(&g), MS(500));
	assert_true(gapmode_commit_fits(&g, true, MS(500)));
	assert_false(gapmode_commit_fits(&g, true, MS(501)));
	/* without a learned order, or a quiet commit, any quiet moment does */
	assert_true(gapmode_commit_fits(&g, false, MS(900)));
	assert_true(gapmode_commit_fits(&g, true, 0));
	/* before two requests for disk blocks were seen */
	struct gapmode u = {0};
	assert_true(gapmode_commit_fits(&u, true, MS(900)));
	/* a stretch measured as 0 (the tiers busy at every request) holds none */
	struct gapmode z = {0};
	gapmode_seen(&z, T0, 1, 0, 0, 0, 0);
	gapmode_seen(&z, T0 + MS(100), 2, 0, 0, 0, 0);
	assert_true(z.measured);
	assert_int_equal(gapmode_commit_gap(&z), 0);
	assert_false(gapmode_commit_fits(&z, true, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_idle_after),	 cmocka_unit_test(test_disk_idle),
	    cmocka_unit_test(test_work),	 cmocka_unit_test(test_stretch_ended),
	    cmocka_unit_test(test_judge_done),	 cmocka_unit_test(test_judge_unjudged),
	    cmocka_unit_test(test_judge_short),	 cmocka_unit_test(test_holds_and_set),
	    cmocka_unit_test(test_plan_dropped), cmocka_unit_test(test_progress),
	    cmocka_unit_test(test_seen),	 cmocka_unit_test(test_seen_commit),
	    cmocka_unit_test(test_seen_window),	 cmocka_unit_test(test_commit_fits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
