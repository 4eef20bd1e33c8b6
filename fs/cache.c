/*
 * fs/cache.c — the RAM tier as a write-back block cache in front of the
 * persistent tiers, and the flusher that makes blocks durable.
 *
 * Every block a request touches is brought into a cache entry whose buffer
 * is a slot of the RAM tier; reads are answered with fuse_reply_iov straight
 * from those buffers (no copy in the daemon), writes are copied into them
 * and complete at once. Dirty entries are written back by the flusher in
 * the background, by fsync, and at unmount.
 *
 * Why the durable slot of a block is chosen when the block is first
 * written, not when it is flushed: a full tier must fail the write that
 * would overflow it (ENOSPC to the writer), never a background write-back
 * of data the writer was already told is safe. Blocks are rewritten in
 * place afterwards; a torn rewrite is caught by the checksum (EIO, never
 * wrong bytes).
 *
 * Blocks whose home is the RAM tier (a rule or pin naming it) stay in RAM
 * ("pinned") up to pin_limit and get a durable slot only when memory
 * pressure spills them, or for persistent files when fsync/unmount asks.
 *
 * Locking: fs->lock guards everything here (see fs/fs.h); block data is
 * copied and moved to tiers with the lock dropped and the entry referenced.
 */
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "fs/fs.h"
#include "policy/keepplan.h"

/* Pending block-map updates, committed to LMDB by cache_commit. */
struct pend {
	uint64_t ino, idx;
};
static struct pend *g_pend;
static size_t g_npend, g_pend_cap;

/* One cache_commit at a time, from its snapshot of the pending work to its
 * LMDB commit, so that commits land in the order their snapshots were
 * taken. Without it, a flusher tick that took file F's size and then
 * waited for LMDB's writer lock could commit after an fsync's newer size
 * and put the old one back; or re-insert a block record that a truncate's
 * commit had deleted, whose slot was then freed and handed to another
 * block. Taken before fs->lock, never while holding it. */
static pthread_mutex_t g_commit_lock = PTHREAD_MUTEX_INITIALIZER;

/* The slots the last commit freed. LMDB makes a commit durable only at its
 * next sync (MDB_NOMETASYNC, meta.c): a slot used again before that would,
 * after a power failure, be named by the map the disk kept, over other
 * bytes (t_powercut, in about half the runs that keep half the unsynced
 * pages). They are freed by a meta_sync begun after their commit ended
 * (commit_sync), which every commit that freed some is followed by. Not
 * under g_commit_lock: there, each fsync's flush waited for the commits of
 * the others, and 16 fsyncing writers lost a fifth of their rate. (The
 * next commit's own flush would carry the meta page too, but LMDB skips
 * the flush of a transaction that changed nothing.) Under g_commit_lock;
 * g_nheld is also read without it (commit_held). */
static struct freed_slot *g_held;
static size_t g_nheld;
/* Commits that held frees so far, and the last of them. Written under
 * g_commit_lock; commit_sync reads g_commits without it. */
static _Atomic uint64_t g_commits;
static uint64_t g_held_from;

/* Whether slots wait for a commit_sync; a hint, read without the lock. */
static bool commit_held(void)
{
	return __atomic_load_n(&g_nheld, __ATOMIC_ACQUIRE) != 0;
}

/* Tier syncs, one round at a time, and per tier the epoch that says which
 * write-backs each sync covered: a write-back to tier T completed in epoch
 * E is on stable storage once a sync of T that began after E returns 0.
 * After a failed fdatasync the kernel drops the pages and a retry returns
 * 0, so the failure must be charged to the files written back to T before
 * it then, or their fsync would say the bytes are safe; files whose new
 * bytes went to other tiers are not concerned. g_wb_epoch is atomic so that
 * a failed sync can close its epoch the moment it returns, without waiting
 * for fs->lock; g_sync_lock is taken before fs->lock. */
static pthread_mutex_t g_sync_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t g_wb_epoch[CONF_MAX_TIERS] = {[0 ... CONF_MAX_TIERS - 1] = 1};
/* Sync rounds begun and ended, and the last one's result: a caller whose
 * write-backs completed before round R began is served by R, so fsyncs
 * that queue behind a round share the next one (group commit) instead of
 * each syncing every tier again. Written under g_sync_lock. */
static _Atomic uint64_t g_rounds_begun;
static uint64_t g_rounds_done;
static int g_round_rc;

static int pend_add(uint64_t ino, uint64_t idx)
{
	if (g_npend == g_pend_cap) {
		size_t n = g_pend_cap ? g_pend_cap * 2 : 1024;
		struct pend *p = realloc(g_pend, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		g_pend = p;
		g_pend_cap = n;
	}
	g_pend[g_npend++] = (struct pend){ino, idx};
	return 0;
}

static void defer_free(struct fs *fs, uint16_t tier, uint64_t slot)
{
	if (fs->nfreed == fs->freed_cap) {
		size_t n = fs->freed_cap ? fs->freed_cap * 2 : 256;
		struct freed_slot *f = realloc(fs->freed, n * sizeof(*f));
		if (!f) {
			/* Leaking one slot until the next mount beats freeing a slot
			 * the committed map may still name. */
			TFS_LOG("tier %s: slot %llu leaked until remount (out of memory)",
				tier_name(fs->tiers[tier]), (unsigned long long)slot);
			return;
		}
		fs->freed = f;
		fs->freed_cap = n;
	}
	fs->freed[fs->nfreed++] = (struct freed_slot){tier, slot};
}

/* Wake everyone waiting on an entry's or inode's state, and one of
 * entry_alloc's waiters (which wakes the next if it leaves). Lock held. */
static void wake_all(struct fs *fs)
{
	pthread_cond_broadcast(&fs->cond);
	if (fs->reclaim_waiters)
		pthread_cond_signal(&fs->reclaim_cond);
}

/* ---- LRU ---------------------------------------------------------------- */

/* The list E belongs on, by its write-back state (fs.h: lru_head). */
static uint8_t lru_state_of(const struct centry *e)
{
	return e->flushing ? LRU_FLUSHING : e->dirty ? LRU_DIRTY : LRU_CLEAN;
}

static void lru_unlink(struct fs *fs, struct centry *e)
{
	int l = e->pinned, s = e->lru;
	if (e->prev)
		e->prev->next = e->next;
	else
		fs->lru_head[l][s] = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		fs->lru_tail[l][s] = e->prev;
	e->prev = e->next = NULL;
	e->lru = LRU_NONE;
}

/* Link E at the head of its list: it was just used. */
static void lru_push(struct fs *fs, struct centry *e)
{
	int l = e->pinned, s = e->lru = lru_state_of(e);
	e->prev = NULL;
	e->next = fs->lru_head[l][s];
	if (fs->lru_head[l][s])
		fs->lru_head[l][s]->prev = e;
	fs->lru_head[l][s] = e;
	if (!fs->lru_tail[l][s])
		fs->lru_tail[l][s] = e;
}

/* Link E where its last use (stamp) places it: a block whose write-back
 * state changed keeps its rank among the others of its new list, as it
 * kept its place in the one list there was. The walk starts from both
 * ends: with a learned order write-backs are of blocks used last (near
 * the head), without one of the oldest (near the tail). */
static void lru_insert(struct fs *fs, struct centry *e)
{
	int l = e->pinned, s = lru_state_of(e);
	struct centry *h = fs->lru_head[l][s], *t = fs->lru_tail[l][s];
	if (!h || e->stamp >= h->stamp) {
		lru_push(fs, e);
		return;
	}
	e->lru = (uint8_t)s;
	if (e->stamp <= t->stamp) {
		e->next = NULL;
		e->prev = t;
		t->next = e;
		fs->lru_tail[l][s] = e;
		return;
	}
	/* h is newer and t older than E: each walk stops by the other end. */
	for (struct centry *fwd = h, *bwd = t;; fwd = fwd->next, bwd = bwd->prev) {
		if (fwd->stamp < e->stamp) { /* before fwd, which is not h */
			e->next = fwd;
			e->prev = fwd->prev;
			fwd->prev->next = e;
			fwd->prev = e;
			return;
		}
		if (bwd->stamp > e->stamp) { /* after bwd, which is not t */
			e->prev = bwd;
			e->next = bwd->next;
			bwd->next->prev = e;
			bwd->next = e;
			return;
		}
	}
}

/* After E's dirty or flushing flag changed: move it to its list. */
static void lru_restate(struct fs *fs, struct centry *e)
{
	if (e->lru == LRU_NONE || e->lru == lru_state_of(e))
		return;
	lru_unlink(fs, e);
	lru_insert(fs, e);
}

/* Walking the lists of state S from the least recently used end, the list
 * of blocks that may go first, then (PINNED_TOO) the pinned one: the first
 * entry, and the one after E (in E's list, whatever state that is now). */
static struct centry *lru_oldest(struct fs *fs, int s, bool pinned_too)
{
	return fs->lru_tail[0][s] ? fs->lru_tail[0][s] : pinned_too ? fs->lru_tail[1][s] : NULL;
}

static struct centry *lru_older(struct fs *fs, struct centry *e, bool pinned_too)
{
	if (e->prev)
		return e->prev;
	return !e->pinned && pinned_too && e->lru != LRU_NONE ? fs->lru_tail[1][e->lru] : NULL;
}

/* Make E's home RAM, moving it to the pinned list. Lock held. */
static void entry_pin(struct fs *fs, struct centry *e)
{
	if (e->pinned)
		return;
	lru_unlink(fs, e);
	e->pinned = true;
	fs->npinned++;
	lru_push(fs, e);
}

/* RAM is no longer E's home (its file was pinned elsewhere or unpinned):
 * an entry like any other, written back by the flusher. */
static void entry_unpin(struct fs *fs, struct centry *e)
{
	if (!e->pinned)
		return;
	lru_unlink(fs, e);
	e->pinned = false;
	fs->npinned--;
	lru_push(fs, e);
}

static void touch(struct fs *fs, struct centry *e)
{
	e->stamp = ++fs->clock;
	if (fs->lru_head[e->pinned][e->lru] != e) {
		lru_unlink(fs, e);
		lru_push(fs, e);
	}
}

/* ---- entries ------------------------------------------------------------ */

static void entry_release_slot(struct fs *fs, struct centry *e)
{
	tier_free(fs->tiers[fs->ram], e->slot);
	fs->ncached--;
	if (e->pinned)
		fs->npinned--;
	free(e);
}

/* Count E dirty if it was clean. Lock held. */
static void entry_mark_dirty(struct fs *fs, struct centry *e)
{
	if (!e->dirty) {
		e->dirty = true;
		fs->ndirty++;
		e->inode->ndirty++;
		lru_restate(fs, e);
	}
}

/* Detach an entry from its block and free it. Lock held, refs == 0. */
static void entry_drop(struct fs *fs, struct centry *e)
{
	struct inode *in = e->inode;
	struct blk *b = in ? fs_blk(in, e->idx) : NULL;
	if (b && b->ce == e) {
		b->ce = NULL;
		in->nce--;
	}
	if (e->dirty) {
		fs->ndirty--;
		in->ndirty--;
	}
	if (e->prefetched) {
		fs->nprefetched--;
		atomic_fetch_add(&fs->stats.prefetch_wasted, 1);
	}
	lru_unlink(fs, e);
	entry_release_slot(fs, e);
}

/* Whether more is dirty than background write-back should let stay. Dirty
 * blocks homed in RAM are not the background's to write, and the RAM they
 * take is not there for others: the limit is a share of what is left. */
static bool dirty_over(const struct fs *fs)
{
	uint64_t room = fs->cache_slots > fs->npinned ? fs->cache_slots - fs->npinned : 0;
	uint64_t dirty = fs->ndirty > fs->npinned ? fs->ndirty - fs->npinned : 0;
	return dirty > room * fs->conf.dirty_ratio / 100;
}

/* The bytes a read of B's durable copy moves (tier_io.len: 0, the whole
 * block), and B's record of those a write-back moved (meta_block.pages). */
static uint32_t blk_io_len(const struct blk *b)
{
	return b->pages * TIER_IO_ALIGN;
}

static void blk_set_io_len(const struct fs *fs, struct blk *b, uint32_t len)
{
	b->pages = len < fs->bs ? len / TIER_IO_ALIGN : 0;
}

/* Evict E, a victim: counted, and counted apart where the keep plan meant
 * it to stay until a read still to come (stats.evictions_kept). Lock held. */
static void entry_evict(struct fs *fs, struct centry *e)
{
	atomic_fetch_add(&fs->stats.evictions, 1);
	if (fs->learned && e->plan == KEEPPLAN_KEEP && e->next_read != UINT64_MAX &&
	    e->next_read >= engine_stale_before(fs))
		atomic_fetch_add(&fs->stats.evictions_kept, 1);
	entry_drop(fs, e);
}

static bool evictable(const struct centry *e, bool allow_pinned)
{
	return e->refs == 0 && e->state == CE_VALID && !e->dirty && !e->flushing &&
	       (allow_pinned || !e->pinned);
}

/* How many evictable entries the learned-order victim search looks at. */
#define VICTIM_SCAN 512
/* How many entries one victim walk visits, whether it can take them or
 * not: on the clean list some are held by requests or still loading, on
 * the dirty list (kept_over_due) most are not due. Walks that counted only
 * the entries they could take once went through the whole cache, under
 * fs->lock, on every miss: with 16 Ki blocks of RAM the update phase ran
 * at 51 MB/s instead of 440. A walk that finds nothing within it leaves
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
 * and the last sub-group's writes waited for the disk (the bench: in two
 * steps of three, 0.6-0.7 s where the third took 0.04 s). */
static uint64_t next_read_of(const struct fs *fs, const struct centry *e, uint64_t stale)
{
	uint64_t t = e->next_read;
	if (t == UINT64_MAX && fs->gap_mode && e->plan == KEEPPLAN_KEEP)
		t = e->next_use;
	if (t != UINT64_MAX && t < stale)
		return UINT64_MAX - 1;
	return t;
}

/* How far a block the keep plan leaves out ranks behind the ones it keeps,
 * in learner clock units: beyond any cycle, short of "unknown". */
#define PLAN_BEHIND (1ULL << 40)

/* ---- Idle disk: the time between training steps ----
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
 * overlap, worth about 1.25 (tests/unit/test_keepplan.c works both out).
 *
 * So the cache watches for stretches with no request for a disk-homed
 * block and no I/O on a persistent tier (DISK_IDLE_NS): in one, the flusher
 * writes everything back and the prefetcher reads ahead past the gradient
 * writes, into RAM taken from the blocks needed last. Requests alone do not
 * tell: inside an update phase the ranks' requests stop for tens of ms at
 * a time, up to a second while a metadata sync stalls the disk, with reads
 * and write-backs still under way (the bench: about 60 such pauses a step,
 * and working them cost 3 points of hit ratio). Once a stretch has been
 * seen to finish both before the next request (within the last cycle and
 * a quarter), the cache is in gap mode: it follows the tail plan
 * (policy/keepplan.h) instead of the keep plan, so that the last writes
 * before the backward pass stay dirty in RAM and every other block is
 * written back as soon as it is written. A stretch too short for that
 * (update phases back to back, as `make bench` runs them by default)
 * leaves the keep plan in charge.
 *
 * A stretch too short to finish its work did not pay for it: the blocks
 * written back were to be overwritten in RAM, the clean blocks read ahead
 * took RAM the keep plan had given to others (with the update phases back
 * to back on the bench: hit ratio 0.32 against 0.35, 0.2 GB more written
 * per step, no faster). So with gap_plan = auto (the default) the work
 * starts only once a stretch has lasted a quarter longer than the longest
 * worked one that ended before its work did (idle_short_ns): the steps of
 * a run are alike, so that settles within a step or two, and a run whose
 * compute time grows finds its way back. gap_plan = yes starts the work in
 * every stretch, at DISK_IDLE_NS.
 */
#define DISK_IDLE_NS (20 * 1000000ULL)

uint64_t cache_idle_after(const struct fs *fs)
{
	uint64_t t = fs->idle_short_ns + fs->idle_short_ns / 4;
	return t > DISK_IDLE_NS ? t : DISK_IDLE_NS;
}

/* How long every persistent tier has had no I/O in flight (0: one has).
 * Lock held (the tiers' idle clocks take a lock of their own, a leaf). */
static uint64_t tiers_idle_ns(struct fs *fs)
{
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
	if (!fs->learned || !fs->tail_plan || !fs->disk_demand_ns)
		return false;
	if (fs->idle_from_ns)
		return true; /* worked until the next request: the work keeps the tiers busy */
	uint64_t now = tier_now_ns(), after = cache_idle_after(fs);
	uint64_t since = now - fs->disk_demand_ns, quiet = tiers_idle_ns(fs); /* MAX: never busy */
	if (since < after || quiet < after || !engine_in_gap(fs))
		return false;
	fs->idle_from_ns = now - (quiet < since ? quiet : since);
	return true;
}

/* Whether an idle stretch did all it could: nothing left to write back
 * (blocks whose home is a disk tier), no read-ahead still under way. */
static bool idle_done(const struct fs *fs)
{
	return !fs->lru_head[0][LRU_DIRTY] && !fs->lru_head[0][LRU_FLUSHING] &&
	       !fs->prefetch_inflight;
}

/* How long gap mode's own work takes in a stretch: the tail plan's RAM
 * written back and as much read ahead, one after the other, at the rates
 * the persistent tiers sustained while busy so far (their stats), or 0
 * before they have any. A stretch that finished the work of the keep plan
 * (what is dirty outside gap mode, and read-ahead into free RAM) may be
 * too short for that: with the update phases back to back and two paths,
 * the first 0.6 s stretch did it, the next step ran in gap mode, and the
 * stretch after it ended short (the bench: that step took 4.0-4.3 s, the
 * steps around it 2.6-2.9 s). Lock held. */
static uint64_t gap_work_ns(struct fs *fs)
{
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
	if (rate[TIER_OP_READ] <= 0 || rate[TIER_OP_WRITE] <= 0)
		return 0;
	double bytes = (double)cache_plan_budget(fs) * fs->bs;
	return (uint64_t)(bytes / rate[TIER_OP_READ] + bytes / rate[TIER_OP_WRITE]);
}

/* Whether a stretch of LEN ns holds gap mode's work, with the quarter to
 * spare that auto's threshold has. Lock held. */
static bool gap_fits(struct fs *fs, uint64_t len)
{
	uint64_t need = gap_work_ns(fs);
	return len >= need + need / 4;
}

/* A request at time NOW, learner clock CLOCK, ended the stretch without
 * one since disk_demand_ns (none before the plan's first request). Lock
 * held. */
static void idle_ended(struct fs *fs, uint64_t clock, uint64_t now)
{
	if (!fs->disk_demand_ns)
		return;
	if (now - fs->disk_demand_ns >= DISK_IDLE_NS)
		atomic_fetch_add(&fs->stats.idle_stretches, 1);
	if (!fs->idle_from_ns)
		return; /* not worked */
	uint64_t quiet = now - fs->idle_from_ns, from = fs->idle_from_ns;
	fs->idle_from_ns = 0;
	atomic_fetch_add(&fs->stats.idle_worked, 1);
	engine_idle_ended(fs);
	if (idle_done(fs)) {
		/* Worth working; gap mode only if its own work fits too. */
		fs->gap_ok_clock = gap_fits(fs, quiet) ? clock + 1 : 0;
		return;
	}
	/* A metadata commit in the stretch held the tiers (its sync stalls
	 * the disk, up to 2.5 s on the bench's VM): the stretch says nothing
	 * of whether the gaps hold the work. Judged on it, a 2.9 s gap of the
	 * bench that a 2.2 s commit had taken turned gap mode off for good
	 * (auto's threshold went past the gaps). */
	uint64_t c0 = atomic_load(&fs->commit_began_ns), c1 = atomic_load(&fs->commit_ended_ns);
	bool commit_in = c0 > c1 || c1 > from;
	/* Gap mode that came on in this stretch (cache_idle_progress) had
	 * only what was left of it for its own work, after the keep plan's:
	 * the stretch says nothing of whether a whole one holds that work
	 * either. Judged on it, the first stretch in gap mode that ended
	 * short turned gap mode off for good, 2 runs in 8 on the bench with
	 * 2.9 s gaps (every later step 5.4-5.5 s against 4.9-5.0 s). */
	bool came_on = fs->gap_mode && fs->gap_on_ns > from;
	if (commit_in || came_on) {
		/* Unjudged: gap mode stays as it was. */
		if (fs->gap_mode)
			fs->gap_ok_clock = clock + 1;
		return;
	}
	/* Gap mode needs the stretch before each step to finish: one that
	 * did not goes off before the step that would begin without its
	 * reads. */
	fs->gap_ok_clock = 0;
	if (fs->conf.gap_plan != CONF_GAP_AUTO || quiet <= fs->idle_short_ns)
		return;
	fs->idle_short_ns = quiet;
	TFS_LOG("gap_plan: a %.3f s stretch without disk I/O ended before everything was "
		"written back and read ahead; idle time is worked after %.3f s from now on",
		(double)quiet / 1e9, (double)cache_idle_after(fs) / 1e9);
}

static void gap_mode_set(struct fs *fs, bool gap)
{
	if (gap == fs->gap_mode)
		return;
	fs->gap_mode = gap;
	if (gap)
		fs->gap_on_ns = tier_now_ns();
	cache_replan(fs);
	TFS_LOG("%s", gap ? "gap mode: the disks idle between steps long enough to write "
			    "back and read ahead; a step's last writes wait in RAM for it"
			  : "gap mode off: the disks' idle stretches are too short");
}

/* The first stretch to finish its work turns gap mode on at once, not at
 * the request that ends it: outside gap mode read-ahead leaves the keep
 * plan's blocks alone, so that stretch read ahead less, and the first
 * step in gap mode began with half its first reads still on disk (the
 * bench: its update phase 0.5 s longer than the next ones'). Only where
 * the gaps are long enough for gap mode's own work (gap_fits), though: the
 * longest seen lately between requests for disk blocks, or this stretch
 * once it lasts that long. A stretch that held just the keep plan's work,
 * as 0.6 s did on two paths with the update phases back to back, turned it
 * on, read-ahead took the kept blocks' RAM, and the next step ran 1.3 s
 * longer. */
bool cache_idle_progress(struct fs *fs)
{
	if (fs->gap_mode || !fs->idle_from_ns || !idle_done(fs))
		return false;
	uint64_t len = tier_now_ns() - fs->idle_from_ns;
	if (!gap_fits(fs, len > fs->gap_seen_ns ? len : fs->gap_seen_ns))
		return false;
	fs->gap_ok_clock = engine_now(fs) + 1;
	gap_mode_set(fs, true);
	return true;
}

/* How long every persistent tier went without I/O since the last call:
 * the least over them of the longest such time, whether it ended
 * (tier_idle_take) or runs still (tier_idle_ns). Called whenever a stretch
 * (gap_seen) starts or ends. Lock held. */
static uint64_t tiers_idle_take(struct fs *fs)
{
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
 * that holds one (with fsyncs of 300 ms, every commit of a step with 50 ms
 * pauses went in such "stretches", and each made the next). A stretch
 * counts for as long as the tiers went without I/O in it, as I/O would
 * share the disk with a commit: the longest such time, not only the one
 * at its end (a mount idle for flush_interval writes back what it kept,
 * and a 2 s pause counted as the 0.5 s after that write-back). I/O that
 * a commit run wholly in the stretch held up is no sign that it did not
 * fit, so such a stretch counts from the commit's start at least. Lock
 * held. */
static void gap_seen(struct fs *fs, uint64_t now)
{
	uint64_t clock = engine_now(fs), from = fs->disk_req_ns;
	uint64_t len = from && !fs->disk_reqs ? now - from : 0;
	uint64_t idle = tiers_idle_take(fs);
	size_t cycle = engine_cycle_len(fs);
	bool expired = cycle && clock - fs->gap_seen_clock > 2 * cycle;
	if (from)
		fs->gap_measured = true;
	fs->disk_req_ns = now;
	if (len <= fs->gap_seen_ns && !expired)
		return;
	uint64_t c0 = atomic_load(&fs->commit_began_ns), c1 = atomic_load(&fs->commit_ended_ns);
	if (c0 >= from && c1 >= c0 && c1 <= now && now - c0 > idle)
		idle = now - c0;
	if (idle < len)
		len = idle;
	if (len > fs->gap_seen_ns || expired) {
		if (expired)
			fs->gap_prev_ns = fs->gap_seen_ns;
		fs->gap_seen_ns = len;
		fs->gap_seen_clock = clock;
	}
}

/* A request touches IN's blocks: a disk-homed IN ends an idle stretch, and
 * the stretch's outcome sets gap mode. Returns whether the request counts
 * as one being served until disk_demand_done. Lock held. */
static bool disk_demand(struct fs *fs, const struct inode *in)
{
	if (!fs_disk_homed(fs, in))
		return false;
	uint64_t now = tier_now_ns();
	gap_seen(fs, now);
	fs->disk_reqs++;
	if (!fs->tail_plan)
		return true;
	bool gap = false;
	if (fs->learned) {
		uint64_t clock = engine_now(fs);
		idle_ended(fs, clock, now);
		gap = fs->gap_ok_clock &&
		      clock + 1 - fs->gap_ok_clock <= engine_cycle_len(fs) / 4 * 5;
	}
	fs->disk_demand_ns = now;
	gap_mode_set(fs, gap);
	return true;
}

/* The request that disk_demand counted (COUNTED) is served: the last one
 * being served starts a stretch. Lock held. */
static void disk_demand_done(struct fs *fs, bool counted)
{
	if (counted && --fs->disk_reqs == 0) {
		fs->disk_req_ns = tier_now_ns();
		(void)tiers_idle_take(fs); /* the stretch starts now */
	}
}

/* When keeping E in RAM stops paying by itself, for write-back: a clean
 * block pays until its next read (a dead one never), a dirty block until its
 * next access of any kind, since an overwrite makes its write-back moot. A
 * dirty block read, then overwritten within a sub-group, is thus kept, not
 * written back for nothing in between. STALE as for next_read_of.
 *
 * A block written since its last read, whose next access reads it, stays
 * in RAM until then only if the keep plan (policy/keepplan.h) keeps it: the
 * others rank behind every kept one, so they are written back first and
 * the horizon keeps the plan's blocks. By next use alone, which blocks
 * stayed was an accident of when RAM came free (neighbouring sub-groups),
 * and a pipelined update saved no time with them.
 *
 * In gap mode (see "Idle disk") the plan is the tail plan, and a dirty
 * block it drops is due at once. */
static uint64_t keep_until(const struct fs *fs, const struct centry *e, uint64_t stale)
{
	uint64_t t = e->dirty ? e->next_use : e->next_read;
	if (t != UINT64_MAX && t < stale)
		return UINT64_MAX - 1;
	if (e->plan == KEEPPLAN_DROP && (e->dirty || e->written_back) &&
	    e->next_use == e->next_read && t < UINT64_MAX - 1) {
		if (fs->gap_mode && e->dirty)
			return UINT64_MAX - 1; /* out at once: the tail plan's RAM */
		t += PLAN_BEHIND;
	}
	return t;
}

/* Stamp E, block IDX of the file of order id ID (fs_order_id), with the
 * learned order's predictions. */
static void stamp(struct fs *fs, struct centry *e, uint64_t id, uint64_t idx)
{
	e->next_read = engine_next_read(fs, id, idx, &e->next_use);
	e->plan = engine_plan(fs, id, idx);
}

/* Among the newest VICTIM_SCAN entries of the state-S list of each class
 * in LISTS (bit 0: those that may go, bit 1: pinned) that OK(e, ARG)
 * accepts, the one WHEN says is needed farthest ahead: Belady's choice (on
 * a repeating scan the newest are the ones needed last, so the sample
 * holds the answer). NULL if none. */
static struct centry *farthest(struct fs *fs, unsigned lists, int s,
			       bool (*ok)(const struct centry *, bool), bool arg,
			       uint64_t (*when)(const struct fs *, const struct centry *, uint64_t))
{
	uint64_t stale = engine_stale_before(fs);
	struct centry *best = NULL;
	uint64_t best_nr = 0;
	for (int l = 0; l < 2 && best_nr != UINT64_MAX; l++) {
		if (!(lists & 1u << l))
			continue;
		unsigned seen = 0, visited = 0;
		for (struct centry *e = fs->lru_head[l][s];
		     e && seen < VICTIM_SCAN && visited < VICTIM_VISIT; e = e->next) {
			visited++;
			if (!ok(e, arg))
				continue;
			seen++;
			uint64_t nr = when(fs, e, stale);
			if (!best || nr > best_nr) {
				best = e;
				best_nr = nr;
			}
			if (best_nr == UINT64_MAX)
				break;
		}
		atomic_fetch_add(&fs->stats.victim_visits, visited);
	}
	return best;
}

/* The least recently used entry that may go, pinned ones last, among the
 * oldest VISIT of each list (UINT64_MAX: all, every list). Lock held. */
static struct centry *lru_victim(struct fs *fs, uint64_t visit)
{
	for (int pass = 0; pass < 2; pass++) {
		uint64_t visited = 0;
		for (struct centry *e = fs->lru_tail[pass][LRU_CLEAN]; e && visited < visit;
		     e = e->prev) {
			visited++;
			if (evictable(e, pass == 1)) {
				atomic_fetch_add(&fs->stats.victim_visits, visited);
				return e;
			}
		}
		atomic_fetch_add(&fs->stats.victim_visits, visited);
	}
	return NULL;
}

/* Outside gap mode the keep plan's blocks are the last victims, and never
 * read-ahead's: an idle stretch writes them back ("Idle disk"), and once
 * clean they were taken like any other, for read-ahead (a disk read for a
 * disk read) and for misses, where dirty they had waited for a write-back
 * (`make bench`: 3-4 points of hit ratio, 5% slower, three pairs). */
static bool evictable_unkept(const struct centry *e, bool allow_pinned)
{
	return evictable(e, allow_pinned) && e->plan != KEEPPLAN_KEEP;
}

/* The entry to evict. Without a learned order: the least recently used
 * clean entry nobody holds, pinned ones last. With one: among the most
 * recently used candidates (on a repeating scan those are needed last), the
 * one whose next read is farthest — Belady's choice — and only if that read
 * comes after NEED_AT (UINT64_MAX: any). Each walk visits at most
 * VICTIM_VISIT entries. Lock held. */
static struct centry *pick_victim_before(struct fs *fs, uint64_t need_at)
{
	atomic_fetch_add(&fs->stats.victim_scans, 1);
	if (fs->learned) {
		uint64_t stale = engine_stale_before(fs);
		/* Outside gap mode the keep plan's blocks go last, and never
		 * for read-ahead (evictable_unkept). */
		bool spare = fs->tail_plan && !fs->gap_mode;
		for (int pass = spare ? -1 : 0; pass < 2; pass++) {
			bool (*ok)(const struct centry *, bool) =
			    pass < 0 || (spare && need_at != UINT64_MAX) ? evictable_unkept
									 : evictable;
			struct centry *best =
			    farthest(fs, 1u << (pass > 0), LRU_CLEAN, ok, pass == 1, next_read_of);
			if (best &&
			    (need_at == UINT64_MAX || next_read_of(fs, best, stale) > need_at))
				return best;
			if (best && need_at != UINT64_MAX)
				return NULL;
		}
		if (need_at != UINT64_MAX)
			return NULL;
	} else if (need_at != UINT64_MAX) {
		return NULL;
	}
	return lru_victim(fs, VICTIM_VISIT);
}

static struct centry *pick_victim(struct fs *fs)
{
	return pick_victim_before(fs, UINT64_MAX);
}

/* Whether anything is dirty, being written back or being loaded: what a
 * reclaim waiter may wait for. Lock held. */
static bool any_flushable(struct fs *fs)
{
	if (lru_oldest(fs, LRU_DIRTY, true) || lru_oldest(fs, LRU_FLUSHING, true))
		return true;
	for (struct centry *e = lru_oldest(fs, LRU_CLEAN, true); e; e = lru_older(fs, e, true))
		if (e->state == CE_LOADING)
			return true;
	return false;
}

/* A new entry on a free RAM slot: 0, -ENOSPC (no free slot), -ENOMEM. */
static int entry_new(struct fs *fs, struct centry **out)
{
	int64_t slot = tier_alloc(fs->tiers[fs->ram]);
	if (slot < 0)
		return -ENOSPC;
	struct centry *e = calloc(1, sizeof(*e));
	if (!e) {
		tier_free(fs->tiers[fs->ram], (uint64_t)slot);
		return -ENOMEM;
	}
	e->slot = (uint64_t)slot;
	e->lru = LRU_NONE;
	e->buf = tier_ram_ptr(fs->tiers[fs->ram], (uint64_t)slot);
	fs->ncached++;
	*out = e;
	return 0;
}

static bool volatile_inode(const struct inode *in)
{
	return in->attr.flags & META_F_VOLATILE;
}

/* Background write-back to a tier that fails its writes backs off: the
 * flusher chose the block it had just failed to write again at once, and
 * retried as fast as the disk answered (tens of thousands of failed writes
 * and log lines a second, t_wbstorm). After a failure the tier's blocks
 * wait WB_BACKOFF_MIN_NS, doubled at each failure up to WB_BACKOFF_MAX_NS;
 * then one write-back (a probe) goes out, and the others wait for its
 * result. A write-back that succeeds ends the back-off: everything goes
 * out again at once. fsync and unmount (TIER_PRIO_DEMAND) do not wait, so
 * that they report the error (or find the disk works again). */
#define WB_BACKOFF_MIN_NS (10 * 1000000ULL)
#define WB_BACKOFF_MAX_NS (1000 * 1000000ULL)
/* How long a request for RAM waits while write-back fails and none
 * succeeds, before it gets EIO, is writeback_timeout: a disk that fails
 * for a moment must not fail writes, one that keeps failing must not hang
 * them for ever. A parallel file system's failover can take minutes. */
/* At most one log line per tier per period for failed write-backs. */
#define WB_LOG_NS (1000 * 1000000ULL)
/* Per tier index, as g_wb_epoch; guarded by fs->lock. */
static struct {
	uint64_t retry_at; /* 0: not backing off */
	uint64_t backoff;  /* the delay now */
	bool probing;	   /* a write-back probes the tier */
	uint64_t failed;   /* failures since the last success */
	struct tier_ratelimit log;
} g_wb[CONF_MAX_TIERS];
/* Tiers whose retry_at is set: bg_candidate, on every step of the
 * flusher's walks, asks nothing more while it is 0. */
static unsigned g_wb_nheld;

/* Whether background write-back to tier T waits. Lock held. */
static bool wb_tier_held(unsigned t)
{
	return g_wb[t].retry_at && (g_wb[t].probing || tier_now_ns() < g_wb[t].retry_at);
}

/* Whether E waits for its tier's back-off: the tier it lives on, or the
 * one its last write-back failed on (a move to a pinned tier). Lock held. */
static bool wb_held_back(const struct centry *e)
{
	if (!g_wb_nheld)
		return false;
	const struct blk *b = fs_blk(e->inode, e->idx);
	if (b && b->tier != TIER_NONE && wb_tier_held(b->tier))
		return true;
	return e->wb_failed && wb_tier_held(e->wb_tier);
}

/* Whether background write-back should take E now. SPILL: memory is short
 * and nothing else is left to write, so blocks whose home is RAM go out too. */
static bool bg_candidate(const struct centry *e, bool spill)
{
	if (!e->dirty || e->flushing || e->state != CE_VALID || e->refs)
		return false;
	if (wb_held_back(e))
		return false;
	if (e->pinned || volatile_inode(e->inode))
		return spill;
	return true;
}

/* Whether a reclaim must spill RAM-homed blocks: no other dirty block can be
 * written. Spilling a gradient while a state block could go instead costs a
 * write and a read of a block the rule keeps in RAM for speed. */
static bool must_spill(struct fs *fs)
{
	if (fs->lru_tail[0][LRU_FLUSHING])
		return false;
	for (struct centry *e = fs->lru_tail[0][LRU_DIRTY]; e; e = e->prev)
		if (bg_candidate(e, false))
			return false;
	for (struct centry *e = fs->lru_tail[0][LRU_CLEAN]; e; e = e->prev)
		if (evictable(e, false))
			return false;
	return true;
}

/* Whether E's slot comes free when its write-back, already under way,
 * completes. Only those: waiting for a write-back yet to be started stalls
 * the caller longer than the read it saves (measured on a capped disk). */
static bool write_back_frees(const struct centry *e, bool unused)
{
	(void)unused;
	if (e->pinned || volatile_inode(e->inode))
		return false;
	return e->flushing;
}

/* Whether a block whose write-back is under way is read later than AFTER.
 * Belady's choice is then that block, not the clean one needed sooner:
 * wait for the write-back rather than evict a block that will be read
 * again within the step. Learned order only. */
static bool farther_dirty(struct fs *fs, uint64_t after)
{
	struct centry *d = farthest(fs, 1u, LRU_FLUSHING, write_back_frees, false, next_read_of);
	return d && next_read_of(fs, d, engine_stale_before(fs)) > after;
}

/* Predictions are stamped on an entry when it is accessed, and there are
 * none while no order is learned: at the moment one is, every block in RAM
 * looked dead (next read unknown) and went first, whereas Belady keeps what
 * is in RAM and lets the blocks read after it go. A relearned cycle makes
 * the old stamps wrong the same way. So the blocks in RAM are stamped again
 * from the new cycle, and the clock notes which of them have not been used
 * since (kept_over_due). O(cached blocks), once per cycle learned. Lock
 * held. */
void cache_restamp(struct fs *fs)
{
	for (int l = 0; l < 2; l++)
		for (int st = 0; st < LRU_NSTATES; st++)
			for (struct centry *e = fs->lru_head[l][st]; e; e = e->next)
				if (e->inode)
					stamp(fs, e, fs_order_id(e->inode), e->idx);
	fs->wb_horizon_ok = false;
	fs->learn_clock = fs->clock;
	/* The write-burst reserve counts stalls per cycle of the new one. */
	fs->idle_stalls = 0;
	fs->stall_clock = engine_now(fs);
}

void cache_replan(struct fs *fs)
{
	for (int l = 0; l < 2; l++)
		for (int st = 0; st < LRU_NSTATES; st++)
			for (struct centry *e = fs->lru_head[l][st]; e; e = e->next)
				if (e->inode)
					e->plan = engine_plan(fs, fs_order_id(e->inode), e->idx);
	fs->wb_horizon_ok = false;
}

/* ---- write-back horizon (learned order) --------------------------------- */

/* The K-th smallest (0-based) of A[0..N), N > K; reorders A (Hoare's
 * selection: linear on average, no allocation, under fs->lock). */
static uint64_t select_kth(uint64_t *a, size_t n, size_t k)
{
	ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1;
	while (lo < hi) {
		uint64_t pivot = a[lo + (hi - lo) / 2];
		ptrdiff_t i = lo - 1, j = hi + 1;
		for (;;) {
			do
				i++;
			while (a[i] < pivot);
			do
				j--;
			while (a[j] > pivot);
			if (i >= j)
				break;
			uint64_t t = a[i];
			a[i] = a[j];
			a[j] = t;
		}
		if ((ptrdiff_t)k <= j)
			hi = j;
		else
			lo = j + 1;
	}
	return a[k];
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
	uint64_t room = fs->cache_slots > fs->npinned ? fs->cache_slots - fs->npinned : 0;
	uint64_t margin = fs_persistent_queue(fs) + fs->conf.threads;
	return room > margin ? room - margin : 0;
}

/* The blocks keep_horizon keeps at most (see there), less the reserve for
 * write bursts (wb_reserve_adjust). */
static uint64_t cache_keep_budget(struct fs *fs)
{
	uint64_t room = cache_keep_room(fs);
	return room > fs->wb_reserve ? room - fs->wb_reserve : 0;
}

uint64_t cache_plan_budget(struct fs *fs)
{
	uint64_t budget = cache_keep_budget(fs);
	uint64_t reserve =
	    (uint64_t)fs->conf.threads * (fs_request_blocks(fs) - 1) + fs->prefetch_max;
	return budget > reserve ? budget - reserve : 0;
}

/* With a learned order, background write-back does what Belady does with
 * the RAM the rules leave: the blocks read soonest stay until they are read,
 * and only the others are on their way out. Writing one of those back early
 * costs nothing (it is written when evicted anyway) and keeps clean victims
 * at hand. Writing back a block that stays costs a disk write every step
 * for nothing: the step reads it from RAM and overwrites it. The horizon is
 * keep_until() of the last block that stays; a dirty block needed later is
 * due for write-back. Left out of the kept set are a slot for each
 * write-back in flight, so that reclaim finds write-backs already under
 * way, and one for each FUSE worker, which may need one for the request it
 * serves. With only the first, on the bench with a fast disk, reads that
 * missed waited for a write-back to free a slot: the update phase took 9%
 * longer, with 0.03 GB more reads and 0.05 GB fewer writes per step. Those
 * writes cost 2-3% where the disk's write bandwidth bounds the step (1 rank,
 * disk capped at 400 MB/s); with 4 ranks there it is a wash. Lock held. */
static uint64_t keep_horizon(struct fs *fs)
{
	uint64_t budget = cache_keep_budget(fs);
	if (!budget)
		return 0;
	size_t keep = (size_t)budget, n = 0;
	uint64_t stale = engine_stale_before(fs);
	for (int st = 0; st < LRU_NSTATES; st++)
		for (struct centry *e = fs->lru_head[0][st]; e; e = e->next)
			fs->wb_scratch[n++] = keep_until(fs, e, stale);
	if (n <= keep)
		return UINT64_MAX;
	return select_kth(fs->wb_scratch, n, keep - 1);
}

/* Whether no persistent tier has a read in flight. Lock held. */
static bool persistent_reads_idle(struct fs *fs)
{
	for (int i = 0; i < fs->conf.ntiers; i++)
		if (tier_persistent(fs->tiers[i]) && tier_busy(fs->tiers[i], TIER_OP_READ))
			return false;
	return true;
}

/* Idle stalls per write burst in a cycle from which the reserve grows
 * (by that many blocks); below one per burst it shrinks. */
#define WB_STALL_GROW 4

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
 * (the bench: about 150 a step), and growing by one a cycle there took
 * RAM from the kept set step after step. At most half the room: where
 * the disk's writes bound the step, stalls stay whatever the reserve (in
 * one run on a 16-core machine, capped at three quarters of the room, it
 * grew to 224 blocks of 234 while the steps went from 5.1 s to 5.7 s).
 * Lock held. */
static void wb_reserve_adjust(struct fs *fs, uint64_t now)
{
	uint64_t n = engine_cycle_len(fs);
	if (!n || now - fs->stall_clock < n)
		return;
	uint64_t reserve = fs->wb_reserve, cap = cache_keep_room(fs) / 2;
	uint64_t runs = fs->write_runs ? fs->write_runs : 1, per = fs->idle_stalls / runs;
	if (per >= WB_STALL_GROW)
		reserve += per;
	else if (fs->idle_stalls < runs)
		reserve -= (reserve + 15) / 16;
	if (reserve > cap)
		reserve = cap;
	if (reserve != fs->wb_reserve) {
		fs->wb_reserve = reserve;
		fs->wb_horizon_ok = false;
	}
	fs->idle_stalls = 0;
	fs->stall_clock = now;
}

/* keep_horizon, recomputed once the learner's clock has moved by 1/64 of
 * the entries it ranks (at least 16 accesses): the ranking shifts by about
 * one entry per access, and walking a large cache for every write-back
 * would hold fs->lock too long. Lock held. */
static uint64_t wb_horizon(struct fs *fs)
{
	uint64_t now = engine_now(fs), every = fs->ncached / 64;
	if (every < 16)
		every = 16;
	wb_reserve_adjust(fs, now);
	if (!fs->wb_horizon_ok || now - fs->wb_horizon_at >= every) {
		fs->wb_horizon = keep_horizon(fs);
		fs->wb_horizon_at = now;
		fs->wb_horizon_ok = true;
	}
	return fs->wb_horizon;
}

/* Whether dirty block E, under a learned order, is due for write-back
 * against HORIZON: needed after it, or its next use unknown or overdue (a
 * block outside the step's cycle, a file written once, saves nothing by
 * staying dirty and must not wait for the training to stop). Lock held. */
static bool due_learned(struct fs *fs, const struct centry *e, uint64_t horizon)
{
	uint64_t t = keep_until(fs, e, engine_stale_before(fs));
	return t >= UINT64_MAX - 1 || t > horizon;
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
 * its blocks. With 4 ranks on the bench that step read 0.22-0.25 of its
 * bytes from RAM against 0.32 in later steps; with this, 0.31-0.34.
 * Waiting so for every kept clean block, not only those, read 0.04 GB less
 * and wrote 0.08 GB more per step in the steady state (1 rank). Lock held. */
static bool kept_over_due(struct fs *fs, const struct centry *v)
{
	if (v->stamp > fs->learn_clock)
		return false;
	uint64_t horizon = wb_horizon(fs);
	if (keep_until(fs, v, engine_stale_before(fs)) > horizon)
		return false;
	uint64_t visited = 0;
	bool found = false;
	for (struct centry *e = fs->lru_tail[0][LRU_DIRTY]; e && visited < VICTIM_VISIT && !found;
	     e = e->prev) {
		visited++;
		found = bg_candidate(e, false) && due_learned(fs, e, horizon);
	}
	atomic_fetch_add(&fs->stats.victim_visits, visited);
	return found;
}

#define STUCK_NS (100 * 1000000ULL)

/* Whether the tier that clean V would be read back from has no read in
 * flight. Waiting for a farther block's write-back instead of evicting V
 * (farther_dirty, kept_over_due) saves a read of V later, and pays while
 * reads fill that time. With the tier's reads idle, every request is
 * waiting for RAM, and the wait only turns the disk's write time into
 * the step's: DeepSpeed without its pipeline (the default) reads a
 * sub-group, then writes it, and with the wait each write waited for the
 * write-back of one before while the disk read nothing (the bench,
 * `BENCH_PIPELINE=off`: 8.5-9.3 s update phases once the order was
 * learned, against 5.8-6.3 s before it; reads and writes each busy 47%
 * of the time). Evicting V there instead: 7.8-7.9 s. In DeepSpeed's
 * pipelined order, where the wait holds up a read stream while the
 * writes go on, reads are in flight and nothing changes (5.1 s against
 * 5.2 with 1 rank, 5.2 s either way with 4; the same hit ratio). Never
 * waiting at all cost 10 points of hit ratio with 4 ranks (6.0 s against
 * 5.2). */
static bool reads_idle(struct fs *fs, const struct centry *v)
{
	const struct blk *b = fs_blk(v->inode, v->idx);
	return b && b->tier != TIER_NONE && !tier_busy(fs->tiers[b->tier], TIER_OP_READ);
}

/* A free RAM slot for a new entry (for IN's block IDX, named in errors),
 * evicting or waiting for write-back. Lock held; may drop it while
 * waiting. */
static int entry_alloc(struct fs *fs, const struct inode *in, uint64_t idx, struct centry **out)
{
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
		struct centry *v = pick_victim(fs);
		if (v && patient && fs->learned && !reads_idle(fs, v) &&
		    (farther_dirty(fs, next_read_of(fs, v, engine_stale_before(fs))) ||
		     kept_over_due(fs, v)))
			v = NULL;
		if (v) {
			entry_evict(fs, v);
			continue;
		}
		bool flushable = any_flushable(fs);
		if (!flushable || !patient) {
			/* Nothing to wait for, or waiting does not help: an
			 * entry the bounded walks did not reach, before giving
			 * up. */
			v = lru_victim(fs, UINT64_MAX);
			if (v) {
				entry_evict(fs, v);
				continue;
			}
		}
		if (!flushable) {
			/* Every entry is held by a request in flight, or dirty
			 * with nowhere to go: report it rather than hang. */
			TFS_LOG("cache: no RAM block can be freed (%llu cached, %llu dirty)",
				(unsigned long long)fs->ncached, (unsigned long long)fs->ndirty);
			rc = -ENOSPC;
			break;
		}
		if (!stalled && fs->learned && persistent_reads_idle(fs)) {
			stalled = true;
			fs->idle_stalls++;
			atomic_fetch_add(&fs->stats.idle_stalls, 1);
		}
		uint64_t flushed = atomic_load(&fs->stats.flushes);
		fs->reclaim_waiters++;
		pthread_cond_signal(&fs->flusher_cond);
		/* Timed: a wake one waiter missed (another took it, or did
		 * not leave) costs that waiter STUCK_NS at most, and a waiter
		 * still tells whether write-back moves. */
		uint64_t t0 = tier_now_ns(), until = t0 + STUCK_NS;
		pthread_cond_timedwait(
		    &fs->reclaim_cond, &fs->lock,
		    &(struct timespec){.tv_sec = (time_t)(until / 1000000000ULL),
				       .tv_nsec = (long)(until % 1000000000ULL)});
		fs->reclaim_waiters--;
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
			 * the disk fails (t_wbstorm); a slow disk still
			 * completes write-backs and never gets here. */
			if (now - stuck_since >
				(uint64_t)fs->conf.writeback_timeout_ms * 1000000ULL &&
			    atomic_load(&fs->stats.flush_errors) != errs_since) {
				TFS_LOG("cache: no RAM block for inode %llu block %llu: write-back "
					"has failed for %llu s (%llu blocks dirty): EIO",
					(unsigned long long)in->ino, (unsigned long long)idx,
					(unsigned long long)((now - stuck_since) / 1000000000ULL),
					(unsigned long long)fs->ndirty);
				rc = -EIO;
				break;
			}
		}
	}
	/* What woke this waiter may serve the next one too. */
	if (waited && fs->reclaim_waiters)
		pthread_cond_signal(&fs->reclaim_cond);
	return rc;
}

static bool tier_full(struct fs *fs, int t)
{
	return tier_slots_used(fs->tiers[t]) >= tier_slots_total(fs->tiers[t]);
}

/* Whether tier T has room for a write-back to a new slot (flush_start):
 * the old slot is freed only at the next commit, so such copies hold
 * slots a while; a reserve of 1/64 of the tier (at least 64 slots) stays
 * for new blocks, which would otherwise spill elsewhere or get ENOSPC. */
static bool cow_room_after(struct fs *fs, int t, uint64_t freed)
{
	uint64_t total = tier_slots_total(fs->tiers[t]);
	uint64_t reserve = total / 64 > 64 ? total / 64 : 64;
	uint64_t used = tier_slots_used(fs->tiers[t]);
	return (used > freed ? used - freed : 0) + reserve < total;
}

static bool cow_room(struct fs *fs, int t)
{
	return cow_room_after(fs, t, 0);
}

/* How many slots of tier T wait for a commit to come free. Lock held. */
static uint64_t freed_on(const struct fs *fs, int t)
{
	uint64_t n = 0;
	for (size_t i = 0; i < fs->nfreed; i++)
		n += fs->freed[i].tier == t;
	return n;
}

/* Whether a commit has slots in hand that it frees once it is on disk:
 * while one runs they are in neither fs->freed nor the held list, and
 * the tier looks as if every slot held a live block. Lock held. */
static bool commit_retiring(struct fs *fs)
{
	return commit_held() ||
	       atomic_load(&fs->commit_began_ns) > atomic_load(&fs->commit_ended_ns);
}

/* Say once per tier that its write-backs wait for commits to free slots:
 * each such wait is a commit in the middle of the I/O. Lock held. */
static void log_short_once(struct fs *fs, int t)
{
	if (fs->short_logged & 1u << t)
		return;
	fs->short_logged |= 1u << t;
	TFS_LOG("tier %s: short of free slots (fewer than 1/64 of them, or 64); write-backs "
		"wait for the commit that frees their earlier copies' slots, a stall in "
		"the middle of the I/O; a tier with more room runs without",
		tier_name(fs->tiers[t]));
}

/* Write-backs to a new slot in flight, all tiers: each old slot comes
 * free at the commit after it completes. Lock held. */
static uint64_t moving_slots(const struct fs *fs)
{
	uint64_t n = 0;
	for (int i = 0; i < fs->conf.ntiers; i++)
		n += fs->moving[i];
	return n;
}

/* cache_commit from a caller that holds fs->lock, which the commit takes
 * itself: dropped meanwhile, so whatever the caller read under it may
 * have changed. */
static int commit_unlocked(struct fs *fs)
{
	pthread_mutex_unlock(&fs->lock);
	int rc = cache_commit(fs);
	pthread_mutex_lock(&fs->lock);
	return rc;
}

/* Give block IDX of IN a slot on a persistent tier. Lock held. */
static int assign_durable(struct fs *fs, struct inode *in, uint64_t idx)
{
	struct blk *b = fs_blk(in, idx); /* reserved by the caller */
	if (b->tier != TIER_NONE)
		return 0;
	int pref = in->home;
	if (pref < 0 || !tier_persistent(fs->tiers[pref]))
		pref = fs->stripe.n ? stripe_tier(&fs->stripe, in->ino, idx) : -1;
	if (pref < 0)
		return -ENOSPC; /* no persistent tier at all: RAM is all there is */
	bool full[CONF_MAX_TIERS] = {0};
	bool committed = false;
	int waits = 0;
	for (int tries = 0; tries < CONF_MAX_TIERS * 2; tries++) {
		for (int i = 0; i < fs->conf.ntiers; i++)
			full[i] = full[i] || !tier_persistent(fs->tiers[i]) || tier_full(fs, i);
		int t = placement_spill(&fs->conf, &fs->stripe, pref, full);
		if (t < 0 && (fs->nfreed || commit_retiring(fs)) && !committed) {
			/* Slots of deleted blocks come back only once their
			 * removal is committed: do that now rather than fail
			 * (and after a commit that has some in hand, which
			 * shows none in fs->freed while it runs). */
			committed = true;
			(void)commit_unlocked(fs);
			if (b->tier != TIER_NONE)
				return 0;
			memset(full, 0, sizeof(full));
			continue;
		}
		if (t < 0 && moving_slots(fs) && waits++ < 64) {
			/* Copies being written back hold two slots each, the
			 * old one retired once they are whole and committed:
			 * wait for one (every completion broadcasts), then
			 * commit again. */
			pthread_cond_wait(&fs->cond, &fs->lock);
			if (b->tier != TIER_NONE)
				return 0;
			committed = false;
			memset(full, 0, sizeof(full));
			tries--;
			continue;
		}
		if (t < 0)
			return t;
		int64_t slot = tier_alloc(fs->tiers[t]);
		if (slot >= 0) {
			b->tier = (uint16_t)t;
			b->unwritten = false;
			b->slot = (uint64_t)slot;
			b->csum = 0;
			return 0;
		}
		full[t] = true;
	}
	return -ENOSPC;
}

/* Undo assign_durable for B while its slot is still unused: no entry took
 * the block, nothing was written there, nothing committed. Lock held. */
static void unassign_durable(struct fs *fs, struct blk *b)
{
	if (!b->ce && b->csum == 0 && b->tier != TIER_NONE && !b->unwritten) {
		tier_free(fs->tiers[b->tier], b->slot);
		b->tier = TIER_NONE;
	}
}

enum get_mode {
	GET_READ,	/* existing data or a hole (NULL) */
	GET_WRITE_PART, /* will be partly overwritten: needs its data */
	GET_WRITE_FULL, /* will be fully overwritten: contents do not matter */
	GET_WRITE_HEAD, /* overwritten from its start to EOF: the rest reads as
			   zeros, so a new entry is zeroed, not loaded */
};

/* Reference the cached entry of block IDX, loading it when needed. Lock
 * held (dropped while loading). *out is NULL for a hole with GET_READ. A
 * new entry for a write mode is returned CE_LOADING: the caller copies its
 * bytes in, then calls write_filled. */
static int entry_get(struct fs *fs, struct inode *in, uint64_t idx, enum get_mode mode,
		     struct centry **out)
{
	if (mode == GET_READ && !fs_blk(in, idx)) {
		*out = NULL; /* a hole in a chunk never written: keep it so */
		return 0;
	}
	int rc = fs_map_reserve(fs, in, idx);
	if (rc)
		return rc;
	struct blk *b = fs_blk(in, idx);
	/* GET_WRITE_HEAD was chosen against this size. */
	uint64_t size0 = in->attr.size;
	for (;;) {
		struct centry *e = b->ce;
		if (e) {
			if (e->state == CE_LOADING) {
				pthread_cond_wait(&fs->cond, &fs->lock);
				continue;
			}
			atomic_fetch_add(&fs->stats.hits, 1);
			if (e->prefetched) {
				/* Overwritten whole, its read was for nothing:
				 * counted used, it kept prefetch_pays() from
				 * pausing read-ahead that only fed overwrites. */
				bool whole = mode == GET_WRITE_FULL || mode == GET_WRITE_HEAD;
				e->prefetched = false;
				fs->nprefetched--;
				atomic_fetch_add(whole ? &fs->stats.prefetch_wasted
						       : &fs->stats.prefetch_hits,
						 1);
			}
			touch(fs, e);
			e->refs++;
			*out = e;
			return 0;
		}
		if ((b->tier == TIER_NONE || fs_blk_unwritten(b)) && mode == GET_READ) {
			/* A hole, or a slot set aside: zeros, no entry. */
			*out = NULL;
			return 0;
		}
		bool pin = false, assigned = false;
		int home = in->home;
		if (b->tier == TIER_NONE) {
			if (home == fs->ram && fs->npinned < fs->pin_limit)
				pin = true;
			else if ((rc = assign_durable(fs, in, idx)))
				return rc;
			else
				assigned = true;
		}
		if ((rc = entry_alloc(fs, in, idx, &e))) {
			/* Else taken (and counted in st_blocks) until a remount. */
			if (assigned)
				unassign_durable(fs, b);
			return rc;
		}
		/* entry_alloc may have dropped the lock: re-check. A pin
		 * (cache_pin) that moved the file meanwhile did not see this
		 * entry: choose again under its new home, or the entry stays
		 * pinned in RAM, or unpinned with no durable slot. */
		if (b->ce || in->home != home) {
			entry_release_slot(fs, e);
			/* A slot chosen for the old home: choose again (a pin
			 * to RAM needs none). */
			if (assigned)
				unassign_durable(fs, b);
			continue;
		}
		e->inode = in;
		e->idx = idx;
		e->refs = 1;
		e->pinned = pin || (in->home == fs->ram && b->tier == TIER_NONE);
		if (e->pinned && !pin)
			fs->npinned++;
		else if (pin)
			fs->npinned++;
		b->ce = e;
		in->nce++;
		lru_push(fs, e);
		e->stamp = ++fs->clock;
		/* Load (or zero) outside the lock; others wait on CE_LOADING.
		 * A new entry for a write stays so until the write's bytes
		 * are in (write_filled): until then its slot holds another
		 * block's bytes (t_landing, 256 KiB blocks) or zeros where the
		 * write goes, neither of which a reader may get. */
		e->state = CE_LOADING;
		if (mode == GET_WRITE_FULL) {
			*out = e;
			return 0;
		}
		/* Another writer extended the file while the lock was dropped
		 * (its block since written back and evicted): the block holds
		 * bytes past the caller's write, to load, not zero. */
		if (mode == GET_WRITE_HEAD && in->attr.size != size0)
			mode = GET_WRITE_PART;
		uint16_t tier = b->tier;
		uint32_t len = blk_io_len(b);
		uint64_t slot = b->slot, csum = b->csum;
		bool written = tier != TIER_NONE && (csum != 0 || b->ce == NULL);
		pthread_mutex_unlock(&fs->lock);
		if (tier == TIER_NONE || !written || mode == GET_WRITE_HEAD) {
			memset(e->buf, 0, fs->bs);
			rc = 0;
		} else {
			atomic_fetch_add(&fs->stats.misses, 1);
			rc = tier_rw(fs->tiers[tier], TIER_OP_READ, TIER_PRIO_DEMAND, slot, e->buf,
				     len, &csum);
		}
		pthread_mutex_lock(&fs->lock);
		if (rc) {
			char path[PATH_MAX];
			if (fs_inode_path(fs, in->ino, path, sizeof(path)))
				snprintf(path, sizeof(path), "inode %llu",
					 (unsigned long long)in->ino);
			TFS_LOG("%s: block %llu on tier %s slot %llu: read failed: %s", path,
				(unsigned long long)idx, tier_name(fs->tiers[tier]),
				(unsigned long long)slot, strerror(-rc));
			e->refs--;
			entry_drop(fs, e);
			wake_all(fs);
			return rc;
		}
		if (mode == GET_READ) {
			e->state = CE_VALID;
			pthread_cond_broadcast(&fs->cond); /* frees nothing */
		}
		*out = e;
		return 0;
	}
}

static void entry_put(struct fs *fs, struct centry *e)
{
	if (--e->refs)
		return;
	if (fs->reclaim_waiters || fs->ref_waiters)
		pthread_cond_broadcast(&fs->cond);
	/* A dirty block let go helps no reclaim waiter: its write-back will. */
	if (fs->reclaim_waiters && evictable(e, true))
		pthread_cond_signal(&fs->reclaim_cond);
}

/* Wait on fs->cond for an entry nobody holds: entry_put announces the last
 * reference only to counted waiters. Without the count, an fsync waiting
 * for a reader's reference hung once no other event came (t_concurrent,
 * ASan build, about 1 run in 40). Lock held. */
static void wait_unreferenced(struct fs *fs)
{
	fs->ref_waiters++;
	pthread_cond_wait(&fs->cond, &fs->lock);
	fs->ref_waiters--;
}

/* ---- data path ---------------------------------------------------------- */

/* Blocks read ahead of a sequential reader, per tier of the stripe. */
#define READAHEAD_PER_TIER 8

/* Sequential reads of blocks on persistent tiers: start loading the next
 * blocks now, into free RAM only, so every tier of the stripe is busy while
 * the reader works through what it has (a reader alone keeps ~8 requests in
 * flight through FUSE, too few to drive several devices). Once the access
 * order is learned, the prefetcher does this job better. Lock held. */
static void read_ahead(struct fs *fs, struct inode *in, uint64_t first, uint64_t last)
{
	bool seq = first == in->ra_next || (first == 0 && last > 0);
	in->ra_next = last + 1;
	if (!seq || fs->learned || !fs->stripe.n)
		return;
	uint64_t window = READAHEAD_PER_TIER * (uint64_t)fs->stripe.n;
	for (uint64_t i = last + 1; i <= last + window; i++) {
		if (fs->prefetch_inflight >= fs->prefetch_max + window)
			break;
		if (i * fs->bs >= in->attr.size || cache_prefetch(fs, in, i, UINT64_MAX) < 0)
			break;
	}
}

int cache_read(struct fs *fs, struct inode *in, uint64_t off, size_t len, fuse_req_t req)
{
	pthread_mutex_lock(&fs->lock);
	uint64_t size = in->attr.size;
	if (off >= size || len == 0) {
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_buf(req, NULL, 0);
		return 1;
	}
	if (len > size - off)
		len = size - off;
	int rc = fs_inode_load_map(fs, in);
	if (rc) {
		pthread_mutex_unlock(&fs->lock);
		return rc;
	}
	bool counted = disk_demand(fs, in);
	uint64_t first = off / fs->bs, last = (off + len - 1) / fs->bs;
	size_t n = (size_t)(last - first + 1);
	struct iovec stack_iov[32];
	struct centry *stack_ents[32];
	struct iovec *iov = n <= 32 ? stack_iov : calloc(n, sizeof(*iov));
	struct centry **ents = n <= 32 ? stack_ents : calloc(n, sizeof(*ents));
	if (!iov || !ents) {
		rc = -ENOMEM;
		n = 0;
		goto out;
	}
	size_t got = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t idx = first + i;
		uint64_t boff = i == 0 ? off % fs->bs : 0;
		uint64_t blen = fs->bs - boff;
		if (blen > len - got)
			blen = len - got;
		ents[i] = NULL;
		engine_access(fs, fs_order_id(in), idx, false);
		rc = entry_get(fs, in, idx, GET_READ, &ents[i]);
		if (rc) {
			n = i;
			goto out;
		}
		if (ents[i])
			stamp(fs, ents[i], fs_order_id(in), idx);
		iov[i].iov_base = (char *)(ents[i] ? ents[i]->buf : fs->zero) + boff;
		iov[i].iov_len = blen;
		got += blen;
	}
	read_ahead(fs, in, first, last);
	fs_read_atime(fs, in);
	pthread_mutex_unlock(&fs->lock);
	/* The reply copies into the kernel before returning: the references
	 * keep the buffers in place until then. libfuse frees REQ whether or
	 * not the reply reaches the kernel (it fails only once the connection
	 * is gone): the caller must not reply again, so this counts as
	 * replied either way. */
	fuse_reply_iov(req, iov, (int)n);
	pthread_mutex_lock(&fs->lock);
	rc = 1;
out:
	for (size_t i = 0; i < n; i++)
		if (ents && ents[i])
			entry_put(fs, ents[i]);
	disk_demand_done(fs, counted);
	pthread_mutex_unlock(&fs->lock);
	if (iov != stack_iov)
		free(iov);
	if (ents != stack_ents)
		free(ents);
	return rc;
}

/* Whether a write of BLEN bytes from DATA into E can take DATA's slot
 * instead of copying: a whole block, DATA exactly the donor slot's memory,
 * and nobody else holding E (a reply or a write-back reading the old
 * buffer would see it reused). Lock held. */
static bool adoptable(struct fs *fs, const struct centry *e, const char *data, size_t blen,
		      const uint64_t *donor)
{
	return donor && *donor != CACHE_NO_SLOT && blen == fs->bs && e->refs == 1 && !e->flushing &&
	       data == cache_slot_ptr(fs, *donor);
}

/* The write's bytes are in E: a new entry's readers may have it now. */
static void write_filled(struct fs *fs, struct centry *e)
{
	if (e->state == CE_LOADING) {
		e->state = CE_VALID;
		pthread_cond_broadcast(&fs->cond); /* frees nothing */
	}
}

/* cache_write's work. Lock held (dropped while copying). */
static int write_locked(struct fs *fs, struct inode *in, uint64_t off, const char *buf, size_t len,
			uint64_t *donor, bool kill_setid)
{
	int rc = fs_inode_load_map(fs, in);
	size_t done = 0;
	bool due = false; /* a block written is due for write-back (learned order) */
	bool counted = disk_demand(fs, in);
	while (!rc && done < len) {
		uint64_t pos = off + done;
		uint64_t idx = pos / fs->bs, boff = pos % fs->bs;
		size_t blen = fs->bs - boff;
		if (blen > len - done)
			blen = len - done;
		/* A write from the block's start to EOF or past it leaves nothing
		 * of the old block to keep: the last, partial block of a file
		 * rewritten whole (DeepSpeed's swap files are rarely a multiple
		 * of the block size) needs no read from disk. */
		enum get_mode mode = boff == 0 && blen == fs->bs		? GET_WRITE_FULL
				     : boff == 0 && pos + blen >= in->attr.size ? GET_WRITE_HEAD
										: GET_WRITE_PART;
		struct centry *e;
		/* A partial write needs the block's data first: to the
		 * learner it is a read, which read-ahead serves and eviction
		 * keeps for (blocks larger than one request). */
		engine_access(fs, fs_order_id(in), idx, mode != GET_WRITE_PART);
		rc = entry_get(fs, in, idx, mode, &e);
		if (rc)
			break;
		stamp(fs, e, fs_order_id(in), idx);
		/* A block being written back must not change under the write:
		 * its checksum is computed over what goes out. */
		while (e->flushing)
			pthread_cond_wait(&fs->cond, &fs->lock);
		if (!e->dirty) {
			if (e->written_back)
				atomic_fetch_add(&fs->stats.flushes_rewritten, 1);
			e->written_back = false;
		}
		entry_mark_dirty(fs, e);
		if (fs->learned && !e->pinned && !volatile_inode(in))
			due = due || due_learned(fs, e, fs->wb_horizon_ok ? fs->wb_horizon : 0);
		if (adoptable(fs, e, buf + done, blen, donor)) {
			/* The request's data already lies in a slot of its own:
			 * the block takes that slot, the worker the old one. */
			uint64_t old = e->slot;
			e->slot = *donor;
			e->buf = (char *)buf + done;
			*donor = old;
			atomic_fetch_add(&fs->stats.writes_adopted, 1);
		} else {
			pthread_mutex_unlock(&fs->lock);
			memcpy((char *)e->buf + boff, buf + done, blen);
			pthread_mutex_lock(&fs->lock);
		}
		write_filled(fs, e);
		entry_put(fs, e);
		done += blen;
		if (off + done > in->attr.size)
			in->attr.size = off + done;
	}
	if (done) {
		in->unsynced = true;
		fs_touch_mc(&in->attr);
		if (kill_setid)
			fs_kill_setid(&in->attr);
		in->attr_dirty = true;
	}
	/* dirty_over still wakes the flusher with a learned order: it then
	 * finds what is due ahead of reclaim (waking it only for due blocks
	 * cost 4 points of hit ratio on the bench); the horizon it checks is
	 * cached (wb_horizon), so a wake is a bounded scan. */
	if (due || dirty_over(fs))
		pthread_cond_signal(&fs->flusher_cond);
	disk_demand_done(fs, counted);
	return done ? (int)done : rc;
}

int cache_write(struct fs *fs, struct inode *in, uint64_t off, const char *buf, size_t len,
		uint64_t *donor, bool kill_setid)
{
	pthread_mutex_lock(&fs->lock);
	while (in->resizing)
		pthread_cond_wait(&fs->cond, &fs->lock);
	in->nwriting++;
	int rc = write_locked(fs, in, off, buf, len, donor, kill_setid);
	if (--in->nwriting == 0 && in->resizing)
		pthread_cond_broadcast(&fs->cond); /* frees nothing */
	pthread_mutex_unlock(&fs->lock);
	return rc;
}

/* Drop the data of blocks FROM to TO (exclusive). Lock held; the caller
 * zeroed a partial block at either end through write_locked. KEEP_EMPTY
 * (fallocate's zero range): a slot that holds nothing committed of the
 * block stays, set aside as unwritten. A slot with committed bytes goes
 * all the same: written over in place before the commit that marks it
 * unwritten, a crash would leave the old checksum over new bytes. */
static int drop_blocks(struct fs *fs, struct inode *in, uint64_t from, uint64_t to, bool keep_empty)
{
	fs_for_each_blk (in, i, from) {
		if (i >= to)
			break;
		struct blk *b = fs_blk(in, i);
		while (b->ce && (b->ce->flushing || b->ce->state == CE_LOADING || b->ce->refs))
			wait_unreferenced(fs);
		if (b->ce)
			entry_drop(fs, b->ce);
		if (keep_empty && b->tier != TIER_NONE && b->csum == 0) {
			/* Queued so that the commit keeps the record. */
			int rc = b->unwritten ? 0 : pend_add(in->ino, i);
			if (rc)
				return rc;
			b->unwritten = true;
			continue;
		}
		if (b->tier != TIER_NONE) {
			/* Recorded first: on ENOMEM the block stays whole,
			 * rather than its slot freed while the map still
			 * points there, to be freed twice by the next try. */
			int rc = pend_add(in->ino, i);
			if (rc)
				return rc;
			defer_free(fs, b->tier, b->slot);
			b->tier = TIER_NONE;
		}
	}
	return 0;
}

static int flush_block_wait(struct fs *fs, struct inode *in, uint64_t i);

static int resize_locked(struct fs *fs, struct inode *in, uint64_t size)
{
	int rc = fs_inode_load_map(fs, in);
	if (rc)
		return rc;
	uint64_t old = in->attr.size;
	if (size < old && size % fs->bs) {
		uint64_t end = (size / fs->bs + 1) * fs->bs;
		if (end > old)
			end = old;
		rc = write_locked(fs, in, size, fs->zero, (size_t)(end - size), NULL, false);
		if (rc < 0)
			return rc;
		/* The cut block's durable copy still holds the bytes beyond
		 * the new size, and the size can be committed any moment
		 * from here (setattr does at once): a kill -9 before the
		 * zeroed block was written back left them to reappear when
		 * the file grew again. So it goes first. */
		struct blk *cut = fs_blk(in, size / fs->bs);
		if (!volatile_inode(in) && cut && cut->tier != TIER_NONE &&
		    (rc = flush_block_wait(fs, in, size / fs->bs)))
			/* The tail is zeroed already: the shrink goes on, and
			 * the block stays dirty, written back later. */
			TFS_LOG("inode %llu: truncate: write-back of block %llu failed: %s",
				(unsigned long long)in->ino, (unsigned long long)(size / fs->bs),
				strerror(-rc));
	}
	if (size < old) {
		rc = drop_blocks(fs, in, (size + fs->bs - 1) / fs->bs, UINT64_MAX, false);
		if (rc)
			return rc;
	}
	in->attr.size = size;
	in->attr_dirty = true;
	in->unsynced = true;
	if (size < old)
		in->shrunk = true;
	return 0;
}

int cache_resize(struct fs *fs, struct inode *in, uint64_t size)
{
	/* Writers are kept out from the tail's zeroing to the new size: a
	 * write in between, into the tail or into a block already dropped
	 * while this waited for a reader, left its bytes beyond EOF, to show
	 * when the file grew again. */
	if (size > fs_max_size(fs))
		return -EFBIG;
	while (in->resizing)
		pthread_cond_wait(&fs->cond, &fs->lock);
	in->resizing = true;
	while (in->nwriting)
		pthread_cond_wait(&fs->cond, &fs->lock);
	int rc = resize_locked(fs, in, size);
	if (!rc && size == 0) {
		/* The bytes they stood for are no longer the file's (every
		 * write-back of them has ended: drop_blocks waited). */
		in->wb_err = 0;
		memset(in->wb_first, 0, sizeof(in->wb_first));
		memset(in->wb_last, 0, sizeof(in->wb_last));
	}
	in->resizing = false;
	wake_all(fs);
	return rc;
}

int cache_forget_inode(struct fs *fs, struct inode *in)
{
	int rc = fs_inode_load_map(fs, in);
	if (rc)
		return rc;
	/* The block records went with the inode's LMDB record: free now. */
	fs_for_each_blk (in, i, 0) {
		struct blk *b = fs_blk(in, i);
		while (b->ce && (b->ce->flushing || b->ce->state == CE_LOADING || b->ce->refs))
			wait_unreferenced(fs);
		if (b->ce)
			entry_drop(fs, b->ce);
		if (b->tier != TIER_NONE)
			defer_free(fs, b->tier, b->slot);
		b->tier = TIER_NONE;
	}
	return 0;
}

/* ---- fallocate ---------------------------------------------------------- */

/* Whether IN's blocks get durable slots, which fallocate can set aside: not
 * for a file kept in RAM, nor one whose data never leaves it. */
static bool sets_aside(const struct fs *fs, const struct inode *in)
{
	if (volatile_inode(in) || in->home == fs->ram)
		return false;
	return fs->stripe.n || (in->home >= 0 && tier_persistent(fs->tiers[in->home]));
}

/* Set aside a durable slot for each block of [FIRST, LAST) that has none,
 * marked unwritten: it reads as zeros, its first write-back goes into it,
 * and the next commit records it (a remount keeps it). A range that does
 * not fit in the free space gets ENOSPC at once, as on ext4; if the space
 * runs out on the way (another file took it), the slots this call took are
 * given back. Lock held (assign_durable may drop it to commit). */
static int reserve_range(struct fs *fs, struct inode *in, uint64_t first, uint64_t last)
{
	uint64_t need = 0;
	for (int tries = 0;; tries++) {
		need = 0;
		for (uint64_t i = first; i < last; i++) {
			const struct blk *b = fs_blk(in, i);
			need += !b || b->tier == TIER_NONE;
		}
		if (!need)
			return 0;
		/* Slots freed but not yet committed count, and those of the
		 * copies being written back: assign_durable commits (after
		 * waiting for those) to get them back. */
		uint64_t used, total;
		fs_durable_slots(fs, &used, &total);
		if (need <= (total > used ? total - used : 0) + fs->nfreed + moving_slots(fs) +
				__atomic_load_n(&g_nheld, __ATOMIC_ACQUIRE))
			break;
		/* A commit that runs has its frees in hand, in neither
		 * count: wait for it (by one of our own) before saying no. */
		if (tries || !commit_retiring(fs))
			return -ENOSPC;
		(void)commit_unlocked(fs);
	}
	uint64_t *took = malloc(need * sizeof(*took));
	if (!took)
		return -ENOMEM;
	uint64_t n = 0;
	int rc = 0;
	for (uint64_t i = first; i < last && n < need; i++) {
		if ((rc = fs_map_reserve(fs, in, i)))
			break;
		struct blk *b = fs_blk(in, i);
		if (b->tier != TIER_NONE)
			continue;
		if ((rc = assign_durable(fs, in, i)))
			break;
		/* Queued first, so that a failure leaves the slot free. */
		if ((rc = pend_add(in->ino, i))) {
			unassign_durable(fs, b);
			break;
		}
		b->unwritten = true;
		took[n++] = i;
	}
	if (rc)
		for (uint64_t k = 0; k < n; k++) {
			/* A commit may have recorded it already (assign_durable
			 * commits when it finds no room): freed by the next. */
			struct blk *b = fs_blk(in, took[k]);
			if (!b->ce && fs_blk_unwritten(b)) {
				defer_free(fs, b->tier, b->slot);
				b->tier = TIER_NONE;
				b->unwritten = false;
			}
		}
	free(took);
	return rc;
}

/* Zero [OFF, END) of block IDX where it lies inside the file, unless the
 * block reads as zeros already. Lock held. */
static int zero_part(struct fs *fs, struct inode *in, uint64_t off, uint64_t end)
{
	const struct blk *b = fs_blk(in, off / fs->bs);
	if (end > in->attr.size)
		end = in->attr.size;
	if (off >= end || !b || !fs_blk_used(b) || (!b->ce && fs_blk_unwritten(b)))
		return 0;
	int rc = write_locked(fs, in, off, fs->zero, (size_t)(end - off), NULL, false);
	return rc < 0 ? rc : 0;
}

int cache_fallocate(struct fs *fs, struct inode *in, int mode, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;
	if (len == 0 || end < off)
		return -EINVAL;
	if (end > fs_max_size(fs))
		return -EFBIG;
	/* As cache_write: a shrink under way sets the size last, with the
	 * lock dropped before, and must not run while this drops it. */
	while (in->resizing)
		pthread_cond_wait(&fs->cond, &fs->lock);
	int rc = fs_inode_load_map(fs, in);
	if (rc)
		return rc;
	in->nwriting++;
	bool clear = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE);
	/* The blocks the range covers whole, and those it covers in part. */
	uint64_t first = (off + fs->bs - 1) / fs->bs, last = end / fs->bs;
	uint64_t head = off / fs->bs, tail = (end - 1) / fs->bs;
	if (clear) {
		if (off % fs->bs)
			rc = zero_part(fs, in, off, first > last ? end : first * fs->bs);
		if (!rc && end % fs->bs && tail >= first)
			rc = zero_part(fs, in, tail * fs->bs > off ? tail * fs->bs : off, end);
		if (!rc && first < last)
			rc = drop_blocks(fs, in, first, last, mode & FALLOC_FL_ZERO_RANGE);
	}
	if (!rc && !(mode & FALLOC_FL_PUNCH_HOLE) && sets_aside(fs, in))
		rc = reserve_range(fs, in, head, tail + 1);
	if (!rc) {
		bool grow = !(mode & FALLOC_FL_KEEP_SIZE) && end > in->attr.size;
		if (grow)
			in->attr.size = end;
		if (grow || clear) {
			fs_touch_mc(&in->attr);
			in->attr_dirty = true;
		}
		in->unsynced = true; /* fsync commits what was set aside */
	}
	if (--in->nwriting == 0 && in->resizing)
		pthread_cond_broadcast(&fs->cond); /* frees nothing */
	return rc;
}

/* Whether block B holds bytes a reader could tell from zeros: written, or
 * in RAM. A hole and a slot set aside but unwritten are holes, as ext4
 * reports its unwritten extents. */
static bool seek_data_at(const struct blk *b)
{
	return b && fs_blk_used(b) && (b->ce || !fs_blk_unwritten(b));
}

int cache_seek(struct fs *fs, struct inode *in, uint64_t off, int whence, uint64_t *out)
{
	uint64_t size = in->attr.size;
	if (off >= size)
		return -ENXIO;
	int rc = fs_inode_load_map(fs, in);
	if (rc)
		return rc;
	uint64_t last = (size - 1) / fs->bs;
	if (whence == SEEK_DATA) {
		for (uint64_t i = fs_blk_next(in, off / fs->bs); i <= last && i < in->nblocks;
		     i = fs_blk_next(in, i + 1))
			if (seek_data_at(fs_blk(in, i))) {
				*out = i * fs->bs > off ? i * fs->bs : off;
				return 0;
			}
		return -ENXIO;
	}
	for (uint64_t i = off / fs->bs; i <= last; i++)
		if (!seek_data_at(fs_blk(in, i))) {
			*out = i * fs->bs > off ? i * fs->bs : off;
			return 0;
		}
	*out = size; /* the hole every file ends with */
	return 0;
}

/* The tier a block is on as users see it: its home. RAM for blocks kept
 * there (pinned) or that have no durable slot; -1 for a hole. Lock held. */
int fs_block_tier(struct fs *fs, const struct blk *b)
{
	if (b->ce && (b->ce->pinned || b->tier == TIER_NONE))
		return fs->ram;
	return b->tier == TIER_NONE ? -1 : b->tier;
}

/* Bytes of IN per tier as users see them: a block only in RAM (dirty, or
 * at home there) counts for the RAM tier. Lock held. Returns the total. */
uint64_t fs_placement(struct fs *fs, struct inode *in, uint64_t *bytes)
{
	memset(bytes, 0, sizeof(uint64_t) * CONF_MAX_TIERS);
	if (fs_inode_load_map(fs, in))
		return 0;
	uint64_t total = 0;
	fs_for_each_blk (in, i, 0) {
		if (i * fs->bs >= in->attr.size)
			break;
		int t = fs_block_tier(fs, fs_blk(in, i));
		if (t < 0)
			continue;
		uint64_t n = in->attr.size - i * fs->bs;
		if (n > fs->bs)
			n = fs->bs;
		bytes[t] += n;
		total += n;
	}
	return total;
}

uint64_t fs_cached(struct fs *fs, struct inode *in, uint64_t *dirty)
{
	uint64_t cached = 0;
	*dirty = 0;
	fs_for_each_blk (in, i, 0) {
		if (i * fs->bs >= in->attr.size)
			break;
		const struct centry *e = fs_blk(in, i)->ce;
		if (!e || e->state != CE_VALID)
			continue;
		uint64_t n = in->attr.size - i * fs->bs;
		if (n > fs->bs)
			n = fs->bs;
		cached += n;
		if (e->dirty)
			*dirty += n;
	}
	return cached;
}

/* Hand IO to tier T with fs->lock dropped (a callback may run inline and
 * takes the lock). A rejected I/O completes through its own done callback
 * with the error, so callers have one completion path. Lock held on entry
 * and on return. */
static int submit_unlocked(struct fs *fs, struct tier *t, struct tier_io *io)
{
	pthread_mutex_unlock(&fs->lock);
	int rc = tier_submit(t, io);
	if (rc) {
		io->result = rc;
		io->tier = t;
		io->done(io);
	}
	pthread_mutex_lock(&fs->lock);
	return rc;
}

/* ---- prefetch ----------------------------------------------------------- */

struct prefetch_io {
	struct tier_io io;
	struct fs *fs;
	struct centry *e;
};

static void prefetch_done(struct tier_io *io)
{
	struct prefetch_io *p = (struct prefetch_io *)io;
	struct fs *fs = p->fs;
	struct centry *e = p->e;
	pthread_mutex_lock(&fs->lock);
	e->refs--;
	if (io->result) {
		/* A demand read of this block will try again and report it. */
		TFS_LOG("inode %llu block %llu: prefetch from tier %s slot %llu failed: %s",
			(unsigned long long)e->inode->ino, (unsigned long long)e->idx,
			tier_name(io->tier), (unsigned long long)io->slot, strerror(-io->result));
		e->prefetched = false; /* never loaded: not a read wasted */
		fs->nprefetched--;
		entry_drop(fs, e);
	} else {
		e->state = CE_VALID;
		atomic_fetch_add(&fs->stats.prefetches, 1);
	}
	fs->prefetch_inflight--;
	wake_all(fs);
	pthread_cond_signal(&fs->prefetch_cond);
	pthread_mutex_unlock(&fs->lock);
	free(p);
}

/* A victim for sequential read-ahead with no learned order: the least
 * recently used clean block, unless it was itself read ahead and is still
 * unread (read-ahead must not evict read-ahead). A streaming reader's
 * blocks, read once, are the first to go; without this, read-ahead stopped
 * once RAM was full, and a cold read of a file striped over the disk and a
 * capped second tier ran with the reader's own ~8 requests in flight. Lock
 * held. */
static struct centry *readahead_victim(struct fs *fs)
{
	for (struct centry *e = fs->lru_tail[0][LRU_CLEAN]; e; e = e->prev)
		if (evictable(e, false))
			return e->prefetched ? NULL : e;
	return NULL;
}

int cache_prefetch(struct fs *fs, struct inode *in, uint64_t idx, uint64_t need_at)
{
	struct blk *b = fs_blk(in, idx);
	if (!b || b->ce || b->tier == TIER_NONE || b->csum == 0)
		return 0;
	struct prefetch_io *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	struct centry *e;
	int rc = entry_new(fs, &e);
	if (rc == -ENOSPC && (need_at != UINT64_MAX || !fs->learned)) {
		struct centry *v =
		    need_at != UINT64_MAX ? pick_victim_before(fs, need_at) : readahead_victim(fs);
		if (!v) {
			free(p);
			return -ENOSPC; /* everything cached is needed sooner */
		}
		entry_evict(fs, v);
		rc = entry_new(fs, &e);
	}
	if (rc) {
		free(p);
		return rc == -ENOSPC ? 0 : rc;
	}
	e->inode = in;
	e->idx = idx;
	e->refs = 1; /* held by the read until it completes */
	e->state = CE_LOADING;
	e->prefetched = true;
	fs->nprefetched++;
	e->pinned = in->home == fs->ram;
	if (e->pinned)
		fs->npinned++;
	e->next_read = e->next_use = need_at;
	e->plan = engine_plan(fs, fs_order_id(in), idx);
	e->stamp = ++fs->clock;
	b->ce = e;
	in->nce++;
	lru_push(fs, e);
	fs->prefetch_inflight++;
	p->fs = fs;
	p->e = e;
	p->io.op = TIER_OP_READ;
	p->io.prio = TIER_PRIO_PREFETCH;
	p->io.slot = b->slot;
	p->io.csum = b->csum;
	p->io.len = blk_io_len(b);
	p->io.buf = e->buf;
	p->io.done = prefetch_done;
	rc = submit_unlocked(fs, fs->tiers[b->tier], &p->io);
	return rc ? rc : 1;
}

/* ---- write-back --------------------------------------------------------- */

struct flush_batch {
	struct fs *fs;
	unsigned inflight; /* guarded by fs->lock */
	int err;
};

struct flush_io {
	struct tier_io io;
	struct centry *e;
	struct flush_batch *batch;
	bool move;     /* io.slot is a new slot on tier `to` (flush_start) */
	uint16_t from; /* with move: the tier of the old slot (fs->moving) */
	uint16_t to;   /* the tier written, moved or not */
	int probe;     /* the tier whose back-off this write-back probes, or -1 */
};

static void flush_done(struct tier_io *io)
{
	struct flush_io *f = (struct flush_io *)io;
	struct fs *fs = f->batch->fs;
	struct centry *e = f->e;
	pthread_mutex_lock(&fs->lock);
	struct inode *in = e->inode;
	struct blk *b = fs_blk(in, e->idx);
	e->flushing = false;
	lru_restate(fs, e);
	in->nflushing--;
	if (f->move)
		fs->moving[f->from]--;
	int err = io->result;
	unsigned t = f->to;
	if (f->probe >= 0)
		g_wb[f->probe].probing = false;
	if (err) {
		atomic_fetch_add(&fs->stats.flush_errors, 1);
		uint64_t now = tier_now_ns();
		g_wb[t].failed++;
		/* Failures of write-backs that were in flight together count
		 * once: the delay grows per try after the last one ran out. */
		if (now >= g_wb[t].retry_at) {
			uint64_t d = g_wb[t].backoff ? 2 * g_wb[t].backoff : WB_BACKOFF_MIN_NS;
			g_wb[t].backoff = d < WB_BACKOFF_MAX_NS ? d : WB_BACKOFF_MAX_NS;
			g_wb_nheld += !g_wb[t].retry_at;
			g_wb[t].retry_at = now + g_wb[t].backoff;
		}
		uint64_t skipped;
		if (tier_ratelimit_ok(&g_wb[t].log, now, WB_LOG_NS, &skipped)) {
			char path[PATH_MAX];
			if (fs_inode_path(fs, in->ino, path, sizeof(path)))
				snprintf(path, sizeof(path), "inode %llu",
					 (unsigned long long)in->ino);
			char more[64] = "";
			if (skipped)
				snprintf(more, sizeof(more),
					 "; %llu more failed since the last line",
					 (unsigned long long)skipped);
			TFS_LOG("%s: block %llu: write-back to tier %s slot %llu failed: %s "
				"(retrying in %llu ms%s)",
				path, (unsigned long long)e->idx, tier_name(io->tier),
				(unsigned long long)io->slot, strerror(-err),
				(unsigned long long)(g_wb[t].backoff / 1000000ULL), more);
		}
	} else {
		if (g_wb[t].retry_at) {
			TFS_LOG("tier %s: write-back works again, after %llu failed write-backs",
				tier_name(io->tier), (unsigned long long)g_wb[t].failed);
			g_wb_nheld--;
			g_wb[t].retry_at = g_wb[t].backoff = 0;
			g_wb[t].log = (struct tier_ratelimit){0};
		}
		g_wb[t].failed = 0;
		atomic_fetch_add(&fs->stats.flushes, 1);
		atomic_fetch_add(&fs->stats.flush_bytes, io->len);
		if (!f->move) {
			b->csum = io->csum; /* in place: the slot holds the new bytes */
			blk_set_io_len(fs, b, io->len);
		}
		b->unwritten = false;
		if (pend_add(in->ino, e->idx))
			err = -ENOMEM;
	}
	e->wb_failed = err != 0;
	e->wb_tier = (uint16_t)t;
	if (err) {
		/* The block stays where it was, dirty, to be tried again; a
		 * new slot was never in the map. */
		entry_mark_dirty(fs, e);
		if (f->move)
			tier_free(fs->tiers[f->to], io->slot);
		f->batch->err = err;
	} else {
		if (f->move) {
			/* The new copy is whole: the map points there from
			 * the next commit, which also frees the old slot. A
			 * crash before leaves the old record and copy. */
			defer_free(fs, b->tier, b->slot);
			b->tier = f->to;
			b->slot = io->slot;
			b->csum = io->csum;
			blk_set_io_len(fs, b, io->len);
		}
		e->written_back = !e->dirty;
		unsigned t = b->tier; /* where the new bytes are, moved or not */
		uint64_t ep = atomic_load(&g_wb_epoch[t]);
		if (!in->wb_first[t])
			in->wb_first[t] = ep;
		in->wb_last[t] = ep;
	}
	e->refs--;
	f->batch->inflight--;
	wake_all(fs);
	pthread_mutex_unlock(&fs->lock);
	free(f);
}

/* The bytes a write-back of IN's block IDX moves: up to EOF, rounded up
 * to TIER_IO_ALIGN, where EOF cuts the block (the rest is zeros, which the
 * read puts back: tiers/tier.h); 0, the whole block. A file whose size is
 * not a multiple of the block size paid a whole block's read and write
 * every step for its last one: with 4 ranks on the bench, 96 files of
 * 21.3 MiB moved 64 MiB more each way per step than their bytes (3% of
 * the step's disk I/O). The size cannot grow past the bytes written
 * without the block itself changing: a write to it dirties it, and bytes
 * past EOF are zeros (a shrink zeroes them first), so a larger size later
 * reads zeros there either way. Lock held. */
static uint32_t durable_len(const struct fs *fs, const struct inode *in, uint64_t idx)
{
	uint64_t start = idx * fs->bs, size = in->attr.size;
	if (size <= start || size - start >= fs->bs)
		return 0;
	uint64_t len = (size - start + TIER_IO_ALIGN - 1) / TIER_IO_ALIGN * TIER_IO_ALIGN;
	return len < fs->bs ? (uint32_t)len : 0;
}

/* Start writing back E. Lock held; returns with it held. The entry must be
 * dirty, not flushing and not being written. -EAGAIN: it no longer is
 * (assign_durable dropped the lock to commit, and a writer took E), so
 * nothing started; choose again. */
static int flush_start(struct fs *fs, struct centry *e, struct flush_batch *batch,
		       enum tier_prio prio)
{
	struct inode *in = e->inode;
	/* Held across the commit assign_durable may make unlocked, so that
	 * E stays; a writer copying into it meanwhile shows as a reference
	 * more. Write-back would clear the writer's dirty mark and checksum
	 * a buffer half old, half new. */
	int refs = e->refs;
	e->refs++;
	int rc = assign_durable(fs, in, e->idx);
	entry_put(fs, e);
	if (rc)
		return rc;
	if (!e->dirty || e->flushing || e->refs != refs)
		return -EAGAIN;
	struct blk *b = fs_blk(in, e->idx);
	/* Never over the block's durable copy: a crash between that write
	 * and the commit of its new checksum would leave the old checksum
	 * over new bytes, and the whole block unreadable (t_rewritecrash).
	 * The write goes to a new slot, and the old one stays until the
	 * commit that points the map at the new one. A block of a file
	 * pinned elsewhere (cache_pin) moves to that tier the same way. */
	int dest = b->tier;
	if (in->attr.pin_tier >= 0 && in->home >= 0 && in->home != fs->ram &&
	    tier_persistent(fs->tiers[in->home]))
		dest = in->home; /* set_pin sets home only after pin_tier */
	/* A tier short of free slots gets them back from the commit that
	 * retires the copies written back before it: that commit comes
	 * first, here, as assign_durable's does for new blocks. Failing
	 * that, the rewrite takes a slot of the reserve kept for new blocks
	 * (below); with none free, it waits for copies still being written,
	 * whose old slots are retired once they are whole, and commits
	 * then. In place only when every slot holds a live block (or the
	 * commits fail): before, a tier with room for less than twice its
	 * data ran short between commits, each copy waiting up to a commit
	 * interval to be retired, and wrote back in place, and a kill -9
	 * then left blocks unreadable (t_fullrewrite: 1-4 rounds in 4). */
	bool commit_failed = false;
	/* Bounded: fsyncs committing back to back could keep a commit
	 * running at every look. */
	for (int round = 0; round < 16 && dest == b->tier && b->csum != 0 && !cow_room(fs, dest);
	     round++) {
		struct tier *dt = fs->tiers[dest];
		uint64_t pending = freed_on(fs, dest);
		bool any_free = tier_slots_used(dt) < tier_slots_total(dt);
		bool commit = !commit_failed && (cow_room_after(fs, dest, pending) ||
						 commit_retiring(fs) || (!any_free && pending));
		if (!commit && (any_free || !fs->moving[dest]))
			break;
		log_short_once(fs, dest);
		e->refs++;
		if (commit) {
			commit_failed = commit_unlocked(fs) != 0; /* logged */
		} else {
			/* Every completion broadcasts (wake_all). */
			pthread_cond_wait(&fs->cond, &fs->lock);
		}
		entry_put(fs, e);
		if (!e->dirty || e->flushing || e->refs != refs)
			return -EAGAIN;
		b = fs_blk(in, e->idx);
	}
	struct flush_io *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	uint16_t to = b->tier;
	uint64_t slot = b->slot;
	/* A rewrite still short of slots takes one of the reserve kept for
	 * new blocks rather than go over its durable copy: the copy it
	 * replaces is retired by the next commit, which a new block short
	 * of a slot commits for (assign_durable). In place only when the
	 * tier has no free slot at all. A block that cannot move to the
	 * tier its file is pinned to, full, is rewritten where it is the
	 * same way. */
	if (dest != b->tier || b->csum != 0) {
		int64_t ns = tier_alloc(fs->tiers[dest]);
		if (ns < 0 && dest != b->tier && b->csum != 0) {
			dest = b->tier;
			ns = tier_alloc(fs->tiers[dest]);
		}
		if (ns >= 0) {
			f->move = true;
			f->from = b->tier;
			fs->moving[b->tier]++;
			f->to = to = (uint16_t)dest;
			slot = (uint64_t)ns;
		}
	}
	f->to = to;
	/* The flusher's write-back to a tier backing off is its probe: the
	 * tier's other blocks wait for its result (wb_tier_held). */
	f->probe = -1;
	if (prio != TIER_PRIO_DEMAND && b->tier != TIER_NONE && g_wb[b->tier].retry_at) {
		f->probe = b->tier;
		g_wb[b->tier].probing = true;
	}
	e->flushing = true;
	e->dirty = false;
	lru_restate(fs, e);
	fs->ndirty--;
	in->ndirty--;
	in->nflushing++;
	e->refs++;
	batch->inflight++;
	f->e = e;
	f->batch = batch;
	f->io.op = TIER_OP_WRITE;
	f->io.prio = prio;
	f->io.slot = slot;
	f->io.buf = e->buf;
	f->io.len = durable_len(fs, in, e->idx);
	f->io.done = flush_done;
	/* A rejected write-back is reported through batch->err by flush_done. */
	submit_unlocked(fs, fs->tiers[to], &f->io);
	return 0;
}

static void batch_wait(struct fs *fs, struct flush_batch *batch)
{
	while (batch->inflight)
		pthread_cond_wait(&fs->cond, &fs->lock);
}

/* Start the write-back of IN's block I if it is dirty, once no write-back
 * or user holds it. One under way (the flusher's) is waited for first: if
 * it fails, the block is dirty again and goes out in this batch, whose
 * error the caller reports; skipped, its failure went to the flusher's
 * batch only, and an fsync returned 0 over bytes that were only in RAM
 * (t_wbfail). Lock held (dropped while waiting). */
static int flush_block(struct fs *fs, struct inode *in, uint64_t i, struct flush_batch *batch)
{
	struct blk *b = fs_blk(in, i);
	struct centry *e = b ? b->ce : NULL;
	if (!e || (!e->dirty && !e->flushing))
		return 0;
	int rc;
	do {
		while (e && (e->flushing || e->refs)) {
			wait_unreferenced(fs);
			e = b->ce;
		}
		rc =
		    e && e->dirty && !e->flushing ? flush_start(fs, e, batch, TIER_PRIO_DEMAND) : 0;
		e = b->ce;
	} while (rc == -EAGAIN);
	return rc;
}

/* Write back IN's block I if dirty and wait for it. Lock held. */
static int flush_block_wait(struct fs *fs, struct inode *in, uint64_t i)
{
	struct flush_batch batch = {.fs = fs};
	int rc = flush_block(fs, in, i, &batch);
	batch_wait(fs, &batch);
	return rc ? rc : batch.err;
}

/* Whether nothing but LMDB needs IN's block map: the kernel has forgotten
 * the inode (no lookup, no open), it still has a name (deletion is
 * inode_maybe_delete's), nothing of it is cached, dirty, being written or
 * resized, and no block record of it waits for a commit. Lock held. */
static bool inode_idle(const struct inode *in)
{
	return in->ino != META_ROOT_INO && !in->nlookup && !in->nopen && in->attr.nlink &&
	       !in->dropping && !in->resizing && !in->nwriting && !in->nce && !in->ndirty &&
	       !in->nflushing && !in->sweep_keep;
}

/* Whether an idle IN may leave the table: LMDB holds all of it, and no
 * fsync is owed a write-back error or a sync of it (fs.h: wb_first). */
static bool inode_forgettable(const struct fs *fs, const struct inode *in)
{
	if (in->attr_dirty || in->wb_err || (in->unsynced && fs->conf.sync_on_close))
		return false;
	for (int t = 0; t < CONF_MAX_TIERS; t++)
		if (in->wb_first[t])
			return false;
	return true;
}

/* Heap bytes of IN's block map. */
static uint64_t map_bytes(const struct inode *in)
{
	uint64_t n = in->nchunks * sizeof(*in->chunks);
	for (uint64_t c = 0; c < in->nchunks; c++)
		if (in->chunks[c])
			n += FS_MAP_CHUNK * sizeof(struct blk);
	return n;
}

/* Give back the memory of inodes the kernel has forgotten: their block
 * maps, and the inodes themselves where nothing about them is owed. Every
 * inode once looked up stayed in the table with its map for the life of
 * the mount: 17 KiB for each small file ever touched (t_inodemem). The
 * next use loads them again from LMDB. After a good commit, lock held: a
 * map is dropped only when LMDB has all of it. Returns the heap bytes
 * freed. */
static uint64_t inode_sweep(struct fs *fs)
{
	uint64_t freed = 0;
	for (size_t i = 0; i < g_npend; i++) {
		struct inode *in = fs_inode_find(fs, g_pend[i].ino);
		if (in)
			in->sweep_keep = true;
	}
	for (size_t h = 0; h < fs->itab_size; h++) {
		struct inode **pp = &fs->itab[h];
		while (*pp) {
			struct inode *in = *pp;
			bool idle = inode_idle(in);
			in->sweep_keep = false;
			if (idle && inode_forgettable(fs, in)) {
				*pp = in->hnext;
				fs->ninodes--;
				freed += map_bytes(in) + sizeof(*in);
				fs_map_free(in);
				free(in);
				continue;
			}
			if (idle && in->map_loaded) {
				freed += map_bytes(in);
				fs_map_unload(fs, in);
			}
			pp = &in->hnext;
		}
	}
	return freed;
}

/* Heap bytes the sweeps gave back since the last malloc_trim. Under
 * g_commit_lock. */
static uint64_t g_swept_bytes;
/* The maps are small heap blocks: freed, they stay in the daemon's RSS,
 * and a burst of new files (whose maps live until their first commit) left
 * the RSS at its peak, 2-7 KiB per file in t_inodemem instead of the 0.5 KiB
 * an inode that stays costs. Past this many freed bytes, the heap's free
 * pages go back to the system. */
#define TRIM_BYTES (8ull << 20)

/* The size of IN that a commit may record now. A file that only grew
 * since its last commit keeps the committed size while a block below the
 * new one has its data only in RAM (written, not written back, no older
 * durable copy): recorded, the new size would after a crash cover a hole
 * where the data was, and a file written and never fsync'd read back as
 * zeros (t_commitinterval, kill -9 between a commit and the next
 * write-back). A file that shrank takes its new size with the deletions of
 * the blocks it cut, whatever else (t_truncrash); either way the size is
 * one the file really had (t_smallcrash). Volatile files (a rule's
 * persistent = no) never reach a tier, and keep their size. Lock held. */
static uint64_t durable_size(const struct fs *fs, const struct inode *in)
{
	uint64_t size = in->attr.size;
	if (volatile_inode(in) || in->shrunk || size <= in->committed_size ||
	    (!in->ndirty && !in->nflushing))
		return size;
	uint64_t n = (size + fs->bs - 1) / fs->bs;
	for (uint64_t i = fs_blk_next(in, 0); i < n && i < in->nblocks;
	     i = fs_blk_next(in, i + 1)) {
		const struct blk *b = fs_blk(in, i);
		if (b && b->ce && (b->ce->dirty || b->ce->flushing) &&
		    (b->tier == TIER_NONE || b->csum == 0))
			return in->committed_size;
	}
	return size;
}

static int sync_tiers(struct fs *fs);

/* Add the N slots a commit freed to g_held. g_commit_lock held. */
static int hold(const struct freed_slot *freed, size_t n)
{
	size_t have = g_nheld;
	struct freed_slot *h = realloc(g_held, (have + n) * sizeof(*h));
	if (!h)
		return -ENOMEM;
	memcpy(h + have, freed, n * sizeof(*h));
	g_held = h;
	g_held_from = atomic_fetch_add(&g_commits, 1) + 1;
	__atomic_store_n(&g_nheld, have + n, __ATOMIC_RELEASE);
	return 0;
}

/* Free the slots g_held holds: the commits that freed them are on disk.
 * g_commit_lock and fs->lock held. */
static void release_held(struct fs *fs)
{
	for (size_t i = 0; i < g_nheld; i++)
		tier_free(fs->tiers[g_held[i].tier], g_held[i].slot);
	free(g_held);
	g_held = NULL;
	__atomic_store_n(&g_nheld, 0, __ATOMIC_RELEASE);
}

/* meta_sync, and then the slots that the commits it made durable freed:
 * those ended before it began. Outside g_commit_lock, as fsyncs flush
 * while other commits run. */
static int commit_sync(struct fs *fs)
{
	uint64_t done = atomic_load(&g_commits);
	int rc = meta_sync(fs->meta);
	if (rc)
		return rc;
	pthread_mutex_lock(&g_commit_lock);
	if (g_nheld && g_held_from <= done) {
		pthread_mutex_lock(&fs->lock);
		release_held(fs);
		pthread_mutex_unlock(&fs->lock);
	}
	pthread_mutex_unlock(&g_commit_lock);
	return 0;
}

/* Under g_commit_lock. *WROTE: whether there was anything to commit (a
 * metadata transaction ran). */
static int commit_locked(struct fs *fs, bool *wrote)
{
	*wrote = false;
	pthread_mutex_lock(&fs->lock);
	size_t np = g_npend;
	struct pend *pend = g_pend;
	g_pend = NULL;
	g_npend = g_pend_cap = 0;
	struct meta_block *recs = np ? calloc(np, sizeof(*recs)) : NULL;
	bool *del = np ? calloc(np, sizeof(*del)) : NULL;
	bool *skip = np ? calloc(np, sizeof(*skip)) : NULL;
	size_t na = 0;
	bool need_sync = false;
	struct meta_inode *attrs = NULL;
	bool *shrunk = NULL; /* per attrs[]: in->shrunk when taken */
	int rc = 0;
	if (np && (!recs || !del || !skip)) {
		rc = -ENOMEM;
		goto unlock_fail;
	}
	for (size_t i = 0; i < np; i++) {
		struct inode *in = fs_inode_find(fs, pend[i].ino);
		if (!in) {
			skip[i] = true;
			continue;
		}
		struct blk *b = fs_blk(in, pend[i].idx);
		if (!b || b->tier == TIER_NONE || (b->csum == 0 && !b->unwritten)) {
			/* No block, or a slot given but not written yet: either
			 * way the committed record (whose slot may be freed in
			 * this very commit) must go. The write-back will add
			 * the new one. */
			del[i] = true;
		} else {
			recs[i].tier_id = fs->tier_id[b->tier];
			recs[i].flags = b->csum == 0 ? META_B_UNWRITTEN : 0;
			recs[i].slot = b->slot;
			recs[i].csum = b->csum;
			recs[i].pages = b->pages;
			/* Written back since the last good sync of its tier. */
			need_sync |= in->wb_first[b->tier] != 0;
		}
	}
	for (size_t h = 0; h < fs->itab_size; h++)
		for (struct inode *in = fs->itab[h]; in; in = in->hnext)
			if (in->attr_dirty)
				na++;
	if (na &&
	    (!(attrs = calloc(na, sizeof(*attrs))) || !(shrunk = calloc(na, sizeof(*shrunk))))) {
		free(attrs);
		free(shrunk);
		rc = -ENOMEM;
		goto unlock_fail;
	}
	na = 0;
	for (size_t h = 0; h < fs->itab_size; h++)
		for (struct inode *in = fs->itab[h]; in; in = in->hnext)
			if (in->attr_dirty) {
				attrs[na] = in->attr;
				uint64_t safe = durable_size(fs, in);
				shrunk[na] = in->shrunk;
				if (safe < attrs[na].size) {
					attrs[na].size = safe; /* the rest later */
				} else {
					in->attr_dirty = false;
					in->shrunk = false;
				}
				na++;
			}
	size_t nfreed = fs->nfreed;
	struct freed_slot *freed = fs->freed;
	fs->freed = NULL;
	fs->nfreed = fs->freed_cap = 0;
	pthread_mutex_unlock(&fs->lock);

	*wrote = np || na || nfreed;
	/* The records name slots written since the last commit. Their bytes
	 * must be durable before the map names them: after a power failure
	 * the map would hold the new checksum over a slot the disk never
	 * got, and the block, whose old copy was intact, would read as an
	 * I/O error (t_powercut). A sync that fails here keeps the records
	 * for the next try; the old copies stay in the map meanwhile. An
	 * fsync has synced them already, as a rule: its own sync round,
	 * outside g_commit_lock, is shared with the other fsyncs of the
	 * moment; if that round failed, the fsync got the error, as every
	 * later one of the file does (wb_err), and the records go in. */
	if (need_sync && (rc = sync_tiers(fs)))
		*wrote = false;
	else if (*wrote) {
		struct meta_txn *t;
		rc = meta_txn_begin(fs->meta, true, &t);
		for (size_t i = 0; !rc && i < np; i++) {
			if (skip[i])
				continue;
			struct meta_inode tmp;
			if (meta_inode_get(t, pend[i].ino, &tmp))
				continue; /* deleted meanwhile */
			if (del[i]) {
				rc = meta_block_del(t, pend[i].ino, pend[i].idx);
				if (rc == -ENOENT)
					rc = 0;
			} else {
				rc = meta_block_put(t, pend[i].ino, pend[i].idx, &recs[i]);
			}
		}
		for (size_t i = 0; !rc && i < na; i++) {
			struct meta_inode tmp;
			if (meta_inode_get(t, attrs[i].ino, &tmp))
				continue;
			/* nlink and parent belong to namespace operations, which
			 * commit them themselves. */
			attrs[i].nlink = tmp.nlink;
			attrs[i].parent = tmp.parent;
			rc = meta_inode_put(t, &attrs[i]);
		}
		if (rc)
			meta_txn_abort(t);
		else
			rc = meta_txn_commit(t);
	}
	pthread_mutex_lock(&fs->lock);
	if (rc) {
		TFS_LOG("metadata commit failed: %s", strerror(-rc));
		/* Keep the work for the next try. */
		for (size_t i = 0; i < np; i++)
			pend_add(pend[i].ino, pend[i].idx);
		for (size_t i = 0; i < na; i++) {
			struct inode *in = fs_inode_find(fs, attrs[i].ino);
			if (in) {
				in->attr_dirty = true;
				in->shrunk |= shrunk[i];
			}
		}
		for (size_t i = 0; i < nfreed; i++)
			defer_free(fs, freed[i].tier, freed[i].slot);
	} else {
		for (size_t i = 0; i < na; i++) {
			struct inode *in = fs_inode_find(fs, attrs[i].ino);
			if (in)
				in->committed_size = attrs[i].size;
		}
		if (nfreed && hold(freed, nfreed))
			/* Out of memory: the next commit tries again. */
			for (size_t i = 0; i < nfreed; i++)
				defer_free(fs, freed[i].tier, freed[i].slot);
		g_swept_bytes += inode_sweep(fs);
	}
	pthread_mutex_unlock(&fs->lock);
	if (g_swept_bytes >= TRIM_BYTES) {
		/* Outside fs->lock: it walks every arena. */
		g_swept_bytes = 0;
		malloc_trim(0);
	}
	free(freed);
	free(attrs);
	free(shrunk);
	free(pend);
	free(recs);
	free(del);
	free(skip);
	return rc;

unlock_fail:
	/* Put the pending list back untouched. */
	for (size_t i = 0; i < np; i++)
		pend_add(pend[i].ino, pend[i].idx);
	pthread_mutex_unlock(&fs->lock);
	free(pend);
	free(recs);
	free(del);
	free(skip);
	return rc;
}

/* cache_commit; *WROTE as commit_locked's. */
static int commit_run(struct fs *fs, bool *wrote)
{
	pthread_mutex_lock(&g_commit_lock);
	uint64_t t0 = tier_now_ns();
	atomic_store(&fs->commit_began_ns, t0);
	int rc = commit_locked(fs, wrote);
	uint64_t t1 = tier_now_ns();
	atomic_store(&fs->commit_ended_ns, t1);
	if (*wrote) {
		atomic_fetch_add(&fs->stats.commits, 1);
		atomic_fetch_add(&fs->stats.commit_ns, t1 - t0);
	}
	pthread_mutex_unlock(&g_commit_lock);
	return rc;
}

/* commit_run, and then the slots it freed are free once it is on disk:
 * at once, as users see a removal free space in df, and the writes to a
 * full tier wait for it. Flushing the commit's meta page costs a flush
 * of 4 KiB. DURABLE: flush it in any case (fsync). */
static int commit_and_free(struct fs *fs, bool durable, bool *wrote)
{
	int rc = commit_run(fs, wrote);
	if (durable || commit_held()) {
		int r = commit_sync(fs);
		if (!rc)
			rc = r;
	}
	return rc;
}

int cache_commit(struct fs *fs)
{
	bool wrote;
	return commit_and_free(fs, false, &wrote);
}

int cache_commit_durable(struct fs *fs)
{
	bool wrote;
	return commit_and_free(fs, true, &wrote);
}

/* One tier's part of sync_tiers, on a thread of its own or the caller's. */
struct tier_sync_job {
	struct tier *t;
	int id;	      /* its index in fs->tiers */
	bool started; /* on a thread of its own */
	pthread_t thread;
	int rc;	      /* tier_sync's */
	uint64_t end; /* with rc != 0: g_wb_epoch[id] when it returned */
};

static void *tier_sync_main(void *arg)
{
	struct tier_sync_job *job = arg;
	job->rc = tier_sync(job->t);
	/* The failed flush may have covered write-backs that completed while
	 * it ran, and the kernel reports it once: charge them too (a success
	 * covers only those before it began), and no later ones. */
	if (job->rc)
		job->end = atomic_fetch_add(&g_wb_epoch[job->id], 1);
	return NULL;
}

/* Sync every persistent tier; charge a failed sync to the files written
 * back to that tier before it began. Returns the first error, for callers
 * that answer for the whole mount (syncfs, unmount); an fsync asks its
 * inode's wb_err instead. */
static int sync_tiers(struct fs *fs)
{
	int n = fs->conf.ntiers;
	uint64_t epoch[CONF_MAX_TIERS], end[CONF_MAX_TIERS];
	int err[CONF_MAX_TIERS] = {0};
	uint64_t seen = atomic_load(&g_rounds_begun);
	pthread_mutex_lock(&g_sync_lock);
	if (g_rounds_done > seen) {
		/* A round that began after our write-backs has ended. */
		int rc = g_round_rc;
		pthread_mutex_unlock(&g_sync_lock);
		return rc;
	}
	uint64_t round = atomic_fetch_add(&g_rounds_begun, 1) + 1;
	pthread_mutex_lock(&fs->lock);
	for (int i = 0; i < n; i++)
		epoch[i] = atomic_fetch_add(&g_wb_epoch[i], 1);
	pthread_mutex_unlock(&fs->lock);
	/* The tiers flush side by side: one after the other, the disk's
	 * flush and a parallel file system's round trips added up. */
	struct tier_sync_job jobs[CONF_MAX_TIERS];
	int njobs = 0;
	for (int i = 0; i < n; i++)
		if (fs->tiers[i] && tier_persistent(fs->tiers[i]))
			jobs[njobs++] = (struct tier_sync_job){.t = fs->tiers[i], .id = i};
	for (int j = 1; j < njobs; j++)
		jobs[j].started = !pthread_create(&jobs[j].thread, NULL, tier_sync_main, &jobs[j]);
	for (int j = 0; j < njobs; j++)
		if (!jobs[j].started)
			tier_sync_main(&jobs[j]); /* the first, or no thread */
	int rc = 0;
	for (int j = 0; j < njobs; j++) {
		if (jobs[j].started)
			pthread_join(jobs[j].thread, NULL);
		int i = jobs[j].id;
		err[i] = jobs[j].rc;
		end[i] = jobs[j].end;
		if (err[i] && !rc)
			rc = err[i];
	}
	pthread_mutex_lock(&fs->lock);
	for (size_t h = 0; h < fs->itab_size; h++)
		for (struct inode *in = fs->itab[h]; in; in = in->hnext)
			for (int i = 0; i < n; i++) {
				if (!in->wb_first[i])
					continue;
				if (err[i] && in->wb_first[i] <= end[i] && !in->wb_err)
					in->wb_err = err[i];
				if (in->wb_first[i] > epoch[i])
					continue;
				/* Write-backs after this sync began are not
				 * covered: the next sync answers for them. */
				in->wb_first[i] = in->wb_last[i] <= epoch[i] ? 0 : epoch[i] + 1;
			}
	pthread_mutex_unlock(&fs->lock);
	g_rounds_done = round;
	g_round_rc = rc;
	pthread_mutex_unlock(&g_sync_lock);
	return rc;
}

/* Write back every dirty block of IN (pinned ones too unless the file is
 * volatile); with DURABLE, also sync the tiers and the metadata. */
int cache_flush_inode(struct fs *fs, struct inode *in, bool durable)
{
	struct flush_batch batch = {.fs = fs};
	pthread_mutex_lock(&fs->lock);
	/* Changes from here on need a flush of their own. */
	bool unsynced = in->unsynced;
	if (durable)
		in->unsynced = false;
	int rc = 0;
	if (!volatile_inode(in)) {
		for (int pass = 0; pass < 2 && !rc; pass++) {
			fs_for_each_blk (in, i, 0) {
				if ((rc = flush_block(fs, in, i, &batch)))
					break;
			}
			batch_wait(fs, &batch);
			if (in->ndirty == 0)
				break;
		}
		while (in->nflushing)
			pthread_cond_wait(&fs->cond, &fs->lock);
	}
	pthread_mutex_unlock(&fs->lock);
	if (!rc)
		rc = batch.err;
	if (!rc && durable)
		sync_tiers(fs); /* a failure that concerns IN is in its wb_err */
	int r = durable ? cache_commit_durable(fs) : cache_commit(fs);
	if (!rc)
		rc = r;
	pthread_mutex_lock(&fs->lock);
	if (!rc && durable)
		rc = in->wb_err;
	if (rc && durable && unsynced)
		in->unsynced = true;
	pthread_mutex_unlock(&fs->lock);
	return rc;
}

/* Write back every dirty block, each once: a block whose write-back fails
 * here stays dirty and is not tried again. Picking it again, as any dirty
 * block, retried it for ever while the disk failed its writes, and the
 * daemon never exited at unmount (t_wbfail). */
int cache_flush_all(struct fs *fs)
{
	struct flush_batch batch = {.fs = fs};
	int rc = 0;
	pthread_mutex_lock(&fs->lock);
	/* Failures before this call are the flusher's: those get a try too. */
	for (struct centry *e = lru_oldest(fs, LRU_DIRTY, true); e; e = lru_older(fs, e, true))
		e->wb_failed = false;
	for (;;) {
		struct centry *pick = NULL;
		for (struct centry *e = lru_oldest(fs, LRU_DIRTY, true); e;
		     e = lru_older(fs, e, true))
			if (e->dirty && !e->flushing && !e->wb_failed && e->refs == 0 &&
			    e->state == CE_VALID && !volatile_inode(e->inode)) {
				pick = e;
				break;
			}
		if (!pick) {
			if (batch.inflight) {
				pthread_cond_wait(&fs->cond, &fs->lock);
				continue;
			}
			break;
		}
		int r = flush_start(fs, pick, &batch, TIER_PRIO_WRITEBACK);
		if (r == -EAGAIN)
			continue;
		if (r) {
			rc = r;
			break;
		}
	}
	batch_wait(fs, &batch);
	pthread_mutex_unlock(&fs->lock);
	if (!rc)
		rc = batch.err;
	int r = sync_tiers(fs);
	if (!rc)
		rc = r;
	r = cache_commit_durable(fs);
	return rc ? rc : r;
}

/* Block IDX of IN, a slot set aside and nothing written, to tier TIER: a
 * slot there instead (none for RAM). Where TIER has none free, the block
 * keeps its old one, which cache_pin reports. Lock held. */
static int move_unwritten(struct fs *fs, struct inode *in, uint64_t idx, int tier)
{
	struct blk *b = fs_blk(in, idx);
	int64_t slot = -1;
	if (tier != fs->ram && (slot = tier_alloc(fs->tiers[tier])) < 0)
		return 0;
	/* The record's change is queued before the old slot is freed, as in
	 * drop_blocks. */
	int rc = pend_add(in->ino, idx);
	if (rc) {
		if (slot >= 0)
			tier_free(fs->tiers[tier], (uint64_t)slot);
		return rc;
	}
	defer_free(fs, b->tier, b->slot);
	b->tier = TIER_NONE;
	b->unwritten = false;
	if (slot >= 0) {
		b->tier = (uint16_t)tier;
		b->slot = (uint64_t)slot;
		b->unwritten = true;
	}
	return 0;
}

int cache_pin(struct fs *fs, struct inode *in, int tier)
{
	/* Rewrite every block: entry_get loads it, and marking it dirty sends
	 * it to its new home on the next write-back (flush_start), which
	 * keeps the old slot until the new one is written and committed: a
	 * crash meanwhile leaves the block where it was. RAM is no durable
	 * home: there the old slot goes at once. */
	pthread_mutex_lock(&fs->lock);
	int rc = fs_inode_load_map(fs, in);
	in->home = tier;
	cache_rehome(fs, in);
	fs_for_each_blk (in, i, 0) {
		if (rc || i * fs->bs >= in->attr.size)
			break;
		struct blk *b = fs_blk(in, i);
		if (!fs_blk_used(b) || b->tier == tier)
			continue;
		if (!b->ce && fs_blk_unwritten(b)) {
			rc = move_unwritten(fs, in, i, tier);
			continue;
		}
		struct centry *e;
		rc = entry_get(fs, in, i, GET_READ, &e);
		if (rc || !e)
			continue;
		while (e->flushing)
			pthread_cond_wait(&fs->cond, &fs->lock);
		if (tier == fs->ram) {
			if (b->tier != TIER_NONE) {
				/* The record's removal is queued before its slot
				 * is freed, as in drop_blocks. */
				if ((rc = pend_add(in->ino, i))) {
					entry_put(fs, e);
					break;
				}
				defer_free(fs, b->tier, b->slot);
				b->tier = TIER_NONE;
				b->csum = 0;
			}
			entry_pin(fs, e);
		}
		entry_mark_dirty(fs, e);
		entry_put(fs, e);
	}
	pthread_mutex_unlock(&fs->lock);
	if (rc || (rc = cache_flush_inode(fs, in, true)))
		return rc;
	/* A block that found no free slot there stays where it was: say so,
	 * rather than report a pin that did not happen. */
	pthread_mutex_lock(&fs->lock);
	uint64_t left = 0;
	if (tier != fs->ram)
		fs_for_each_blk (in, i, 0) {
			uint16_t t = fs_blk(in, i)->tier;
			if (t != TIER_NONE && t != tier)
				left++;
		}
	pthread_mutex_unlock(&fs->lock);
	if (left) {
		TFS_LOG("pin inode %llu to tier %s: %llu blocks found no free slot there",
			(unsigned long long)in->ino, tier_name(fs->tiers[tier]),
			(unsigned long long)left);
		return -ENOSPC;
	}
	return 0;
}

void cache_rehome(struct fs *fs, struct inode *in)
{
	if (in->home == fs->ram)
		return;
	fs_for_each_blk (in, i, 0) {
		struct blk *b = fs_blk(in, i);
		struct centry *e = b->ce;
		if (e && e->pinned) {
			entry_unpin(fs, e);
			if (b->tier == TIER_NONE && e->state == CE_VALID)
				entry_mark_dirty(fs, e);
		}
	}
}

/* The next block for write-back. Without a learned order: the least
 * recently used candidate from FROM towards the newest. With one: the
 * candidate read farthest in the future (Belady), among the newest
 * VICTIM_SCAN: on a repeating step the block written last is read last, and
 * the dirty blocks left are those needed soonest, which may then stay in
 * RAM until they are read, never written at all. Lock held. */
static struct centry *next_to_flush(struct fs *fs, struct centry *from, bool learned, bool spill)
{
	if (!learned) {
		/* FROM may have left the dirty list while the lock was dropped
		 * (written back, or being written): walking on from it would
		 * walk the clean list, all of it, under the lock. */
		if (from && from->lru != LRU_DIRTY)
			from = lru_oldest(fs, LRU_DIRTY, spill);
		for (struct centry *e = from; e; e = lru_older(fs, e, spill))
			if (bg_candidate(e, spill))
				return e;
		return NULL;
	}
	return farthest(fs, spill ? 3u : 1u, LRU_DIRTY, bg_candidate, spill, keep_until);
}

/* Whether background write-back (no reclaim waiting) takes E, the block
 * next_to_flush chose. Without a learned order: while more is dirty than
 * dirty_ratio allows. With one: due_learned(). */
static bool wb_due(struct fs *fs, struct centry *e, bool learned, uint64_t horizon)
{
	return learned ? due_learned(fs, e, horizon) : dirty_over(fs);
}

/* A dirty block outside the learned cycle (next use unknown) that
 * farthest()'s newest-first sample does not reach. Untouched since it was
 * written, it drifts to the LRU tail while the cycle's blocks are touched
 * every step, so a bounded walk from the tail finds it. Overdue predictions
 * are left to farthest(): pipelined ranks make kept blocks late often
 * enough that writing every late one back here cost 4 points of hit ratio
 * on the bench. Lock held. */
static struct centry *stray_dirty(struct fs *fs)
{
	uint64_t stale = engine_stale_before(fs);
	unsigned seen = 0;
	for (struct centry *e = fs->lru_tail[0][LRU_DIRTY]; e && seen < VICTIM_SCAN;
	     e = e->prev, seen++)
		if (bg_candidate(e, false) && keep_until(fs, e, stale) == UINT64_MAX)
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

/* How many write-backs of blocks the learned order keeps may be in flight
 * for reclaim waiters: about one MiB of them. What such a write costs is
 * disk bytes (the step overwrites the block, so the write was for
 * nothing); what it buys is a slot freed soon. With 1 MiB blocks one in
 * flight keeps the disk busy; with small blocks one at a time runs at the
 * latency of a request, far below the disk's bandwidth, and waiters queue
 * behind it (a 512 MiB replay with 256 MiB of RAM, update steps: 16 KiB
 * blocks 4.5-4.8 s at one, 2.6-2.9 s at this limit; 64 KiB blocks
 * 2.9-3.4 s, 1.8-2.0 s). */
static unsigned kept_wb_limit(const struct fs *fs, unsigned max)
{
	uint64_t n = fs_request_blocks(fs);
	return n > max ? max : (unsigned)n;
}

/* Ask the committer for a commit of the block maps of the write-backs
 * finished so far. The flusher used to commit itself after each round of
 * write-backs: a commit syncs the metadata file, and on a disk busy with
 * the step's I/O that stalled the disk. On the bench's VM (disk capped at
 * 400 MB/s) each commit took 150-330 ms, in which the disk completed
 * nothing; the update phase made 10-12 of them a step and took 6.5 s
 * instead of 5.5 s. A background commit is owed to no one (fsync, syncfs
 * and unmount commit themselves): it only bounds what a crash loses of data
 * never made durable, as ext4's commit= does. Lock held. */
static void commit_soon(struct fs *fs)
{
	if (!fs->commit_wanted) {
		fs->commit_wanted = true;
		pthread_cond_signal(&fs->commit_cond);
	}
}

/* How long the persistent tiers must have been idle for a due commit to go
 * at once, and how often a due commit looks while they are not. */
#define COMMIT_QUIET_NS (20 * 1000000ULL)
#define COMMIT_POLL_NS	(5 * 1000000ULL)

/* Whether no request for a disk-homed block is being served, every
 * persistent tier has been idle for COMMIT_QUIET_NS and, with a learned
 * order that has disk-homed requests, none came for as long. In
 * gap mode an update phase opens with reads the idle stretch fetched into
 * RAM, so the tiers idle while the step has begun: a commit due then took
 * that for a quiet moment and stalled the step's first disk reads (the
 * bench: 0.7 commits a step in update phases in some runs, 6.2-6.4 s steps
 * against 4.9-5.1 s in runs without). Lock held. */
static bool tiers_quiet(struct fs *fs)
{
	if (fs->disk_reqs || tiers_idle_ns(fs) < COMMIT_QUIET_NS)
		return false;
	return !fs->tail_plan || !fs->disk_demand_ns ||
	       tier_now_ns() - fs->disk_demand_ns >= COMMIT_QUIET_NS;
}

/* How many intervals a due commit may wait at most for a quiet moment. */
#define COMMIT_WAIT_MAX 6

/* The longest idle stretch of the learned step (gap_seen: no request for
 * a disk block being served, no tier I/O) in the last two cycles or the
 * two before (gap_seen starts its window afresh with whatever stretch
 * comes next). Lock held. */
uint64_t cache_commit_gap(const struct fs *fs)
{
	return fs->gap_seen_ns > fs->gap_prev_ns ? fs->gap_seen_ns : fs->gap_prev_ns;
}

/* Whether a commit as long as the last quiet ones fits in the idle
 * stretches of the learned step (cache_commit_gap). With the update phases back
 * to back the only stretch is the fraction of a second in which the
 * application makes its gradients, and a commit that took longer than
 * that ran on into the next update phase, where it stalled the disk (the
 * bench: 0.3-0.8 s commits against 0.3-0.4 s stretches, 0.3-0.7 of them a
 * step). Such a commit waits the longest wait at once, six intervals, the
 * bound commit_interval promises, and then goes forced (with the doubling
 * of the wait alone, commits came three times as often for the first half
 * minute). Without a learned order, before any quiet commit, or before
 * two requests for disk blocks were seen, any quiet moment does; a
 * stretch measured as 0 (the tiers busy at every request) holds none.
 * Lock held. */
static bool commit_fits(const struct fs *fs)
{
	uint64_t took = fs->commit_quiet_ns;
	return !fs->learned || !took || !fs->gap_measured || took <= cache_commit_gap(fs);
}

/* Serves commit_soon: one commit that finds work to do per
 * commit_interval at most (one that finds none, as after most idle ticks,
 * does not count). A due commit waits for a moment when the persistent
 * tiers are idle: the time a training step spends in forward and backward
 * leaves them so, and a commit there stalls nothing, where one in an
 * update phase stalled the disk for up to 1.3 s on the bench's VM. It
 * waits up to one more interval; one that had to go without doubles that
 * wait for the next, up to COMMIT_WAIT_MAX intervals, and one that found
 * its moment sets it to a quarter more than it took (at least an
 * interval). Steps longer than an interval thus get their commits between
 * them: a commit due 5 s into an 8 s step would otherwise go at 10 s, in
 * the middle of the next update phase, about one step in three. The
 * window in which data never fsync'd may be lost to a power failure is
 * then up to seven intervals (35 s by default), as the kernel's own
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
	pthread_mutex_lock(&fs->lock);
	while (!fs->commit_stop) {
		if (!fs->commit_wanted) {
			wanted_at = 0;
			pthread_cond_wait(&fs->commit_cond, &fs->lock);
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
			pthread_cond_timedwait(&fs->commit_cond, &fs->lock, &ts);
			continue;
		}
		fs->commit_wanted = false;
		wanted_at = 0;
		pthread_mutex_unlock(&fs->lock);
		bool wrote;
		/* A failure is logged; its work stays pending. */
		(void)commit_and_free(fs, false, &wrote);
		uint64_t t = tier_now_ns() - now;
		pthread_mutex_lock(&fs->lock);
		if (wrote) {
			/* Only what a commit takes in a quiet moment says
			 * whether one fits there: a forced one shares the disk
			 * with the step, and took longer. */
			if (quiet)
				fs->commit_quiet_ns =
				    fs->commit_quiet_ns ? (3 * fs->commit_quiet_ns + t) / 4 : t;
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
	pthread_mutex_unlock(&fs->lock);
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
	pthread_mutex_lock(&fs->lock);
	while (!fs->stopping) {
		bool learned = fs->learned;
		uint64_t horizon = learned ? wb_horizon(fs) : UINT64_MAX;
		bool reclaim = fs->reclaim_waiters > 0;
		bool pressure = false;
		if (!idle && learned) {
			struct centry *f = next_to_flush(fs, NULL, true, false);
			pressure = (f && due_learned(fs, f, horizon)) || stray_dirty(fs);
		} else if (!idle) {
			pressure = dirty_over(fs);
		}
		bool tick = false, quiet = false;
		if (!reclaim && !pressure) {
			/* With a learned order, wake when the disks fall idle
			 * too ("Idle disk"), unless they are already. */
			uint64_t wait = fs->conf.flush_interval_ms * 1000000ULL, idle_in = 0;
			if (learned && fs->tail_plan && fs->disk_demand_ns && !fs->idle_from_ns) {
				/* Past the request-free time, the tiers may still
				 * be finishing: look again then. */
				uint64_t now = tier_now_ns(),
					 at = fs->disk_demand_ns + cache_idle_after(fs);
				idle_in = at > now ? at - now : DISK_IDLE_NS / 4;
				if (idle_in < wait)
					wait = idle_in;
			}
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			uint64_t ns = (uint64_t)ts.tv_nsec + wait;
			ts.tv_sec += (time_t)(ns / 1000000000ULL);
			ts.tv_nsec = (long)(ns % 1000000000ULL);
			tick = pthread_cond_timedwait(&fs->flusher_cond, &fs->lock, &ts) ==
				   ETIMEDOUT &&
			       wait != idle_in;
			if (fs->stopping)
				break;
			reclaim = fs->reclaim_waiters > 0;
			learned = fs->learned;
			horizon = learned ? wb_horizon(fs) : UINT64_MAX;
		}
		bool disk_idle = learned && cache_disk_idle(fs);
		if (disk_idle) {
			/* The disks are ours: everything goes back, and the
			 * prefetcher may take the clean blocks for the reads
			 * that come next. */
			horizon = 0;
			pthread_cond_signal(&fs->prefetch_cond);
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
		bool spill = reclaim && must_spill(fs);
		struct centry *e =
		    next_to_flush(fs, lru_oldest(fs, LRU_DIRTY, spill), learned, spill);
		while (e && !fs->stopping) {
			reclaim = fs->reclaim_waiters > 0;
			bool due = wb_due(fs, e, learned, horizon);
			if (!reclaim && !due && (learned || started >= max)) {
				struct centry *s = learned ? stray_dirty(fs) : NULL;
				if (!s)
					break;
				e = s;
			}
			/* A block the learned order keeps goes out for a waiter
			 * only while less than kept_wb_limit() is under way: that
			 * will free a slot soon enough, and a kept block written for a
			 * waiter is then read from RAM and rewritten, a disk write
			 * for nothing. Filling the queue with them cost 135 disk
			 * writes per step on the bench (1 rank); one per waiter
			 * still cost 0.06-0.16 GB of writes per step, on the disk
			 * channel that bounds the update phase. */
			unsigned limit = max;
			bool kept = learned && reclaim && !due;
			if (kept)
				limit = kept_wb_limit(fs, max);
			if (batch.inflight >= limit) {
				/* Wait for one write-back to complete, then choose
				 * again: what is due may have changed meanwhile. */
				unsigned n = batch.inflight;
				e->refs++; /* keeps e in place while waiting */
				while (batch.inflight >= n)
					pthread_cond_wait(&fs->cond, &fs->lock);
				if (learned && cache_disk_idle(fs))
					pthread_cond_signal(&fs->prefetch_cond); /* a clean block */
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
		batch_wait(fs, &batch);
		idle = started == 0;
		if (started || tick)
			commit_soon(fs); /* attribute changes ride on the periodic tick */
		if (!started && reclaim) {
			/* Nothing to write: wake waiters so they re-check.
			 * Not while a tier backs off: its blocks are still to
			 * write, a waiter would only wake this loop again at
			 * once, and the two would spin until the back-off
			 * ends. Waiters wake on their own every STUCK_NS. */
			if (!g_wb_nheld)
				wake_all(fs);
			pthread_cond_timedwait(&fs->flusher_cond, &fs->lock,
					       &(struct timespec){.tv_sec = time(NULL) + 1});
		}
	}
	pthread_mutex_unlock(&fs->lock);
	return NULL;
}

/* Stop the committer; what it has not committed yet is the unmount's own
 * commit's (cache_flush_all). */
static void committer_stop(struct fs *fs)
{
	if (!fs->committer_running)
		return;
	pthread_mutex_lock(&fs->lock);
	fs->commit_stop = true;
	pthread_cond_signal(&fs->commit_cond);
	pthread_mutex_unlock(&fs->lock);
	pthread_join(fs->committer, NULL);
	fs->committer_running = false;
}

int flusher_start(struct fs *fs)
{
	int rc = pthread_create(&fs->committer, NULL, committer_main, fs);
	if (rc)
		return -rc;
	(void)pthread_setname_np(fs->committer, "tierfs-commit");
	fs->committer_running = true;
	rc = pthread_create(&fs->flusher, NULL, flusher_main, fs);
	if (rc) {
		committer_stop(fs);
		return -rc;
	}
	/* Names are for `top -H` and perf; without one the thread works the same. */
	(void)pthread_setname_np(fs->flusher, "tierfs-flush");
	fs->flusher_running = true;
	return 0;
}

void flusher_stop(struct fs *fs)
{
	if (!fs->flusher_running)
		return;
	pthread_mutex_lock(&fs->lock);
	fs->stopping = true;
	pthread_cond_signal(&fs->flusher_cond);
	pthread_mutex_unlock(&fs->lock);
	pthread_join(fs->flusher, NULL);
	fs->flusher_running = false;
	committer_stop(fs);
}

int cache_init(struct fs *fs)
{
	struct tier *ram = fs->tiers[fs->ram];
	/* The landing slots come first, so no cache entry takes them. */
	fs->nlanding = fs_landing_slots(fs);
	fs->landing = calloc(fs->nlanding + 1, sizeof(*fs->landing));
	if (!fs->landing)
		return -ENOMEM;
	for (uint64_t i = 0; i < fs->nlanding; i++) {
		int64_t slot = tier_alloc(ram);
		if (slot < 0)
			return (int)slot;
		fs->landing[fs->landing_free++] = (uint64_t)slot;
	}
	fs->cache_slots = tier_slots_total(ram) - fs->nlanding;
	uint64_t need = fs_cache_min_blocks(&fs->conf);
	if (fs->cache_slots < need) {
		TFS_LOG("%s: tier %s: capacity %llu bytes is too small for the cache: need at "
			"least %llu blocks of %u bytes",
			fs->conf.path, tier_name(ram), (unsigned long long)fs->cache_slots * fs->bs,
			(unsigned long long)need, fs->bs);
		return -EINVAL;
	}
	uint64_t reserve = need > fs->cache_slots / 8 ? need : fs->cache_slots / 8;
	fs->pin_limit = fs->cache_slots - reserve;
	fs->wb_scratch = calloc(fs->cache_slots, sizeof(*fs->wb_scratch));
	fs->zero = aligned_alloc(4096, fs->bs);
	if (!fs->zero || !fs->wb_scratch)
		return -ENOMEM;
	memset(fs->zero, 0, fs->bs);
	return 0;
}

void cache_destroy(struct fs *fs)
{
	for (int l = 0; l < 2; l++)
		for (int st = 0; st < LRU_NSTATES; st++)
			while (fs->lru_head[l][st]) {
				struct centry *e = fs->lru_head[l][st];
				lru_unlink(fs, e);
				free(e);
			}
	free(fs->zero);
	free(fs->wb_scratch);
	free(fs->landing);
	free(fs->freed);
	free(g_held); /* a failed last sync: the next mount finds them free */
	g_held = NULL;
	g_nheld = 0;
	free(g_pend);
	g_pend = NULL;
	g_npend = g_pend_cap = 0;
}

uint64_t cache_landing_get(struct fs *fs)
{
	pthread_mutex_lock(&fs->lock);
	uint64_t slot = fs->landing_free ? fs->landing[--fs->landing_free] : CACHE_NO_SLOT;
	pthread_mutex_unlock(&fs->lock);
	return slot;
}

void *cache_slot_ptr(struct fs *fs, uint64_t slot)
{
	return tier_ram_ptr(fs->tiers[fs->ram], slot);
}

void fs_tier_slots(struct fs *fs, int i, uint64_t *used, uint64_t *total)
{
	uint64_t u = tier_slots_used(fs->tiers[i]), t = tier_slots_total(fs->tiers[i]);
	if (i == fs->ram) {
		/* Landing slots are always in use, by a worker or a block. */
		u = u > fs->nlanding ? u - fs->nlanding : 0;
		t -= fs->nlanding;
	}
	*used = u;
	*total = t;
}

void fs_durable_slots(struct fs *fs, uint64_t *used, uint64_t *total)
{
	uint64_t u = 0, t = 0;
	for (int i = 0; i < fs->conf.ntiers; i++) {
		if (!tier_persistent(fs->tiers[i]))
			continue;
		uint64_t a, b;
		fs_tier_slots(fs, i, &a, &b);
		u += a;
		t += b;
	}
	*used = u;
	*total = t;
}
