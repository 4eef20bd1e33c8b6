/*
 * tests/unit/test_keepplan.c — the keep plan (policy/keepplan.c).
 *
 * The cycles mimic DeepSpeed's step: backward writes every gradient block
 * (RAM-only keys), then the update reads sub-group 0, and iteration i reads
 * sub-group i+1 while it writes i-1 (pipelined: the two interleave block by
 * block), or reads then writes each sub-group in turn (not pipelined). A
 * plan is judged by the pipelined schedule's own time, computed here
 * without windows: each iteration takes as long as the larger of its disk
 * reads and disk writes, in blocks.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy/keepplan.h"

#define GRAD_RANK 1

static uint64_t state_key(unsigned sg, unsigned b, unsigned blocks)
{
	return (uint64_t)1 << 24 | (sg * blocks + b);
}

static uint64_t grad_key(unsigned sg, unsigned b, unsigned blocks)
{
	return (uint64_t)(1 + GRAD_RANK) << 24 | (sg * blocks + b);
}

static bool not_grad(uint64_t key)
{
	return key >> 24 != 1 + GRAD_RANK;
}

/* keepplan's ONDISK for KEY[0..N): DISK of each key; NULL without DISK. */
static uint8_t *ondisk_of(const uint64_t *key, size_t n, bool (*disk)(uint64_t))
{
	if (!disk)
		return NULL;
	uint8_t *d = malloc(n ? n : 1);
	assert_non_null(d);
	for (size_t i = 0; i < n; i++)
		d[i] = disk(key[i]);
	return d;
}

struct cyc {
	uint64_t *key;
	uint8_t *wr;
	size_t n, cap;
};

static void add(struct cyc *c, uint64_t key, bool wr)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 1024;
		c->key = realloc(c->key, c->cap * sizeof(*c->key));
		c->wr = realloc(c->wr, c->cap * sizeof(*c->wr));
		assert_non_null(c->key);
		assert_non_null(c->wr);
	}
	c->key[c->n] = key;
	c->wr[c->n++] = wr;
}

static void cyc_free(struct cyc *c)
{
	free(c->key);
	free(c->wr);
}

/* Sub-group SG's reads: its state blocks, then half as many gradient ones. */
static void reads_of(unsigned sg, unsigned blocks, uint64_t *out)
{
	for (unsigned b = 0; b < blocks; b++)
		out[b] = state_key(sg, b, blocks);
	for (unsigned b = 0; b < blocks / 2; b++)
		out[blocks + b] = grad_key(sg, b, blocks);
}

/* One step of G sub-groups of B state blocks. */
static void step(struct cyc *c, unsigned g, unsigned blocks, bool pipelined)
{
	unsigned nr = blocks + blocks / 2;
	uint64_t *r = calloc(nr, sizeof(*r));
	assert_non_null(r);
	for (unsigned sg = 0; sg < g; sg++)
		for (unsigned b = 0; b < blocks / 2; b++)
			add(c, grad_key(sg, b, blocks), true);
	if (!pipelined) {
		for (unsigned sg = 0; sg < g; sg++) {
			reads_of(sg, blocks, r);
			for (unsigned k = 0; k < nr; k++)
				add(c, r[k], false);
			for (unsigned b = 0; b < blocks; b++)
				add(c, state_key(sg, b, blocks), true);
		}
		free(r);
		return;
	}
	reads_of(0, blocks, r);
	for (unsigned k = 0; k < nr; k++)
		add(c, r[k], false);
	for (unsigned i = 0; i < g; i++) {
		bool rd = i + 1 < g, wr = i > 0;
		if (rd)
			reads_of(i + 1, blocks, r);
		for (unsigned k = 0; k < nr; k++) {
			if (rd)
				add(c, r[k], false);
			if (wr && k < blocks)
				add(c, state_key(i - 1, k, blocks), true);
		}
	}
	for (unsigned b = 0; b < blocks; b++)
		add(c, state_key(g - 1, b, blocks), true);
	free(r);
}

/* The pipelined schedule's time, in blocks, with the state blocks the
 * plan keeps off the disk: the first read, each iteration's larger side,
 * the last write. */
static unsigned pipeline_time(const struct keepplan *kp, unsigned g, unsigned blocks)
{
	unsigned *left = calloc(g, sizeof(*left));
	assert_non_null(left);
	for (unsigned sg = 0; sg < g; sg++)
		for (unsigned b = 0; b < blocks; b++)
			left[sg] += keepplan_lookup(kp, state_key(sg, b, blocks)) != KEEPPLAN_KEEP;
	unsigned t = left[0];
	for (unsigned i = 0; i < g; i++) {
		unsigned r = i + 1 < g ? left[i + 1] : 0, w = i > 0 ? left[i - 1] : 0;
		t += r > w ? r : w;
	}
	t += left[g - 1];
	free(left);
	return t;
}

static unsigned kept_in(const struct keepplan *kp, unsigned sg, unsigned blocks)
{
	unsigned n = 0;
	for (unsigned b = 0; b < blocks; b++)
		n += keepplan_lookup(kp, state_key(sg, b, blocks)) == KEEPPLAN_KEEP;
	return n;
}

static struct keepplan *plan(const struct cyc *c, bool (*disk)(uint64_t), size_t budget)
{
	struct keepplan *kp = NULL;
	uint8_t *ondisk = ondisk_of(c->key, c->n, disk);
	assert_int_equal(keepplan_build(c->key, c->wr, c->n, ondisk, budget, &kp), 0);
	free(ondisk);
	assert_non_null(kp);
	return kp;
}

/* The bench's shape: 8 sub-groups, RAM for a quarter of them beside the
 * gradients. Keeping two neighbouring sub-groups, where the cache left
 * room, saves no time at all; an equal share of every sub-group saves 1.25
 * iterations per sub-group's worth of RAM (the first read and the last
 * write are one side only, every iteration between them moves both), the
 * most any plan saves on this schedule. */
static void test_pipelined_time(void **state)
{
	(void)state;
	const unsigned g = 8, blocks = 64, budget = 2 * blocks;
	struct cyc c = {0};
	step(&c, g, blocks, true);
	struct keepplan *kp = plan(&c, not_grad, budget);
	struct keepplan_stats st;
	keepplan_get_stats(kp, &st);
	assert_int_equal(st.candidates, g * blocks);
	assert_int_equal(st.kept, budget);
	assert_int_equal(st.ios, 2 * g * blocks);
	assert_int_equal(st.saved, 2 * budget);

	unsigned none = (g + 2) * blocks;
	assert_int_equal(pipeline_time(kp, g, blocks), none - budget * 5 / 4);
	for (unsigned sg = 0; sg < g; sg++)
		assert_int_equal(kept_in(kp, sg, blocks), budget / g);

	/* What keeping sub-groups 3 and 4 whole gives (Belady's byte count
	 * cannot tell it from the plan): no time saved. */
	struct cyc only = {0};
	for (unsigned sg = 3; sg <= 4; sg++)
		for (unsigned b = 0; b < blocks; b++)
			add(&only, state_key(sg, b, blocks), false);
	struct keepplan *nb = plan(&only, NULL, budget);
	assert_int_equal(pipeline_time(nb, g, blocks), none);
	keepplan_free(nb);
	cyc_free(&only);

	/* Gradient blocks live in RAM: not in the plan; nor are keys not in
	 * the cycle. Every state block has a verdict. */
	assert_int_equal(keepplan_lookup(kp, grad_key(0, 0, blocks)), KEEPPLAN_NONE);
	assert_int_equal(keepplan_lookup(kp, state_key(g, 0, blocks)), KEEPPLAN_NONE);
	for (unsigned sg = 0; sg < g; sg++)
		for (unsigned b = 0; b < blocks; b++)
			assert_int_not_equal(keepplan_lookup(kp, state_key(sg, b, blocks)),
					     KEEPPLAN_NONE);
	keepplan_free(kp);
	cyc_free(&c);
}

/* Wherever the learner cut the cycle, and at budgets that do not divide
 * evenly, every sub-group gets its share within one block. */
static void test_rotated(void **state)
{
	(void)state;
	const unsigned g = 8, blocks = 64;
	struct cyc c = {0};
	step(&c, g, blocks, true);
	step(&c, g, blocks, true);
	size_t len = c.n / 2;
	const size_t budgets[] = {1, 37, 128, 301, 511};
	for (size_t bi = 0; bi < sizeof(budgets) / sizeof(*budgets); bi++) {
		for (size_t off = 0; off < len; off += len / 7) {
			struct cyc r = {.key = c.key + off, .wr = c.wr + off, .n = len};
			struct keepplan *kp = plan(&r, not_grad, budgets[bi]);
			unsigned total = 0;
			for (unsigned sg = 0; sg < g; sg++) {
				unsigned k = kept_in(kp, sg, blocks);
				assert_true(k * g + g >= budgets[bi]);
				assert_true(k * g <= budgets[bi] + g);
				total += k;
			}
			assert_int_equal(total, budgets[bi]);
			keepplan_free(kp);
		}
	}
	cyc_free(&c);
}

/* Not pipelined: a sub-group's read and its write never overlap, every
 * kept block saves both, whichever it is. */
static void test_serial(void **state)
{
	(void)state;
	const unsigned g = 6, blocks = 32, budget = 50;
	struct cyc c = {0};
	step(&c, g, blocks, false);
	struct keepplan *kp = plan(&c, not_grad, budget);
	struct keepplan_stats st;
	keepplan_get_stats(kp, &st);
	assert_int_equal(st.kept, budget);
	assert_int_equal(st.saved, 2 * budget);
	unsigned kept = 0;
	for (unsigned sg = 0; sg < g; sg++)
		kept += kept_in(kp, sg, blocks);
	assert_int_equal(kept, budget);
	keepplan_free(kp);
	cyc_free(&c);
}

/* Budgets of nothing and of everything. */
static void test_budget_edges(void **state)
{
	(void)state;
	const unsigned g = 4, blocks = 16;
	struct cyc c = {0};
	step(&c, g, blocks, true);
	struct keepplan *kp = plan(&c, not_grad, 0);
	struct keepplan_stats st;
	keepplan_get_stats(kp, &st);
	assert_int_equal(st.kept, 0);
	assert_int_equal(st.saved, 0);
	assert_int_equal(st.candidates, g * blocks);
	for (unsigned sg = 0; sg < g; sg++)
		assert_int_equal(kept_in(kp, sg, blocks), 0);
	assert_int_equal(keepplan_lookup(kp, state_key(1, 1, blocks)), KEEPPLAN_DROP);
	keepplan_free(kp);

	kp = plan(&c, not_grad, 1000);
	keepplan_get_stats(kp, &st);
	assert_int_equal(st.kept, g * blocks);
	assert_int_equal(pipeline_time(kp, g, blocks), 0);
	keepplan_free(kp);

	/* Without a disk predicate the gradients count too. */
	kp = plan(&c, NULL, 0);
	keepplan_get_stats(kp, &st);
	assert_int_equal(st.candidates, g * blocks + g * blocks / 2);
	keepplan_free(kp);
	cyc_free(&c);
}

/* Keys the plan leaves out (never read, read too often), and worth: a
 * block read three times a cycle goes before those read once, and a
 * written block whose next access reads it before one only read. */
static void test_worth(void **state)
{
	(void)state;
	struct cyc c = {0};
	for (unsigned i = 0; i < 20; i++)
		add(&c, 100, false); /* read 20 times */
	for (unsigned i = 0; i < 10; i++)
		add(&c, 200 + i, true); /* only written */
	for (unsigned i = 0; i < 10; i++)
		add(&c, 300 + i, false); /* only read */
	for (unsigned i = 0; i < 3; i++)
		add(&c, 500, false), add(&c, 501, true); /* 500 read 3 times */
	add(&c, 400, true);
	add(&c, 400, true); /* written twice, then read: one write-back */
	add(&c, 400, false);
	struct keepplan *kp = plan(&c, NULL, 2);
	struct keepplan_stats st;
	keepplan_get_stats(kp, &st);
	assert_int_equal(st.candidates, 12);
	assert_int_equal(st.kept, 2);
	assert_int_equal(st.ios, 10 + 3 + 2);
	assert_int_equal(st.saved, 3 + 2);
	assert_int_equal(keepplan_lookup(kp, 500), KEEPPLAN_KEEP);
	assert_int_equal(keepplan_lookup(kp, 400), KEEPPLAN_KEEP);
	assert_int_equal(keepplan_lookup(kp, 305), KEEPPLAN_DROP);
	assert_int_equal(keepplan_lookup(kp, 100), KEEPPLAN_NONE);
	assert_int_equal(keepplan_lookup(kp, 205), KEEPPLAN_NONE);
	assert_int_equal(keepplan_lookup(kp, 501), KEEPPLAN_NONE);
	assert_int_equal(keepplan_lookup(kp, 999), KEEPPLAN_NONE);
	assert_int_equal(keepplan_lookup(NULL, 305), KEEPPLAN_NONE);
	keepplan_free(kp);
	keepplan_free(NULL);

	/* The ten read once, 5 of them: every other one along the cycle. */
	kp = plan(&c, NULL, 2 + 5);
	for (unsigned i = 0; i < 10; i++)
		assert_int_equal(keepplan_lookup(kp, 300 + i),
				 i % 2 ? KEEPPLAN_KEEP : KEEPPLAN_DROP);
	keepplan_free(kp);
	cyc_free(&c);

	/* A write whose next read is in the next cycle (the cycle wraps). */
	struct cyc w = {0};
	add(&w, 1, false);
	add(&w, 1, true);
	kp = plan(&w, NULL, 0);
	keepplan_get_stats(kp, &st);
	assert_int_equal(st.ios, 2);
	keepplan_free(kp);
	cyc_free(&w);
}

static void test_einval(void **state)
{
	(void)state;
	uint64_t k = 1;
	uint8_t w = 0;
	struct keepplan *kp = (struct keepplan *)&k;
	assert_int_equal(keepplan_build(&k, &w, 0, NULL, 1, &kp), -EINVAL);
	assert_null(kp);
	assert_int_equal(keepplan_build(&k, &w, 1, NULL, 1, &kp), 0);
	assert_int_equal(keepplan_lookup(kp, 1), KEEPPLAN_KEEP);
	keepplan_free(kp);
}

/* The pipelined schedule's time with idle disks between steps, under the
 * tail plan: the writes it keeps wait in RAM for the idle stretch (off the
 * last iterations, which only write), and the same BUDGET blocks of RAM
 * then hold the next update's first reads (off the first ones, which only
 * read). */
static unsigned gap_time(const struct keepplan *kp, unsigned g, unsigned blocks, unsigned budget)
{
	unsigned *rd = calloc(g, sizeof(*rd)), *wr = calloc(g, sizeof(*wr));
	assert_non_null(rd);
	assert_non_null(wr);
	unsigned ahead = budget;
	for (unsigned sg = 0; sg < g; sg++) {
		wr[sg] = blocks - kept_in(kp, sg, blocks);
		rd[sg] = blocks < ahead ? 0 : blocks - ahead;
		ahead -= blocks - rd[sg];
	}
	unsigned t = rd[0];
	for (unsigned i = 0; i < g; i++) {
		unsigned r = i + 1 < g ? rd[i + 1] : 0, w = i > 0 ? wr[i - 1] : 0;
		t += r > w ? r : w;
	}
	t += wr[g - 1];
	free(rd);
	free(wr);
	return t;
}

/* The tail plan keeps the last writes before the gradient stretch, wherever
 * the learner cut the cycle: on the bench's shape sub-groups 7 and 6 whole.
 * With idle disks between steps that takes twice its RAM off the step,
 * where the keep plan's even share takes 1.25 times. */
static void test_tail(void **state)
{
	(void)state;
	const unsigned g = 8, blocks = 64, budget = 2 * blocks;
	struct cyc c = {0};
	step(&c, g, blocks, true);
	step(&c, g, blocks, true);
	size_t len = c.n / 2;
	unsigned none = (g + 2) * blocks;
	for (size_t off = 0; off < len; off += len / 5) {
		struct keepplan *kp = NULL;
		uint8_t *ondisk = ondisk_of(c.key + off, len, not_grad);
		assert_int_equal(
		    keepplan_build_tail(c.key + off, c.wr + off, len, ondisk, budget, &kp), 0);
		free(ondisk);
		for (unsigned sg = 0; sg < g; sg++)
			assert_int_equal(kept_in(kp, sg, blocks), sg >= g - 2 ? blocks : 0);
		/* Every state block has a verdict, gradients none. */
		assert_int_equal(keepplan_lookup(kp, state_key(0, 0, blocks)), KEEPPLAN_DROP);
		assert_int_equal(keepplan_lookup(kp, grad_key(g - 1, 0, blocks)), KEEPPLAN_NONE);
		assert_int_equal(gap_time(kp, g, blocks, budget), none - 2 * budget);
		keepplan_free(kp);
	}
	struct keepplan *keep = plan(&c, not_grad, budget);
	assert_int_equal(pipeline_time(keep, g, blocks), none - budget * 5 / 4);
	keepplan_free(keep);
	cyc_free(&c);
}

/* No stretch of non-disk accesses (or nothing but): no tail plan. */
static void test_tail_enoent(void **state)
{
	(void)state;
	struct cyc c = {0};
	step(&c, 4, 8, true);
	struct keepplan *kp = (struct keepplan *)&c;
	assert_int_equal(keepplan_build_tail(c.key, c.wr, c.n, NULL, 4, &kp), -ENOENT);
	assert_null(kp);
	struct cyc grads = {0};
	for (unsigned b = 0; b < 8; b++)
		add(&grads, grad_key(0, b, 8), true);
	uint8_t *ondisk = ondisk_of(grads.key, grads.n, not_grad);
	assert_int_equal(keepplan_build_tail(grads.key, grads.wr, grads.n, ondisk, 4, &kp),
			 -ENOENT);
	free(ondisk);
	cyc_free(&grads);
	cyc_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pipelined_time), cmocka_unit_test(test_rotated),
	    cmocka_unit_test(test_serial),	   cmocka_unit_test(test_budget_edges),
	    cmocka_unit_test(test_worth),	   cmocka_unit_test(test_einval),
	    cmocka_unit_test(test_tail),	   cmocka_unit_test(test_tail_enoent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
