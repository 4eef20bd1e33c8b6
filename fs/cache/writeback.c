/*
 * fs/cache/writeback.c — write-back I/O: writing a dirty block to its durable slot,
 * and backing off a tier that fails its writes.
 *
 * A block that already has a durable copy is never written over it: a
 * crash between that write and the commit of its new checksum would leave
 * the old checksum over new bytes, and the whole block unreadable. The
 * write goes to a new slot and the old one is retired by the commit that
 * points the map at the new one; in place only when the tier has no free
 * slot at all, where a torn write is then caught by the checksum (EIO,
 * never wrong bytes).
 *
 * Locking: fs/lock.h.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/cache/internal.h"

/* Background write-back to a tier that fails its writes backs off: the
 * flusher chose the block it had just failed to write again at once, and
 * retried as fast as the disk answered, a storm of failed writes and log
 * lines. After a failure the tier's blocks
 * wait WB_BACKOFF_MIN_NS, doubled at each failure up to WB_BACKOFF_MAX_NS;
 * then one write-back (a probe) goes out, and the others wait for its
 * result. A write-back that succeeds ends the back-off: everything goes
 * out again at once. fsync and unmount (TIER_PRIO_DEMAND) do not wait, so
 * that they report the error (or find the disk works again). */
#define WB_BACKOFF_MIN_NS (10 * 1000000ULL)

#define WB_BACKOFF_MAX_NS (1000 * 1000000ULL)

/* How long a request for RAM waits while write-back fails and none
 * succeeds, before it gets EIO, is writeback_timeout (entry_alloc,
 * fs/cache/reclaim.c): a disk that fails
 * for a moment must not fail writes, one that keeps failing must not hang
 * them for ever. A parallel file system's failover can take minutes. */
/* At most one log line per tier per period for failed write-backs. */
#define WB_LOG_NS (1000 * 1000000ULL)

/* Whether background write-back to tier T waits. Lock held. */
static bool wb_tier_held(struct fs *fs, unsigned t)
{
	tfs_assert_held(&fs->lock);
	return fs->cache.wb[t].retry_at &&
	       (fs->cache.wb[t].probing || tier_now_ns() < fs->cache.wb[t].retry_at);
}

/* Whether E waits for its tier's back-off: the tier it lives on, or the
 * one its last write-back failed on (a move to a pinned tier). Lock held. */
static bool wb_held_back(struct fs *fs, const struct centry *e)
{
	tfs_assert_held(&fs->lock);
	if (!fs->cache.wb_nheld)
		return false;
	const struct blk *b = fs_blk(e->inode, e->idx);
	if (b && b->tier != TIER_NONE && wb_tier_held(fs, b->tier))
		return true;
	return e->wb_failed && wb_tier_held(fs, e->wb_tier);
}

/* Whether background write-back should take E now. SPILL: memory is short
 * and nothing else is left to write, so blocks whose home is RAM go out too. */
bool wb_candidate(struct fs *fs, const struct centry *e, bool spill)
{
	if (!e->dirty || e->flushing || e->state != CE_VALID || e->refs)
		return false;
	if (wb_held_back(fs, e))
		return false;
	if (e->pinned || inode_is_volatile(e->inode))
		return spill;
	return true;
}

/* Whether a reclaim must spill RAM-homed blocks: no other dirty block can be
 * written. Spilling a gradient while a state block could go instead costs a
 * write and a read of a block the rule keeps in RAM for speed. */
bool wb_must_spill(struct fs *fs)
{
	if (fs->cache.lru_tail[0][LRU_FLUSHING])
		return false;
	for (struct centry *e = fs->cache.lru_tail[0][LRU_DIRTY]; e; e = e->prev)
		if (wb_candidate(fs, e, false))
			return false;
	for (struct centry *e = fs->cache.lru_tail[0][LRU_CLEAN]; e; e = e->prev)
		if (entry_evictable(fs, e, false))
			return false;
	return true;
}

/* Hand IO to tier T with fs->lock dropped (a callback may run inline and
 * takes the lock). A rejected I/O completes through its own done callback
 * with the error, so callers have one completion path. Lock held on entry
 * and on return. */
int cache_submit_unlocked(struct fs *fs, struct tier *t, struct tier_io *io)
{
	tfs_assert_held(&fs->lock);
	tfs_unlock(&fs->lock);
	int rc = tier_submit(t, io);
	if (rc) {
		io->result = rc;
		io->tier = t;
		io->done(io);
	}
	tfs_lock(&fs->lock);
	return rc;
}

struct flush_io {
	struct tier_io io;
	struct centry *e;
	struct flush_batch *batch;
	bool move;     /* io.slot is a new slot on tier `to` (flush_start) */
	uint16_t from; /* with move: the tier of the old slot (fs->cache.moving) */
	uint16_t to;   /* the tier written, moved or not */
	int probe;     /* the tier whose back-off this write-back probes, or -1 */
};

static void flush_done(struct tier_io *io)
{
	struct flush_io *f = (struct flush_io *)io;
	struct fs *fs = f->batch->fs;
	struct centry *e = f->e;
	tfs_lock(&fs->lock);
	struct inode *in = e->inode;
	struct blk *b = fs_blk(in, e->idx);
	e->flushing = false;
	lru_restate(fs, e);
	in->nflushing--;
	if (f->move)
		fs->cache.moving[f->from]--;
	int err = io->result;
	unsigned t = f->to;
	if (f->probe >= 0)
		fs->cache.wb[f->probe].probing = false;
	if (err) {
		atomic_fetch_add(&fs->stats.flush_errors, 1);
		uint64_t now = tier_now_ns();
		fs->cache.wb[t].failed++;
		/* Failures of write-backs that were in flight together count
		 * once: the delay grows per try after the last one ran out. */
		if (now >= fs->cache.wb[t].retry_at) {
			uint64_t d = fs->cache.wb[t].backoff ? 2 * fs->cache.wb[t].backoff
							     : WB_BACKOFF_MIN_NS;
			fs->cache.wb[t].backoff = d < WB_BACKOFF_MAX_NS ? d : WB_BACKOFF_MAX_NS;
			fs->cache.wb_nheld += !fs->cache.wb[t].retry_at;
			fs->cache.wb[t].retry_at = now + fs->cache.wb[t].backoff;
		}
		uint64_t skipped;
		if (tier_ratelimit_ok(&fs->cache.wb[t].log, now, WB_LOG_NS, &skipped)) {
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
				(unsigned long long)(fs->cache.wb[t].backoff / 1000000ULL), more);
		}
	} else {
		if (fs->cache.wb[t].retry_at) {
			TFS_LOG("tier %s: write-back works again, after %llu failed write-backs",
				tier_name(io->tier), (unsigned long long)fs->cache.wb[t].failed);
			fs->cache.wb_nheld--;
			fs->cache.wb[t].retry_at = fs->cache.wb[t].backoff = 0;
			fs->cache.wb[t].log = (struct tier_ratelimit){0};
		}
		fs->cache.wb[t].failed = 0;
		atomic_fetch_add(&fs->stats.flushes, 1);
		atomic_fetch_add(&fs->stats.flush_bytes, io->len);
		if (!f->move) {
			b->csum = io->csum; /* in place: the slot holds the new bytes */
			blk_set_io_len(fs, b, io->len, io->stored_len);
		}
		b->unwritten = false;
		if (commit_pend_add(fs, in->ino, e->idx))
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
			slot_defer_free(fs, b->tier, b->slot);
			b->tier = f->to;
			b->slot = io->slot;
			b->csum = io->csum;
			blk_set_io_len(fs, b, io->len, io->stored_len);
		}
		e->written_back = !e->dirty;
		unsigned t = b->tier; /* where the new bytes are, moved or not */
		uint64_t ep = atomic_load(&fs->commit.wb_epoch[t]);
		if (!in->wb_first[t])
			in->wb_first[t] = ep;
		in->wb_last[t] = ep;
	}
	e->refs--;
	f->batch->inflight--;
	cache_wake(fs);
	tfs_unlock(&fs->lock);
	free(f);
}

/* The bytes a write-back of IN's block IDX moves: up to EOF, rounded up
 * to TIER_IO_ALIGN, where EOF cuts the block (the rest is zeros, which the
 * read puts back: tiers/tier.h); 0, the whole block. A file whose size is
 * not a multiple of the block size paid a whole block's read and write
 * every step for its last one, a visible share of the step's disk I/O
 * where many such files are rewritten each step. The size cannot grow past the bytes written
 * without the block itself changing: a write to it dirties it, and bytes
 * past EOF are zeros (a shrink zeroes them first), so a larger size later
 * reads zeros there either way. Lock held. */
static uint32_t durable_len(const struct fs *fs, const struct inode *in, uint64_t idx)
{
	tfs_assert_held(&fs->lock);
	uint64_t start = idx * fs->bs, size = in->attr.size;
	if (size <= start || size - start >= fs->bs)
		return 0;
	uint64_t len = (size - start + TIER_IO_ALIGN - 1) / TIER_IO_ALIGN * TIER_IO_ALIGN;
	return len < fs->bs ? (uint32_t)len : 0;
}

/* Start writing back E. Lock held; returns with it held. The entry must be
 * dirty, not flushing and not being written. -EAGAIN: it no longer is
 * (slot_assign dropped the lock to commit, and a writer took E), so
 * nothing started; choose again. */
int flush_start(struct fs *fs, struct centry *e, struct flush_batch *batch, enum tier_prio prio)
{
	tfs_assert_held(&fs->lock);
	struct inode *in = e->inode;
	/* Held across the commit slot_assign may make unlocked, so that
	 * E stays; a writer copying into it meanwhile shows as a reference
	 * more. Write-back would clear the writer's dirty mark and checksum
	 * a buffer half old, half new. */
	int refs = e->refs;
	e->refs++;
	int rc = slot_assign(fs, in, e->idx);
	entry_put(fs, e);
	if (rc)
		return rc;
	if (!e->dirty || e->flushing || e->refs != refs)
		return -EAGAIN;
	struct blk *b = fs_blk(in, e->idx);
	/* Never over the block's durable copy (why: the top of this file).
	 * The write goes to a new slot, and the old one stays until the
	 * commit that points the map at the new one. A block of a file
	 * pinned elsewhere (cache_pin) moves to that tier the same way. */
	int dest = b->tier;
	if (in->attr.pin_tier >= 0 && in->home >= 0 && in->home != fs->ram &&
	    tier_persistent(fs->tiers[in->home]))
		dest = in->home; /* set_pin sets home only after pin_tier */
	/* A tier short of free slots gets them back from the commit that
	 * retires the copies written back before it: that commit comes
	 * first, here, as slot_assign's does for new blocks. Failing
	 * that, the rewrite takes a slot of the reserve kept for new blocks
	 * (below); with none free, it waits for copies still being written,
	 * whose old slots are retired once they are whole, and commits
	 * then. In place only when every slot holds a live block (or the
	 * commits fail): before, a tier with room for less than twice its
	 * data ran short between commits, each copy waiting up to a commit
	 * interval to be retired, and wrote back in place, and a kill -9
	 * then left blocks unreadable. */
	bool commit_failed = false;
	/* Bounded: fsyncs committing back to back could keep a commit
	 * running at every look. */
	for (int round = 0;
	     round < 16 && dest == b->tier && b->csum != 0 && !slot_cow_room(fs, dest); round++) {
		struct tier *dt = fs->tiers[dest];
		uint64_t pending = slot_freed_on(fs, dest);
		bool any_free = tier_slots_used(dt) < tier_slots_total(dt);
		bool commit =
		    !commit_failed && (slot_cow_room_after(fs, dest, pending) ||
				       slot_commit_retiring(fs) || (!any_free && pending));
		if (!commit && (any_free || !fs->cache.moving[dest]))
			break;
		slot_log_short(fs, dest);
		e->refs++;
		if (commit) {
			commit_failed = commit_unlocked(fs) != 0; /* logged */
		} else {
			/* Every completion broadcasts (cache_wake). */
			tfs_cond_wait(&fs->cond, &fs->lock);
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
	 * of a slot commits for (slot_assign). In place only when the
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
			fs->cache.moving[b->tier]++;
			f->to = to = (uint16_t)dest;
			slot = (uint64_t)ns;
		}
	}
	f->to = to;
	/* The flusher's write-back to a tier backing off is its probe: the
	 * tier's other blocks wait for its result (wb_tier_held). */
	f->probe = -1;
	if (prio != TIER_PRIO_DEMAND && b->tier != TIER_NONE && fs->cache.wb[b->tier].retry_at) {
		f->probe = b->tier;
		fs->cache.wb[b->tier].probing = true;
	}
	e->flushing = true;
	e->dirty = false;
	lru_restate(fs, e);
	fs->cache.ndirty--;
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
	cache_submit_unlocked(fs, fs->tiers[to], &f->io);
	return 0;
}

void flush_batch_wait(struct fs *fs, struct flush_batch *batch)
{
	while (batch->inflight)
		tfs_cond_wait(&fs->cond, &fs->lock);
}

/* Start the write-back of IN's block I if it is dirty, once no write-back
 * or user holds it. One under way (the flusher's) is waited for first: if
 * it fails, the block is dirty again and goes out in this batch, whose
 * error the caller reports; skipped, its failure went to the flusher's
 * batch only, and an fsync returned 0 over bytes that were only in RAM.
 * Lock held (dropped while waiting). */
int flush_block(struct fs *fs, struct inode *in, uint64_t i, struct flush_batch *batch)
{
	tfs_assert_held(&fs->lock);
	struct blk *b = fs_blk(in, i);
	struct centry *e = b ? b->ce : NULL;
	if (!e || (!e->dirty && !e->flushing))
		return 0;
	int rc;
	do {
		while (e && (e->flushing || e->refs)) {
			entry_wait_unreferenced(fs);
			e = b->ce;
		}
		rc =
		    e && e->dirty && !e->flushing ? flush_start(fs, e, batch, TIER_PRIO_DEMAND) : 0;
		e = b->ce;
	} while (rc == -EAGAIN);
	return rc;
}

/* Write back IN's block I if dirty and wait for it. Lock held. */
int flush_block_wait(struct fs *fs, struct inode *in, uint64_t i)
{
	tfs_assert_held(&fs->lock);
	struct flush_batch batch = {.fs = fs};
	int rc = flush_block(fs, in, i, &batch);
	flush_batch_wait(fs, &batch);
	return rc ? rc : batch.err;
}
