/*
 * policy/wbhorizon.h — which dirty blocks background write-back takes:
 * the write-back horizon of a learned order, the reserve it leaves for
 * write bursts, and the dirty limit without an order.
 *
 * With a learned order, write-back does what Belady does with the RAM the
 * rules leave: the blocks read soonest stay until they are read, and only
 * the others are on their way out. Writing one of those back early costs
 * nothing (it is written when evicted anyway) and keeps clean victims at
 * hand; writing back a block that stays costs a disk write every step for
 * nothing, since the step reads it from RAM and overwrites it. The horizon
 * is the keep time (wbhorizon_keep_until) of the last block that stays; a
 * dirty block needed later is due.
 *
 * Pure: no locks, no clocks, no I/O. The cache (fs/cache.c) walks its
 * entries, fills the keep times in, and holds the state structs under its
 * lock. Times are in learner clock units (engine_now).
 */
#ifndef TIERFS_WBHORIZON_H
#define TIERFS_WBHORIZON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How far a block the keep plan leaves out ranks behind the ones it keeps,
 * in learner clock units: beyond any cycle, short of "unknown". */
#define WBHORIZON_PLAN_BEHIND (1ULL << 40)

/* Idle stalls per write burst in a cycle from which the reserve grows (by
 * that many blocks); below one per burst it shrinks. */
#define WBRESERVE_STALL_GROW 4

/* Until when keeping a block in RAM pays by itself, for write-back: a
 * clean block (not DIRTY) pays until its NEXT_READ (a dead one never), a
 * dirty block until its NEXT_USE of any kind, since an overwrite makes its
 * write-back moot. A dirty block read, then overwritten within a
 * sub-group, is thus kept, not written back for nothing in between. A
 * prediction older than STALE counts as not needed soon (UINT64_MAX - 1),
 * as for victim_next_read.
 *
 * A block written since its last read (DIRTY, or WRITTEN_BACK since that
 * write), whose next access reads it, stays in RAM until then only if the
 * keep plan keeps it: those the plan drops (PLAN KEEPPLAN_DROP) rank
 * WBHORIZON_PLAN_BEHIND behind every kept one, so they are written back
 * first and the horizon keeps the plan's blocks. By next use alone, which
 * blocks stayed was an accident of when RAM came free, and a pipelined
 * update saved no time with them.
 *
 * In gap mode the plan is the tail plan, and a dirty block it drops is due
 * at once (UINT64_MAX - 1): its RAM is the tail plan's. */
uint64_t wbhorizon_keep_until(uint64_t next_read, uint64_t next_use, uint8_t plan, bool dirty,
			      bool written_back, bool gap_mode, uint64_t stale);

/* The K-th smallest (0-based) of A[0..N), N > K; reorders A (Hoare's
 * selection: linear on average, no allocation, fit to run under the
 * cache's lock). */
uint64_t wbhorizon_select_kth(uint64_t *a, size_t n, size_t k);

/* RAM the cache may keep blocks in: its CACHE_SLOTS beside the NPINNED
 * RAM-homed blocks, less a slot for each write-back in flight (QUEUE, the
 * persistent tiers' queue depths) and for each FUSE worker (THREADS), which
 * may need one for the request it serves. With the slot for write-backs
 * alone, reads that missed waited for a write-back to free a slot. */
uint64_t wbhorizon_keep_room(uint64_t cache_slots, uint64_t npinned, uint64_t queue,
			     unsigned threads);

/* The blocks the horizon keeps at most: the keep ROOM less the RESERVE for
 * write bursts. */
uint64_t wbhorizon_keep_budget(uint64_t room, uint64_t reserve);

/* The blocks a keep plan may keep: the keep BUDGET less what requests in
 * flight take beyond one block each (THREADS workers of REQUEST_BLOCKS
 * blocks) and the read-ahead queue (PREFETCH_MAX). */
uint64_t wbhorizon_plan_budget(uint64_t budget, unsigned threads, uint64_t request_blocks,
			       unsigned prefetch_max);

/* The horizon: the BUDGET-th smallest of the N keep times in KEEP (which
 * it reorders); 0 without a budget (nothing stays), UINT64_MAX where all N
 * fit (everything stays). */
uint64_t wbhorizon_of(uint64_t *keep, size_t n, uint64_t budget);

/* Whether a dirty block that stays until KEEP_UNTIL is due for write-back
 * against HORIZON: needed after it, or its next use unknown or overdue (a
 * block outside the step's cycle, a file written once, saves nothing by
 * staying dirty and must not wait for the training to stop). */
bool wbhorizon_due(uint64_t keep_until, uint64_t horizon);

/* Without a learned order: whether more is dirty (NDIRTY) than background
 * write-back should let stay, DIRTY_RATIO percent of the CACHE_SLOTS.
 * Dirty blocks homed in RAM (NPINNED) are not the background's to write,
 * and the RAM they take is not there for others: the limit is a share of
 * what is left. */
bool wbhorizon_dirty_over(uint64_t cache_slots, uint64_t npinned, uint64_t ndirty,
			  unsigned dirty_ratio);

/* How many write-backs of blocks the learned order keeps may be in flight
 * for reclaim waiters: a request's worth of blocks (REQUEST_BLOCKS), at
 * most MAX. What such a write costs is disk bytes (the step overwrites
 * the block); what it buys is a slot freed soon. With large blocks one in
 * flight keeps the disk busy; with small ones a write at a time runs at a
 * request's latency, far below the disk's bandwidth, and waiters queue
 * behind it. */
unsigned wbhorizon_kept_limit(uint64_t request_blocks, unsigned max);

/* The last horizon computed, recomputed once the learner's clock has moved
 * by 1/64 of the entries it ranks (at least 16 accesses): the ranking
 * shifts by about one entry per access, and walking a large cache for
 * every write-back would hold the cache's lock too long. */
struct wbhorizon_memo {
	uint64_t horizon; /* fs.wb_horizon: the last wbhorizon_of() */
	uint64_t at;	  /* fs.wb_horizon_at: the learner's clock then */
	bool ok;	  /* fs.wb_horizon_ok: false, recompute at the next ask */
};

/* Whether the memo must be recomputed at learner clock NOW with NCACHED
 * entries ranked. */
bool wbhorizon_memo_stale(const struct wbhorizon_memo *m, uint64_t now, uint64_t ncached);
/* Record HORIZON computed at NOW. */
void wbhorizon_memo_set(struct wbhorizon_memo *m, uint64_t horizon, uint64_t now);
/* The keep times changed (a relearn, a new plan, a new reserve). */
void wbhorizon_memo_invalidate(struct wbhorizon_memo *m);

/* The write-burst reserve: the blocks the horizon leaves out of the kept
 * set, so that they are written back ahead and a burst of writes finds
 * clean blocks to take. DeepSpeed without its pipeline (the default) reads
 * a sub-group, then writes all of it, and reads nothing meanwhile; with
 * every block of RAM kept, each of those writes waited for a write-back
 * while the disk read nothing, and the next reads found the disk writing:
 * reads and writes took turns. A wait for RAM that began with no read in
 * flight anywhere is such a stall.
 *
 * Once a cycle the reserve grows by the last cycle's stalls per burst of
 * writes, while that is WBRESERVE_STALL_GROW or more, and shrinks by a
 * sixteenth in a cycle with fewer stalls than bursts. In between it holds:
 * the pipelined order stalls one or two per burst whatever the reserve,
 * and growing by one a cycle there took RAM from the kept set step after
 * step. At most half the keep room: where the disk's writes bound the
 * step, stalls stay whatever the reserve, and a larger cap let it take
 * nearly all the room while the steps grew longer. */
struct wbreserve {
	uint64_t reserve;     /* fs.wb_reserve: blocks left out of the kept set */
	uint64_t stalls;      /* fs.idle_stalls: stalls since stall_clock */
	uint64_t stall_clock; /* fs.stall_clock: learner clock the count began at */
};

/* A wait for RAM began with no read in flight on any persistent tier. */
void wbreserve_stall(struct wbreserve *r);
/* A cycle was learned at learner clock NOW: count its stalls afresh. */
void wbreserve_restart(struct wbreserve *r, uint64_t now);
/* At learner clock NOW, with a learned cycle of CYCLE_LEN accesses (0:
 * none), a keep ROOM (wbhorizon_keep_room) and WRITE_RUNS bursts of writes
 * in the cycle: adjust the reserve once a cycle has passed since the count
 * began. Returns whether the reserve changed (the horizon must then be
 * recomputed). */
bool wbreserve_adjust(struct wbreserve *r, uint64_t now, uint64_t cycle_len, uint64_t room,
		      size_t write_runs);

#endif
