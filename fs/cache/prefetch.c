/*
 * fs/cache/prefetch.c — read-ahead I/O: loading a block into RAM before a request
 * asks for it, along the learned order or behind a sequential reader,
 * without evicting anything needed sooner than the block itself.
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
 * capped second tier ran with the reader's own ~8 requests in flight. Lock
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
	e->plan = engine_plan(fs, fs_order_id(in), idx);
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
	p->io.buf = e->buf;
	p->io.done = prefetch_done;
	rc = cache_submit_unlocked(fs, fs->tiers[b->tier], &p->io);
	return rc ? rc : 1;
}
