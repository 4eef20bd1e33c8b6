/*
 * fs/cache/horizon.c — which dirty blocks a learned order keeps in RAM (the
 * write-back horizon) and which the flusher writes back now.
 *
 * A dirty block read again soon is worth keeping: writing it back and
 * reading it again costs two disk transfers that RAM saves. The horizon is
 * the next-use time of the last block that fits in the RAM left for
 * keeping (keep_horizon); blocks needed later are written back in the
 * background, blocks needed sooner stay. The write-burst reserve leaves
 * room out of the kept set for the bursts of writes that stalled for RAM.
 *
 * Locking: fs/lock.h.
 */

#include "fs/cache/internal.h"
#include "policy/wbhorizon.h"

/* Whether more is dirty than background write-back should let stay. Dirty
 * blocks homed in RAM are not the background's to write, and the RAM they
 * take is not there for others: the limit is a share of what is left. */
bool wb_dirty_over(const struct fs *fs)
{
	return wbhorizon_dirty_over(fs->cache.cache_slots, fs->cache.npinned, fs->cache.ndirty,
				    FS_LIVE(fs->conf.dirty_ratio));
}

unsigned fs_persistent_queue(const struct fs *fs)
{
	unsigned max = 0;
	for (int i = 0; i < fs->conf.ntiers; i++)
		if (tier_persistent(fs->tiers[i]))
			max += fs->conf.tiers[i].queue_depth;
	return max;
}

/* RAM the cache may keep blocks in: beside the pinned ones and a slot for
 * each write-back in flight and each FUSE worker (see keep_horizon). */
static uint64_t cache_keep_room(struct fs *fs)
{
	return wbhorizon_keep_room(fs->cache.cache_slots, fs->cache.npinned,
				   fs_persistent_queue(fs), fs->conf.threads);
}

/* The blocks keep_horizon keeps at most (see there), less the reserve for
 * write bursts (wb_reserve_adjust). */
static uint64_t cache_keep_budget(struct fs *fs)
{
	return wbhorizon_keep_budget(cache_keep_room(fs), fs->cache.wbr.reserve);
}

uint64_t cache_plan_budget(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	return wbhorizon_plan_budget(cache_keep_budget(fs), fs->conf.threads, fs_request_blocks(fs),
				     fs->cache.prefetch_max);
}

/* With a learned order, background write-back does what Belady does with
 * the RAM the rules leave: the blocks read soonest stay until they are read,
 * and only the others are on their way out. Writing one of those back early
 * costs nothing (it is written when evicted anyway) and keeps clean victims
 * at hand. Writing back a block that stays costs a disk write every step
 * for nothing: the step reads it from RAM and overwrites it. The horizon is
 * entry_keep_until() of the last block that stays; a dirty block needed later is
 * due for write-back. Left out of the kept set are a slot for each
 * write-back in flight, so that reclaim finds write-backs already under
 * way, and one for each FUSE worker, which may need one for the request it
 * serves. With only the first, with a fast disk, reads that missed waited
 * for a write-back to free a slot: the update phase took longer, with a
 * few more reads and fewer writes per step. Those writes cost a little
 * where the disk's write bandwidth bounds the step (one rank, a capped
 * disk); with several ranks there it is a wash. Lock held. */
static uint64_t keep_horizon(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	uint64_t budget = cache_keep_budget(fs);
	if (!budget)
		return 0;
	size_t n = 0;
	uint64_t stale = engine_stale_before(fs);
	for (int st = 0; st < LRU_NSTATES; st++)
		for (struct centry *e = fs->cache.lru_head[0][st]; e; e = e->next)
			fs->cache.wb_scratch[n++] = entry_keep_until(fs, e, stale);
	return wbhorizon_of(fs->cache.wb_scratch, n, budget);
}

/* Whether no persistent tier has a read in flight. Lock held. */
bool wb_reads_idle(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	for (int i = 0; i < fs->conf.ntiers; i++)
		if (tier_persistent(fs->tiers[i]) && tier_busy(fs->tiers[i], TIER_OP_READ))
			return false;
	return true;
}

/* Once a cycle, the write-burst reserve: the blocks the write-back horizon
 * leaves out of the kept set, so that they are written back ahead and a
 * burst of writes finds clean blocks to take. DeepSpeed without its
 * pipeline (the default) reads a sub-group, then writes all of it, and
 * reads nothing meanwhile; with every block of RAM kept (Belady's choice),
 * each of those writes waited for a write-back while the disk read
 * nothing, and the next reads found the disk writing: reads and writes
 * took turns. A wait that began with no read in flight anywhere is such
 * a stall. The reserve grows by the stalls of the last cycle per burst of
 * writes in it, while that is WB_STALL_GROW or more, and shrinks by a
 * sixteenth in a cycle with fewer stalls than bursts. In between it holds:
 * the pipelined order stalls one or two per burst whatever the reserve
 * (many a step), and growing by one a cycle there took
 * RAM from the kept set step after step. At most half the room: where
 * the disk's writes bound the step, stalls stay whatever the reserve
 * (capped at three quarters of the room, it grew to nearly all of that
 * while the steps grew slower).
 * Lock held. */
static void wb_reserve_adjust(struct fs *fs, uint64_t now)
{
	tfs_assert_held(&fs->lock);
	if (wbreserve_adjust(&fs->cache.wbr, now, engine_cycle_len(fs), cache_keep_room(fs),
			     fs->eng.write_runs))
		wbhorizon_memo_invalidate(&fs->cache.wbh);
}

/* keep_horizon, recomputed once the learner's clock has moved by 1/64 of
 * the entries it ranks (at least 16 accesses): the ranking shifts by about
 * one entry per access, and walking a large cache for every write-back
 * would hold fs->lock too long. Lock held. */
uint64_t wb_horizon(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	uint64_t now = engine_now(fs);
	wb_reserve_adjust(fs, now);
	if (wbhorizon_memo_stale(&fs->cache.wbh, now, fs->cache.ncached))
		wbhorizon_memo_set(&fs->cache.wbh, keep_horizon(fs), now);
	return fs->cache.wbh.horizon;
}

/* Whether dirty block E, under a learned order, is due for write-back
 * against HORIZON: needed after it, or its next use unknown or overdue (a
 * block outside the step's cycle, a file written once, saves nothing by
 * staying dirty and must not wait for the training to stop). Lock held. */
bool wb_due_learned(struct fs *fs, const struct centry *e, uint64_t horizon)
{
	tfs_assert_held(&fs->lock);
	return wbhorizon_due(entry_keep_until(fs, e, engine_stale_before(fs)), horizon);
}

/* How many write-backs of blocks the learned order keeps may be in flight
 * for reclaim waiters: about one MiB of them. What such a write costs is
 * disk bytes (the step overwrites the block, so the write was for
 * nothing); what it buys is a slot freed soon. With 1 MiB blocks one in
 * flight keeps the disk busy; with small blocks one at a time runs at the
 * latency of a request, far below the disk's bandwidth, and waiters queue
 * behind it (with small blocks, update steps took over half as long again
 * at one as at this limit). */
unsigned wb_kept_limit(const struct fs *fs, unsigned max)
{
	return wbhorizon_kept_limit(fs_request_blocks(fs), max);
}
