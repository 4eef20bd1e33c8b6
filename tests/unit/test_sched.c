/*
 * tests/unit/test_sched.c — the per-tier scheduler: priority order, FIFO
 * within a class, the in-flight bound, no starvation of write-back under a
 * continuous demand load, and the bandwidth caps' pacing, one per direction.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tiers/sched.h"

static void init_io(struct tier_io *io, enum tier_prio prio, uint64_t tag)
{
	memset(io, 0, sizeof(*io));
	io->prio = prio;
	io->slot = tag;
}

static void test_init_rejects(void **state)
{
	(void)state;
	struct sched s;
	struct sched_params p = {.limit = 0};
	assert_int_equal(sched_init(&s, &p), -EINVAL);
	p.limit = 4;
	p.max_bandwidth[TIER_OP_WRITE] = 1000;
	assert_int_equal(sched_init(&s, &p), -EINVAL); /* cap without io_bytes */
	p.io_bytes = 4096;
	assert_int_equal(sched_init(&s, &p), 0);
}

/* Pushed in reverse priority order, popped most urgent first; with a large
 * starve bound nothing is reordered by aging. */
static void test_priorities_and_fifo(void **state)
{
	(void)state;
	struct sched s;
	struct sched_params p = {.limit = 1000, .starve_after = 1000};
	assert_int_equal(sched_init(&s, &p), 0);
	struct tier_io io[4][5];
	for (int c = 3; c >= 0; c--)
		for (int i = 0; i < 5; i++) {
			init_io(&io[c][i], (enum tier_prio)c, (uint64_t)(c * 100 + i));
			sched_push(&s, &io[c][i]);
		}
	assert_int_equal(sched_queued(&s), 20);
	for (int c = 0; c < 4; c++)
		for (int i = 0; i < 5; i++) {
			struct tier_io *got = sched_pop(&s, 0, NULL);
			assert_non_null(got);
			assert_ptr_equal(got, &io[c][i]); /* class order, FIFO inside */
		}
	assert_null(sched_pop(&s, 0, NULL));
	assert_int_equal(sched_inflight(&s), 20);
	struct sched_stats st;
	sched_get_stats(&s, &st);
	assert_int_equal(st.aged, 0);
	for (int c = 0; c < 4; c++)
		assert_int_equal(st.dispatched[c], 5);
}

/* Random pushes, pops and completions: in flight never exceeds the limit
 * and every I/O comes out exactly once. */
static void test_inflight_bound(void **state)
{
	(void)state;
	enum { N = 5000, LIMIT = 3 };
	struct sched s;
	struct sched_params p = {.limit = LIMIT};
	assert_int_equal(sched_init(&s, &p), 0);
	struct tier_io *io = calloc(N, sizeof(*io));
	unsigned char *seen = calloc(N, 1);
	assert_non_null(io);
	assert_non_null(seen);
	srand(7);
	int pushed = 0, popped = 0, outstanding = 0, max_out = 0;
	while (popped < N) {
		int r = rand() % 3;
		if (r == 0 && pushed < N) {
			init_io(&io[pushed], (enum tier_prio)(rand() % 4), (uint64_t)pushed);
			sched_push(&s, &io[pushed]);
			pushed++;
		} else if (r == 1) {
			struct tier_io *g = sched_pop(&s, 0, NULL);
			if (g) {
				assert_false(seen[g->slot]);
				seen[g->slot] = 1;
				popped++;
				outstanding++;
				if (outstanding > max_out)
					max_out = outstanding;
			} else {
				/* NULL only when empty or at the bound. */
				assert_true(sched_queued(&s) == 0 || outstanding == LIMIT);
			}
		} else if (outstanding > 0) {
			sched_done(&s);
			outstanding--;
		}
		assert_int_equal(sched_inflight(&s), (unsigned)outstanding);
		assert_true(outstanding <= LIMIT);
	}
	assert_int_equal(max_out, LIMIT);
	free(io);
	free(seen);
}

/* Demand I/Os keep arriving faster than they are served; every write-back
 * I/O must still be dispatched within a bounded number of dispatches after
 * reaching the head of its queue, and write-backs stay FIFO. */
static void test_no_starvation(void **state)
{
	(void)state;
	enum { K = 8, NWB = 20, DEMAND = 4000 };
	struct sched s;
	struct sched_params p = {.limit = 2, .starve_after = K};
	assert_int_equal(sched_init(&s, &p), 0);
	struct tier_io *dem = calloc(DEMAND, sizeof(*dem));
	struct tier_io wb[NWB], pf[NWB];
	assert_non_null(dem);
	for (int i = 0; i < NWB; i++) {
		init_io(&wb[i], TIER_PRIO_WRITEBACK, (uint64_t)(1000000 + i));
		sched_push(&s, &wb[i]);
		init_io(&pf[i], TIER_PRIO_PREFETCH, (uint64_t)(2000000 + i));
		sched_push(&s, &pf[i]);
	}
	int nd = 0, dispatch = 0, wb_next = 0, last_wb = 0, max_gap = 0;
	while (wb_next < NWB) {
		/* Two new demand reads per dispatch: the demand queue never drains. */
		for (int k = 0; k < 2 && nd < DEMAND; k++) {
			init_io(&dem[nd], TIER_PRIO_DEMAND, (uint64_t)nd);
			sched_push(&s, &dem[nd]);
			nd++;
		}
		assert_true(nd < DEMAND); /* the test would stop being a load */
		struct tier_io *g = sched_pop(&s, 0, NULL);
		assert_non_null(g);
		dispatch++;
		if (g->prio == TIER_PRIO_WRITEBACK) {
			assert_ptr_equal(g, &wb[wb_next]); /* FIFO */
			wb_next++;
			if (dispatch - last_wb > max_gap)
				max_gap = dispatch - last_wb;
			last_wb = dispatch;
		}
		sched_done(&s);
	}
	/* Head of write-back served at least every K + (classes - 1) + 1. */
	assert_true(max_gap <= K + SCHED_NPRIO);
	struct sched_stats st;
	sched_get_stats(&s, &st);
	assert_true(st.aged >= NWB);
	/* Demand still got the bulk of the dispatches. */
	assert_true(st.dispatched[TIER_PRIO_DEMAND] > 3 * st.dispatched[TIER_PRIO_WRITEBACK]);
	free(dem);
}

/* Time aging: a write-back older than max_wait_ns jumps ahead of demand. */
static void test_time_aging(void **state)
{
	(void)state;
	struct sched s;
	struct sched_params p = {.limit = 8, .starve_after = 1000, .max_wait_ns = 1000};
	assert_int_equal(sched_init(&s, &p), 0);
	struct tier_io d[3], w;
	init_io(&w, TIER_PRIO_WRITEBACK, 99);
	w.submit_ns = 100;
	sched_push(&s, &w);
	for (int i = 0; i < 3; i++) {
		init_io(&d[i], TIER_PRIO_DEMAND, (uint64_t)i);
		d[i].submit_ns = 1050;
		sched_push(&s, &d[i]);
	}
	assert_ptr_equal(sched_pop(&s, 1050, NULL), &d[0]); /* waited 950 ns: not yet */
	assert_ptr_equal(sched_pop(&s, 1200, NULL), &w);    /* waited 1100 ns */
	assert_ptr_equal(sched_pop(&s, 1200, NULL), &d[1]);
}

/* Time aging serves the oldest expired head, the top class's included: an
 * expired demand read older than a backlog of expired write-backs comes
 * first, not after all of them. */
static void test_time_aging_oldest_first(void **state)
{
	(void)state;
	struct sched s;
	struct sched_params p = {.limit = 1, .starve_after = 1000000, .max_wait_ns = 1000};
	assert_int_equal(sched_init(&s, &p), 0);
	struct tier_io d, w[64];
	init_io(&d, TIER_PRIO_DEMAND, 1000);
	d.submit_ns = 10;
	sched_push(&s, &d);
	for (int i = 0; i < 64; i++) {
		init_io(&w[i], TIER_PRIO_WRITEBACK, (uint64_t)i);
		w[i].submit_ns = 100 + (uint64_t)i;
		sched_push(&s, &w[i]);
	}
	assert_ptr_equal(sched_pop(&s, 1000000, NULL), &d);
	sched_done(&s);
	assert_ptr_equal(sched_pop(&s, 1000001, NULL), &w[0]);
}

/* Bandwidth cap: 1 MB/s with 1000-byte I/Os = one I/O per ms, burst of 2. */
static void test_bandwidth_cap(void **state)
{
	(void)state;
	struct sched s;
	struct sched_params p = {
	    .limit = 100, .max_bandwidth = {1000000, 0}, .io_bytes = 1000, .burst_bytes = 2000};
	assert_int_equal(sched_init(&s, &p), 0);
	struct tier_io io[50];
	for (int i = 0; i < 50; i++) {
		init_io(&io[i], TIER_PRIO_DEMAND, (uint64_t)i);
		sched_push(&s, &io[i]);
	}
	uint64_t now = 1000000000ull, wait = 0;
	assert_non_null(sched_pop(&s, now, &wait));
	assert_non_null(sched_pop(&s, now, &wait)); /* burst of 2 */
	assert_null(sched_pop(&s, now, &wait));
	assert_true(wait > 0 && wait <= 1000000);
	/* Follow the advice for 40 more I/Os: the elapsed time matches the cap. */
	uint64_t t0 = now;
	int got = 0;
	while (got < 40) {
		struct tier_io *g = sched_pop(&s, now, &wait);
		if (g) {
			got++;
			continue;
		}
		assert_true(wait > 0);
		now += wait;
	}
	uint64_t elapsed = now - t0;
	/* 40 I/Os at 1 per ms, the burst already spent: 39..41 ms. */
	assert_true(elapsed >= 39000000ull && elapsed <= 41000000ull);
	struct sched_stats st;
	sched_get_stats(&s, &st);
	assert_true(st.throttled > 0);
}

/* Time for N more I/Os following sched_pop's advice, from NOW. */
static uint64_t paced_ns(struct sched *s, uint64_t now, int n)
{
	uint64_t t0 = now, wait = 0;
	for (int got = 0; got < n;) {
		if (sched_pop(s, now, &wait)) {
			got++;
			sched_done(s);
			continue;
		}
		assert_true(wait > 0);
		now += wait;
	}
	return now - t0;
}

/* A cap changed while I/Os queue: the next ones go at the new rate; one
 * removed lets them all go at once; one set where there was none paces. */
static void test_caps_changed(void **state)
{
	(void)state;
	struct sched s;
	struct sched_params p = {
	    .limit = 100, .max_bandwidth = {1000000, 0}, .io_bytes = 1000, .burst_bytes = 1000};
	assert_int_equal(sched_init(&s, &p), 0);
	struct tier_io io[200];
	for (int i = 0; i < 200; i++) {
		init_io(&io[i], TIER_PRIO_DEMAND, (uint64_t)i);
		sched_push(&s, &io[i]);
	}
	uint64_t now = 1000000000ull;
	uint64_t t = paced_ns(&s, now, 20); /* 1 per ms */
	assert_true(t >= 18000000ull && t <= 21000000ull);
	now += t;
	uint64_t faster[2] = {4000000, 0};
	assert_int_equal(sched_set_caps(&s, faster), 0);
	t = paced_ns(&s, now, 40); /* 4 per ms */
	assert_true(t >= 8000000ull && t <= 11000000ull);
	now += t;
	uint64_t none[2] = {0, 0};
	assert_int_equal(sched_set_caps(&s, none), 0);
	assert_int_equal(paced_ns(&s, now, 40), 0);
	uint64_t slow[2] = {500000, 0};
	assert_int_equal(sched_set_caps(&s, slow), 0);
	t = paced_ns(&s, now, 20); /* 1 per 2 ms */
	assert_true(t >= 36000000ull && t <= 41000000ull);
}

/* The cap is on bytes: I/Os of half a block (a file's last block up to
 * EOF, tier_io.len) go twice as often as whole ones. */
static void test_bandwidth_cap_partial(void **state)
{
	(void)state;
	struct sched s;
	struct sched_params p = {
	    .limit = 100, .max_bandwidth = {8192000, 0}, .io_bytes = 8192, .burst_bytes = 8192};
	assert_int_equal(sched_init(&s, &p), 0);
	struct tier_io io[41];
	for (int i = 0; i < 41; i++) {
		init_io(&io[i], TIER_PRIO_DEMAND, (uint64_t)i);
		io[i].len = 4096;
		sched_push(&s, &io[i]);
	}
	uint64_t now = 1000000000ull, t0 = now, wait = 0;
	for (int got = 0; got < 41;) {
		if (sched_pop(&s, now, &wait)) {
			got++;
			sched_done(&s);
			continue;
		}
		assert_true(wait > 0);
		now += wait;
	}
	/* The first passes at once; 40 more at 0.5 ms each: 19..21 ms. */
	assert_in_range(now - t0, 19000000ull, 21000000ull);
}

/* Reads and writes each have their own bucket, as io.max's rbps and wbps:
 * 40 reads and 40 writes at 1 I/O per ms each take about 40 ms, not the 80
 * one shared bucket would take, and a throttled read at the head of the
 * demand class does not hold back the write-back behind it. */
static void test_caps_per_direction(void **state)
{
	(void)state;
	struct sched s;
	struct sched_params p = {.limit = 100,
				 .max_bandwidth = {1000000, 1000000},
				 .io_bytes = 1000,
				 .burst_bytes = 2000};
	assert_int_equal(sched_init(&s, &p), 0);
	struct tier_io rd[42], wr[42];
	for (int i = 0; i < 42; i++) {
		init_io(&rd[i], TIER_PRIO_DEMAND, (uint64_t)i);
		rd[i].op = TIER_OP_READ;
		sched_push(&s, &rd[i]);
		init_io(&wr[i], TIER_PRIO_WRITEBACK, (uint64_t)(100 + i));
		wr[i].op = TIER_OP_WRITE;
		sched_push(&s, &wr[i]);
	}
	uint64_t now = 1000000000ull, wait = 0;
	/* The read burst first (demand is the top class), then the write
	 * burst while the reads wait, then nothing. */
	assert_ptr_equal(sched_pop(&s, now, &wait), &rd[0]);
	assert_ptr_equal(sched_pop(&s, now, &wait), &rd[1]);
	assert_ptr_equal(sched_pop(&s, now, &wait), &wr[0]);
	assert_ptr_equal(sched_pop(&s, now, &wait), &wr[1]);
	assert_null(sched_pop(&s, now, &wait));
	assert_true(wait > 0 && wait <= 1000000);
	uint64_t t0 = now;
	int nr = 0, nw = 0;
	while (nr + nw < 80) {
		struct tier_io *g = sched_pop(&s, now, &wait);
		if (g) {
			if (g->op == TIER_OP_READ)
				assert_ptr_equal(g, &rd[2 + nr++]);
			else
				assert_ptr_equal(g, &wr[2 + nw++]);
			continue;
		}
		assert_true(wait > 0);
		now += wait;
	}
	uint64_t elapsed = now - t0;
	assert_true(elapsed >= 39000000ull && elapsed <= 41000000ull);

	/* A read cap alone never paces writes. */
	struct sched_params q = {.limit = 100, .max_bandwidth = {1000000, 0}, .io_bytes = 1000};
	assert_int_equal(sched_init(&s, &q), 0);
	for (int i = 0; i < 42; i++) {
		init_io(&wr[i], TIER_PRIO_WRITEBACK, (uint64_t)i);
		wr[i].op = TIER_OP_WRITE;
		sched_push(&s, &wr[i]);
	}
	for (int i = 0; i < 42; i++)
		assert_ptr_equal(sched_pop(&s, now, &wait), &wr[i]);
	struct sched_stats st;
	sched_get_stats(&s, &st);
	assert_int_equal(st.throttled, 0);
}

/* A class whose head waits for its direction's bucket is not passed over:
 * with reads capped and write-back flowing, counting the write dispatches
 * against the read classes aged prefetch past starve_after between two read
 * tokens, and prefetch took almost every token from demand reads (1 of the
 * first 20). */
static void test_throttled_class_not_aged(void **state)
{
	(void)state;
	enum { N = 40, WB_PER_MS = 10 };
	struct sched s;
	/* Reads: one per ms, no burst; writes uncapped. */
	struct sched_params p = {
	    .limit = 100, .max_bandwidth = {1000000, 0}, .io_bytes = 1000, .burst_bytes = 1000};
	assert_int_equal(sched_init(&s, &p), 0);
	static struct tier_io dem[N], pf[N], wb[N * WB_PER_MS];
	for (int i = 0; i < N; i++) {
		init_io(&dem[i], TIER_PRIO_DEMAND, (uint64_t)i);
		sched_push(&s, &dem[i]);
		init_io(&pf[i], TIER_PRIO_PREFETCH, (uint64_t)(1000 + i));
		sched_push(&s, &pf[i]);
	}
	uint64_t now = 1000000000ull, wait;
	int nwb = 0, reads = 0, demand = 0;
	while (reads < 20) {
		for (int k = 0; k < WB_PER_MS; k++) {
			init_io(&wb[nwb], TIER_PRIO_WRITEBACK, (uint64_t)(5000 + nwb));
			wb[nwb].op = TIER_OP_WRITE;
			sched_push(&s, &wb[nwb]);
			nwb++;
		}
		struct tier_io *g;
		while ((g = sched_pop(&s, now, &wait))) {
			if (g->op == TIER_OP_READ) {
				reads++;
				demand += g->prio == TIER_PRIO_DEMAND;
			}
			sched_done(&s);
		}
		now += 1000000;
	}
	/* Aging lets one prefetch through per starve_after (8) demand reads. */
	assert_in_range(demand, 17, 19);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_init_rejects),
	    cmocka_unit_test(test_priorities_and_fifo),
	    cmocka_unit_test(test_inflight_bound),
	    cmocka_unit_test(test_no_starvation),
	    cmocka_unit_test(test_time_aging),
	    cmocka_unit_test(test_time_aging_oldest_first),
	    cmocka_unit_test(test_bandwidth_cap),
	    cmocka_unit_test(test_bandwidth_cap_partial),
	    cmocka_unit_test(test_caps_per_direction),
	    cmocka_unit_test(test_throttled_class_not_aged),
	    cmocka_unit_test(test_caps_changed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
