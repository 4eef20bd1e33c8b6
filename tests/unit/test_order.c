/*
 * tests/unit/test_order.c — how the access-order learner learns a cycle,
 * keeps it and learns it again when the order changes.
 *
 * Traces mimic DeepSpeed's update phase: per sub-group, read its blocks,
 * then write them (each key twice per cycle, not consecutively), with the
 * initial write before the first step, pipelined reads and writes taking
 * turns, and small blocks interleaved by the workers. The learner must lock
 * on the step, never on a period inside it, stay within max_cycle, and
 * follow a changed order without flapping.
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

static void test_clean_cycle(void **state)
{
	(void)state;
	enum { G = 10, B = 20, CYC = 2 * G * B, STEPS = 6 };
	struct trace t = {0};
	add_steps(&t, G, B, STEPS);
	struct order *o;
	assert_int_equal(order_create(NULL, &o), 0);
	assert_false(order_learned(o));
	assert_int_equal(order_next_use(o, t.key[0]), UINT64_MAX);
	srand(11);
	size_t learned_at = 0;
	for (size_t j = 0; j < t.n; j++) {
		if (order_learned(o)) {
			if (!learned_at)
				learned_at = j;
			/* Exact next use for the coming key and random others. */
			assert_int_equal(order_next_use(o, t.key[j]), 0);
			for (int q = 0; q < 3; q++) {
				uint64_t key = mkkey(0, (unsigned)(rand() % (G * B)));
				uint64_t bn = brute_next(&t, j, key, false);
				if (bn != UINT64_MAX)
					assert_int_equal(order_next_use(o, key), bn);
				bn = brute_next(&t, j, key, true);
				if (bn != UINT64_MAX)
					assert_int_equal(order_next_read(o, key), bn);
			}
			uint64_t up[16];
			size_t nu = order_upcoming(o, 16, up);
			assert_int_equal(nu, 16);
			for (size_t i = 0; i < nu && j + i < t.n; i++)
				assert_int_equal(up[i], t.key[j + i]);
		}
		order_access(o, t.key[j], t.wr[j]);
	}
	/* Learned within two cycles. */
	assert_true(learned_at > 0 && learned_at <= 2 * CYC);
	assert_int_equal(order_cycle_len(o), CYC);
	assert_int_equal(order_next_use(o, mkkey(7, 1)), UINT64_MAX); /* not in cycle */
	struct order_stats st;
	order_get_stats(o, &st);
	assert_int_equal(st.accesses, t.n);
	assert_int_equal(st.learns, 1);
	assert_int_equal(st.relearns, 0);
	assert_int_equal(st.predicted_hits, st.learned_accesses);
	assert_true(st.learned);
	order_destroy(o);
	tr_free(&t);
}

/* Learn one order, switch to a shuffled one: drops to not learned, then
 * relearns the new order with exact predictions. */
static void test_broken_pattern(void **state)
{
	(void)state;
	enum { N = 300 };
	unsigned perm[N];
	for (unsigned i = 0; i < N; i++)
		perm[i] = i;
	struct order_params p = {.health_window = 512};
	struct order *o;
	assert_int_equal(order_create(&p, &o), 0);
	for (int s = 0; s < 4; s++)
		for (unsigned i = 0; i < N; i++)
			order_access(o, mkkey(0, perm[i]), false);
	assert_true(order_learned(o));
	assert_int_equal(order_cycle_len(o), N);

	srand(5);
	for (unsigned i = N - 1; i > 0; i--) {
		unsigned j = (unsigned)(rand() % (i + 1));
		unsigned x = perm[i];
		perm[i] = perm[j];
		perm[j] = x;
	}
	bool dropped = false;
	int relearned_step = -1;
	for (int s = 0; s < 12; s++) {
		for (unsigned i = 0; i < N; i++) {
			if (dropped && relearned_step < 0 && order_learned(o))
				relearned_step = s;
			if (!order_learned(o))
				dropped = true;
			if (relearned_step >= 0) {
				/* Exact on the new order. */
				assert_int_equal(order_next_use(o, mkkey(0, perm[i])), 0);
				assert_int_equal(order_next_use(o, mkkey(0, perm[(i + 5) % N])), 5);
			}
			order_access(o, mkkey(0, perm[i]), false);
		}
	}
	assert_true(dropped);
	assert_true(relearned_step >= 0);
	struct order_stats st;
	order_get_stats(o, &st);
	assert_int_equal(st.relearns, 1);
	assert_int_equal(st.learns, 2);
	assert_int_equal(st.cycle_len, N);
	order_destroy(o);
}

/* What a real run feeds the learner: first the initial write of every
 * block (not periodic), then steps whose sub-groups are large enough that
 * "read, then written" repeats at one sub-group's distance over a whole
 * check span. That sub-period must never become the cycle (a write never
 * matches the read before it), and the stretch before the first step must
 * not delay learning: the cycle is known during the third step at the
 * latest. */
static void test_init_then_steps(void **state)
{
	(void)state;
	enum { G = 4, B = 300, CYC = 2 * G * B, STEPS = 5 };
	struct trace t = {0};
	for (unsigned b = 0; b < G * B; b++)
		tr_add(&t, mkkey(0, b), true);
	size_t init = t.n;
	add_steps(&t, G, B, STEPS);
	struct order *o;
	assert_int_equal(order_create(NULL, &o), 0);
	size_t learned_at = 0;
	for (size_t j = 0; j < t.n; j++) {
		if (order_learned(o)) {
			if (!learned_at)
				learned_at = j;
			assert_int_equal(order_cycle_len(o), CYC);
			assert_int_equal(order_next_use(o, t.key[j]), 0);
			uint64_t bn =
			    brute_next(&t, j, mkkey(0, (unsigned)(j * 7 % (G * B))), true);
			if (bn != UINT64_MAX)
				assert_int_equal(
				    order_next_read(o, mkkey(0, (unsigned)(j * 7 % (G * B)))), bn);
		}
		order_access(o, t.key[j], t.wr[j]);
	}
	print_message("# init %zu + %d steps of %d: learned at %zu\n", init, STEPS, CYC,
		      learned_at);
	assert_true(learned_at > 0 && learned_at <= init + 2 * CYC + CYC / 2);
	struct order_stats st;
	order_get_stats(o, &st);
	assert_int_equal(st.false_locks, 0);
	assert_int_equal(st.learns, 1);
	order_destroy(o);
	tr_free(&t);
}

/* A cycle longer than max_cycle is never learned; one inside is; a long
 * stream with no period never is (and stays inside its buffers: ASan). */
static void test_memory_bound(void **state)
{
	(void)state;
	struct order_params p = {.max_cycle = 64};
	struct order *o;
	assert_int_equal(order_create(&p, &o), 0);
	for (int s = 0; s < 30; s++)
		for (unsigned b = 0; b < 100; b++) {
			order_access(o, mkkey(0, b), false);
			assert_false(order_learned(o));
		}
	order_destroy(o);

	assert_int_equal(order_create(&p, &o), 0);
	for (int s = 0; s < 10; s++) /* min_verify: 256 accesses */
		for (unsigned b = 0; b < 50; b++)
			order_access(o, mkkey(0, b), false);
	assert_true(order_learned(o));
	assert_int_equal(order_cycle_len(o), 50);
	order_destroy(o);

	p.max_cycle = 1024;
	assert_int_equal(order_create(&p, &o), 0);
	srand(3);
	for (int i = 0; i < 200000; i++) {
		order_access(o, ((uint64_t)rand() << 20) ^ (uint64_t)rand(), i & 1);
		assert_false(order_learned(o));
	}
	order_destroy(o);

	struct order_params bad = {.max_cycle = (size_t)1 << 31};
	assert_int_equal(order_create(&bad, &o), -EINVAL);
	bad = (struct order_params){.threshold = 1.5};
	assert_int_equal(order_create(&bad, &o), -EINVAL);
}

/* One rank with DeepSpeed's pipeline: while it updates sub-group i it reads
 * i+1 and writes i-1, and how those two streams take turns changes from
 * step to step (the cache serves one from RAM, then the other): here each
 * iteration puts all writes first, all reads first, or alternates them, at
 * random. A write then moves by up to a sub-group's reads between steps,
 * more than the least window, and the correct cycle must still be learned
 * and held: no false lock, no relearn. */
static void test_pipelined_turns(void **state)
{
	(void)state;
	enum { SG = 8, BL = 64, STEPS = 10 }; /* BL blocks per file */
	struct trace t = {0};
	srand(11);
	for (int s = 0; s < STEPS; s++) {
		/* Files 4g..4g+3 are P, M, V, G of sub-group g. */
		for (unsigned g = 0; g < SG; g++)
			for (unsigned b = 0; b < BL; b++)
				tr_add(&t, mkkey(4 * g + 3, b), true);
		for (int i = -1; i <= SG; i++) {
			/* Iteration i reads i+1 and writes i-1 (i = -1: the
			 * first read; i = SG: the last write). */
			uint64_t rd[4 * BL], wr[3 * BL];
			size_t nr = 0, nw = 0;
			if (i + 1 < SG)
				for (unsigned f = 0; f < 4; f++)
					for (unsigned b = 0; b < BL; b++)
						rd[nr++] = mkkey(4 * (unsigned)(i + 1) + f, b);
			if (i - 1 >= 0)
				for (unsigned f = 0; f < 3; f++)
					for (unsigned b = 0; b < BL; b++)
						wr[nw++] = mkkey(4 * (unsigned)(i - 1) + f, b);
			int turns = rand() % 3; /* 0 writes first, 1 reads first, 2 alternate */
			size_t a = 0, c = 0;
			while (a < nr || c < nw) {
				bool take_read =
				    c >= nw || (a < nr && (turns == 1 || (turns == 2 && a <= c)));
				if (take_read)
					tr_add(&t, rd[a++], false);
				else
					tr_add(&t, wr[c++], true);
			}
		}
	}
	size_t per_step = t.n / STEPS;
	struct order *o;
	assert_int_equal(order_create(NULL, &o), 0);
	size_t learned_at = 0;
	for (size_t j = 0; j < t.n; j++) {
		order_access(o, t.key[j], t.wr[j]);
		if (!learned_at && order_learned(o))
			learned_at = j + 1;
	}
	struct order_stats st;
	order_get_stats(o, &st);
	print_message("# pipelined turns: %zu/step, learned at %zu, learns %llu, false locks %llu, "
		      "relearns %llu, predicted %.3f\n",
		      per_step, learned_at, (unsigned long long)st.learns,
		      (unsigned long long)st.false_locks, (unsigned long long)st.relearns,
		      (double)st.predicted_hits /
			  (double)(st.learned_accesses ? st.learned_accesses : 1));
	assert_true(learned_at > 0 && learned_at <= 3 * per_step);
	assert_true(st.learned);
	assert_int_equal(st.learns, 1);
	assert_int_equal(st.false_locks, 0);
	assert_int_equal(st.relearns, 0);
	assert_int_equal(st.cycle_len, per_step);
	/* The tolerance the cache's staleness test shares: cycle / 8 here. */
	assert_int_equal(order_tolerance(o), per_step / 8);
	order_destroy(o);
	tr_free(&t);
}

/* One step of FILES files: each read, then written, in order. */
static void file_step(struct order *o, const uint64_t *ino, unsigned files, unsigned blocks)
{
	for (unsigned f = 0; f < files; f++) {
		for (unsigned b = 0; b < blocks; b++)
			order_access(o, ino[f] << 24 | b, false);
		for (unsigned b = 0; b < blocks; b++)
			order_access(o, ino[f] << 24 | b, true);
	}
}

/* A part of the step changes by less than the health threshold lets
 * through: one file of 12 is deleted and created again (a new inode, so
 * new keys). The cycle must take the change in: before, a trusted cycle
 * dropped every new candidate period, and the new file's blocks were never
 * predicted, for as long as the training ran. */
static void test_partial_change(void **state)
{
	(void)state;
	enum { FILES = 12, BLOCKS = 50, CYC = 2 * FILES * BLOCKS };
	uint64_t ino[FILES];
	for (unsigned f = 0; f < FILES; f++)
		ino[f] = f + 1;
	struct order *o;
	assert_int_equal(order_create(NULL, &o), 0);
	for (int s = 0; s < 5; s++)
		file_step(o, ino, FILES, BLOCKS);
	assert_true(order_learned(o));
	assert_int_equal(order_cycle_len(o), CYC);
	uint64_t learns = order_learn_count(o), old = ino[6];
	ino[6] = 1000;
	for (int s = 0; s < 100; s++)
		file_step(o, ino, FILES, BLOCKS);
	assert_true(order_learned(o));
	assert_int_equal(order_cycle_len(o), CYC);
	assert_int_not_equal(order_next_use(o, ino[6] << 24 | 0), UINT64_MAX);
	assert_int_not_equal(order_next_read(o, ino[6] << 24 | (BLOCKS - 1)), UINT64_MAX);
	assert_int_equal(order_next_use(o, old << 24 | 0), UINT64_MAX);
	/* Taken in once, not over and over. */
	assert_in_range(order_learn_count(o) - learns, 1, 2);
	order_destroy(o);
}

/* Small blocks: a 1 MiB request covers 64 blocks of 16K, and the replay
 * keeps 8 requests in flight (reads of sub-group i+1 and writes of i-1
 * together), so the block accesses of 8 requests interleave through the
 * FUSE workers in a different order every step, and a cycle is ~64 times
 * longer (in accesses) than at 1M. The learner must learn it once and keep
 * it over the steps: it has no reason to drop a cycle that repeats, however
 * finely the requests are interleaved. A scan after the last step (the
 * replay's --verify) is not the cycle and does not count here. */
static void test_small_blocks_interleaved(void **state)
{
	(void)state;
	enum { SG = 8, FILES = 4, REQS = 4, BPR = 64, QD = 8, STEPS = 6 };
	enum { FB = REQS * BPR }; /* blocks per file */
	struct trace t = {0};
	size_t step_start[STEPS + 1];
	srand(16);
	struct req {
		unsigned f, r;
		bool w;
	};
	struct req *q = calloc((size_t)SG * FILES * REQS * 2, sizeof(*q));
	assert_non_null(q);
	/* The first write of every file (not periodic). */
	for (unsigned f = 0; f < SG * FILES; f++)
		for (unsigned b = 0; b < FB; b++)
			tr_add(&t, mkkey(f, b), true);
	for (int s = 0; s < STEPS; s++) {
		step_start[s] = t.n;
		/* The requests in issue order: iteration i reads sub-group i+1
		 * and writes i-1 (P, M, V written; G, the 4th, only read),
		 * request by request, reads and writes alternating. */
		size_t nq = 0;
		for (int i = -1; i <= SG; i++) {
			unsigned nr = i + 1 < SG ? FILES * REQS : 0;
			unsigned nw = i - 1 >= 0 ? (FILES - 1) * REQS : 0;
			for (unsigned a = 0, c = 0; a < nr || c < nw;) {
				if (a < nr) {
					q[nq++] = (struct req){(unsigned)(i + 1) * FILES + a / REQS,
							       a % REQS, false};
					a++;
				}
				if (c < nw) {
					q[nq++] = (struct req){(unsigned)(i - 1) * FILES + c / REQS,
							       c % REQS, true};
					c++;
				}
			}
		}
		/* QD requests in flight, each served block by block by its own
		 * worker; which worker runs next is anyone's guess. */
		size_t slot[QD], cur[QD], next = 0, live = 0;
		for (unsigned d = 0; d < QD && next < nq; d++, live++) {
			slot[d] = next++;
			cur[d] = 0;
		}
		while (live) {
			unsigned d = (unsigned)rand() % live;
			const struct req *r = &q[slot[d]];
			tr_add(&t, mkkey(r->f, r->r * BPR + (unsigned)cur[d]), r->w);
			if (++cur[d] == BPR) {
				if (next < nq) {
					slot[d] = next++;
					cur[d] = 0;
				} else {
					slot[d] = slot[live - 1];
					cur[d] = cur[live - 1];
					live--;
				}
			}
		}
	}
	step_start[STEPS] = t.n;
	free(q);
	size_t per_step = step_start[STEPS] - step_start[STEPS - 1];
	struct order *o;
	assert_int_equal(order_create(NULL, &o), 0);
	size_t learned_at = 0, dropped_at = 0;
	for (size_t j = 0; j < t.n; j++) {
		order_access(o, t.key[j], t.wr[j]);
		if (!learned_at && order_learned(o))
			learned_at = j + 1;
		if (learned_at && !dropped_at && !order_learned(o))
			dropped_at = j + 1;
	}
	struct order_stats st;
	order_get_stats(o, &st);
	print_message(
	    "# 16K blocks, %d requests in flight: %zu/step, learned at %zu (step 2 from "
	    "%zu), dropped at %zu, learns %llu, false locks %llu, relearns %llu, cycle "
	    "%zu, predicted %.3f\n",
	    QD, per_step, learned_at, step_start[1], dropped_at, (unsigned long long)st.learns,
	    (unsigned long long)st.false_locks, (unsigned long long)st.relearns, st.cycle_len,
	    (double)st.predicted_hits / (double)(st.learned_accesses ? st.learned_accesses : 1));
	/* Learned in the second step (the first one after the initial write
	 * is its only reference), kept to the end. */
	assert_true(learned_at > step_start[1] && learned_at <= step_start[2]);
	assert_int_equal(dropped_at, 0);
	assert_true(st.learned);
	assert_int_equal(st.learns, 1);
	assert_int_equal(st.false_locks, 0);
	assert_int_equal(st.relearns, 0);
	assert_in_range(st.cycle_len, per_step - per_step / 64, per_step + per_step / 64);
	assert_true(st.predicted_hits >= st.learned_accesses / 100 * 99);
	order_destroy(o);
	tr_free(&t);
}

/* The order changes from alternating (ascending one step, descending the
 * next: a two-step cycle) to ascending every step. The two-step cycle has
 * each access within its tolerance, so its health holds; the one-step
 * period that now holds takes over, and predicts every access. */
static void test_shorter_period(void **state)
{
	(void)state;
	enum { N = 205 };
	struct order_params p = {.max_cycle = 4096};
	struct order *o;
	assert_int_equal(order_create(&p, &o), 0);
	for (unsigned s = 0; s < 10; s++)
		for (unsigned b = 0; b < N; b++)
			order_access(o, mkkey(0, s % 2 ? N - 1 - b : b), false);
	assert_true(order_learned(o));
	assert_int_equal(order_cycle_len(o), 2 * N - 2);
	uint64_t learns = order_learn_count(o);
	unsigned exact = 0, steps = 0;
	for (; steps < 40 && exact < N; steps++) {
		exact = 0;
		for (unsigned b = 0; b < N; b++) {
			exact += order_next_use(o, mkkey(0, b)) == 0;
			order_access(o, mkkey(0, b), false);
		}
	}
	print_message("alternating to ascending: every access predicted after %u steps\n", steps);
	assert_int_equal(exact, N);
	assert_true(order_learned(o));
	assert_int_equal(order_cycle_len(o), N);
	assert_int_equal(order_learn_count(o), learns + 1);
	/* Ascending it stays: no flapping back. */
	for (unsigned s = 0; s < 40; s++)
		for (unsigned b = 0; b < N; b++)
			order_access(o, mkkey(0, b), false);
	assert_int_equal(order_learn_count(o), learns + 1);
	assert_int_equal(order_cycle_len(o), N);
	order_destroy(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_clean_cycle),
	    cmocka_unit_test(test_broken_pattern),
	    cmocka_unit_test(test_init_then_steps),
	    cmocka_unit_test(test_memory_bound),
	    cmocka_unit_test(test_pipelined_turns),
	    cmocka_unit_test(test_partial_change),
	    cmocka_unit_test(test_small_blocks_interleaved),
	    cmocka_unit_test(test_shorter_period),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
