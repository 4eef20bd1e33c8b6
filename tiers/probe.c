/*
 * tiers/probe.c — tier bandwidth probe (see probe.h). It drives the tier
 * exactly as the file system does: async tier_submit with queue_depth
 * requests in flight, page-aligned block buffers, checksums on, so the
 * figure is what striping will actually get, not a raw dd number.
 *
 * Each in-flight lane owns one buffer and one tier_io and starts its next
 * slot from its completion callback (tier_submit never blocks), so the queue
 * stays full without a round trip through the calling thread.
 *
 * The buffers come from tier_mem_map, as the RAM tier's slots do, which are
 * what the file system reads into and writes from: with 4 KiB pages a 1 MiB
 * O_DIRECT request is split into many segments, and a disk may then read
 * well below the rate the mount's own reads get. Striping in proportion to
 * such a figure would put too large a share on a slower second tier.
 */
#include "tiers/probe.h"
#include "tiers/backend.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_MIN_SLOTS 4

struct probe_run;

struct probe_lane {
	struct tier_io io;
	struct probe_run *run;
	void *buf;
	uint64_t idx; /* index into run->slots of the I/O in io */
};

struct probe_run {
	/* Immutable during a pass, but op, which changes between passes. */
	struct tier *t;
	enum tier_op op;
	const uint64_t *slots;
	uint64_t *csums;  /* per slot: written by the write pass's completions
			     (each index by one lane), read by the read pass */
	uint32_t *stored; /* per slot, as csums: tier_io.stored_len */
	uint64_t n;
	/* Guarded by lock. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t next;	   /* index of the next slot to start */
	uint64_t finished; /* I/Os completed or refused */
	int err;	   /* first error */
};

static void probe_done(struct tier_io *io);

/* Start the next slot on lane l, if any is left. Called with run->lock
 * held; drops it around tier_submit, since the completion (which takes the
 * lock) may run before tier_submit returns. */
static void lane_start(struct probe_run *run, struct probe_lane *l)
{
	while (run->next < run->n && !run->err) {
		uint64_t i = run->next++;
		l->idx = i;
		l->io = (struct tier_io){
		    .op = run->op,
		    .prio = TIER_PRIO_DEMAND,
		    .slot = run->slots[i],
		    .buf = l->buf,
		    .csum = run->op == TIER_OP_READ ? run->csums[i] : 0,
		    .stored_len = run->op == TIER_OP_READ ? run->stored[i] : 0,
		    .done = probe_done,
		    .priv = l,
		};
		pthread_mutex_unlock(&run->lock);
		int rc = tier_submit(run->t, &l->io);
		pthread_mutex_lock(&run->lock);
		if (rc == 0)
			return;
		tier_log(run->t, "bandwidth probe: slot %" PRIu64 ": submit refused: %s",
			 run->slots[i], strerror(-rc));
		if (!run->err)
			run->err = rc;
		run->finished++;
		pthread_cond_broadcast(&run->cond);
	}
}

static void probe_done(struct tier_io *io)
{
	struct probe_lane *l = io->priv;
	struct probe_run *run = l->run;
	pthread_mutex_lock(&run->lock);
	if (io->result && !run->err)
		run->err = io->result;
	if (io->op == TIER_OP_WRITE) {
		run->csums[l->idx] = io->csum;
		run->stored[l->idx] = io->stored_len;
	}
	run->finished++;
	pthread_cond_broadcast(&run->cond);
	if (!run->err)
		lane_start(run, l);
	pthread_mutex_unlock(&run->lock);
}

/* One pass over every slot with nlanes I/Os in flight. Returns 0 or the
 * first error; *ns gets the elapsed time. */
static int probe_pass(struct probe_run *run, struct probe_lane *lanes, unsigned nlanes,
		      enum tier_op op, uint64_t *ns)
{
	uint64_t t0 = tier_now_ns();
	pthread_mutex_lock(&run->lock);
	run->op = op;
	run->next = 0;
	run->finished = 0;
	for (unsigned k = 0; k < nlanes && !run->err; k++)
		lane_start(run, &lanes[k]);
	/* After an error lanes stop starting new I/O: wait for the ones
	 * started (next counts them), not for all n. */
	while (run->finished < run->next)
		pthread_cond_wait(&run->cond, &run->lock);
	int err = run->err;
	pthread_mutex_unlock(&run->lock);
	*ns = tier_now_ns() - t0;
	return err;
}

/* A device idle before the probe, or a throttle with a burst allowance (a
 * blkio cap lets a first burst through well above the cap), runs its
 * first megabytes faster than it can keep up. One untimed pass absorbs
 * that; timed passes then repeat for at least PROBE_MIN_NS (at most
 * PROBE_MAX_PASSES), so that the figure is the steady rate striping gets. */
#define PROBE_MIN_NS	 (200 * 1000000ULL)
#define PROBE_MAX_PASSES 16

/* A write pass ends with a tier_sync, timed with it: on a buffered tier,
 * passes that rewrite the same slots in the page cache would otherwise be
 * credited with bytes the device never wrote. */
static int probe_pass_synced(struct probe_run *run, struct probe_lane *lanes, unsigned nlanes,
			     enum tier_op op, uint64_t *ns)
{
	int rc = probe_pass(run, lanes, nlanes, op, ns);
	if (rc || op != TIER_OP_WRITE)
		return rc;
	uint64_t t0 = tier_now_ns();
	rc = tier_sync(run->t);
	*ns += tier_now_ns() - t0;
	if (rc)
		tier_log(run->t, "bandwidth probe: sync failed: %s", strerror(-rc));
	return rc;
}

/* A warm-up pass of OP, then timed passes: *bytes and *ns get what the timed
 * passes moved and took. */
static int probe_timed(struct probe_run *run, struct probe_lane *lanes, unsigned nlanes,
		       enum tier_op op, uint64_t *bytes, uint64_t *ns)
{
	uint64_t pns;
	int rc = probe_pass_synced(run, lanes, nlanes, op, &pns);
	*bytes = *ns = 0;
	for (int p = 0; !rc && p < PROBE_MAX_PASSES && *ns < PROBE_MIN_NS; p++) {
		rc = probe_pass_synced(run, lanes, nlanes, op, &pns);
		*ns += pns;
		*bytes += run->n * run->t->block_size;
	}
	return rc;
}

/* Incompressible, non-zero data: what the optimizer state looks like, and
 * what a compressing codec cannot shortcut. */
static void fill_random(void *buf, size_t len, uint64_t seed)
{
	uint64_t *w = buf;
	uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
	for (size_t i = 0; i < len / sizeof(*w); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		w[i] = x | 1;
	}
}

static uint64_t rate(uint64_t bytes, uint64_t ns)
{
	if (ns == 0)
		ns = 1;
	return (uint64_t)((unsigned __int128)bytes * 1000000000u / ns);
}

int tier_probe_bandwidth(struct tier *t, uint64_t bytes, uint64_t *read_bps, uint64_t *write_bps)
{
	if (t->kind == TIER_RAM) {
		tier_log(t, "bandwidth probe: not meaningful on a RAM tier");
		return -EINVAL;
	}
	uint32_t bs = t->block_size;
	uint64_t want = bytes / bs;
	if (want < PROBE_MIN_SLOTS)
		want = PROBE_MIN_SLOTS;
	uint64_t *slots = malloc(want * sizeof(*slots));
	uint64_t *csums = calloc(want, sizeof(*csums));
	unsigned nlanes = t->queue_depth;
	struct probe_lane *lanes = calloc(nlanes, sizeof(*lanes));
	uint32_t *stored = calloc(want, sizeof(*stored));
	struct probe_run run = {.t = t, .slots = slots, .csums = csums, .stored = stored};
	struct tier_mem mem = {0};
	pthread_mutex_init(&run.lock, NULL);
	pthread_cond_init(&run.cond, NULL);
	int rc = 0;
	if (!slots || !csums || !stored || !lanes) {
		rc = -ENOMEM;
		goto out;
	}
	while (run.n < want) {
		int64_t s = tier_alloc(t);
		if (s == -ENOSPC)
			break;
		if (s < 0) {
			rc = (int)s;
			tier_log(t, "bandwidth probe: cannot allocate a slot: %s", strerror(-rc));
			goto out;
		}
		slots[run.n++] = (uint64_t)s;
	}
	if (run.n < PROBE_MIN_SLOTS) {
		tier_log(t, "bandwidth probe: only %" PRIu64 " free slots, at least %d needed",
			 run.n, PROBE_MIN_SLOTS);
		rc = -ENOSPC;
		goto out;
	}
	if (nlanes > run.n)
		nlanes = (unsigned)run.n;
	rc = tier_mem_map(&mem, (size_t)nlanes * bs);
	if (rc) {
		tier_log(t, "bandwidth probe: cannot map %u buffers: %s", nlanes, strerror(-rc));
		goto out;
	}
	for (unsigned k = 0; k < nlanes; k++) {
		lanes[k].run = &run;
		lanes[k].buf = mem.base + (size_t)k * bs;
		fill_random(lanes[k].buf, bs, k + 1);
	}

	uint64_t wns = 0, rns = 0, wbytes = 0, rbytes = 0;
	rc = probe_timed(&run, lanes, nlanes, TIER_OP_WRITE, &wbytes, &wns);
	if (rc) {
		tier_log(t, "bandwidth probe: write pass failed: %s", strerror(-rc));
		goto out;
	}
	rc = probe_timed(&run, lanes, nlanes, TIER_OP_READ, &rbytes, &rns);
	if (rc) {
		tier_log(t, "bandwidth probe: read pass failed: %s", strerror(-rc));
		goto out;
	}
	*write_bps = rate(wbytes, wns);
	*read_bps = rate(rbytes, rns);
out:
	/* Every started I/O has completed (probe_pass waits), so the slots
	 * and buffers are no longer referenced. */
	for (uint64_t i = 0; i < run.n; i++)
		tier_free(t, slots[i]);
	tier_mem_unmap(&mem);
	free(lanes);
	free(slots);
	free(csums);
	free(stored);
	pthread_mutex_destroy(&run.lock);
	pthread_cond_destroy(&run.cond);
	return rc;
}
