/*
 * tests/unit/test_placement.c — stripe pattern (proportions, smoothness,
 * per-inode offsets, weight reduction), rule matching and spill order.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/placement.h"

static struct stripe st;

/* Over every window of one round, starting anywhere, each tier gets
 * exactly its (reduced) weight. */
static void check_round_counts(const struct stripe *s, uint64_t ino, const uint64_t *want)
{
	for (uint64_t start = 0; start < 3 * (uint64_t)s->seqlen; start += 7) {
		uint64_t cnt[CONF_MAX_TIERS] = {0};
		for (int b = 0; b < s->seqlen; b++) {
			int t = stripe_tier(s, ino, start + (uint64_t)b);
			assert_true(t >= 0 && t < CONF_MAX_TIERS);
			cnt[t]++;
		}
		for (int i = 0; i < s->n; i++)
			if (cnt[s->tier[i]] != want[i])
				fail_msg(
				    "ino %llu start %llu: tier %d got %llu blocks per round, want "
				    "%llu",
				    (unsigned long long)ino, (unsigned long long)start, s->tier[i],
				    (unsigned long long)cnt[s->tier[i]],
				    (unsigned long long)want[i]);
	}
}

static void test_proportions(void **state)
{
	(void)state;
	/* Config tier indexes deliberately not 0..n-1. */
	int tiers[3] = {5, 2, 9};
	uint64_t w[3] = {6, 3, 9}; /* gcd 3 -> 2,1,3 */
	assert_int_equal(stripe_init(&st, 3, tiers, w), 0);
	assert_int_equal(st.seqlen, 6);
	uint64_t want[3] = {2, 1, 3};
	assert_memory_equal(st.weight, want, sizeof(want));
	for (uint64_t ino = 1; ino < 50; ino++)
		check_round_counts(&st, ino, want);

	/* Over many blocks the totals match the weights exactly. */
	uint64_t cnt[16] = {0};
	for (uint64_t b = 0; b < 6000; b++)
		cnt[stripe_tier(&st, 42, b)]++;
	assert_int_equal(cnt[5], 2000);
	assert_int_equal(cnt[2], 1000);
	assert_int_equal(cnt[9], 3000);
}

/* Longest run of one tier in the cyclic pattern. */
static int max_run(const struct stripe *s)
{
	int best = 0;
	for (int start = 0; start < s->seqlen; start++) {
		int run = 1;
		while (run < s->seqlen && s->seq[(start + run) % s->seqlen] == s->seq[start])
			run++;
		if (run > best)
			best = run;
	}
	return best;
}

static void test_smooth(void **state)
{
	(void)state;
	int tiers[2] = {0, 1};
	for (uint64_t a = 1; a <= 20; a++) {
		for (uint64_t b = 1; b <= 20; b++) {
			uint64_t w[2] = {a, b};
			assert_int_equal(stripe_init(&st, 2, tiers, w), 0);
			uint64_t hi = a > b ? a : b, lo = a > b ? b : a;
			int bound = (int)((hi + lo - 1) / lo) + 1;
			if (max_run(&st) > bound)
				fail_msg("weights %llu:%llu: run of %d > %d", (unsigned long long)a,
					 (unsigned long long)b, max_run(&st), bound);
		}
	}
	/* 1:1 alternates strictly. */
	uint64_t w[2] = {7, 7};
	assert_int_equal(stripe_init(&st, 2, tiers, w), 0);
	assert_int_equal(st.seqlen, 2);
	for (uint64_t b = 0; b < 100; b++)
		assert_int_not_equal(stripe_tier(&st, 3, b), stripe_tier(&st, 3, b + 1));
	/* 3:1 with four tiers worth of positions: never two of the light tier
	 * in a row, heavy runs at most 3. */
	int t4[2] = {0, 1};
	uint64_t w4[2] = {3, 1};
	assert_int_equal(stripe_init(&st, 2, t4, w4), 0);
	assert_true(max_run(&st) <= 3);
}

static void test_inode_offsets(void **state)
{
	(void)state;
	int tiers[4] = {0, 1, 2, 3};
	uint64_t w[4] = {1, 1, 1, 1};
	assert_int_equal(stripe_init(&st, 4, tiers, w), 0);
	int first[4] = {0};
	for (uint64_t ino = 1; ino <= 400; ino++)
		first[stripe_tier(&st, ino, 0)]++;
	/* Block 0 of consecutive inodes is spread over all tiers. */
	for (int i = 0; i < 4; i++)
		if (first[i] < 60)
			fail_msg("only %d of 400 files start on tier %d", first[i], i);
	/* And a file's pattern is the same round, just shifted. */
	int shifted = 0;
	for (uint64_t ino = 1; ino <= 20; ino++)
		shifted += stripe_tier(&st, ino, 0) != stripe_tier(&st, ino + 1, 0);
	assert_true(shifted > 5);
	/* Huge block numbers do not overflow. */
	assert_true(stripe_tier(&st, UINT64_MAX, UINT64_MAX) >= 0);
}

static void test_scale_down(void **state)
{
	(void)state;
	int tiers[3] = {0, 1, 2};
	uint64_t w[3] = {1000000, 3000000, 1}; /* coprime sum ~4e6 */
	assert_int_equal(stripe_init(&st, 3, tiers, w), 0);
	assert_true(st.seqlen <= STRIPE_SEQ_MAX);
	assert_true(st.weight[2] >= 1);
	/* ratio 1:3 kept within one position */
	assert_true(st.weight[1] + 3 >= 3 * st.weight[0] && st.weight[1] <= 3 * st.weight[0] + 3);
	uint64_t want[3] = {st.weight[0], st.weight[1], st.weight[2]};
	assert_int_equal(want[0] + want[1] + want[2], (uint64_t)st.seqlen);
	check_round_counts(&st, 7, want);

	/* Many tiers, one dominant: every tier keeps a position. */
	int t16[16];
	uint64_t w16[16];
	for (int i = 0; i < 16; i++) {
		t16[i] = i;
		w16[i] = i == 0 ? UINT64_MAX / 2 : 1;
	}
	assert_int_equal(stripe_init(&st, 16, t16, w16), 0);
	assert_true(st.seqlen <= STRIPE_SEQ_MAX);
	for (int i = 1; i < 16; i++)
		assert_int_equal(st.weight[i], 1);
	assert_int_equal(st.weight[0], (uint64_t)st.seqlen - 15);
}

static void test_stripe_init_bad(void **state)
{
	(void)state;
	int tiers[2] = {0, 1};
	uint64_t w[2] = {1, 0};
	assert_int_equal(stripe_init(&st, 2, tiers, w), -EINVAL);
	uint64_t w1[2] = {1, 1};
	assert_int_equal(stripe_init(&st, 0, tiers, w1), -EINVAL);
	assert_int_equal(stripe_init(&st, CONF_MAX_TIERS + 1, tiers, w1), -EINVAL);
	int dup[2] = {1, 1};
	assert_int_equal(stripe_init(&st, 2, dup, w1), -EINVAL);

	struct config c;
	memset(&c, 0, sizeof(c));
	assert_int_equal(stripe_init_config(&st, &c), -ENOENT);
	c.ntiers = 3;
	c.tiers[0].weight = 2;
	c.tiers[2].weight = 1;
	c.nstripe = 2;
	c.stripe[0] = 0;
	c.stripe[1] = 2;
	assert_int_equal(stripe_init_config(&st, &c), 0);
	assert_int_equal(st.seqlen, 3);
	assert_int_equal(st.tier[1], 2);
}

static void add_rule(struct config *c, const char *match, int tier)
{
	struct conf_rule *r = &c->rules[c->nrules++];
	snprintf(r->name, sizeof(r->name), "r%d", c->nrules);
	snprintf(r->match, sizeof(r->match), "%s", match);
	r->tier = tier;
	r->persistent = true;
}

static void test_rules(void **state)
{
	(void)state;
	static struct config c;
	memset(&c, 0, sizeof(c));
	add_rule(&c, "*_gradient_*.tensor.swp", 0);
	add_rule(&c, "/zero_stage_3/optimizer/rank1/*", 1);
	add_rule(&c, "exp_avg-*", 2);
	add_rule(&c, "*.tensor.swp", 3);

	const char *g = "/zero_stage_3/optimizer/rank0/1_10_gradient_0_100.tensor.swp";
	assert_int_equal(placement_rule_for(&c, g), 0);
	assert_int_equal(placement_rule_for(&c, "/1_10_gradient_0_100.tensor.swp"), 0);
	/* full-path glob, and first match wins over the later *.tensor.swp */
	assert_int_equal(placement_rule_for(&c, "/zero_stage_3/optimizer/rank1/1_10.tensor.swp"),
			 1);
	/* "exp_avg-*" has no '/': matched on the basename at any depth */
	assert_int_equal(
	    placement_rule_for(&c, "/zero_stage_3/optimizer/rank0/exp_avg-1_10.tensor.swp"), 2);
	assert_int_equal(placement_rule_for(&c, "/a/b/c/1_10.tensor.swp"), 3);
	assert_int_equal(placement_rule_for(&c, "/a/b/notes.txt"), -1);
	assert_int_equal(placement_rule_for(&c, "/exp_avg.txt"), -1);
	/* a glob with '/' is not tried against the basename */
	assert_int_equal(placement_rule_for(&c, "/x/rank1/y"), -1);

	memset(&c, 0, sizeof(c));
	assert_int_equal(placement_rule_for(&c, "/x"), -1);
}

static void test_spill(void **state)
{
	(void)state;
	static struct config c;
	memset(&c, 0, sizeof(c));
	c.ntiers = 5; /* 0 ram, 1..4 posix; stripe is 3, 1, 4 */
	int tiers[3] = {3, 1, 4};
	uint64_t w[3] = {1, 1, 1};
	assert_int_equal(stripe_init(&st, 3, tiers, w), 0);
	bool full[5] = {false};

	assert_int_equal(placement_spill(&c, &st, 1, full), 1);
	assert_int_equal(placement_spill(&c, &st, 0, full), 0);
	full[1] = true;
	assert_int_equal(placement_spill(&c, &st, 1, full), 4); /* after 1 comes 4 */
	full[4] = true;
	assert_int_equal(placement_spill(&c, &st, 1, full), 3); /* wraps */
	/* a full non-stripe tier spills to the stripe from its start */
	full[0] = true;
	assert_int_equal(placement_spill(&c, &st, 0, full), 3);
	full[3] = true;
	assert_int_equal(placement_spill(&c, &st, 0, full), -ENOSPC);
	assert_int_equal(placement_spill(&c, &st, 1, full), -ENOSPC);
	full[1] = false;
	assert_int_equal(placement_spill(&c, &st, 4, full), 1);
	assert_int_equal(placement_spill(&c, &st, 3, full), 1);
	/* not-full preferred is always taken, even outside the stripe */
	full[2] = false;
	assert_int_equal(placement_spill(&c, &st, 2, full), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_proportions),	    cmocka_unit_test(test_smooth),
	    cmocka_unit_test(test_inode_offsets),   cmocka_unit_test(test_scale_down),
	    cmocka_unit_test(test_stripe_init_bad), cmocka_unit_test(test_rules),
	    cmocka_unit_test(test_spill),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
