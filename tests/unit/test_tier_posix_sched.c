/*
 * tests/unit/test_tier_posix_sched.c — the posix tier's async I/O through
 * the scheduler: priority order (a demand read overtakes queued
 * write-backs), the in-flight bound, max_bandwidth pacing the device
 * without blocking the submitter, idle-time accounting, and the one timer
 * that resumes throttled queues. The storage side has test_tier_posix.c.
 *
 * Runs in a fresh directory under /tmp.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tier_posix_fixture.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Records the completion order (indices into ios). The gate_a-th and
 * gate_b-th completions (0-based, -1 = none) hold the completion thread
 * until the test releases them: while held, no completion can dispatch, so
 * the test sees exactly what the backend has issued. */
struct order {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct tier_io *ios;
	int n, failed;
	int seq[256];
	int gate_a, gate_b;
	int holding; /* completion number now held, -1 = none */
	int release; /* completion number the test allows to go on */
};

static void order_cb(struct tier_io *io)
{
	struct order *o = io->priv;
	pthread_mutex_lock(&o->lock);
	int k = o->n;
	if (k < 256)
		o->seq[k] = (int)(io - o->ios);
	o->n++;
	if (io->result)
		o->failed++;
	if (k == o->gate_a || k == o->gate_b) {
		o->holding = k;
		pthread_cond_broadcast(&o->cond);
		while (o->release != k)
			pthread_cond_wait(&o->cond, &o->lock);
		o->holding = -1;
	}
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->lock);
}

static void order_init(struct order *o, struct tier_io *ios)
{
	*o = (struct order){.ios = ios, .gate_a = -1, .gate_b = -1, .holding = -1, .release = -1};
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->cond, NULL);
}

static void order_wait_held(struct order *o, int k)
{
	pthread_mutex_lock(&o->lock);
	while (o->holding != k)
		pthread_cond_wait(&o->cond, &o->lock);
	pthread_mutex_unlock(&o->lock);
}

static void order_release(struct order *o, int k)
{
	pthread_mutex_lock(&o->lock);
	o->release = k;
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->lock);
}

static void order_wait_for(struct order *o, int n)
{
	pthread_mutex_lock(&o->lock);
	while (o->n < n)
		pthread_cond_wait(&o->cond, &o->lock);
	pthread_mutex_unlock(&o->lock);
}

/* queue_depth 1, a backlog of background write-backs, then a demand read:
 * the read overtakes the queued write-backs. The first write-back's
 * completion is held until the read is submitted, so the backlog is real
 * whatever the disk speed. */
static void test_demand_first(void **state)
{
	(void)state;
	enum { N = 32, DEMAND = N };
	struct tier_params p = params(N + 1);
	p.queue_depth = 1;
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	char *data = aligned_alloc(4096, (size_t)(N + 1) * BS);
	char *back = aligned_alloc(4096, BS);
	for (int i = 0; i <= N; i++) {
		assert_int_equal(tier_alloc(t), i);
		fill(data + (size_t)i * BS, (unsigned)i + 500);
	}
	/* The block the demand read will fetch. */
	uint64_t csum;
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, DEMAND,
				 data + (size_t)DEMAND * BS, 0, &csum),
			 0);

	struct tier_io ios[N + 1];
	struct order o;
	order_init(&o, ios);
	o.gate_a = 0;
	for (int i = 0; i < N; i++) {
		ios[i] = (struct tier_io){.op = TIER_OP_WRITE,
					  .prio = TIER_PRIO_WRITEBACK,
					  .slot = (uint64_t)i,
					  .buf = data + (size_t)i * BS,
					  .done = order_cb,
					  .priv = &o};
		assert_int_equal(tier_submit(t, &ios[i]), 0);
	}
	order_wait_held(&o, 0);
	ios[DEMAND] = (struct tier_io){.op = TIER_OP_READ,
				       .prio = TIER_PRIO_DEMAND,
				       .slot = DEMAND,
				       .buf = back,
				       .csum = csum,
				       .done = order_cb,
				       .priv = &o};
	assert_int_equal(tier_submit(t, &ios[DEMAND]), 0);
	order_release(&o, 0);
	order_wait_for(&o, N + 1);
	assert_int_equal(o.failed, 0);
	assert_memory_equal(back, data + (size_t)DEMAND * BS, BS);

	int pos = -1;
	for (int k = 0; k < N + 1; k++)
		if (o.seq[k] == DEMAND)
			pos = k;
	/* At most the write-back that was done and the one in flight (the
	 * single queue_depth place) precede it; N - 2 queued ones follow. */
	assert_in_range(pos, 1, 2);
	/* Write-backs keep their FIFO order among themselves. */
	for (int k = 1, last = -1; k < N + 1; k++) {
		if (o.seq[k] == DEMAND)
			continue;
		assert_true(o.seq[k] > last);
		last = o.seq[k];
	}
	tier_close(t);
	free(data);
	free(back);
}

/* Slots of the slab file at dir/slab-00000.dat (and following) that hold
 * non-zero data: written by the device, seen independently of the tier. */
static int count_written(int nslots)
{
	char *b = malloc(BS);
	int n = 0;
	for (int i = 0; i < nslots; i++) {
		char p[128];
		snprintf(p, sizeof(p), "%s/slab-%05d.dat", dir, i / (SLAB / BS));
		int fd = open(p, O_RDONLY);
		assert_true(fd >= 0);
		assert_int_equal(pread(fd, b, BS, (off_t)(i % (SLAB / BS)) * BS), BS);
		close(fd);
		for (int j = 0; j < BS; j++) {
			if (b[j]) {
				n++;
				break;
			}
		}
	}
	free(b);
	return n;
}

/* In flight never exceeds queue_depth. While completion k is held, the
 * backend can have issued at most queue_depth + k + 1 I/Os (the k + 1
 * finished ones each freed a place); so after the device has had ample
 * time, exactly that many slots hold data, not the N submitted. */
static void test_inflight_bound(void **state)
{
	(void)state;
	enum { N = 64, Q = 4, K = 24 };
	struct tier_params p = params(N);
	p.queue_depth = Q;
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	char *data = aligned_alloc(4096, (size_t)N * BS);
	for (int i = 0; i < N; i++) {
		assert_int_equal(tier_alloc(t), i);
		fill(data + (size_t)i * BS, (unsigned)i + 900);
	}
	assert_int_equal(count_written(N), 0);
	struct tier_io ios[N];
	struct order o;
	order_init(&o, ios);
	o.gate_a = 0;
	o.gate_b = K;
	for (int i = 0; i < N; i++) {
		ios[i] = (struct tier_io){.op = TIER_OP_WRITE,
					  .prio = (enum tier_prio)(i % 4),
					  .slot = (uint64_t)i,
					  .buf = data + (size_t)i * BS,
					  .done = order_cb,
					  .priv = &o};
		assert_int_equal(tier_submit(t, &ios[i]), 0);
	}
	order_wait_held(&o, 0);
	usleep(100 * 1000);
	int w = count_written(N);
	assert_in_range(w, Q, Q + 1);
	order_release(&o, 0);
	order_wait_held(&o, K);
	usleep(100 * 1000);
	w = count_written(N);
	assert_in_range(w, Q + K, Q + K + 1);
	order_release(&o, K);
	order_wait_for(&o, N);
	assert_int_equal(o.failed, 0);
	assert_int_equal(count_written(N), N);
	tier_close(t);
	free(data);
}

/* max_bandwidth paces the device, not the caller: 32 blocks of 64 KiB at
 * 2 MiB/s take about a second, yet every tier_submit returns at once. */
static void test_bandwidth_cap(void **state)
{
	(void)state;
	enum { N = 32 };
	struct tier_params p = params(N);
	p.queue_depth = 2;
	p.max_bandwidth[TIER_OP_WRITE] = 2 << 20;
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	assert_true(tier_idle_ns(t) == UINT64_MAX); /* never had I/O */
	char *data = aligned_alloc(4096, (size_t)N * BS);
	for (int i = 0; i < N; i++) {
		assert_int_equal(tier_alloc(t), i);
		fill(data + (size_t)i * BS, (unsigned)i + 77);
	}
	struct tier_io ios[N];
	struct counter c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
	double t0 = now_s(), worst = 0;
	for (int i = 0; i < N; i++) {
		ios[i] = (struct tier_io){.op = TIER_OP_WRITE,
					  .prio = TIER_PRIO_WRITEBACK,
					  .slot = (uint64_t)i,
					  .buf = data + (size_t)i * BS,
					  .done = count_cb,
					  .priv = &c};
		double s0 = now_s();
		assert_int_equal(tier_submit(t, &ios[i]), 0);
		double d = now_s() - s0;
		if (d > worst)
			worst = d;
	}
	double submitted = now_s() - t0;
	/* About a second of writes queued under the cap: not idle, and
	 * counted as writes in flight (all but the bucket's burst), no reads. */
	assert_int_equal(tier_idle_ns(t), 0);
	assert_in_range(tier_busy(t, TIER_OP_WRITE), N - 4, N);
	assert_int_equal(tier_busy(t, TIER_OP_READ), 0);
	wait_for(&c, N);
	assert_int_equal(tier_busy(t, TIER_OP_WRITE), 0);
	double dt = now_s() - t0;
	assert_int_equal(c.failed, 0);
	assert_true(worst < 0.010);
	assert_true(submitted < 0.1);
	/* 2 MiB at 2 MiB/s, less the two-block burst the bucket allows. */
	assert_true(dt >= 0.9);
	assert_true(dt < 3.0);
	/* Writes were queued or in flight the whole time, reads never; the
	 * write side's busy time stops when its last write completes. */
	struct tier_stats st, later;
	tier_get_stats(t, &st);
	assert_true(st.busy_ns[TIER_OP_WRITE] >= 850000000ull);
	assert_true(st.busy_ns[TIER_OP_WRITE] <= (uint64_t)(dt * 1e9));
	assert_int_equal(st.busy_ns[TIER_OP_READ], 0);
	usleep(50000);
	tier_get_stats(t, &later);
	assert_int_equal(later.busy_ns[TIER_OP_WRITE], st.busy_ns[TIER_OP_WRITE]);
	uint64_t idle = tier_idle_ns(t);
	assert_true(idle >= 50000000ull && idle < 10000000000ull);
	/* And a read-back through the same cap still works (timer path). */
	char *back = aligned_alloc(4096, BS);
	uint64_t csum = ios[5].csum;
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, 5, back, 0, &csum), 0);
	assert_memory_equal(back, data + 5 * BS, BS);
	tier_get_stats(t, &later);
	assert_true(later.busy_ns[TIER_OP_READ] > 0);
	assert_int_equal(later.busy_ns[TIER_OP_WRITE], st.busy_ns[TIER_OP_WRITE]);
	tier_close(t);
	free(back);
	free(data);
}

/* tier_idle_take: the longest time without I/O that ended since the last
 * take, counted from that take at the earliest; the time idle now is
 * tier_idle_ns's, not its. */
static void test_idle_take(void **state)
{
	(void)state;
	struct tier_params p = params(4);
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	char *data = aligned_alloc(4096, BS);
	fill(data, 3);
	assert_int_equal(tier_alloc(t), 0);
	assert_int_equal(tier_idle_take(t), 0); /* never had I/O */
	uint64_t csum = 0;
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_WRITEBACK, 0, data, 0, &csum), 0);
	usleep(60000);
	double k0 = now_s();
	assert_int_equal(tier_idle_take(t), 0); /* idle still: not ended */
	double k1 = now_s();
	usleep(40000);
	double r0 = now_s();
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, 0, data, 0, &csum), 0);
	double r1 = now_s();
	/* Over 100 ms idle, but only the time since the last take counts. */
	double idle = (double)tier_idle_take(t) / 1e9;
	assert_true(idle >= r0 - k1 && idle <= r1 - k0);
	assert_int_equal(tier_idle_take(t), 0); /* taken */
	/* Two idle times: the longer counts. */
	usleep(50000);
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, 0, data, 0, &csum), 0);
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, 0, data, 0, &csum), 0);
	assert_true(tier_idle_take(t) >= 50000000ull);
	tier_close(t);
	free(data);
}

/* One timer resumes a throttled queue. Armed for a read that waits about a
 * second at a 64 KiB/s read cap, it must not hold 40 writes under a
 * 64 MiB/s write cap too (about 40 ms of budget) until it fires: a shorter
 * wait moves it earlier. */
static void test_caps_timer_moves_earlier(void **state)
{
	(void)state;
	enum { NR = 9, NW = 40 };
	struct tier_params p = params(NW + 1);
	p.max_bandwidth[TIER_OP_READ] = BS; /* one read a second */
	p.max_bandwidth[TIER_OP_WRITE] = 64 << 20;
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	char *data = aligned_alloc(4096, (size_t)(NW + 1) * BS);
	char *rbuf = aligned_alloc(4096, (size_t)NR * BS);
	for (int i = 0; i < NW + 1; i++) {
		assert_int_equal(tier_alloc(t), i);
		fill(data + (size_t)i * BS, (unsigned)i + 5);
	}
	uint64_t csum = 0;
	assert_int_equal(
	    tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, NW, data + (size_t)NW * BS, 0, &csum), 0);
	usleep(50 * 1000); /* the write bucket refills */
	/* The read burst (queue_depth reads) passes; the 9th arms the timer
	 * for about a second. */
	struct tier_io rd[NR];
	struct counter cr = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
	for (int i = 0; i < NR; i++) {
		rd[i] = (struct tier_io){.op = TIER_OP_READ,
					 .prio = TIER_PRIO_PREFETCH,
					 .slot = NW,
					 .buf = rbuf + (size_t)i * BS,
					 .csum = csum,
					 .done = count_cb,
					 .priv = &cr};
		assert_int_equal(tier_submit(t, &rd[i]), 0);
	}
	wait_for(&cr, NR - 1);
	struct tier_io wr[NW];
	struct counter cw = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
	double t0 = now_s();
	for (int i = 0; i < NW; i++) {
		wr[i] = (struct tier_io){.op = TIER_OP_WRITE,
					 .prio = TIER_PRIO_WRITEBACK,
					 .slot = (uint64_t)i,
					 .buf = data + (size_t)i * BS,
					 .done = count_cb,
					 .priv = &cw};
		assert_int_equal(tier_submit(t, &wr[i]), 0);
	}
	wait_for(&cw, NW);
	double dt = now_s() - t0;
	wait_for(&cr, NR);
	assert_int_equal(cw.failed + cr.failed, 0);
	tier_close(t);
	free(rbuf);
	free(data);
	assert_true(dt < 0.5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_demand_first, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_inflight_bound, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_bandwidth_cap, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_take, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_caps_timer_moves_earlier, setup_tmp, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
