/*
 * fs/cache/flusher.c — the flusher and committer threads.
 *
 * The flusher writes dirty blocks back in the background: without a
 * learned order, while more is dirty than dirty_ratio allows, and a
 * queue's worth of the oldest every flush_interval; with one, those past
 * the write-back horizon (fs/cache/horizon.c), and all of them in an idle
 * stretch (fs/cache/idle.c) or a quiet period. The committer commits the maps of
 * finished write-backs so that the flusher never waits on the metadata
 * disk, and, with a learned order, waits for an idle stretch long enough
 * to hold the commit (commit_fits) rather than stall a step.
 *
 * Locking: fs/lock.h.
 */
#include <errno.h>
#include <time.h>

#include "fs/cache/internal.h"

/* The next block for write-back. Without a learned order: the least
 * recently used candidate from FROM towards the newest. With one: the
 * candidate read farthest in the future (Belady), among the newest
 * VICTIM_SCAN: on a repeating step the block written last is read last, and
 * the dirty blocks left are those needed soonest, which may then stay in
 * RAM until they are read, never written at all. Lock held. */
static struct centry *next_to_flush(struct fs *fs, struct centry *from, bool learned, bool spill)
{
	tfs_assert_held(&fs->lock);
	if (!learned) {
		/* FROM may have left the dirty list while the lock was dropped
		 * (written back, or being written): walking on from it would
		 * walk the clean list, all of it, under the lock. */
		if (from && from->lru != LRU_DIRTY)
			from = lru_oldest(fs, LRU_DIRTY, spill);
		for (struct centry *e = from; e; e = lru_older(fs, e, spill))
			if (wb_candidate(fs, e, spill))
				return e;
		return NULL;
	}
	return victim_farthest(fs, spill ? 3u : 1u, LRU_DIRTY, wb_candidate, spill,
			       entry_keep_until);
}

/* Whether background write-back (no reclaim waiting) takes E, the block
 * next_to_flush chose. Without a learned order: while more is dirty than
 * dirty_ratio allows. With one: wb_due_learned(). */
static bool wb_due(struct fs *fs, struct centry *e, bool learned, uint64_t horizon)
{
	return learned ? wb_due_learned(fs, e, horizon) : wb_dirty_over(fs);
}

/* A dirty block outside the learned cycle (next use unknown) that
 * victim_farthest()'s newest-first sample does not reach. Untouched since it was
 * written, it drifts to the LRU tail while the cycle's blocks are touched
 * every step, so a bounded walk from the tail finds it. Overdue predictions
 * are left to victim_farthest(): pipelined ranks make kept blocks late often
 * enough that writing every late one back here cost hit ratio. Lock
 * held. */
static struct centry *stray_dirty(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	uint64_t stale = engine_stale_before(fs);
	unsigned seen = 0;
	for (struct centry *e = fs->cache.lru_tail[0][LRU_DIRTY]; e && seen < VICTIM_SCAN;
	     e = e->prev, seen++)
		if (wb_candidate(fs, e, false) && entry_keep_until(fs, e, stale) == UINT64_MAX)
			return e;
	return NULL;
}

/* Whether the mount was quiet over the last period: the learner's clock
 * moved by less than 1/64 of a cycle since TICK_CLOCK (a training step moves
 * it by a whole cycle; a reader tailing a log now and then does not). */
static bool quiet_since(struct fs *fs, uint64_t tick_clock)
{
	return engine_now(fs) - tick_clock <= engine_cycle_len(fs) / 64;
}

/* Ask the committer for a commit of the block maps of the write-backs
 * finished so far. The flusher used to commit itself after each round of
 * write-backs: a commit syncs the metadata file, and on a disk busy with
 * the step's I/O that stalled the disk: on a capped disk each commit took
 * a good part of a second, in which the disk completed nothing, and the
 * update phase made many of them a step and took markedly longer. A
 * background commit is owed to no one (fsync, syncfs
 * and unmount commit themselves): it only bounds what a crash loses of data
 * never made durable, as ext4's commit= does. Lock held. */
static void commit_soon(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	if (!fs->commit.wanted) {
		fs->commit.wanted = true;
		pthread_cond_signal(&fs->commit.cond);
	}
}

/* How long the persistent tiers must have been idle for a due commit to go
 * at once, and how often a due commit looks while they are not. */
#define COMMIT_QUIET_NS (20 * 1000000ULL)

#define COMMIT_POLL_NS (5 * 1000000ULL)

/* Whether no request for a disk-homed block is being served, every
 * persistent tier has been idle for COMMIT_QUIET_NS and, with a learned
 * order that has disk-homed requests, none came for as long. In
 * gap mode an update phase opens with reads the idle stretch fetched into
 * RAM, so the tiers idle while the step has begun: a commit due then took
 * that for a quiet moment and stalled the step's first disk reads (the
 * runs where commits so landed in update phases had markedly slower
 * steps than those without). Lock held. */
static bool tiers_quiet(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	if (fs->idle.gap.reqs || idle_tiers_ns(fs) < COMMIT_QUIET_NS)
		return false;
	return !fs->eng.tail_plan || !fs->idle.gap.demand_ns ||
	       tier_now_ns() - fs->idle.gap.demand_ns >= COMMIT_QUIET_NS;
}

/* How many intervals a due commit may wait at most for a quiet moment. */
#define COMMIT_WAIT_MAX 6

/* The longest idle stretch of the learned step (gap_seen: no request for
 * a disk block being served, no tier I/O) in the last two cycles or the
 * two before (gap_seen starts its window afresh with whatever stretch
 * comes next). Lock held. */
uint64_t cache_commit_gap(const struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	return gapmode_commit_gap(&fs->idle.gap);
}

/* Whether a commit as long as the last quiet ones fits in the idle
 * stretches of the learned step (cache_commit_gap). With the update phases back
 * to back the only stretch is the fraction of a second in which the
 * application makes its gradients, and a commit that took longer than
 * that ran on into the next update phase, where it stalled the disk (a
 * commit often outlasts such a stretch). Such a commit waits the longest
 * wait at once, COMMIT_WAIT_MAX intervals, the bound commit_interval
 * promises, and then goes forced (with the doubling of the wait alone,
 * commits came several times as often at first, until the wait had
 * grown). Without a learned order, before any quiet commit, or before
 * two requests for disk blocks were seen, any quiet moment does; a
 * stretch measured as 0 (the tiers busy at every request) holds none.
 * Lock held. */
static bool commit_fits(const struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	return gapmode_commit_fits(&fs->idle.gap, fs->eng.learned, fs->commit.quiet_ns);
}

/* Serves commit_soon: one commit that finds work to do per
 * commit_interval at most (one that finds none, as after most idle ticks,
 * does not count). A due commit waits for a moment when the persistent
 * tiers are idle: the time a training step spends in forward and backward
 * leaves them so, and a commit there stalls nothing, where one in an
 * update phase stalled the disk for as long as it ran. It
 * waits up to one more interval; one that had to go without doubles that
 * wait for the next, up to COMMIT_WAIT_MAX intervals, and one that found
 * its moment sets it to a quarter more than it took (at least an
 * interval). Steps longer than an interval thus get their commits between
 * them: a commit due 5 s into an 8 s step would otherwise go at 10 s, in
 * the middle of the next update phase, about one step in three. The
 * window in which data never fsync'd may be lost to a power failure is
 * then up to seven intervals, as the kernel's own
 * write-back of dirty pages allows (30 s). A request made while a commit
 * runs gets one more commit after it: a write-back finished meanwhile may
 * have missed that one. On stop it leaves what is pending to the
 * unmount's own commit. */
static void *committer_main(void *arg)
{
	struct fs *fs = arg;
	uint64_t every = (uint64_t)fs->conf.commit_interval_ms * 1000000ULL, last = 0;
	uint64_t wait = every;	/* how long a due commit waits for a quiet moment */
	bool any = false;	/* whether LAST is set */
	uint64_t wanted_at = 0; /* when the request being served was made, 0 none */
	tfs_lock(&fs->lock);
	while (!fs->commit.stop) {
		if (!fs->commit.wanted) {
			wanted_at = 0;
			tfs_cond_wait(&fs->commit.cond, &fs->lock);
			continue;
		}
		uint64_t now = tier_now_ns();
		if (!wanted_at)
			wanted_at = now;
		/* Due once an interval has passed since the last commit; at the
		 * latest, WAIT after that, or after the request. */
		uint64_t due = any ? last + every : wanted_at;
		uint64_t from = due > wanted_at ? due : wanted_at;
		uint64_t wake = 0;
		bool quiet = false;
		if (now < due)
			wake = due;
		else {
			bool idle = tiers_quiet(fs);
			quiet = idle && commit_fits(fs);
			if (idle && !quiet)
				wait = every * COMMIT_WAIT_MAX;
			if (!quiet && now - from < wait)
				wake = now + COMMIT_POLL_NS;
		}
		if (wake) {
			struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000ULL),
					      .tv_nsec = (long)(wake % 1000000000ULL)};
			tfs_cond_timedwait(&fs->commit.cond, &fs->lock, &ts);
			continue;
		}
		fs->commit.wanted = false;
		wanted_at = 0;
		tfs_unlock(&fs->lock);
		bool wrote;
		/* A failure is logged; its work stays pending. */
		(void)commit_and_free(fs, false, &wrote);
		uint64_t t = tier_now_ns() - now;
		tfs_lock(&fs->lock);
		if (wrote) {
			/* Only what a commit takes in a quiet moment says
			 * whether one fits there: a forced one shares the disk
			 * with the step, and took longer. */
			if (quiet)
				fs->commit.quiet_ns =
				    fs->commit.quiet_ns ? (3 * fs->commit.quiet_ns + t) / 4 : t;
			last = now;
			any = true;
			if (!quiet) {
				atomic_fetch_add(&fs->stats.commits_forced, 1);
				wait = wait * 2 < every * COMMIT_WAIT_MAX ? wait * 2
									  : every * COMMIT_WAIT_MAX;
			} else {
				uint64_t took = (now - from) + (now - from) / 4;
				wait = took > every ? took : every;
			}
		}
	}
	tfs_unlock(&fs->lock);
	return NULL;
}

static void *flusher_main(void *arg)
{
	struct fs *fs = arg;
	struct flush_batch batch = {.fs = fs};
	/* Whether the last round found nothing it may write: dirty blocks
	 * pinned in RAM count as dirty but are not the background's to write,
	 * so "too much dirty" alone must not make this loop spin. */
	bool idle = false;
	/* The learner's clock at the last tick (quiet_since). */
	uint64_t tick_clock = 0;
	unsigned max = fs_persistent_queue(fs);
	tfs_lock(&fs->lock);
	while (!fs->stopping) {
		bool learned = fs->eng.learned;
		uint64_t horizon = learned ? wb_horizon(fs) : UINT64_MAX;
		bool reclaim = fs->cache.reclaim_waiters > 0;
		bool pressure = false;
		if (!idle && learned) {
			struct centry *f = next_to_flush(fs, NULL, true, false);
			pressure = (f && wb_due_learned(fs, f, horizon)) || stray_dirty(fs);
		} else if (!idle) {
			pressure = wb_dirty_over(fs);
		}
		bool tick = false, quiet = false;
		if (!reclaim && !pressure) {
			/* With a learned order, wake when the disks fall idle
			 * too (fs/cache/idle.c), unless they are already. */
			uint64_t wait = FS_LIVE(fs->conf.flush_interval_ms) * 1000000ULL,
				 idle_in = 0;
			if (learned && fs->eng.tail_plan && fs->idle.gap.demand_ns &&
			    !fs->idle.gap.from_ns) {
				/* Past the request-free time, the tiers may still
				 * be finishing: look again then. */
				uint64_t now = tier_now_ns(),
					 at = fs->idle.gap.demand_ns + cache_idle_after(fs);
				idle_in = at > now ? at - now : DISK_IDLE_NS / 4;
				if (idle_in < wait)
					wait = idle_in;
			}
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			uint64_t ns = (uint64_t)ts.tv_nsec + wait;
			ts.tv_sec += (time_t)(ns / 1000000000ULL);
			ts.tv_nsec = (long)(ns % 1000000000ULL);
			tick = tfs_cond_timedwait(&fs->cache.flusher_cond, &fs->lock, &ts) ==
				   ETIMEDOUT &&
			       wait != idle_in;
			if (fs->stopping)
				break;
			reclaim = fs->cache.reclaim_waiters > 0;
			learned = fs->eng.learned;
			horizon = learned ? wb_horizon(fs) : UINT64_MAX;
		}
		bool disk_idle = learned && cache_disk_idle(fs);
		if (disk_idle) {
			/* The disks are ours: everything goes back, and the
			 * prefetcher may take the clean blocks for the reads
			 * that come next. */
			horizon = 0;
			pthread_cond_signal(&fs->cache.prefetch_cond);
		}
		if (tick) {
			/* A mount quiet for a whole period writes everything
			 * back: kept blocks do not stay dirty in RAM after the
			 * training stops. */
			quiet = learned && quiet_since(fs, tick_clock);
			if (quiet)
				horizon = 0;
			tick_clock = engine_now(fs);
		}
		/* Keep up to the tiers' queue depth of write-backs in flight, in
		 * next_to_flush's order. Without a learned order and without
		 * pressure, only a trickle of `max` goes out per period. */
		unsigned started = 0;
		bool spill = reclaim && wb_must_spill(fs);
		struct centry *e =
		    next_to_flush(fs, lru_oldest(fs, LRU_DIRTY, spill), learned, spill);
		while (e && !fs->stopping) {
			reclaim = fs->cache.reclaim_waiters > 0;
			bool due = wb_due(fs, e, learned, horizon);
			if (!reclaim && !due && (learned || started >= max)) {
				struct centry *s = learned ? stray_dirty(fs) : NULL;
				if (!s)
					break;
				e = s;
			}
			/* A block the learned order keeps goes out for a waiter
			 * only while less than wb_kept_limit() is under way: that
			 * will free a slot soon enough, and a kept block written for a
			 * waiter is then read from RAM and rewritten, a disk write
			 * for nothing. Filling the queue with them cost many disk
			 * writes per step; one per waiter still cost a share of
			 * the step's writes, on the disk channel that bounds the
			 * update phase. */
			unsigned limit = max;
			bool kept = learned && reclaim && !due;
			if (kept)
				limit = wb_kept_limit(fs, max);
			if (batch.inflight >= limit) {
				/* Wait for one write-back to complete, then choose
				 * again: what is due may have changed meanwhile. */
				unsigned n = batch.inflight;
				e->refs++; /* keeps e in place while waiting */
				while (batch.inflight >= n)
					tfs_cond_wait(&fs->cond, &fs->lock);
				if (learned && cache_disk_idle(fs))
					pthread_cond_signal(
					    &fs->cache.prefetch_cond); /* a clean block */
				entry_put(fs, e);
				if (learned)
					horizon = (quiet && quiet_since(fs, tick_clock)) ||
							  cache_disk_idle(fs)
						      ? 0
						      : wb_horizon(fs);
				e = next_to_flush(fs, e, learned, spill);
				continue;
			}
			/* The walk goes on from NX: a reference keeps it while
			 * the lock is dropped. Not one being loaded: a failed
			 * load frees its entry whoever holds it. */
			struct centry *nx = learned ? NULL : lru_older(fs, e, spill);
			while (nx && nx->state == CE_LOADING)
				nx = lru_older(fs, nx, spill);
			if (nx)
				nx->refs++;
			int rc = flush_start(fs, e, &batch,
					     reclaim ? TIER_PRIO_RECLAIM : TIER_PRIO_WRITEBACK);
			if (rc == -EAGAIN) {
				if (nx)
					entry_put(fs, nx);
				e = next_to_flush(fs, nx, learned, spill);
				continue;
			}
			if (rc) {
				if (nx)
					entry_put(fs, nx);
				break;
			}
			if (reclaim)
				atomic_fetch_add(&fs->stats.flushes_reclaim, 1);
			if (kept)
				atomic_fetch_add(&fs->stats.flushes_kept, 1);
			if (++started % 256 == 0)
				commit_soon(fs); /* long rounds commit as they go */
			if (nx)
				entry_put(fs, nx);
			e = next_to_flush(fs, nx, learned, spill);
		}
		flush_batch_wait(fs, &batch);
		idle = started == 0;
		if (started || tick)
			commit_soon(fs); /* attribute changes ride on the periodic tick */
		if (!started && reclaim) {
			/* Nothing to write: wake waiters so they re-check.
			 * Not while a tier backs off: its blocks are still to
			 * write, a waiter would only wake this loop again at
			 * once, and the two would spin until the back-off
			 * ends. Waiters wake on their own every STUCK_NS. */
			if (!fs->cache.wb_nheld)
				cache_wake(fs);
			tfs_cond_timedwait(&fs->cache.flusher_cond, &fs->lock,
					   &(struct timespec){.tv_sec = time(NULL) + 1});
		}
	}
	tfs_unlock(&fs->lock);
	return NULL;
}

/* Stop the committer; what it has not committed yet is the unmount's own
 * commit's (cache_flush_all). */
static void committer_stop(struct fs *fs)
{
	if (!fs->commit.committer_running)
		return;
	tfs_lock(&fs->lock);
	fs->commit.stop = true;
	pthread_cond_signal(&fs->commit.cond);
	tfs_unlock(&fs->lock);
	pthread_join(fs->commit.committer, NULL);
	fs->commit.committer_running = false;
}

int flusher_start(struct fs *fs)
{
	int rc = pthread_create(&fs->commit.committer, NULL, committer_main, fs);
	if (rc)
		return -rc;
	(void)pthread_setname_np(fs->commit.committer, "tierfs-commit");
	fs->commit.committer_running = true;
	rc = pthread_create(&fs->cache.flusher, NULL, flusher_main, fs);
	if (rc) {
		committer_stop(fs);
		return -rc;
	}
	/* Names are for `top -H` and perf; without one the thread works the same. */
	(void)pthread_setname_np(fs->cache.flusher, "tierfs-flush");
	fs->cache.flusher_running = true;
	return 0;
}

void flusher_stop(struct fs *fs)
{
	if (!fs->cache.flusher_running)
		return;
	fs_thread_stop(fs, fs->cache.flusher, &fs->cache.flusher_cond);
	fs->cache.flusher_running = false;
	committer_stop(fs);
}
