/*
 * fs/cache/data.c — the data operations a request makes: read, write, resize
 * and forget, and the placement queries of the xattrs.
 *
 * Reads hand out the blocks' RAM buffers themselves (no copy in the
 * daemon); writes are copied into them and complete at once, the block
 * dirty until the flusher, an fsync or the unmount writes it back.
 *
 * Locking: fs/lock.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "fs/cache/internal.h"

/* Blocks read ahead of a sequential reader, per tier of the stripe. */
#define READAHEAD_PER_TIER 8

/* Sequential reads of blocks on persistent tiers: start loading the next
 * blocks now, into free RAM or in place of the least recently used clean
 * block (never one read ahead: readahead_victim), so every tier of the stripe is busy while
 * the reader works through what it has (a reader alone keeps a handful of requests in
 * flight through FUSE, too few to drive several devices). Once the access
 * order is learned, the prefetcher does this job better. Lock held. */
static void read_ahead(struct fs *fs, struct inode *in, uint64_t first, uint64_t last)
{
	tfs_assert_held(&fs->lock);
	bool seq = first == in->ra_next || (first == 0 && last > 0);
	in->ra_next = last + 1;
	if (!seq || fs->eng.learned || !fs->stripe.n)
		return;
	uint64_t window = READAHEAD_PER_TIER * (uint64_t)fs->stripe.n;
	for (uint64_t i = last + 1; i <= last + window; i++) {
		if (fs->cache.prefetch_inflight >= fs->cache.prefetch_max + window)
			break;
		if (i * fs->bs >= in->attr.size || cache_prefetch(fs, in, i, UINT64_MAX) < 0)
			break;
	}
}

int cache_read_get(struct fs *fs, struct inode *in, uint64_t off, size_t len, struct cache_read *r)
{
	r->n = 0;
	r->live = false;
	r->iov = r->stack_iov;
	r->ents = r->stack_ents;
	tfs_lock(&fs->lock);
	uint64_t size = in->attr.size;
	if (off >= size || len == 0) {
		tfs_unlock(&fs->lock);
		return 0;
	}
	if (len > size - off)
		len = size - off;
	int rc = fs_inode_load_map(fs, in);
	if (rc) {
		tfs_unlock(&fs->lock);
		return rc;
	}
	r->live = true;
	r->counted = idle_disk_demand(fs, in);
	uint64_t first = off / fs->bs, last = (off + len - 1) / fs->bs;
	size_t n = (size_t)(last - first + 1);
	if (n > CACHE_READ_STACK) {
		r->iov = calloc(n, sizeof(*r->iov));
		r->ents = calloc(n, sizeof(*r->ents));
		if (!r->iov || !r->ents) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	size_t got = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t idx = first + i;
		uint64_t boff = i == 0 ? off % fs->bs : 0;
		uint64_t blen = fs->bs - boff;
		if (blen > len - got)
			blen = len - got;
		r->ents[i] = NULL;
		cache_note_access(fs, in, idx, false);
		rc = entry_get(fs, in, idx, GET_READ, &r->ents[i]);
		if (rc)
			goto fail;
		r->n = i + 1;
		if (r->ents[i])
			entry_stamp(fs, r->ents[i], fs_order_id(in), idx);
		r->iov[i].iov_base = (char *)(r->ents[i] ? r->ents[i]->buf : fs->cache.zero) + boff;
		r->iov[i].iov_len = blen;
		got += blen;
	}
	read_ahead(fs, in, first, last);
	fs_read_atime(fs, in);
	tfs_unlock(&fs->lock);
	return 0;
fail:
	tfs_unlock(&fs->lock);
	cache_read_put(fs, r);
	return rc;
}

/* The reply has copied the data into the kernel: the references that kept
 * the buffers in place until then go. */
void cache_read_put(struct fs *fs, struct cache_read *r)
{
	if (!r->live)
		return;
	tfs_lock(&fs->lock);
	for (size_t i = 0; i < r->n; i++)
		if (r->ents && r->ents[i])
			entry_put(fs, r->ents[i]);
	idle_disk_demand_done(fs, r->counted);
	tfs_unlock(&fs->lock);
	if (r->iov != r->stack_iov)
		free(r->iov);
	if (r->ents != r->stack_ents)
		free(r->ents);
	r->n = 0;
	r->live = false;
}

/* Whether a write of BLEN bytes from DATA into E can take DATA's slot
 * instead of copying: a whole block, DATA exactly the donor slot's memory,
 * and nobody else holding E (a reply or a write-back reading the old
 * buffer would see it reused). Lock held. */
static bool adoptable(struct fs *fs, const struct centry *e, const char *data, size_t blen,
		      const uint64_t *donor)
{
	tfs_assert_held(&fs->lock);
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
int data_write_locked(struct fs *fs, struct inode *in, uint64_t off, const char *buf, size_t len,
		      uint64_t *donor, bool kill_setid)
{
	tfs_assert_held(&fs->lock);
	int rc = fs_inode_load_map(fs, in);
	size_t done = 0;
	bool due = false; /* a block written is due for write-back (learned order) */
	bool counted = idle_disk_demand(fs, in);
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
		cache_note_access(fs, in, idx, mode != GET_WRITE_PART);
		rc = entry_get(fs, in, idx, mode, &e);
		if (rc)
			break;
		entry_stamp(fs, e, fs_order_id(in), idx);
		/* A block being written back must not change under the write:
		 * its checksum is computed over what goes out. */
		while (e->flushing)
			tfs_cond_wait(&fs->cond, &fs->lock);
		if (!e->dirty) {
			if (e->written_back)
				atomic_fetch_add(&fs->stats.flushes_rewritten, 1);
			e->written_back = false;
		}
		entry_mark_dirty(fs, e);
		if (fs->eng.learned && !e->pinned && !inode_is_volatile(in))
			due = due ||
			      wb_due_learned(fs, e, fs->cache.wbh.ok ? fs->cache.wbh.horizon : 0);
		if (adoptable(fs, e, buf + done, blen, donor)) {
			/* The request's data already lies in a slot of its own:
			 * the block takes that slot, the worker the old one. */
			uint64_t old = e->slot;
			e->slot = *donor;
			e->buf = (char *)buf + done;
			*donor = old;
			atomic_fetch_add(&fs->stats.writes_adopted, 1);
		} else {
			tfs_unlock(&fs->lock);
			memcpy((char *)e->buf + boff, buf + done, blen);
			tfs_lock(&fs->lock);
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
	/* wb_dirty_over still wakes the flusher with a learned order: it then
	 * finds what is due ahead of reclaim (waking it only for due blocks
	 * cost hit ratio: reclaim found them still dirty); the horizon it checks is
	 * cached (wb_horizon), so a wake is a bounded scan. */
	if (due || wb_dirty_over(fs))
		pthread_cond_signal(&fs->cache.flusher_cond);
	idle_disk_demand_done(fs, counted);
	return done ? (int)done : rc;
}

int cache_write(struct fs *fs, struct inode *in, uint64_t off, const char *buf, size_t len,
		uint64_t *donor, bool kill_setid)
{
	tfs_lock(&fs->lock);
	while (in->resizing)
		tfs_cond_wait(&fs->cond, &fs->lock);
	in->nwriting++;
	int rc = data_write_locked(fs, in, off, buf, len, donor, kill_setid);
	if (--in->nwriting == 0 && in->resizing)
		pthread_cond_broadcast(&fs->cond); /* frees nothing */
	tfs_unlock(&fs->lock);
	return rc;
}

/* Drop the data of blocks FROM to TO (exclusive). Lock held; the caller
 * zeroed a partial block at either end through data_write_locked. KEEP_EMPTY
 * (fallocate's zero range): a slot that holds nothing committed of the
 * block stays, set aside as unwritten. A slot with committed bytes goes
 * all the same: written over in place before the commit that marks it
 * unwritten, a crash would leave the old checksum over new bytes. */
int data_drop_blocks(struct fs *fs, struct inode *in, uint64_t from, uint64_t to, bool keep_empty)
{
	tfs_assert_held(&fs->lock);
	fs_for_each_blk (in, i, from) {
		if (i >= to)
			break;
		struct blk *b = fs_blk(in, i);
		while (b->ce && (b->ce->flushing || b->ce->state == CE_LOADING || b->ce->refs))
			entry_wait_unreferenced(fs);
		if (b->ce)
			entry_drop(fs, b->ce);
		if (keep_empty && b->tier != TIER_NONE && b->csum == 0) {
			/* Queued so that the commit keeps the record. */
			int rc = b->unwritten ? 0 : commit_pend_add(fs, in->ino, i);
			if (rc)
				return rc;
			b->unwritten = true;
			continue;
		}
		if (b->tier != TIER_NONE) {
			/* Recorded first: on ENOMEM the block stays whole,
			 * rather than its slot freed while the map still
			 * points there, to be freed twice by the next try. */
			int rc = commit_pend_add(fs, in->ino, i);
			if (rc)
				return rc;
			slot_defer_free(fs, b->tier, b->slot);
			b->tier = TIER_NONE;
		}
	}
	return 0;
}

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
		rc = data_write_locked(fs, in, size, fs->cache.zero, (size_t)(end - size), NULL,
				       false);
		if (rc < 0)
			return rc;
		/* The cut block's durable copy still holds the bytes beyond
		 * the new size, and the size can be committed any moment
		 * from here (setattr does at once): a kill -9 before the
		 * zeroed block was written back left them to reappear when
		 * the file grew again. So it goes first. */
		struct blk *cut = fs_blk(in, size / fs->bs);
		if (!inode_is_volatile(in) && cut && cut->tier != TIER_NONE &&
		    (rc = flush_block_wait(fs, in, size / fs->bs)))
			/* The tail is zeroed already: the shrink goes on, and
			 * the block stays dirty, written back later. */
			TFS_LOG("inode %llu: truncate: write-back of block %llu failed: %s",
				(unsigned long long)in->ino, (unsigned long long)(size / fs->bs),
				strerror(-rc));
	}
	if (size < old) {
		rc = data_drop_blocks(fs, in, (size + fs->bs - 1) / fs->bs, UINT64_MAX, false);
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
	tfs_assert_held(&fs->lock);
	/* Writers are kept out from the tail's zeroing to the new size: a
	 * write in between, into the tail or into a block already dropped
	 * while this waited for a reader, left its bytes beyond EOF, to show
	 * when the file grew again. */
	if (size > fs_max_size(fs))
		return -EFBIG;
	while (in->resizing)
		tfs_cond_wait(&fs->cond, &fs->lock);
	in->resizing = true;
	while (in->nwriting)
		tfs_cond_wait(&fs->cond, &fs->lock);
	int rc = resize_locked(fs, in, size);
	if (!rc && size == 0) {
		/* The bytes they stood for are no longer the file's (every
		 * write-back of them has ended: data_drop_blocks waited). */
		in->wb_err = 0;
		memset(in->wb_first, 0, sizeof(in->wb_first));
		memset(in->wb_last, 0, sizeof(in->wb_last));
	}
	in->resizing = false;
	cache_wake(fs);
	return rc;
}

int cache_forget_inode(struct fs *fs, struct inode *in)
{
	tfs_assert_held(&fs->lock);
	int rc = fs_inode_load_map(fs, in);
	if (rc)
		return rc;
	/* The block records went with the inode's LMDB record: free now. */
	fs_for_each_blk (in, i, 0) {
		struct blk *b = fs_blk(in, i);
		while (b->ce && (b->ce->flushing || b->ce->state == CE_LOADING || b->ce->refs))
			entry_wait_unreferenced(fs);
		if (b->ce)
			entry_drop(fs, b->ce);
		if (b->tier != TIER_NONE)
			slot_defer_free(fs, b->tier, b->slot);
		b->tier = TIER_NONE;
	}
	return 0;
}

/* The tier a block is on as users see it: its home. RAM for blocks kept
 * there (pinned) or that have no durable slot; -1 for a hole. Lock held. */
int fs_block_tier(struct fs *fs, const struct blk *b)
{
	tfs_assert_held(&fs->lock);
	if (b->ce && (b->ce->pinned || b->tier == TIER_NONE))
		return fs->ram;
	return b->tier == TIER_NONE ? -1 : b->tier;
}

/* Bytes of IN per tier as users see them: a block only in RAM (dirty, or
 * at home there) counts for the RAM tier. Lock held. Returns the total. */
uint64_t fs_placement(struct fs *fs, struct inode *in, uint64_t *bytes)
{
	tfs_assert_held(&fs->lock);
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
	tfs_assert_held(&fs->lock);
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
