/*
 * tests/unit/test_tier_posix.c — the posix tier: async I/O through the
 * scheduler (priority order, in-flight bound, max_bandwidth without blocking
 * the submitter), the blocking wrapper, checksum verification, remount,
 * layout checks (tier.info), slab files, O_DIRECT fallback, capacity.
 *
 * Runs in a fresh directory under /tmp (a disk file system here) and, for
 * the O_DIRECT cases, under /dev/shm (tmpfs).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tiers/tier.h"

#define BS   (64 * 1024)
#define SLAB (1024 * 1024) /* 16 blocks per slab */

static char dir[64];

static int make_dir(const char *base)
{
	snprintf(dir, sizeof(dir), "%s/tierfs-test-XXXXXX", base);
	return mkdtemp(dir) ? 0 : -errno;
}

static void remove_dir(void)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || e->d_name[1] == '.'))
			continue;
		char p[512];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

static int setup_tmp(void **state)
{
	(void)state;
	return make_dir("/tmp");
}

static int teardown(void **state)
{
	(void)state;
	remove_dir();
	return 0;
}

static struct tier_params params(uint64_t nblocks)
{
	struct tier_params p = {.name = "nvme0",
				.kind = TIER_POSIX,
				.path = dir,
				.capacity = nblocks * BS,
				.block_size = BS,
				.persistent = true,
				.direct = -1,
				.queue_depth = 8,
				.slab_size = SLAB};
	return p;
}

static struct tier *open_posix(uint64_t nblocks)
{
	struct tier_params p = params(nblocks);
	struct tier *t = NULL;
	assert_int_equal(tier_open(&p, &t), 0);
	return t;
}

static void fill(void *buf, unsigned seed)
{
	uint32_t *w = buf;
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < BS / 4; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		w[i] = x;
	}
}

static int count_slabs(void)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, "slab-", 5) == 0)
			n++;
	closedir(d);
	return n;
}

/* Counts completions; the test thread waits for a target. */
struct counter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done, failed;
};

static void count_cb(struct tier_io *io)
{
	struct counter *c = io->priv;
	pthread_mutex_lock(&c->lock);
	c->done++;
	if (io->result)
		c->failed++;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void wait_for(struct counter *c, int n)
{
	pthread_mutex_lock(&c->lock);
	while (c->done < n)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

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
 * second at a 64 KiB/s read cap, it used to hold 40 writes under a 64 MiB/s
 * write cap too (about 40 ms of budget) until it fired: 1.02 s. A shorter
 * wait now moves it earlier. */
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

/* What the kernel says about O_DIRECT in dir, found independently of the
 * tier code. */
static int dir_accepts_direct(void)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/probe", dir);
	int fd = open(p, O_RDWR | O_CREAT | O_DIRECT, 0644);
	if (fd < 0)
		return 0;
	void *b = aligned_alloc(4096, 4096);
	memset(b, 0, 4096);
	int ok = pwrite(fd, b, 4096, 0) == 4096;
	free(b);
	close(fd);
	unlink(p);
	return ok;
}

/* Write n blocks asynchronously (all submitted at once, so most wait in
 * the backend's queue), read them back asynchronously, compare. */
static void test_async_many(void **state)
{
	(void)state;
	enum { N = 300 };
	struct tier *t = open_posix(N);
	assert_int_equal(tier_slots_total(t), N);
	/* /tmp is ext4 here: O_DIRECT must really be used. */
	assert_int_equal(tier_is_direct(t), dir_accepts_direct());
	assert_true(tier_persistent(t));
	char *data = aligned_alloc(4096, (size_t)N * BS);
	char *back = aligned_alloc(4096, (size_t)N * BS);
	struct tier_io *ios = calloc(N, sizeof(*ios));
	struct counter c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
	for (int i = 0; i < N; i++) {
		int64_t s = tier_alloc(t);
		assert_int_equal(s, i);
		fill(data + (size_t)i * BS, (unsigned)i);
		ios[i] = (struct tier_io){.op = TIER_OP_WRITE,
					  .prio = TIER_PRIO_WRITEBACK,
					  .slot = (uint64_t)s,
					  .buf = data + (size_t)i * BS,
					  .done = count_cb,
					  .priv = &c};
	}
	assert_int_equal(tier_alloc(t), -ENOSPC);
	/* 300 blocks at 16 per slab: 19 slab files, not 300. */
	assert_int_equal(count_slabs(), 19);
	for (int i = 0; i < N; i++)
		assert_int_equal(tier_submit(t, &ios[i]), 0);
	wait_for(&c, N);
	assert_int_equal(c.failed, 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(ios[i].result, 0);
		assert_true(ios[i].csum == tier_checksum(data + (size_t)i * BS, BS));
	}
	assert_int_equal(tier_sync(t), 0);

	memset(back, 0, (size_t)N * BS);
	c.done = 0;
	for (int i = N - 1; i >= 0; i--) {
		ios[i].op = TIER_OP_READ;
		ios[i].prio = TIER_PRIO_PREFETCH;
		ios[i].buf = back + (size_t)i * BS;
		assert_int_equal(tier_submit(t, &ios[i]), 0);
	}
	wait_for(&c, N);
	assert_int_equal(c.failed, 0);
	assert_memory_equal(back, data, (size_t)N * BS);

	struct tier_stats st;
	tier_get_stats(t, &st);
	assert_int_equal(st.writes, N);
	assert_int_equal(st.reads, N);
	assert_int_equal(st.bytes_written, (uint64_t)N * BS);
	assert_int_equal(st.bytes_read, (uint64_t)N * BS);
	assert_int_equal(st.errors, 0);
	assert_int_equal(st.csum_errors, 0);
	assert_true(st.read_ns > 0 && st.write_ns > 0);

	/* The last slab only holds the 12 slots left. */
	struct stat sb;
	char p[128];
	snprintf(p, sizeof(p), "%s/slab-00018.dat", dir);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_size, 12 * BS);
	snprintf(p, sizeof(p), "%s/slab-00000.dat", dir);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_size, SLAB);
	/* Preallocated, not sparse. */
	assert_true((uint64_t)sb.st_blocks * 512 >= SLAB);
	tier_close(t);
	free(ios);
	free(data);
	free(back);
}

/* tier_close waits for everything submitted. */
static void test_close_waits(void **state)
{
	(void)state;
	enum { N = 64 };
	struct tier *t = open_posix(N);
	char *data = aligned_alloc(4096, (size_t)N * BS);
	struct tier_io *ios = calloc(N, sizeof(*ios));
	struct counter c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
	for (int i = 0; i < N; i++) {
		fill(data + (size_t)i * BS, (unsigned)i + 1000);
		ios[i] = (struct tier_io){.op = TIER_OP_WRITE,
					  .slot = (uint64_t)i,
					  .buf = data + (size_t)i * BS,
					  .done = count_cb,
					  .priv = &c};
		assert_int_equal(tier_submit(t, &ios[i]), 0);
	}
	tier_close(t);
	assert_int_equal(c.done, N);
	assert_int_equal(c.failed, 0);
	free(ios);
	free(data);
}

static void test_rw_checksum_mismatch(void **state)
{
	(void)state;
	struct tier *t = open_posix(32);
	char *buf = aligned_alloc(4096, BS), *out = aligned_alloc(4096, BS);
	fill(buf, 42);
	uint64_t slot = 21, csum = 0;
	assert_int_equal(tier_reserve(t, slot), 0);
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, slot, buf, 0, &csum), 0);
	assert_true(csum == tier_checksum(buf, BS));
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, slot, out, 0, &csum), 0);
	assert_memory_equal(out, buf, BS);
	assert_int_equal(tier_sync(t), 0);

	/* Corrupt one byte of slot 21 = slab 1, index 5. */
	char p[128];
	snprintf(p, sizeof(p), "%s/slab-00001.dat", dir);
	int fd = open(p, O_RDWR);
	assert_true(fd >= 0);
	char byte = (char)(buf[777] ^ 0x10);
	assert_int_equal(pwrite(fd, &byte, 1, 5 * BS + 777), 1);
	assert_int_equal(fsync(fd), 0);
	close(fd);

	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, slot, out, 0, &csum), -EIO);
	struct tier_stats st;
	tier_get_stats(t, &st);
	assert_int_equal(st.csum_errors, 1);
	assert_int_equal(st.errors, 1);
	assert_int_equal(st.reads, 1);
	/* A wrong expected checksum is caught the same way. */
	uint64_t wrong = csum ^ 1;
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, 0, out, 0, &wrong), -EIO);
	tier_close(t);
	free(buf);
	free(out);
}

/* Once allocations reach the middle of a slab, the next slab is made in
 * the background, whole, before any slot of it is allocated: tier_alloc
 * runs under the file system's lock, where a 1 GiB fallocate stalled every
 * request. Slabs made so, and slabs an allocation reaches while one is
 * being made, hold their blocks like any other. */
static void test_slab_ahead(void **state)
{
	(void)state;
	struct tier *t = open_posix(4 * (SLAB / BS)); /* 4 slabs of 16 */
	for (int i = 0; i < SLAB / BS / 2; i++)
		assert_int_equal(tier_alloc(t), i);
	assert_int_equal(count_slabs(), 1); /* slot 7: not past the middle yet */
	assert_int_equal(tier_alloc(t), SLAB / BS / 2);
	char path[128];
	snprintf(path, sizeof(path), "%s/slab-00001.dat", dir);
	struct stat st = {0};
	for (int ms = 0; ms < 10000; ms += 10) {
		if (stat(path, &st) == 0 && st.st_size == SLAB)
			break;
		usleep(10000);
	}
	assert_int_equal(st.st_size, SLAB);
	assert_int_equal(tier_slots_used(t), SLAB / BS / 2 + 1);
	/* The rest at once: the allocations race the thread for slabs 2, 3. */
	for (uint64_t i = SLAB / BS / 2 + 1; i < 4 * (SLAB / BS); i++)
		assert_int_equal(tier_alloc(t), (int64_t)i);
	assert_int_equal(tier_alloc(t), -ENOSPC);
	char *buf = aligned_alloc(4096, BS), *got = aligned_alloc(4096, BS);
	uint64_t csum[4 * (SLAB / BS)];
	for (unsigned i = 0; i < 4 * (SLAB / BS); i++) {
		fill(buf, i);
		assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, i, buf, 0, &csum[i]),
				 0);
	}
	for (unsigned i = 0; i < 4 * (SLAB / BS); i++) {
		fill(buf, i);
		assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, i, got, 0, &csum[i]),
				 0);
		assert_memory_equal(got, buf, BS);
	}
	tier_close(t);
	assert_int_equal(count_slabs(), 4); /* none beyond the capacity */
	free(buf);
	free(got);
}

static void test_reopen(void **state)
{
	(void)state;
	enum { N = 40 };
	char *data = aligned_alloc(4096, (size_t)N * BS), *out = aligned_alloc(4096, BS);
	uint64_t csum[N];
	struct tier *t = open_posix(N);
	for (int i = 0; i < N; i++) {
		fill(data + (size_t)i * BS, (unsigned)i + 7);
		assert_int_equal(tier_alloc(t), i);
		assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_WRITEBACK, (uint64_t)i,
					 data + (size_t)i * BS, 0, &csum[i]),
				 0);
	}
	assert_int_equal(tier_sync(t), 0);
	tier_close(t);

	/* slab_size 0 adopts the size the directory was formatted with. */
	struct tier_params p = params(N);
	p.slab_size = 0;
	assert_int_equal(tier_open(&p, &t), 0);
	assert_int_equal(tier_slots_used(t), 0);
	for (int i = N - 1; i >= 0; i--) {
		assert_int_equal(tier_reserve(t, (uint64_t)i), 0);
		assert_int_equal(
		    tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, (uint64_t)i, out, 0, &csum[i]), 0);
		assert_memory_equal(out, data + (size_t)i * BS, BS);
	}
	tier_close(t);

	/* A different block size or slab size is refused. */
	p = params(N);
	p.block_size = 2 * BS;
	t = (struct tier *)1;
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	assert_null(t);
	p = params(N);
	p.slab_size = 2 * SLAB;
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	free(data);
	free(out);
}

/* A tier directory that the tier creates is the daemon user's alone, as
 * its files are. */
static void test_dir_created_private(void **state)
{
	(void)state;
	char sub[128], path[160];
	snprintf(sub, sizeof(sub), "%s/fresh", dir);
	struct tier_params p = params(4);
	p.path = sub;
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	struct stat st;
	assert_int_equal(stat(sub, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	tier_close(t);
	snprintf(path, sizeof(path), "%s/tier.info", sub);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(sub), 0);
}

/* tier_sync_dir: the directory and its parent, whatever the spelling. */
static void test_sync_dir(void **state)
{
	(void)state;
	char sub[128], trail[160];
	snprintf(sub, sizeof(sub), "%s/d", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(tier_sync_dir(sub), 0);
	snprintf(trail, sizeof(trail), "%s//", sub);
	assert_int_equal(tier_sync_dir(trail), 0);
	assert_int_equal(tier_sync_dir("/"), 0);
	assert_int_equal(tier_sync_dir("/tmp"), 0);
	char cwd[PATH_MAX];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0);
	assert_int_equal(tier_sync_dir("d"), 0); /* parent "." */
	assert_int_equal(tier_sync_dir("missing"), -ENOENT);
	assert_int_equal(chdir(cwd), 0);
	snprintf(trail, sizeof(trail), "%s/missing/d", dir);
	assert_int_equal(tier_sync_dir(trail), -ENOENT);
	assert_int_equal(rmdir(sub), 0);
}

static void test_capacity(void **state)
{
	(void)state;
	/* 10.5 blocks round down to 10. */
	struct tier_params p = params(10);
	p.capacity += BS / 2;
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	assert_int_equal(tier_slots_total(t), 10);
	/* Slabs are created on allocation, not at open. */
	assert_int_equal(count_slabs(), 0);
	char *buf = aligned_alloc(4096, BS);
	fill(buf, 1);
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, 10, buf, 0, NULL), -ERANGE);
	assert_int_equal(tier_reserve(t, 10), -ERANGE);
	for (int i = 0; i < 10; i++)
		assert_true(tier_alloc(t) >= 0);
	assert_int_equal(tier_alloc(t), -ENOSPC);
	assert_int_equal(count_slabs(), 1);
	/* Optimizer state: readable only by the daemon's user, whatever the
	 * mount's own permissions. */
	char path[128];
	struct stat st;
	snprintf(path, sizeof(path), "%s/slab-00000.dat", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(path, sizeof(path), "%s/tier.info", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, 9, buf, 0, NULL), 0);
	tier_close(t);

	/* Slab size must be a multiple of the block size. */
	remove_dir();
	assert_int_equal(make_dir("/tmp"), 0);
	p = params(10);
	p.slab_size = BS + 4096;
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	p.path = NULL;
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	free(buf);
}

/* tmpfs: O_DIRECT auto falls back where the kernel refuses it (tmpfs
 * accepts O_DIRECT since Linux 6.6); direct=1 then fails clearly. */
static void test_tmpfs_direct(void **state)
{
	(void)state;
	remove_dir();
	if (make_dir("/dev/shm")) {
		assert_int_equal(make_dir("/tmp"), 0);
		skip();
	}
	int kernel_direct = dir_accepts_direct();
	struct tier_params p = params(16);
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	assert_int_equal(tier_is_direct(t), kernel_direct);
	char *buf = aligned_alloc(4096, BS), *out = aligned_alloc(4096, BS);
	fill(buf, 3);
	uint64_t csum;
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, 3, buf, 0, &csum), 0);
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, 3, out, 0, &csum), 0);
	assert_memory_equal(out, buf, BS);
	tier_close(t);

	p.direct = 1;
	t = NULL;
	if (kernel_direct) {
		assert_int_equal(tier_open(&p, &t), 0);
		assert_true(tier_is_direct(t));
		tier_close(t);
	} else {
		assert_int_equal(tier_open(&p, &t), -EINVAL);
		assert_null(t);
	}
	p.direct = 0;
	assert_int_equal(tier_open(&p, &t), 0);
	assert_false(tier_is_direct(t));
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, 3, out, 0, &csum), 0);
	assert_memory_equal(out, buf, BS);
	tier_close(t);
	free(buf);
	free(out);
}

/* A file's last block moves its bytes up to EOF only (tier_io.len): the
 * checksum is the whole block's with the rest zeros, whatever the buffer
 * holds there, and a read of that length fills the rest with zeros. A
 * longer stale tail in the slot, from the slot's last user, must not
 * show. */
static void test_partial_len(void **state)
{
	(void)state;
	struct tier *t = open_posix(32);
	char *buf = aligned_alloc(4096, BS), *out = aligned_alloc(4096, BS);
	char *want = aligned_alloc(4096, BS);
	uint64_t slot = 7, csum = 0, full = 0;
	assert_int_equal(tier_reserve(t, slot), 0);
	fill(buf, 9); /* the slot's last user: a whole block */
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, slot, buf, 0, &full), 0);
	fill(buf, 10); /* bytes past 8 KiB stand for garbage past EOF */
	memcpy(want, buf, 8192);
	memset(want + 8192, 0, BS - 8192);
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, slot, buf, 8192, &csum), 0);
	assert_true(csum == tier_checksum(want, BS));
	assert_true(csum == tier_checksum_block(buf, 8192, BS));
	memset(out, 0x5a, BS);
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, slot, out, 8192, &csum), 0);
	assert_memory_equal(out, want, BS);
	/* Read whole, the slot's stale tail fails the checksum: never
	 * returned as the block's bytes. */
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, slot, out, 0, &csum), -EIO);
	struct tier_stats st;
	tier_get_stats(t, &st);
	assert_int_equal(st.bytes_written, (uint64_t)BS + 8192);
	assert_int_equal(st.bytes_read, 8192);
	/* Lengths that are not whole pages of the block are refused. */
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, slot, out, 100, &csum),
			 -EINVAL);
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, slot, out, BS + 4096, &csum),
			 -EINVAL);
	tier_close(t);
	free(buf);
	free(out);
	free(want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_async_many, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_close_waits, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_rw_checksum_mismatch, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_partial_len, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_reopen, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_slab_ahead, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_capacity, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_dir_created_private, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_sync_dir, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_tmpfs_direct, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_demand_first, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_inflight_bound, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_bandwidth_cap, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_take, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_caps_timer_moves_earlier, setup_tmp, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
