/*
 * tiers/sched.h — per-tier I/O scheduler queue, used inside tier backends.
 *
 * Why: one tier (one device) is shared by every rank on the node. Demand
 * reads must not queue behind bulk prefetch or background write-back, yet
 * write-back must still make progress (or RAM never frees), and the device
 * performs best with a bounded number of requests in flight.
 *
 * What: one FIFO per enum tier_prio (linked through tier_io->next, so no
 * allocation), a bounded in-flight count, strict priority
 * demand > reclaim > prefetch > writeback, plus two anti-starvation rules:
 *   - dispatch aging: a non-empty class that has been passed over by
 *     `starve_after` dispatches is served next (the most passed-over first),
 *     so the head of any class waits at most about starve_after + 3
 *     dispatches whatever the load above it;
 *   - time aging (optional): a head whose io->submit_ns (set by the tier
 *     layer at submission, same clock as now_ns) is older than max_wait_ns is
 *     served before higher classes.
 * Optional token buckets (GCRA) cap the bytes/s dispatched, one for reads
 * and one for writes (max_bandwidth[op]), as the kernel's io.max caps rbps
 * and wbps: a device serves reads and writes side by side, and so does the
 * cap. A class whose head waits for its direction's tokens does not hold
 * back a class whose head goes the other way.
 *
 * Lives below policy/: includes nothing from policy/ or fs/.
 *
 * Thread safety: none inside. The caller holds its backend lock around every
 * call (sched_push/pop/done and the getters); the struct is plain data.
 */
#ifndef TIERFS_SCHED_H
#define TIERFS_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tiers/tier.h"

#define SCHED_NPRIO 4 /* TIER_PRIO_DEMAND .. TIER_PRIO_WRITEBACK */

struct sched_params {
	unsigned limit;		   /* max I/Os in flight, >= 1 */
	unsigned starve_after;	   /* dispatches a waiting class may be passed over;
				      0 = default 8 */
	uint64_t max_wait_ns;	   /* time aging on io->submit_ns; 0 = off */
	uint64_t max_bandwidth[2]; /* bytes/s cap per enum tier_op; 0 = none */
	uint32_t io_bytes;	   /* bytes one I/O moves (the block size), for the cap */
	uint64_t burst_bytes;	   /* bucket depth; 0 = default limit * io_bytes */
};

struct sched_stats {
	uint64_t pushed[SCHED_NPRIO];
	uint64_t dispatched[SCHED_NPRIO];
	uint64_t aged;	    /* dispatches made out of priority order to prevent starvation */
	uint64_t throttled; /* sched_pop calls refused by a bandwidth cap */
};

/* Plain data so a backend can embed it; fields are private to sched.c. */
struct sched {
	struct tier_io *head[SCHED_NPRIO], *tail[SCHED_NPRIO];
	size_t queued[SCHED_NPRIO];
	uint64_t skipped[SCHED_NPRIO]; /* dispatches that passed this class while non-empty */
	unsigned inflight, limit, starve_after;
	uint64_t max_wait_ns;
	/* One bucket per enum tier_op. */
	uint64_t cost_ns[2];  /* ns of budget one I/O consumes (0 = no cap) */
	uint32_t io_bytes;    /* what an I/O of cost_ns moves (sched_params) */
	uint64_t burst_bytes; /* sched_params' (0 = default) */
	uint64_t burst_ns[2]; /* bucket depth expressed in ns */
	uint64_t tat_ns[2];   /* GCRA theoretical arrival time */
	struct sched_stats st;
};

/* Returns 0, or -EINVAL (limit 0, or a cap without io_bytes). */
int sched_init(struct sched *s, const struct sched_params *p);

/* Change the caps (bytes/s per enum tier_op, 0 = none) from the next
 * dispatch on. Returns 0, or -EINVAL (a cap without io_bytes). */
int sched_set_caps(struct sched *s, const uint64_t max_bandwidth[2]);

/* Queue io at the tail of its class (io->prio, clamped to the last class).
 * Uses io->next; reads io->submit_ns only when max_wait_ns is set. */
void sched_push(struct sched *s, struct tier_io *io);

/* The next I/O to submit, or NULL. NULL when nothing is queued, when
 * `limit` I/Os are in flight (call again after sched_done), or when every
 * queued head waits for its direction's cap: then *wait_ns (if non-NULL)
 * gets the ns until the first of them may go (0 in the other NULL cases). now_ns: a monotonic clock
 * (CLOCK_MONOTONIC ns), only used for time aging and the cap. A returned I/O counts as in flight
 * until sched_done. */
struct tier_io *sched_pop(struct sched *s, uint64_t now_ns, uint64_t *wait_ns);

/* One dispatched I/O completed. */
void sched_done(struct sched *s);

unsigned sched_inflight(const struct sched *s);
size_t sched_queued(const struct sched *s); /* all classes */
void sched_get_stats(const struct sched *s, struct sched_stats *out);

#endif
