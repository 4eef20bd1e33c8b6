/*
 * fs/cache/idle.c — the time between training steps, and gap mode.
 *
 * A real step leaves the disks idle between two update phases: forward and
 * backward run on the GPU, and the gradients they write stay in RAM (the
 * gradient rule). In that stretch every dirty block can be written back
 * for free, and the next update's first reads fetched into the RAM that
 * frees, so RAM can serve the end of one update and the start of the next
 * with different blocks. That pays more than the keep plan: the pipelined
 * update opens with reads alone (sub-groups 0 and 1, nothing written yet)
 * and closes with writes alone. A block of RAM that holds a tail write
 * until the idle stretch, and then a head read, takes a block off each of
 * those one-sided phases: two blocks of time, where a block the keep plan
 * keeps takes a read and a write off the middle, in which the two sides
 * overlap, and is worth less than two (the model of a pipelined update).
 *
 * So the cache watches for stretches with no request for a disk-homed
 * block and no I/O on a persistent tier (DISK_IDLE_NS): in one, the flusher
 * writes everything back and the prefetcher reads ahead past the gradient
 * writes, into RAM taken from the blocks needed last. Requests alone do not
 * tell: inside an update phase the ranks' requests stop for short whiles,
 * longer while a metadata sync stalls the disk, with reads
 * and write-backs still under way, and working those pauses costs hits.
 * Once a stretch has been
 * seen to finish both before the next request (within the last cycle and
 * a quarter), the cache is in gap mode: it follows the tail plan
 * (policy/keepplan.h) instead of the keep plan, so that the last writes
 * before the backward pass stay dirty in RAM and every other block is
 * written back as soon as it is written. A stretch too short for that
 * (update phases back to back, as a benchmark without compute runs them)
 * leaves the keep plan in charge.
 *
 * A stretch too short to finish its work did not pay for it: the blocks
 * written back were to be overwritten in RAM, the clean blocks read ahead
 * took RAM the keep plan had given to others (with the update phases back
 * to back: fewer hits, more bytes written, no faster). So with gap_plan = auto (the default) the
 * work starts only once a stretch has lasted a quarter longer than the longest worked one that
 * ended before its work did (idle_short_ns): the steps of a run are alike, so that settles within a
 * step or two, and a run whose compute time grows finds its way back. gap_plan = yes starts the
 * work in every stretch, at DISK_IDLE_NS.
 *
 * Locking: fs/lock.h.
 */
#include "fs/cache/internal.h"

uint64_t cache_idle_after(const struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	return gapmode_idle_after(&fs->idle.gap);
}

/* How long every persistent tier has had no I/O in flight (0: one has).
 * Lock held (the tiers' idle clocks take a lock of their own, a leaf). */
uint64_t idle_tiers_ns(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	uint64_t idle = UINT64_MAX;
	for (int i = 0; i < fs->conf.ntiers; i++) {
		if (!tier_persistent(fs->tiers[i]))
			continue;
		uint64_t t = tier_idle_ns(fs->tiers[i]);
		if (t < idle)
			idle = t;
	}
	return idle;
}

bool cache_disk_idle(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	int known = gapmode_idle_known(&fs->idle.gap, fs->eng.learned, fs->eng.tail_plan != NULL);
	if (known >= 0)
		return known;
	uint64_t now = tier_now_ns(), quiet = idle_tiers_ns(fs); /* MAX: never busy */
	if (!gapmode_quiet_long(&fs->idle.gap, now, quiet) || !engine_in_gap(fs))
		return false;
	gapmode_work_begins(&fs->idle.gap, now, quiet);
	return true;
}

/* Whether an idle stretch did all it could: nothing left to write back
 * (blocks whose home is a disk tier), no read-ahead still under way. */
static bool idle_done(const struct fs *fs)
{
	return gapmode_idle_done(fs->cache.lru_head[0][LRU_DIRTY] != NULL,
				 fs->cache.lru_head[0][LRU_FLUSHING] != NULL,
				 fs->cache.prefetch_inflight);
}

/* How long gap mode's own work takes in a stretch: the tail plan's RAM
 * written back and as much read ahead, one after the other, at the rates
 * the persistent tiers sustained while busy so far (their stats), or 0
 * before they have any. A stretch that finished the work of the keep plan
 * (what is dirty outside gap mode, and read-ahead into free RAM) may be
 * too short for that: with the update phases back to back, the first
 * short stretch did it, the next step ran in gap mode, the stretch after
 * it ended short, and that step took half as long again as the steps
 * around it. Lock held. */
static uint64_t gap_work_ns(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	double rate[2] = {0, 0};
	for (int i = 0; i < fs->conf.ntiers; i++) {
		if (!tier_persistent(fs->tiers[i]))
			continue;
		struct tier_stats st;
		tier_get_stats(fs->tiers[i], &st);
		if (st.busy_ns[TIER_OP_READ])
			rate[TIER_OP_READ] +=
			    (double)st.bytes_read / (double)st.busy_ns[TIER_OP_READ];
		if (st.busy_ns[TIER_OP_WRITE])
			rate[TIER_OP_WRITE] +=
			    (double)st.bytes_written / (double)st.busy_ns[TIER_OP_WRITE];
	}
	return gapmode_work_ns(rate[TIER_OP_READ], rate[TIER_OP_WRITE], cache_plan_budget(fs),
			       fs->bs);
}

/* Whether a stretch of LEN ns holds gap mode's work, with the quarter to
 * spare that auto's threshold has. Lock held. */
static bool gap_fits(struct fs *fs, uint64_t len)
{
	tfs_assert_held(&fs->lock);
	return gapmode_fits(len, gap_work_ns(fs));
}

/* A request at time NOW, learner clock CLOCK, ended the stretch without
 * one since disk_demand_ns (none before the plan's first request). Lock
 * held. */
static void idle_ended(struct fs *fs, uint64_t clock, uint64_t now)
{
	uint64_t quiet = 0, from = 0;
	unsigned ev = gapmode_stretch_ended(&fs->idle.gap, now, &quiet, &from);
	if (ev & GAPMODE_STRETCH)
		atomic_fetch_add(&fs->stats.idle_stretches, 1);
	if (!(ev & GAPMODE_WORKED))
		return; /* not worked */
	atomic_fetch_add(&fs->stats.idle_worked, 1);
	cache_prefetch_idle_ended(fs);
	bool done = idle_done(fs);
	/* A metadata commit in the stretch held the tiers (its sync stalls
	 * the disk, for seconds on a slow one): the stretch says nothing
	 * of whether the gaps hold the work. Judged on it, a gap that a
	 * commit had mostly taken turned gap mode off for good
	 * (auto's threshold went past the gaps). */
	uint64_t c0 = atomic_load(&fs->commit.began_ns), c1 = atomic_load(&fs->commit.ended_ns);
	/* Gap mode that came on in this stretch (cache_idle_progress) had
	 * only what was left of it for its own work, after the keep plan's:
	 * the stretch says nothing of whether a whole one holds that work
	 * either. Judged on it, the first stretch in gap mode that ended
	 * short turned gap mode off for good in some runs, and every later
	 * step was slower. */
	/* Gap mode needs the stretch before each step to finish: one that
	 * did not goes off before the step that would begin without its
	 * reads. */
	if (!gapmode_judge(&fs->idle.gap, clock, quiet, from, done, done && gap_fits(fs, quiet), c0,
			   c1, fs->conf.gap_plan == CONF_GAP_AUTO))
		return;
	TFS_LOG("gap_plan: a %.3f s stretch without disk I/O ended before everything was "
		"written back and read ahead; idle time is worked after %.3f s from now on",
		(double)quiet / 1e9, (double)cache_idle_after(fs) / 1e9);
}

static void gap_mode_set(struct fs *fs, bool gap, uint64_t now)
{
	if (!gapmode_set(&fs->idle.gap, gap, now))
		return;
	cache_replan(fs);
	TFS_LOG("%s", gap ? "gap mode: the disks idle between steps long enough to write "
			    "back and read ahead; a step's last writes wait in RAM for it"
			  : "gap mode off: the disks' idle stretches are too short");
}

/* The first stretch to finish its work turns gap mode on at once, not at
 * the request that ends it: outside gap mode read-ahead leaves the keep
 * plan's blocks alone, so that stretch read ahead less, and the first
 * step in gap mode began with half its first reads still on disk (its
 * update phase visibly longer than the next ones'). Only where
 * the gaps are long enough for gap mode's own work (gap_fits), though: the
 * longest seen lately between requests for disk blocks, or this stretch
 * once it lasts that long. A stretch that held just the keep plan's work,
 * as short ones do with the update phases back to back, turned it
 * on, read-ahead took the kept blocks' RAM, and the next step ran much
 * longer. */
bool cache_idle_progress(struct fs *fs)
{
	if (!gapmode_may_progress(&fs->idle.gap, idle_done(fs)))
		return false;
	uint64_t now = tier_now_ns();
	if (!gap_fits(fs, gapmode_progress_len(&fs->idle.gap, now)))
		return false;
	gapmode_mark_ok(&fs->idle.gap, engine_now(fs));
	gap_mode_set(fs, true, now);
	return true;
}

/* How long every persistent tier went without I/O since the last call:
 * the least over them of the longest such time, whether it ended
 * (tier_idle_take) or runs still (tier_idle_ns). Called whenever a stretch
 * (gap_seen) starts or ends. Lock held. */
static uint64_t tiers_idle_take(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	uint64_t idle = UINT64_MAX;
	for (int i = 0; i < fs->conf.ntiers; i++) {
		if (!tier_persistent(fs->tiers[i]))
			continue;
		uint64_t now = tier_idle_ns(fs->tiers[i]), ended = tier_idle_take(fs->tiers[i]);
		uint64_t t = now > ended ? now : ended;
		if (t < idle)
			idle = t;
	}
	return idle;
}

/* A request for a disk-homed block at NOW: keep the longest stretch with
 * no such request being served, within the last two cycles (any, before
 * one is learned), for cache_idle_progress and commit_fits. A request
 * still being served (waiting for RAM, or for a commit's sync) ends no
 * stretch: counted, a step stalled on a commit looked like an idle stretch
 * that holds one (with slow fsyncs, every commit of a step with short
 * pauses went in such "stretches", and each made the next). A stretch
 * counts for as long as the tiers went without I/O in it, as I/O would
 * share the disk with a commit: the longest such time, not only the one
 * at its end (a mount idle for flush_interval writes back what it kept,
 * and a long pause counted as only the part after that write-back). I/O that
 * a commit run wholly in the stretch held up is no sign that it did not
 * fit, so such a stretch counts from the commit's start at least. Lock
 * held. */
static void gap_seen(struct fs *fs, uint64_t now)
{
	uint64_t clock = engine_now(fs);
	uint64_t idle = tiers_idle_take(fs);
	size_t cycle = engine_cycle_len(fs);
	uint64_t c0 = atomic_load(&fs->commit.began_ns), c1 = atomic_load(&fs->commit.ended_ns);
	gapmode_seen(&fs->idle.gap, now, clock, idle, cycle, c0, c1);
}

/* A request touches IN's blocks: a disk-homed IN ends an idle stretch, and
 * the stretch's outcome sets gap mode. Returns whether the request counts
 * as one being served until idle_disk_demand_done. Lock held. */
bool idle_disk_demand(struct fs *fs, const struct inode *in)
{
	tfs_assert_held(&fs->lock);
	if (!fs_disk_homed(fs, in))
		return false;
	uint64_t now = tier_now_ns();
	gap_seen(fs, now);
	gapmode_demand_begin(&fs->idle.gap);
	if (!fs->eng.tail_plan)
		return true;
	bool gap = false;
	if (fs->eng.learned) {
		uint64_t clock = engine_now(fs);
		idle_ended(fs, clock, now);
		gap = gapmode_holds(&fs->idle.gap, clock, engine_cycle_len(fs));
	}
	gapmode_demand_at(&fs->idle.gap, now);
	gap_mode_set(fs, gap, now);
	return true;
}

/* The request that idle_disk_demand counted (COUNTED) is served: the last one
 * being served starts a stretch. Lock held. */
void idle_disk_demand_done(struct fs *fs, bool counted)
{
	tfs_assert_held(&fs->lock);
	if (gapmode_demand_done(&fs->idle.gap, counted)) {
		gapmode_stretch_starts(&fs->idle.gap, tier_now_ns());
		(void)tiers_idle_take(fs); /* the stretch starts now */
	}
}

/* The engine's plans went (a cycle learned or lost): gap mode follows the
 * tail plan, which is gone, and no stretch spans two plans. Lock held. */
void cache_plans_dropped(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	gapmode_plan_dropped(&fs->idle.gap);
}
