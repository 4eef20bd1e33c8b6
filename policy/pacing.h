/*
 * policy/pacing.h — how much read-ahead the prefetcher does, and when it
 * pauses.
 *
 * Read-ahead follows the learned order; where that order places each
 * rank's next blocks only within the learner's tolerance (several ranks),
 * most blocks read ahead were dropped unread, each a disk read for nothing
 * on the channel that bounds the step, and the hit ratio fell below that of
 * no read-ahead at all. Where the order is exact few are dropped, so
 * judging read-ahead by its own results changes nothing there.
 *
 * Pure: the pacing state is a struct the engine holds under the cache's
 * lock; counts and clocks come in as arguments. Times are in learner clock
 * units (order_now).
 */
#ifndef TIERFS_PACING_H
#define TIERFS_PACING_H

#include <stdbool.h>
#include <stdint.h>

/* Read-ahead blocks whose use is judged at a time: enough that one stray
 * block does not pause read-ahead, few enough to react within a step. */
#define PACING_WINDOW 64

/* How much further than prefetch_depth read-ahead looks while the disks
 * idle between steps (counting reads only): the whole next update's
 * first reads, as far as RAM lets it evict blocks needed later. */
#define PACING_IDLE_AHEAD 16

/* Whether read-ahead pays, judged window by window: over each
 * PACING_WINDOW blocks read ahead and then used or dropped unread, if more
 * were dropped than used, read-ahead pauses for a cycle, then tries
 * again. */
struct pacing {
	uint64_t used0;	      /* fs.pf_used0: blocks read ahead and used, when the window began */
	uint64_t wasted0;     /* fs.pf_wasted0: ... and dropped unread */
	uint64_t pause_until; /* fs.pf_pause_until: learner clock the pause lasts until */
};

/* Whether read-ahead is worth its disk reads at learner clock NOW, with
 * USED and WASTED the counts so far (stats.prefetch_hits,
 * stats.prefetch_wasted) and a learned cycle of CYCLE_LEN accesses (the
 * pause). A window that closes starts the next. */
bool pacing_pays(struct pacing *p, uint64_t now, uint64_t used, uint64_t wasted,
		 uint64_t cycle_len);

/* An idle stretch ended: it read ahead with the pause lifted, so judging
 * starts afresh from the counts USED and WASTED, without a pause. */
void pacing_restart(struct pacing *p, uint64_t used, uint64_t wasted);

/* Whether RAM is full (NCACHED of CACHE_SLOTS) and blocks read ahead, not
 * used yet (NPREFETCHED), take half the prefetch queue (PREFETCH_MAX): they
 * wait in the RAM the kept blocks leave, a queue's worth, which demand
 * reads need too. Unbounded, several ranks filled it and demand reads
 * evicted many of them unread. With RAM to spare nothing competes; and
 * once it is full, one not read when predicted goes first, so none holds
 * the bound. */
bool pacing_crowds(uint64_t ncached, uint64_t cache_slots, uint64_t nprefetched,
		   unsigned prefetch_max);

/* Whether the prefetcher may start one more read-ahead: fewer than
 * PREFETCH_MAX in flight (INFLIGHT), and RAM not crowded by read-ahead
 * (CROWDS, pacing_crowds) unless the disks IDLE between steps. */
bool pacing_room(unsigned inflight, unsigned prefetch_max, bool idle, bool crowds);

/* Whether an upcoming block is worth reading ahead: its next read, WHEN
 * accesses from now, is its next use (NEXT_USE; a block whose next access
 * overwrites it needs no read), and no later than DEPTH beyond its place
 * AT in the upcoming list. One whose own last access says its read is far
 * off was read already: the global position lags a rank that ran ahead,
 * and loading it again would waste a read and a slot until the next
 * step. */
bool pacing_wanted(uint64_t when, uint64_t next_use, uint64_t at, unsigned depth);

/* The prefetcher's memo of victim searches that found nothing: a search
 * that found no block needed after a time finds none for any later time
 * either until the lock is dropped (a read started), and each walks many
 * blocks under the lock. NONE_AFTER is the memo (UINT64_MAX: none).
 *
 * pacing_skip: whether a read-ahead for a block needed at NEED_AT can be
 * skipped. */
bool pacing_skip(uint64_t need_at, uint64_t none_after);
/* The memo after a read-ahead for NEED_AT returned RC (cache_prefetch:
 * -ENOSPC no victim, > 0 a read started, else unchanged). */
uint64_t pacing_none_after(uint64_t none_after, int rc, uint64_t need_at);

#endif
