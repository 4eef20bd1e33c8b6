/*
 * fs/cache/entry.c — the cache's entries: the LRU lists they are on, their
 * references (entry_get/entry_put), and the predictions stamped on them.
 *
 * An entry is a block held in RAM, its buffer a slot of the RAM tier. Its
 * state changes under fs->lock and every change is announced on fs->cond
 * (cache_wake); its bytes are copied with the lock dropped, a reference
 * keeping the buffer in place.
 *
 * Locking: fs/lock.h.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/cache/internal.h"
#include "policy/victim.h"
#include "policy/wbhorizon.h"

/* Wake everyone waiting on an entry's or inode's state, and one of
 * entry_alloc's waiters (which wakes the next if it leaves). Lock held. */
void cache_wake(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	pthread_cond_broadcast(&fs->cond);
	if (fs->cache.reclaim_waiters)
		pthread_cond_signal(&fs->cache.reclaim_cond);
}

/* The list E belongs on, by its write-back state (cache.lru_head). */
static uint8_t lru_state_of(const struct centry *e)
{
	return e->flushing ? LRU_FLUSHING : e->dirty ? LRU_DIRTY : LRU_CLEAN;
}

void lru_unlink(struct fs *fs, struct centry *e)
{
	int l = e->pinned, s = e->lru;
	if (e->prev)
		e->prev->next = e->next;
	else
		fs->cache.lru_head[l][s] = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		fs->cache.lru_tail[l][s] = e->prev;
	e->prev = e->next = NULL;
	e->lru = LRU_NONE;
}

/* Link E at the head of its list: it was just used. */
void lru_push(struct fs *fs, struct centry *e)
{
	int l = e->pinned, s = e->lru = lru_state_of(e);
	e->prev = NULL;
	e->next = fs->cache.lru_head[l][s];
	if (fs->cache.lru_head[l][s])
		fs->cache.lru_head[l][s]->prev = e;
	fs->cache.lru_head[l][s] = e;
	if (!fs->cache.lru_tail[l][s])
		fs->cache.lru_tail[l][s] = e;
}

/* Link E where its last use (stamp) places it: a block whose write-back
 * state changed keeps its rank among the others of its new list, as it
 * kept its place in the one list there was. The walk starts from both
 * ends: with a learned order write-backs are of blocks used last (near
 * the head), without one of the oldest (near the tail). */
static void lru_insert(struct fs *fs, struct centry *e)
{
	int l = e->pinned, s = lru_state_of(e);
	struct centry *h = fs->cache.lru_head[l][s], *t = fs->cache.lru_tail[l][s];
	if (!h || e->stamp >= h->stamp) {
		lru_push(fs, e);
		return;
	}
	e->lru = (uint8_t)s;
	if (e->stamp <= t->stamp) {
		e->next = NULL;
		e->prev = t;
		t->next = e;
		fs->cache.lru_tail[l][s] = e;
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
void lru_restate(struct fs *fs, struct centry *e)
{
	if (e->lru == LRU_NONE || e->lru == lru_state_of(e))
		return;
	lru_unlink(fs, e);
	lru_insert(fs, e);
}

/* Walking the lists of state S from the least recently used end, the list
 * of blocks that may go first, then (PINNED_TOO) the pinned one: the first
 * entry, and the one after E (in E's list, whatever state that is now). */
struct centry *lru_oldest(struct fs *fs, int s, bool pinned_too)
{
	return fs->cache.lru_tail[0][s] ? fs->cache.lru_tail[0][s]
	       : pinned_too		? fs->cache.lru_tail[1][s]
					: NULL;
}

struct centry *lru_older(struct fs *fs, struct centry *e, bool pinned_too)
{
	if (e->prev)
		return e->prev;
	return !e->pinned && pinned_too && e->lru != LRU_NONE ? fs->cache.lru_tail[1][e->lru]
							      : NULL;
}

/* Make E's home RAM, moving it to the pinned list. Lock held. */
void entry_pin(struct fs *fs, struct centry *e)
{
	tfs_assert_held(&fs->lock);
	if (e->pinned)
		return;
	lru_unlink(fs, e);
	e->pinned = true;
	fs->cache.npinned++;
	lru_push(fs, e);
}

/* RAM is no longer E's home (its file was pinned elsewhere or unpinned):
 * an entry like any other, written back by the flusher. */
void entry_unpin(struct fs *fs, struct centry *e)
{
	if (!e->pinned)
		return;
	lru_unlink(fs, e);
	e->pinned = false;
	fs->cache.npinned--;
	lru_push(fs, e);
}

static void touch(struct fs *fs, struct centry *e)
{
	e->stamp = ++fs->cache.clock;
	if (fs->cache.lru_head[e->pinned][e->lru] != e) {
		lru_unlink(fs, e);
		lru_push(fs, e);
	}
}

static void entry_release_slot(struct fs *fs, struct centry *e)
{
	tier_free(fs->tiers[fs->ram], e->slot);
	fs->cache.ncached--;
	if (e->pinned)
		fs->cache.npinned--;
	free(e);
}

/* Count E dirty if it was clean. Lock held. */
void entry_mark_dirty(struct fs *fs, struct centry *e)
{
	tfs_assert_held(&fs->lock);
	if (!e->dirty) {
		e->dirty = true;
		fs->cache.ndirty++;
		e->inode->ndirty++;
		lru_restate(fs, e);
	}
}

/* Detach an entry from its block and free it. Lock held, refs == 0. */
void entry_drop(struct fs *fs, struct centry *e)
{
	tfs_assert_held(&fs->lock);
	struct inode *in = e->inode;
	struct blk *b = in ? fs_blk(in, e->idx) : NULL;
	if (b && b->ce == e) {
		b->ce = NULL;
		in->nce--;
	}
	if (e->dirty) {
		fs->cache.ndirty--;
		in->ndirty--;
	}
	if (e->prefetched) {
		fs->cache.nprefetched--;
		atomic_fetch_add(&fs->stats.prefetch_wasted, 1);
	}
	lru_unlink(fs, e);
	entry_release_slot(fs, e);
}

/* The bytes a read of B's durable copy moves (tier_io.len: 0, the whole
 * block), and B's record of those a write-back moved (meta_block.pages),
 * with the bytes the tier's codec stored them in (tier_io.stored_len,
 * meta_block.stored). */
uint32_t blk_io_len(const struct blk *b)
{
	return b->pages * TIER_IO_ALIGN;
}

void blk_set_io_len(const struct fs *fs, struct blk *b, uint32_t len, uint32_t stored)
{
	b->pages = (uint16_t)(len < fs->bs ? len / TIER_IO_ALIGN : 0);
	b->stored = (uint16_t)(stored / TIER_IO_ALIGN);
}

uint32_t blk_stored_len(const struct blk *b)
{
	return b->stored * TIER_IO_ALIGN;
}

/* Evict E, a victim: counted, and counted apart where the keep plan meant
 * it to stay until a read still to come (stats.evictions_kept). Lock held. */
void entry_evict(struct fs *fs, struct centry *e)
{
	tfs_assert_held(&fs->lock);
	atomic_fetch_add(&fs->stats.evictions, 1);
	if (victim_evicts_kept(fs->eng.learned, e->plan, e->next_read, engine_stale_before(fs)))
		atomic_fetch_add(&fs->stats.evictions_kept, 1);
	entry_drop(fs, e);
}

/* Stamp E, block IDX of the file of order id ID (fs_order_id), with the
 * learned order's predictions. */
void entry_stamp(struct fs *fs, struct centry *e, uint64_t id, uint64_t idx)
{
	e->next_read = engine_next_read(fs, id, idx, &e->next_use);
	e->plan = engine_plan(fs, id, idx, fs->idle.gap.on);
}

/* A request accesses block IDX of IN (WRITE: overwrites it whole): the
 * learner is told, sized afresh from time to time, and read-ahead woken.
 * Lock held. */
void cache_note_access(struct fs *fs, struct inode *in, uint64_t idx, bool write)
{
	tfs_assert_held(&fs->lock);
	if (engine_fit_due(fs, idx))
		engine_fit(fs, cache_learn_blocks(fs));
	engine_access(fs, fs_order_id(in), idx, write);
	/* The prefetcher looks again once per request's worth of blocks (a
	 * FUSE request spans up to 1 MiB), not on every block: each wake
	 * takes the lock and walks the upcoming order, and with small blocks
	 * waking it for each access cost a visible share of the update
	 * phase. Completed read-aheads still wake it every time. */
	if (fs->eng.learned && fs->cache.prefetcher_running) {
		uint64_t now = engine_now(fs), every = fs_request_blocks(fs);
		if (every == 1 || now - fs->cache.pf_signalled >= every) {
			fs->cache.pf_signalled = now;
			pthread_cond_signal(&fs->cache.prefetch_cond);
		}
	}
}

/* A new entry on a free RAM slot: 0, -ENOSPC (no free slot), -ENOMEM. */
int entry_new(struct fs *fs, struct centry **out)
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
	fs->cache.ncached++;
	*out = e;
	return 0;
}

bool inode_is_volatile(const struct inode *in)
{
	return in->attr.flags & META_F_VOLATILE;
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
	tfs_assert_held(&fs->lock);
	for (int l = 0; l < 2; l++)
		for (int st = 0; st < LRU_NSTATES; st++)
			for (struct centry *e = fs->cache.lru_head[l][st]; e; e = e->next)
				if (e->inode)
					entry_stamp(fs, e, fs_order_id(e->inode), e->idx);
	wbhorizon_memo_invalidate(&fs->cache.wbh);
	fs->cache.learn_clock = fs->cache.clock;
	/* The write-burst reserve counts stalls per cycle of the new one. */
	wbreserve_restart(&fs->cache.wbr, engine_now(fs));
}

void cache_replan(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	for (int l = 0; l < 2; l++)
		for (int st = 0; st < LRU_NSTATES; st++)
			for (struct centry *e = fs->cache.lru_head[l][st]; e; e = e->next)
				if (e->inode)
					e->plan = engine_plan(fs, fs_order_id(e->inode), e->idx,
							      fs->idle.gap.on);
	wbhorizon_memo_invalidate(&fs->cache.wbh);
}

/* Reference the cached entry of block IDX, loading it when needed. Lock
 * held (dropped while loading). *out is NULL for a hole with GET_READ. A
 * new entry for a write mode is returned CE_LOADING: the caller copies its
 * bytes in, then calls write_filled. */
int entry_get(struct fs *fs, struct inode *in, uint64_t idx, enum get_mode mode,
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
				tfs_cond_wait(&fs->cond, &fs->lock);
				continue;
			}
			atomic_fetch_add(&fs->stats.hits, 1);
			if (e->prefetched) {
				/* Overwritten whole, its read was for nothing:
				 * counted used, it kept prefetch_pays() from
				 * pausing read-ahead that only fed overwrites. */
				bool whole = mode == GET_WRITE_FULL || mode == GET_WRITE_HEAD;
				e->prefetched = false;
				fs->cache.nprefetched--;
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
			if (home == fs->ram && fs->cache.npinned < fs->cache.pin_limit)
				pin = true;
			else if ((rc = slot_assign(fs, in, idx)))
				return rc;
			else
				assigned = true;
		}
		if ((rc = entry_alloc(fs, in, idx, &e))) {
			/* Else taken (and counted in st_blocks) until a remount. */
			if (assigned)
				slot_unassign(fs, b);
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
				slot_unassign(fs, b);
			continue;
		}
		e->inode = in;
		e->idx = idx;
		e->refs = 1;
		e->pinned = pin || (in->home == fs->ram && b->tier == TIER_NONE);
		if (e->pinned && !pin)
			fs->cache.npinned++;
		else if (pin)
			fs->cache.npinned++;
		b->ce = e;
		in->nce++;
		lru_push(fs, e);
		e->stamp = ++fs->cache.clock;
		/* Load (or zero) outside the lock; others wait on CE_LOADING.
		 * A new entry for a write stays so until the write's bytes
		 * are in (write_filled): until then its slot holds another
		 * block's bytes (a slot used before) or zeros where the
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
		uint32_t len = blk_io_len(b), stored = blk_stored_len(b);
		uint64_t slot = b->slot, csum = b->csum;
		bool written = tier != TIER_NONE && (csum != 0 || b->ce == NULL);
		tfs_unlock(&fs->lock);
		if (tier == TIER_NONE || !written || mode == GET_WRITE_HEAD) {
			memset(e->buf, 0, fs->bs);
			rc = 0;
		} else {
			atomic_fetch_add(&fs->stats.misses, 1);
			rc = tier_rw_stored(fs->tiers[tier], TIER_OP_READ, TIER_PRIO_DEMAND, slot,
					    e->buf, len, &csum, &stored);
		}
		tfs_lock(&fs->lock);
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
			cache_wake(fs);
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

void entry_put(struct fs *fs, struct centry *e)
{
	if (--e->refs)
		return;
	if (fs->cache.reclaim_waiters || fs->cache.ref_waiters)
		pthread_cond_broadcast(&fs->cond);
	/* A dirty block let go helps no reclaim waiter: its write-back will. */
	if (fs->cache.reclaim_waiters && entry_evictable(fs, e, true))
		pthread_cond_signal(&fs->cache.reclaim_cond);
}

/* Wait on fs->cond for an entry nobody holds: entry_put announces the last
 * reference only to counted waiters. Without the count, an fsync waiting
 * for a reader's reference hung once no other event came (a rare race,
 * seen under the sanitizers' slowdown). Lock held. */
void entry_wait_unreferenced(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	fs->cache.ref_waiters++;
	tfs_cond_wait(&fs->cond, &fs->lock);
	fs->cache.ref_waiters--;
}
