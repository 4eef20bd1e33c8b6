/*
 * fs/cache/prefetch.c — read-ahead I/O: loading a block into RAM before a request
 * asks for it, along the learned order or behind a sequential reader,
 * without evicting anything needed sooner than the block itself (behind a
 * reader, with no order learned: nothing itself read ahead).
 *
 * Locking: fs/lock.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/cache/internal.h"

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
	tfs_lock(&fs->lock);
	e->refs--;
	if (io->result) {
		/* A demand read of this block will try again and report it. */
		TFS_LOG("inode %llu block %llu: prefetch from tier %s slot %llu failed: %s",
			(unsigned long long)e->inode->ino, (unsigned long long)e->idx,
			tier_name(io->tier), (unsigned long long)io->slot, strerror(-io->result));
		e->prefetched = false; /* never loaded: not a read wasted */
		fs->cache.nprefetched--;
		entry_drop(fs, e);
	} else {
		e->state = CE_VALID;
		atomic_fetch_add(&fs->stats.prefetches, 1);
	}
	fs->cache.prefetch_inflight--;
	cache_wake(fs);
	pthread_cond_signal(&fs->cache.prefetch_cond);
	tfs_unlock(&fs->lock);
	free(p);
}

/* A victim for sequential read-ahead with no learned order: the least
 * recently used clean block, unless it was itself read ahead and is still
 * unread (read-ahead must not evict read-ahead). A streaming reader's
 * blocks, read once, are the first to go; without this, read-ahead stopped
 * once RAM was full, and a cold read of a file striped over the disk and a
 * capped second tier ran with the reader's own few requests in flight. Lock
 * held. */
static struct centry *readahead_victim(struct fs *fs)
{
	for (struct centry *e = fs->cache.lru_tail[0][LRU_CLEAN]; e; e = e->prev)
		if (entry_evictable(fs, e, false))
			return e->prefetched ? NULL : e;
	return NULL;
}

int cache_prefetch(struct fs *fs, struct inode *in, uint64_t idx, uint64_t need_at)
{
	tfs_assert_held(&fs->lock);
	struct blk *b = fs_blk(in, idx);
	if (!b || b->ce || b->tier == TIER_NONE || b->csum == 0)
		return 0;
	struct prefetch_io *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	struct centry *e;
	int rc = entry_new(fs, &e);
	if (rc == -ENOSPC && (need_at != UINT64_MAX || !fs->eng.learned)) {
		struct centry *v =
		    need_at != UINT64_MAX ? victim_pick_before(fs, need_at) : readahead_victim(fs);
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
	fs->cache.nprefetched++;
	e->pinned = in->home == fs->ram;
	if (e->pinned)
		fs->cache.npinned++;
	e->next_read = e->next_use = need_at;
	e->plan = engine_plan(fs, fs_order_id(in), idx, fs->idle.gap.on);
	e->stamp = ++fs->cache.clock;
	b->ce = e;
	in->nce++;
	lru_push(fs, e);
	fs->cache.prefetch_inflight++;
	p->fs = fs;
	p->e = e;
	p->io.op = TIER_OP_READ;
	p->io.prio = TIER_PRIO_PREFETCH;
	p->io.slot = b->slot;
	p->io.csum = b->csum;
	p->io.len = blk_io_len(b);
	p->io.stored_len = blk_stored_len(b);
	p->io.buf = e->buf;
	p->io.done = prefetch_done;
	rc = cache_submit_unlocked(fs, fs->tiers[b->tier], &p->io);
	return rc ? rc : 1;
}

/* The prefetcher thread: reads ahead along the learned order.
 *
 * Read-ahead pays only while the blocks it reads are used: over each
 * window of PACING_WINDOW blocks read ahead and then used or dropped
 * unread, if more were dropped than used, it pauses for a cycle, then tries
 * again (policy/pacing.h). With several ranks the learned order places
 * each rank's next blocks only within the learner's tolerance, and most of
 * what it read could be dropped unread: disk reads for nothing, on the
 * channel that bounds the run. With one rank few are dropped, so the
 * windows pay and nothing changes.
 *
 * Blocks read ahead and not used yet are bounded to half the prefetch
 * queue once RAM is full (pacing_crowds): they wait in the RAM the kept
 * blocks leave, a queue's worth (keep_horizon), which demand reads need
 * too. With RAM to spare nothing competes; and once it is full, one that
 * is not read when predicted goes first (entry_next_read), so none holds
 * the bound. */
static void *prefetcher_main(void *arg)
{
	struct fs *fs = arg;
	unsigned depth = fs->conf.prefetch_depth;
	/* While the disks are idle it reads ahead PACING_IDLE_AHEAD times
	 * further, counting reads only (fs/cache/idle.c). */
	size_t ahead = (size_t)depth * PACING_IDLE_AHEAD;
	uint64_t *keys = calloc(ahead, sizeof(*keys));
	uint32_t *dist = calloc(ahead, sizeof(*dist));
	if (!keys || !dist) {
		free(keys);
		free(dist);
		TFS_LOG("prefetch: out of memory, prefetch disabled");
		return NULL;
	}
	bool again = false; /* look again at once: gap mode just came on */
	tfs_lock(&fs->lock);
	while (!fs->stopping) {
		if (!again)
			tfs_cond_wait(&fs->cache.prefetch_cond, &fs->lock);
		again = false;
		if (fs->stopping || !fs->eng.learned)
			continue;
		/* Between steps the next accesses are gradient writes, in
		 * RAM: look past them to the update's first reads, as far as
		 * RAM lets read-ahead evict blocks needed later. Idle disks
		 * cost nothing, so the read-ahead's pause does not hold then. */
		bool idle = cache_disk_idle(fs);
		if (!idle &&
		    !pacing_pays(&fs->cache.pacing, engine_now(fs),
				 atomic_load(&fs->stats.prefetch_hits),
				 atomic_load(&fs->stats.prefetch_wasted), engine_cycle_len(fs)))
			continue;
		size_t n = engine_upcoming(fs, idle, idle ? ahead : depth, keys, dist);
		/* A victim search that found nothing needed after a time finds
		 * nothing for any later time either, until the lock is dropped
		 * (a read started): each search walks up to thousands of
		 * blocks under the lock, and this loop runs on every access. */
		uint64_t none_after = UINT64_MAX;
		for (size_t i = 0;
		     i < n &&
		     pacing_room(fs->cache.prefetch_inflight, fs->cache.prefetch_max, idle,
				 pacing_crowds(fs->cache.ncached, fs->cache.cache_slots,
					       fs->cache.nprefetched, fs->cache.prefetch_max)) &&
		     fs->eng.learned && !fs->stopping;
		     i++) {
			/* A block whose next access overwrites it needs no read.
			 * One whose own last access says its read is far off was
			 * read already: the global position lags a rank that ran
			 * ahead, and loading it again would waste a read and a
			 * slot until the next step. */
			uint64_t next_use, when = engine_key_next(fs, keys[i], &next_use);
			if (!pacing_wanted(when, next_use, idle ? dist[i] : i, depth))
				continue;
			/* Loaded if need be: an inode the kernel has forgotten,
			 * with nothing cached, leaves the table (the inode
			 * sweep), and is just the kind whose blocks to fetch. */
			struct inode *in;
			uint64_t id, idx;
			engine_key_split(keys[i], &id, &idx);
			uint64_t ino = fs_order_id_ino(fs, id);
			if (!ino || fs_inode_get(fs, ino, &in) || in->dropping ||
			    fs_inode_load_map(fs, in))
				continue;
			/* WHEN counts from the clock now: cache_prefetch drops
			 * the lock, and the ranks move it on meanwhile. */
			uint64_t need_at = engine_now(fs) + when;
			if (pacing_skip(need_at, none_after))
				continue;
			int rc = cache_prefetch(fs, in, idx, need_at);
			if (rc < 0 && rc != -ENOSPC)
				break;
			none_after = pacing_none_after(none_after, rc, need_at);
		}
		if (idle && cache_idle_progress(fs))
			again = true;
	}
	tfs_unlock(&fs->lock);
	free(keys);
	free(dist);
	return NULL;
}

int cache_prefetcher_start(struct fs *fs)
{
	/* Signalled by every completed read-ahead, sequential ones too. */
	pthread_cond_init(&fs->cache.prefetch_cond, NULL);
	if (!fs->eng.order || !fs->conf.prefetch_depth || !fs->stripe.n)
		return 0;
	/* Prefetch may use the queue depth of every persistent tier, which
	 * the scheduler serves after demand reads. */
	fs->cache.prefetch_max = fs_persistent_queue(fs);
	int rc = pthread_create(&fs->cache.prefetcher, NULL, prefetcher_main, fs);
	if (rc)
		return -rc;
	(void)pthread_setname_np(fs->cache.prefetcher, "tierfs-prefetch");
	fs->cache.prefetcher_running = true;
	return 0;
}

void cache_prefetcher_stop(struct fs *fs)
{
	if (!fs->cache.prefetcher_running)
		return;
	fs_thread_stop(fs, fs->cache.prefetcher, &fs->cache.prefetch_cond);
	fs->cache.prefetcher_running = false;
	tfs_lock(&fs->lock);
	while (fs->cache.prefetch_inflight)
		tfs_cond_wait(&fs->cond, &fs->lock);
	tfs_unlock(&fs->lock);
}

/* An idle stretch ended: read-ahead judges itself afresh. What it read
 * while the disks were idle cost nothing, and a pause a window of it
 * earned before would hold it off the whole next update. Lock held. */
void cache_prefetch_idle_ended(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	pacing_restart(&fs->cache.pacing, atomic_load(&fs->stats.prefetch_hits),
		       atomic_load(&fs->stats.prefetch_wasted));
}
