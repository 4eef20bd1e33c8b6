/*
 * tests/unit/test_order_predict.c — what a learned cycle predicts, and that
 * a grown learner predicts the same.
 *
 * The cycle is a copy of the last period, cut where the learner confirmed
 * it: drift at the cut must not lose an access or turn a read into a
 * rewrite, a write that comes early is still the write, and
 * order_upcoming_reads finds the update's first reads past the gradient
 * writes. Growing the learner, at once or in parts, keeps its cycle and
 * its predictions.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy/order.h"

#include "order_fixture.h"

/* A block read, then written 60 accesses later. One step its write comes
 * 35 early, nearer the read's place in the cycle than the write's: it must
 * still be taken for the write, so that its next use is next step's read,
 * not "the write" again (which made the block look dead after it). */
static void test_write_near_read(void **state)
{
	(void)state;
	enum { P = 400, X = 1000 };
	struct order *o;
	assert_int_equal(order_create(NULL, &o), 0);
	for (int s = 0; s < 6; s++) {
		int wpos = s == 5 ? 125 : 160;
		for (unsigned i = 0; i < P; i++) {
			if (i == 100)
				order_access(o, mkkey(1, X), false);
			if ((int)i == wpos) {
				order_access(o, mkkey(1, X), true);
				if (s == 5) {
					assert_true(order_learned(o));
					uint64_t u = order_next_use(o, mkkey(1, X));
					uint64_t d = order_next_read(o, mkkey(1, X));
					assert_true(u != UINT64_MAX);
					assert_int_equal(d, u);
				}
			}
			order_access(o, mkkey(0, i), false);
		}
	}
	order_destroy(o);
}

/* The median offset can put the cut one access short of the period: from
 * the second step on, one read comes late (moved from the step's head to
 * near its tail), so most accesses of that step sit one place earlier
 * than the step before. The copy then lacked the period's first access
 * for good: a block read every step that the cycle never read. */
static void test_cut_short(void **state)
{
	(void)state;
	enum { N = 512 };
	struct order *o;
	assert_int_equal(order_create(NULL, &o), 0);
	for (unsigned s = 0; s < 8; s++) {
		unsigned seq[2 * N];
		for (unsigned i = 0; i < 2 * N; i++)
			seq[i] = i;
		if (s >= 1) { /* read 10 moves to place 900 */
			memmove(&seq[10], &seq[11], (900 - 10) * sizeof(*seq));
			seq[900] = 10;
		}
		for (unsigned j = 0; j < 2 * N; j++)
			order_access(o, mkkey(0, seq[j] % N), seq[j] >= N);
	}
	assert_true(order_learned(o));
	const uint64_t *keys;
	const uint8_t *wr;
	size_t len = order_cycle(o, &keys, &wr);
	assert_int_equal(len, 2 * N);
	for (unsigned k = 0; k < 2 * N; k++) {
		bool found = false;
		for (size_t p = 0; p < len && !found; p++)
			found = keys[p] == mkkey(0, k % N) && (wr[p] != 0) == (k >= N);
		if (!found)
			fail_msg("block %u's %s is not in the cycle", k % N,
				 k >= N ? "write" : "read");
	}
	order_destroy(o);
}

/* The learned cycle is a copy of the last period, cut where the learner
 * happened to confirm it. Drift moves one access (Z) from just inside the
 * cut to D places before it, and another (Y) from just after the copy's end
 * into it: the copy lacks Z and holds Y twice. Z must be in the cycle
 * however far (within the tolerance) it drifted. The cut is found on the
 * clean trace; drift moves it by up to D. */
static void test_cut_repair(void **state)
{
	(void)state;
	enum { P = 500, STEPS = 6 };
	size_t n = (size_t)P * STEPS, lost = 0, repaired = 0;
	uint64_t *k = malloc(n * sizeof(*k));
	assert_non_null(k);
	for (size_t i = 0; i < n; i++)
		k[i] = mkkey(0, (unsigned)(i % P));
	struct order *o;
	assert_int_equal(order_create(NULL, &o), 0);
	size_t learned_at = 0;
	for (size_t i = 0; i < n && !learned_at; i++) {
		order_access(o, k[i], false);
		if (order_learned(o))
			learned_at = i + 1;
	}
	order_destroy(o);
	size_t cut = learned_at - P;
	assert_true(learned_at > 0 && cut > 128 && learned_at + 8 < n);
	for (size_t d = 4; d <= 100; d += 4) {
		for (size_t i = 0; i < n; i++)
			k[i] = mkkey(0, (unsigned)(i % P));
		uint64_t z = k[cut + 3], y = k[learned_at + 2];
		memmove(&k[cut - d + 1], &k[cut - d], (d + 3) * sizeof(*k));
		k[cut - d] = z;
		memmove(&k[learned_at - d + 1], &k[learned_at - d], (d + 2) * sizeof(*k));
		k[learned_at - d] = y;
		assert_int_equal(order_create(NULL, &o), 0);
		for (size_t i = 0; i < n; i++) {
			order_access(o, k[i], false);
			if (order_learned(o)) {
				lost += order_next_use(o, z) == UINT64_MAX;
				break;
			}
		}
		struct order_stats st;
		order_get_stats(o, &st);
		repaired += st.repaired;
		order_destroy(o);
	}
	print_message("# cut repair: 25 drifts, Z lost from the cycle %zu times, %zu repairs\n",
		      lost, repaired);
	assert_int_equal(lost, 0);
	free(k);
}

/* Ranks that drift apart put an access near the cut of the learned cycle
 * into the copy twice, once at each end. A block written just before the
 * cut must still be predicted to be read next, as it is in the trace: a
 * predicted rewrite made the cache take it for dead (written back, evicted
 * first, read back from disk). 4 ranks, drift up to 2 sub-groups. */
static void test_cut_repeat(void **state)
{
	(void)state;
	srand(7);
	struct trace t = {0};
	gen_ranks(&t, 4, 8, 16, 10, 64, 5, 0);
	struct order *o;
	assert_int_equal(order_create(NULL, &o), 0);
	size_t writes = 0, dead = 0;
	for (size_t j = 0; j < t.n; j++) {
		order_access(o, t.key[j], t.wr[j]);
		if (!order_learned(o) || !t.wr[j])
			continue;
		uint64_t next = brute_next(&t, j + 1, t.key[j], false);
		if (next == UINT64_MAX || next != brute_next(&t, j + 1, t.key[j], true))
			continue; /* the trace has no read of it next */
		writes++;
		dead += order_next_use(o, t.key[j]) != order_next_read(o, t.key[j]);
	}
	print_message("# cut repeats: %zu writes read next, %zu predicted overwritten first\n",
		      writes, dead);
	assert_true(writes > 1000);
	assert_int_equal(dead, 0);
	order_destroy(o);
	tr_free(&t);
}

/* Between steps the next accesses are the backward pass's gradient writes:
 * order_upcoming_reads steps over them to the update's first reads, with
 * the distance to each, where order_upcoming sees only the writes. */
static void test_upcoming_reads(void **state)
{
	(void)state;
	enum { SG = 4, BL = 8 };
	struct order *o;
	assert_int_equal(order_create(NULL, &o), 0);
	for (int s = 0; s < 4; s++) {
		for (unsigned g = 0; g < SG; g++)
			for (unsigned b = 0; b < BL; b++)
				order_access(o, mkkey(g * 4 + 3, b), true);
		for (unsigned g = 0; g < SG; g++) {
			for (unsigned f = 0; f < 4; f++)
				for (unsigned b = 0; b < BL; b++)
					order_access(o, mkkey(g * 4 + f, b), false);
			for (unsigned f = 0; f < 3; f++)
				for (unsigned b = 0; b < BL; b++)
					order_access(o, mkkey(g * 4 + f, b), true);
		}
	}
	assert_true(order_learned(o));
	uint64_t k[BL + 2];
	uint32_t d[BL + 2];
	assert_int_equal(order_upcoming(o, 1, k), 1);
	assert_int_equal(k[0], mkkey(3, 0)); /* a gradient write */
	assert_int_equal(order_upcoming_reads(o, BL + 2, k, d), BL + 2);
	for (unsigned b = 0; b < BL; b++) {
		assert_int_equal(k[b], mkkey(0, b));
		assert_int_equal(d[b], SG * BL + b);
		assert_int_equal(order_next_read(o, k[b]), d[b]);
	}
	assert_int_equal(k[BL], mkkey(1, 0));
	assert_int_equal(d[BL], SG * BL + BL);
	order_destroy(o);
	struct order *none;
	assert_int_equal(order_create(NULL, &none), 0);
	assert_int_equal(order_upcoming_reads(none, 4, k, d), 0);
	order_destroy(none);
}

/* A and B predict the same next use and next read for rank 0's blocks
 * 0..N-1. */
static void same_predictions(const struct order *a, const struct order *b, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		assert_int_equal(order_next_use(a, mkkey(0, k)), order_next_use(b, mkkey(0, k)));
		assert_int_equal(order_next_read(a, mkkey(0, k)), order_next_read(b, mkkey(0, k)));
	}
}

/* A cycle of three quarters of the learner's size, learned: the larger
 * learner has it at once, with the same predictions, though the recording
 * it is fed holds too little of it to learn it again. */
static void test_grow_keeps_cycle(void **state)
{
	(void)state;
	enum { G = 12, B = 32, CYC = 2 * G * B };
	struct trace t = {0};
	add_steps(&t, G, B, 5);
	struct order_params p = {.max_cycle = 1024};
	struct order *from, *grown;
	assert_int_equal(order_create(&p, &from), 0);
	for (size_t j = 0; j < t.n - CYC / 3; j++)
		order_access(from, t.key[j], t.wr[j]);
	assert_true(order_learned(from));
	assert_int_equal(order_cycle_len(from), CYC);
	assert_int_equal(order_grow(from, 2048, &grown), 0);
	assert_true(order_learned(grown));
	assert_int_equal(order_cycle_len(grown), CYC);
	assert_int_equal(order_learn_count(grown), order_learn_count(from));
	same_predictions(grown, from, G * B);
	/* And it goes on predicting the rest. */
	for (size_t j = t.n - CYC / 3; j < t.n; j++) {
		assert_int_equal(order_next_use(grown, t.key[j]), 0);
		order_access(grown, t.key[j], t.wr[j]);
	}
	assert_true(order_learned(grown));
	order_destroy(from);
	order_destroy(grown);
	tr_free(&t);
}

/* Growing in parts (order_seed_take, order_seed_grow, the accesses made
 * meanwhile, order_grow_finish) ends where order_grow at the end does:
 * here a cycle the old learner saw only partly when the seed was taken,
 * learned thanks to the accesses given to the new one afterwards. A
 * repeat of the access the seed ended on collapses into it, as in the
 * old learner. */
static void test_grow_in_parts(void **state)
{
	(void)state;
	enum { G = 10, B = 20, CYC = 2 * G * B };
	struct trace t = {0};
	add_steps(&t, G, B, 6);
	struct order_params p = {.max_cycle = 1024};
	struct order *from, *whole, *grown;
	struct order_seed *seed;
	assert_int_equal(order_create(&p, &from), 0);
	size_t cut = CYC + CYC / 5;
	for (size_t j = 0; j < cut; j++)
		order_access(from, t.key[j], t.wr[j]);
	assert_false(order_learned(from));
	assert_int_equal(order_seed_take(from, 512, &seed), -EINVAL); /* smaller */
	assert_int_equal(order_seed_take(from, 4096, &seed), 0);
	/* The seed's last access, repeated as a read, then the rest. */
	order_access(from, t.key[cut - 1], false);
	for (size_t j = cut; j < t.n; j++)
		order_access(from, t.key[j], t.wr[j]);
	assert_true(order_learned(from));
	assert_int_equal(order_seed_grow(seed, &grown), 0);
	order_seed_free(seed);
	assert_false(order_learned(grown)); /* the seed alone holds too little */
	order_access(grown, t.key[cut - 1], false);
	for (size_t j = cut; j < t.n; j++)
		order_access(grown, t.key[j], t.wr[j]);
	assert_true(order_learned(grown)); /* from those, before order_grow_finish */
	order_grow_finish(grown, from);
	assert_int_equal(order_grow(from, 4096, &whole), 0);

	assert_int_equal(order_max_cycle(grown), 4096);
	assert_true(order_learned(grown));
	assert_int_equal(order_cycle_len(grown), CYC);
	assert_int_equal(order_cycle_len(whole), CYC);
	/* The clock and counters go on from the old learner's. */
	assert_int_equal(order_now(grown), order_now(from));
	assert_int_equal(order_learn_count(grown), order_learn_count(from));
	same_predictions(grown, whole, G * B);
	order_destroy(from);
	order_destroy(whole);
	order_destroy(grown);
	tr_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_write_near_read),  cmocka_unit_test(test_cut_short),
	    cmocka_unit_test(test_cut_repair),	     cmocka_unit_test(test_cut_repeat),
	    cmocka_unit_test(test_upcoming_reads),   cmocka_unit_test(test_grow_in_parts),
	    cmocka_unit_test(test_grow_keeps_cycle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
