/*
 * fs/cache/reclaim.c — reclaim: which block leaves RAM when a new one needs a
 * slot, and the wait for a slot when none can leave yet.
 *
 * With a learned order the victim is Belady's: the clean block whose next
 * read is farthest, among a bounded sample (victim_farthest); a block the
 * keep plan keeps goes last. Without one, the least recently used. A
 * caller that finds nothing to evict waits for write-back (entry_alloc),
 * and gets EIO once write-back has failed for writeback_timeout.
 *
 * Locking: fs/lock.h.
 */
#include <errno.h>
#include <time.h>

#include "fs/cache/internal.h"
#include "policy/victim.h"
#include "policy/wbhorizon.h"

bool entry_evictable(struct fs *fs, const struct centry *e, bool allow_pinned)
{
	(void)fs; /* victim_farthest()'s candidate test: others need it */
	return victim_evictable(e->refs, e->state == CE_VALID, e->dirty, e->flushing, e->pinned,
				allow_pinned);
}

/* How many entries one victim walk visits, whether it can take them or
 * not: on the clean list some are held by requests or still loading, on
 * the dirty list (kept_over_due) most are not due. Walks that counted only
 * the entries they could take once went through the whole cache, under
 * fs->lock, on every miss: with a large RAM tier the update phase ran at
 * a fraction of the disk's speed. A walk that finds nothing within it leaves
 * the caller to wait for a write-back; entry_alloc walks the whole clean
 * lists only before giving up. */
#define VICTIM_VISIT (4 * VICTIM_SCAN)

/* When E is next read, for choosing a victim. A prediction older than STALE
 * (engine_stale_before) did not happen where the order said (a stray
 * access, a rank far behind): the block is treated as not needed soon.
 * Within the learner's tolerance, a late read is ordinary drift between
 * ranks or between a rank's reader and writer; the learner itself still
 * counts it as on time, so the cache must not call it stale sooner.
 *
 * A block read and not yet overwritten is dead (engine_next_read), the
 * first to go, except in gap mode when the tail plan keeps the write that
 * comes: that write takes over the block's RAM (writes_adopted), and
 * without it waits for a slot. Ranked by its write, the dead blocks of the
 * step's last sub-groups stay while other clean blocks, read only in the
 * next step (and taken by the gap's read-ahead anyway), go first. When
 * they went first, whatever the update's last iterations needed took them,
 * and the last sub-group's writes waited for the disk, in most steps
 * where they should have taken no time. */
static uint64_t entry_next_read(const struct fs *fs, const struct centry *e, uint64_t stale)
{
	return victim_next_read(e->next_read, e->next_use, e->plan, fs->idle.gap.on, stale);
}

/* When keeping E in RAM stops paying by itself, for write-back: a clean
 * block pays until its next read (a dead one never), a dirty block until its
 * next access of any kind, since an overwrite makes its write-back moot. A
 * dirty block read, then overwritten within a sub-group, is thus kept, not
 * written back for nothing in between. STALE as for entry_next_read.
 *
 * A block written since its last read, whose next access reads it, stays
 * in RAM until then only if the keep plan (policy/keepplan.h) keeps it: the
 * others rank behind every kept one, so they are written back first and
 * the horizon keeps the plan's blocks. By next use alone, which blocks
 * stayed was an accident of when RAM came free (neighbouring sub-groups),
 * and a pipelined update saved no time with them.
 *
 * In gap mode (fs/cache/idle.c) the plan is the tail plan, and a dirty
 * block it drops is due at once. */
uint64_t entry_keep_until(const struct fs *fs, const struct centry *e, uint64_t stale)
{
	return wbhorizon_keep_until(e->next_read, e->next_use, e->plan, e->dirty, e->written_back,
				    fs->idle.gap.on, stale);
}

/* Among the newest VICTIM_SCAN entries of the state-S list of each class
 * in LISTS (bit 0: those that may go, bit 1: pinned) that OK(e, ARG)
 * accepts, the one WHEN says is needed farthest ahead: Belady's choice (on
 * a repeating scan the newest are the ones needed last, so the sample
 * holds the answer). NULL if none. */
struct centry *victim_farthest(struct fs *fs, unsigned lists, int s,
			       bool (*ok)(struct fs *, const struct centry *, bool), bool arg,
			       uint64_t (*when)(const struct fs *, const struct centry *, uint64_t))
{
	uint64_t stale = engine_stale_before(fs);
	struct centry *best = NULL;
	uint64_t best_nr = 0;
	for (int l = 0; l < 2 && !victim_search_done(best_nr); l++) {
		if (!(lists & 1u << l))
			continue;
		unsigned seen = 0, visited = 0;
		for (struct centry *e = fs->cache.lru_head[l][s];
		     e && seen < VICTIM_SCAN && visited < VICTIM_VISIT; e = e->next) {
			visited++;
			if (!ok(fs, e, arg))
				continue;
			seen++;
			uint64_t nr = when(fs, e, stale);
			if (victim_better(nr, best_nr, best != NULL)) {
				best = e;
				best_nr = nr;
			}
			if (victim_search_done(best_nr))
				break;
		}
		atomic_fetch_add(&fs->stats.victim_visits, visited);
	}
	return best;
}

/* The least recently used entry that may go, pinned ones last, among the
 * oldest VISIT of each list (UINT64_MAX: all, every list). Lock held. */
static struct centry *victim_lru(struct fs *fs, uint64_t visit)
{
	tfs_assert_held(&fs->lock);
	for (int pass = 0; pass < 2; pass++) {
		uint64_t visited = 0;
		for (struct centry *e = fs->cache.lru_tail[pass][LRU_CLEAN]; e && visited < visit;
		     e = e->prev) {
			visited++;
			if (entry_evictable(fs, e, pass == 1)) {
				atomic_fetch_add(&fs->stats.victim_visits, visited);
				return e;
			}
		}
		atomic_fetch_add(&fs->stats.victim_visits, visited);
	}
	return NULL;
}

/* Outside gap mode the keep plan's blocks are the last victims, and never
 * read-ahead's: an idle stretch writes them back (fs/cache/idle.c), and once
 * clean they were taken like any other, for read-ahead (a disk read for a
 * disk read) and for misses, where dirty they had waited for a write-back
 * (a lower hit ratio, and slower steps). */
static bool entry_evictable_unkept(struct fs *fs, const struct centry *e, bool allow_pinned)
{
	(void)fs;
	return victim_evictable_unkept(e->refs, e->state == CE_VALID, e->dirty, e->flushing,
				       e->pinned, allow_pinned, e->plan);
}

/* The entry to evict. Without a learned order: the least recently used
 * clean entry nobody holds, pinned ones last. With one: among the most
 * recently used candidates (on a repeating scan those are needed last), the
 * one whose next read is farthest — Belady's choice — and only if that read
 * comes after NEED_AT (UINT64_MAX: any). Each walk visits at most
 * VICTIM_VISIT entries. Lock held. */
struct centry *victim_pick_before(struct fs *fs, uint64_t need_at)
{
	tfs_assert_held(&fs->lock);
	atomic_fetch_add(&fs->stats.victim_scans, 1);
	if (fs->eng.learned) {
		uint64_t stale = engine_stale_before(fs);
		/* Outside gap mode the keep plan's blocks go last, and never
		 * for read-ahead (entry_evictable_unkept). */
		bool tail = fs->eng.tail_plan != NULL, gap = fs->idle.gap.on;
		for (int pass = victim_first_pass(tail, gap); pass < 2; pass++) {
			struct victim_pass p = victim_pass(pass, tail, gap, need_at);
			struct centry *best = victim_farthest(fs, p.lists, LRU_CLEAN,
							      p.unkept_only ? entry_evictable_unkept
									    : entry_evictable,
							      p.allow_pinned, entry_next_read);
			uint64_t when = best ? entry_next_read(fs, best, stale) : 0;
			enum victim_verdict v = victim_pass_verdict(best != NULL, when, need_at);
			if (v == VICTIM_TAKE)
				return best;
			if (v == VICTIM_NONE)
				return NULL;
		}
	}
	if (!victim_lru_fallback(need_at))
		return NULL;
	return victim_lru(fs, VICTIM_VISIT);
}

static struct centry *victim_pick(struct fs *fs)
{
	return victim_pick_before(fs, UINT64_MAX);
}

/* Whether anything is dirty, being written back or being loaded: what a
 * reclaim waiter may wait for. Lock held. */
static bool wb_any_flushable(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	if (lru_oldest(fs, LRU_DIRTY, true) || lru_oldest(fs, LRU_FLUSHING, true))
		return true;
	for (struct centry *e = lru_oldest(fs, LRU_CLEAN, true); e; e = lru_older(fs, e, true))
		if (e->state == CE_LOADING)
			return true;
	return false;
}

/* Whether E's slot comes free when its write-back, already under way,
 * completes. Only those: waiting for a write-back yet to be started stalls
 * the caller longer than the read it saves (measured on a capped disk). */
static bool wb_frees(struct fs *fs, const struct centry *e, bool unused)
{
	(void)fs;
	(void)unused;
	return victim_write_back_frees(e->pinned, inode_is_volatile(e->inode), e->flushing);
}

/* Whether a block whose write-back is under way is read later than AFTER.
 * Belady's choice is then that block, not the clean one needed sooner:
 * wait for the write-back rather than evict a block that will be read
 * again within the step. Learned order only. */
static bool victim_farther_dirty(struct fs *fs, uint64_t after)
{
	struct centry *d = victim_farthest(fs, 1u, LRU_FLUSHING, wb_frees, false, entry_next_read);
	return victim_farther(d != NULL, d ? entry_next_read(fs, d, engine_stale_before(fs)) : 0,
			      after);
}

/* Whether V, the clean victim, is a block that was in RAM when the cycle was
 * learned, has not been used since, and is one the kept set holds, while a
 * dirty block that the kept set does not hold waits for write-back. Belady's
 * choice is then that dirty block, written back first.
 *
 * Why only such blocks: in a steady step the kept blocks are dirty (read
 * from RAM, then rewritten), so reclaim never sees them. The blocks in RAM
 * when the cycle is learned are clean, left there by LRU, and each reclaim
 * took one of them while the step's own write-backs were still under way:
 * by the end of that step none was left, and the kept set formed anew from
 * its blocks. That step read a clearly smaller share of its bytes from
 * RAM than later steps; with this, about the same share. Waiting so for
 * every kept clean block, not only those, saved fewer reads than it added
 * writes per step in the steady state. Lock held. */
static bool kept_over_due(struct fs *fs, const struct centry *v)
{
	tfs_assert_held(&fs->lock);
	if (!victim_unused_since_learn(v->stamp, fs->cache.learn_clock))
		return false;
	uint64_t horizon = wb_horizon(fs);
	if (!victim_kept_by_horizon(entry_keep_until(fs, v, engine_stale_before(fs)), horizon))
		return false;
	uint64_t visited = 0;
	bool found = false;
	for (struct centry *e = fs->cache.lru_tail[0][LRU_DIRTY];
	     e && visited < VICTIM_VISIT && !found; e = e->prev) {
		visited++;
		found = wb_candidate(fs, e, false) && wb_due_learned(fs, e, horizon);
	}
	atomic_fetch_add(&fs->stats.victim_visits, visited);
	return found;
}

#define STUCK_NS (100 * 1000000ULL)

/* Whether the tier that clean V would be read back from has no read in
 * flight. Waiting for a farther block's write-back instead of evicting V
 * (victim_farther_dirty, kept_over_due) saves a read of V later, and pays while
 * reads fill that time. With the tier's reads idle, every request is
 * waiting for RAM, and the wait only turns the disk's write time into
 * the step's: DeepSpeed without its pipeline (the default) reads a
 * sub-group, then writes it, and with the wait each write waited for the
 * write-back of one before while the disk read nothing: update phases
 * grew by half once the order was learned, reads and writes each busy
 * under half of the time. Evicting V there instead won most of that back.
 * In DeepSpeed's pipelined order, where the wait holds up a read stream
 * while the writes go on, reads are in flight and nothing changes (the
 * same times and hit ratio). Never waiting at all cost a large share of
 * the hit ratio with several ranks, and time with it. */
static bool reads_idle(struct fs *fs, const struct centry *v)
{
	const struct blk *b = fs_blk(v->inode, v->idx);
	return b && b->tier != TIER_NONE && !tier_busy(fs->tiers[b->tier], TIER_OP_READ);
}

/* A free RAM slot for a new entry (for IN's block IDX, named in errors),
 * evicting or waiting for write-back. Lock held; may drop it while
 * waiting. */
int entry_alloc(struct fs *fs, const struct inode *in, uint64_t idx, struct centry **out)
{
	tfs_assert_held(&fs->lock);
	/* Waiting for a farther block's write-back pays only while write-back
	 * moves: a tier that is full or failing must not stall the caller for
	 * longer than STUCK_NS. */
	bool patient = true, waited = false, stalled = false;
	uint64_t stuck_since = 0, errs_since = 0;
	int rc;
	for (;;) {
		rc = entry_new(fs, out);
		if (rc != -ENOSPC)
			break;
		struct centry *v = victim_pick(fs);
		bool learned = fs->eng.learned;
		/* reads_idle takes each tier's busy lock: asked only where the
		 * answer counts. */
		if (v &&
		    victim_may_wait(patient, learned, patient && learned && reads_idle(fs, v)) &&
		    (victim_farther_dirty(fs, entry_next_read(fs, v, engine_stale_before(fs))) ||
		     kept_over_due(fs, v)))
			v = NULL;
		if (v) {
			entry_evict(fs, v);
			continue;
		}
		bool flushable = wb_any_flushable(fs);
		if (!flushable || !patient) {
			/* Nothing to wait for, or waiting does not help: an
			 * entry the bounded walks did not reach, before giving
			 * up. */
			v = victim_lru(fs, UINT64_MAX);
			if (v) {
				entry_evict(fs, v);
				continue;
			}
		}
		if (!flushable) {
			/* Every entry is held by a request in flight, or dirty
			 * with nowhere to go: report it rather than hang. */
			TFS_LOG("cache: no RAM block can be freed (%llu cached, %llu dirty)",
				(unsigned long long)fs->cache.ncached,
				(unsigned long long)fs->cache.ndirty);
			rc = -ENOSPC;
			break;
		}
		if (!stalled && fs->eng.learned && wb_reads_idle(fs)) {
			stalled = true;
			wbreserve_stall(&fs->cache.wbr);
			atomic_fetch_add(&fs->stats.idle_stalls, 1);
		}
		uint64_t flushed = atomic_load(&fs->stats.flushes);
		fs->cache.reclaim_waiters++;
		pthread_cond_signal(&fs->cache.flusher_cond);
		/* Timed: a wake one waiter missed (another took it, or did
		 * not leave) costs that waiter STUCK_NS at most, and a waiter
		 * still tells whether write-back moves. */
		uint64_t t0 = tier_now_ns(), until = t0 + STUCK_NS;
		tfs_cond_timedwait(&fs->cache.reclaim_cond, &fs->lock,
				   &(struct timespec){.tv_sec = (time_t)(until / 1000000000ULL),
						      .tv_nsec = (long)(until % 1000000000ULL)});
		fs->cache.reclaim_waiters--;
		uint64_t now = tier_now_ns();
		atomic_fetch_add(&fs->stats.reclaim_waits, 1);
		atomic_fetch_add(&fs->stats.reclaim_wait_ns, now - t0);
		waited = true;
		if (atomic_load(&fs->stats.flushes) != flushed) {
			stuck_since = 0;
		} else {
			if (!stuck_since) {
				stuck_since = now;
				errs_since = atomic_load(&fs->stats.flush_errors);
			} else if (now - stuck_since > STUCK_NS) {
				patient = false;
			}
			/* No write-back succeeded for writeback_timeout, and some
			 * failed: RAM is full of blocks the tiers do not take.
			 * Waiting longer would hang the request for as long as
			 * the disk fails; a slow disk still
			 * completes write-backs and never gets here. */
			if (now - stuck_since >
				(uint64_t)fs->conf.writeback_timeout_ms * 1000000ULL &&
			    atomic_load(&fs->stats.flush_errors) != errs_since) {
				TFS_LOG("cache: no RAM block for inode %llu block %llu: write-back "
					"has failed for %llu s (%llu blocks dirty): EIO",
					(unsigned long long)in->ino, (unsigned long long)idx,
					(unsigned long long)((now - stuck_since) / 1000000000ULL),
					(unsigned long long)fs->cache.ndirty);
				rc = -EIO;
				break;
			}
		}
	}
	/* What woke this waiter may serve the next one too. */
	if (waited && fs->cache.reclaim_waiters)
		pthread_cond_signal(&fs->cache.reclaim_cond);
	return rc;
}
