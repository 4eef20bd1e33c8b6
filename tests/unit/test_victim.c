/*
 * tests/unit/test_victim.c — the eviction decisions (policy/victim.c).
 *
 * Besides each decision alone, a small model of the cache's victim search
 * (the lists walked newest first, passes as victim_pass says) checks how
 * they combine: Belady's choice, the keep plan spared outside gap mode,
 * read-ahead that takes only a block needed after its own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "policy/keepplan.h"
#include "policy/victim.h"

#define MAX UINT64_MAX

static void test_evictable(void **state)
{
	(void)state;
	assert_true(victim_evictable(0, true, false, false, false, false));
	assert_false(victim_evictable(1, true, false, false, false, false));  /* held */
	assert_false(victim_evictable(0, false, false, false, false, false)); /* loading */
	assert_false(victim_evictable(0, true, true, false, false, false));   /* dirty */
	assert_false(victim_evictable(0, true, false, true, false, false));   /* being written */
	assert_false(victim_evictable(0, true, false, false, true, false));   /* pinned */
	assert_true(victim_evictable(0, true, false, false, true, true));     /* pinned allowed */
	assert_false(victim_evictable(0, true, true, false, true, true));     /* dirty pinned */
}

static void test_evictable_unkept(void **state)
{
	(void)state;
	assert_false(victim_evictable_unkept(0, true, false, false, false, false, KEEPPLAN_KEEP));
	assert_true(victim_evictable_unkept(0, true, false, false, false, false, KEEPPLAN_DROP));
	assert_true(victim_evictable_unkept(0, true, false, false, false, false, KEEPPLAN_NONE));
	assert_false(victim_evictable_unkept(2, true, false, false, false, false, KEEPPLAN_DROP));
	assert_true(victim_evictable_unkept(0, true, false, false, true, true, KEEPPLAN_NONE));
}

static void test_next_read(void **state)
{
	(void)state;
	uint64_t stale = 100;
	/* a live prediction as it is */
	assert_int_equal(victim_next_read(150, 150, KEEPPLAN_NONE, false, stale), 150);
	/* within the tolerance: a late read is drift, not stale */
	assert_int_equal(victim_next_read(100, 100, KEEPPLAN_NONE, false, stale), 100);
	/* older than the tolerance: not needed soon, behind the live ones */
	assert_int_equal(victim_next_read(99, 99, KEEPPLAN_NONE, false, stale), MAX - 1);
	/* dead (overwritten before read) and unknown: first to go */
	assert_int_equal(victim_next_read(MAX, 300, KEEPPLAN_NONE, false, stale), MAX);
	assert_int_equal(victim_next_read(MAX, 300, KEEPPLAN_KEEP, false, stale), MAX);
	/* gap mode: a dead block the tail plan keeps ranks by its write */
	assert_int_equal(victim_next_read(MAX, 300, KEEPPLAN_KEEP, true, stale), 300);
	assert_int_equal(victim_next_read(MAX, 300, KEEPPLAN_DROP, true, stale), MAX);
	assert_int_equal(victim_next_read(MAX, 300, KEEPPLAN_NONE, true, stale), MAX);
	assert_int_equal(victim_next_read(MAX, MAX, KEEPPLAN_KEEP, true, stale), MAX);
	/* ... and that write is stale like any prediction */
	assert_int_equal(victim_next_read(MAX, 50, KEEPPLAN_KEEP, true, stale), MAX - 1);
	/* a read prediction wins over the write in gap mode */
	assert_int_equal(victim_next_read(200, 300, KEEPPLAN_KEEP, true, stale), 200);
	/* nothing is stale before the tolerance has passed */
	assert_int_equal(victim_next_read(0, 0, KEEPPLAN_NONE, false, 0), 0);
}

static void test_better(void **state)
{
	(void)state;
	assert_true(victim_better(0, 0, false)); /* the first candidate */
	assert_true(victim_better(11, 10, true));
	assert_false(victim_better(10, 10, true)); /* first seen among equals */
	assert_false(victim_better(9, 10, true));
	assert_true(victim_better(MAX, MAX - 1, true));
	assert_true(victim_search_done(MAX));
	assert_false(victim_search_done(MAX - 1));
}

static void test_passes(void **state)
{
	(void)state;
	assert_int_equal(victim_first_pass(true, false), -1); /* keep plan spared */
	assert_int_equal(victim_first_pass(true, true), 0);   /* gap mode */
	assert_int_equal(victim_first_pass(false, false), 0); /* no tail plan */

	struct victim_pass p = victim_pass(-1, true, false, MAX);
	assert_int_equal(p.lists, 1);
	assert_false(p.allow_pinned);
	assert_true(p.unkept_only);
	p = victim_pass(0, true, false, MAX);
	assert_int_equal(p.lists, 1);
	assert_false(p.allow_pinned);
	assert_false(p.unkept_only);
	p = victim_pass(0, true, false, 500); /* read-ahead never takes kept blocks */
	assert_true(p.unkept_only);
	p = victim_pass(1, true, false, 500);
	assert_int_equal(p.lists, 2);
	assert_true(p.allow_pinned);
	assert_true(p.unkept_only);
	p = victim_pass(1, true, false, MAX);
	assert_false(p.unkept_only);
	p = victim_pass(0, true, true, 500); /* gap mode: nothing spared */
	assert_false(p.unkept_only);
	p = victim_pass(0, false, false, 500);
	assert_false(p.unkept_only);
}

static void test_pass_verdict(void **state)
{
	(void)state;
	assert_int_equal(victim_pass_verdict(true, 5, MAX), VICTIM_TAKE);
	assert_int_equal(victim_pass_verdict(true, 501, 500), VICTIM_TAKE);
	assert_int_equal(victim_pass_verdict(true, 500, 500), VICTIM_NONE); /* not after */
	assert_int_equal(victim_pass_verdict(true, 10, 500), VICTIM_NONE);
	assert_int_equal(victim_pass_verdict(false, 0, 500), VICTIM_NEXT);
	assert_int_equal(victim_pass_verdict(false, 0, MAX), VICTIM_NEXT);
	assert_true(victim_lru_fallback(MAX));
	assert_false(victim_lru_fallback(500));
}

/* A model of the cache's learned-order victim search over two clean lists
 * (0: may go, 1: pinned), each newest first, as fs/cache.c composes it. */
struct cand {
	uint64_t next_read, next_use;
	uint8_t plan;
	int refs;
	bool pinned;
};

static int search(const struct cand *const lists[2], const size_t n[2], bool tail, bool gap,
		  uint64_t stale, uint64_t need_at)
{
	for (int pass = victim_first_pass(tail, gap); pass < 2; pass++) {
		struct victim_pass vp = victim_pass(pass, tail, gap, need_at);
		int best = -1;
		uint64_t best_when = 0;
		for (int l = 0; l < 2 && !(best >= 0 && victim_search_done(best_when)); l++) {
			if (!(vp.lists & 1u << l))
				continue;
			for (size_t i = 0; i < n[l]; i++) {
				const struct cand *c = &lists[l][i];
				bool ok = vp.unkept_only
					      ? victim_evictable_unkept(c->refs, true, false, false,
									c->pinned, vp.allow_pinned,
									c->plan)
					      : victim_evictable(c->refs, true, false, false,
								 c->pinned, vp.allow_pinned);
				if (!ok)
					continue;
				uint64_t w = victim_next_read(c->next_read, c->next_use, c->plan,
							      gap, stale);
				if (victim_better(w, best_when, best >= 0)) {
					best = l * 100 + (int)i;
					best_when = w;
				}
				if (victim_search_done(best_when))
					break;
			}
		}
		switch (victim_pass_verdict(best >= 0, best_when, need_at)) {
		case VICTIM_TAKE:
			return best;
		case VICTIM_NONE:
			return -1;
		case VICTIM_NEXT:
			break;
		}
	}
	return victim_lru_fallback(need_at) ? -2 : -1; /* -2: LRU's turn */
}

static void test_search(void **state)
{
	(void)state;
	const struct cand may[] = {
	    {300, 300, KEEPPLAN_KEEP, 0, false}, /* kept, needed last */
	    {200, 200, KEEPPLAN_DROP, 0, false},
	    {250, 250, KEEPPLAN_NONE, 1, false}, /* held by a request */
	    {150, 150, KEEPPLAN_NONE, 0, false},
	};
	const struct cand pin[] = {{900, 900, KEEPPLAN_NONE, 0, true}};
	const struct cand *lists[2] = {may, pin};
	size_t n[2] = {4, 1};
	/* Belady among what may go; the pinned list only if nothing else */
	assert_int_equal(search(lists, n, false, false, 0, MAX), 0);
	/* outside gap mode the keep plan's block goes last */
	assert_int_equal(search(lists, n, true, false, 0, MAX), 1);
	/* in gap mode the tail plan is the plan, nothing spared */
	assert_int_equal(search(lists, n, true, true, 0, MAX), 0);
	/* read-ahead for a block needed at 180 takes the unkept one needed at
	 * 200; for one needed at 200 or later, nothing (no waiting for the
	 * pinned list or the kept block) */
	assert_int_equal(search(lists, n, true, false, 0, 180), 1);
	assert_int_equal(search(lists, n, true, false, 0, 200), -1);
	assert_int_equal(search(lists, n, true, false, 0, 260), -1);
	/* a stale prediction makes a block a victim ahead of live ones */
	assert_int_equal(search(lists, n, false, false, 160, MAX), 3);
	/* only pinned blocks left: the pinned pass takes one */
	size_t n_pin[2] = {0, 1};
	assert_int_equal(search(lists, n_pin, false, false, 0, MAX), 100);
	assert_int_equal(search(lists, n_pin, true, false, 0, 500), 100);
	assert_int_equal(search(lists, n_pin, true, false, 0, 900), -1);
	/* nothing evictable: the LRU walk's turn, never for read-ahead */
	size_t none[2] = {0, 0};
	assert_int_equal(search(lists, none, true, false, 0, MAX), -2);
	assert_int_equal(search(lists, none, true, false, 0, 5), -1);
	/* a dead block ends the walk at once: nothing is needed later */
	const struct cand dead[] = {{MAX, 10, KEEPPLAN_NONE, 0, false},
				    {MAX, 20, KEEPPLAN_NONE, 0, false}};
	const struct cand *dl[2] = {dead, pin};
	size_t dn[2] = {2, 1};
	assert_int_equal(search(dl, dn, false, false, 0, MAX), 0);
}

static void test_wait(void **state)
{
	(void)state;
	assert_false(victim_write_back_frees(true, false, true));   /* RAM is its home */
	assert_false(victim_write_back_frees(false, true, true));   /* volatile file */
	assert_false(victim_write_back_frees(false, false, false)); /* not started */
	assert_true(victim_write_back_frees(false, false, true));

	assert_true(victim_may_wait(true, true, false));
	assert_false(victim_may_wait(false, true, false)); /* write-back stuck */
	assert_false(victim_may_wait(true, false, false)); /* no learned order */
	assert_false(victim_may_wait(true, true, true));   /* reads idle: evict */

	assert_true(victim_farther(true, 301, 300));
	assert_false(victim_farther(true, 300, 300));
	assert_false(victim_farther(false, MAX, 0));
	assert_true(victim_farther(true, MAX, MAX - 1)); /* unknown beats stale */
}

static void test_kept_over_due(void **state)
{
	(void)state;
	assert_true(victim_unused_since_learn(10, 10));
	assert_true(victim_unused_since_learn(9, 10));
	assert_false(victim_unused_since_learn(11, 10)); /* used since */
	assert_true(victim_kept_by_horizon(100, 100));
	assert_false(victim_kept_by_horizon(101, 100));
	/* everything fits (horizon MAX): a stale block is held too */
	assert_true(victim_kept_by_horizon(MAX - 1, MAX));
}

static void test_evicts_kept(void **state)
{
	(void)state;
	assert_true(victim_evicts_kept(true, KEEPPLAN_KEEP, 200, 100));
	assert_true(victim_evicts_kept(true, KEEPPLAN_KEEP, 100, 100));	 /* on time */
	assert_false(victim_evicts_kept(true, KEEPPLAN_KEEP, 99, 100));	 /* stale */
	assert_false(victim_evicts_kept(true, KEEPPLAN_KEEP, MAX, 100)); /* dead */
	assert_false(victim_evicts_kept(true, KEEPPLAN_DROP, 200, 100));
	assert_false(victim_evicts_kept(false, KEEPPLAN_KEEP, 200, 100));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_evictable),	  cmocka_unit_test(test_evictable_unkept),
	    cmocka_unit_test(test_next_read),	  cmocka_unit_test(test_better),
	    cmocka_unit_test(test_passes),	  cmocka_unit_test(test_pass_verdict),
	    cmocka_unit_test(test_search),	  cmocka_unit_test(test_wait),
	    cmocka_unit_test(test_kept_over_due), cmocka_unit_test(test_evicts_kept),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
