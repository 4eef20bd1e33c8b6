/*
 * fs/cache/alloc.c — fallocate(2) and lseek(2) SEEK_DATA/SEEK_HOLE.
 *
 * fallocate sets durable slots aside for a range, so that later writes
 * there cannot fail with ENOSPC; punch and zero ranges free or zero what
 * they cover.
 *
 * Locking: fs/lock.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "fs/cache/internal.h"

/* Whether IN's blocks get durable slots, which fallocate can set aside: not
 * for a file kept in RAM, nor one whose data never leaves it. */
static bool sets_aside(const struct fs *fs, const struct inode *in)
{
	if (inode_is_volatile(in) || in->home == fs->ram)
		return false;
	return fs->stripe.n || (in->home >= 0 && tier_persistent(fs->tiers[in->home]));
}

/* Set aside a durable slot for each block of [FIRST, LAST) that has none,
 * marked unwritten: it reads as zeros, its first write-back goes into it,
 * and the next commit records it (a remount keeps it). A range that does
 * not fit in the free space gets ENOSPC at once, as on ext4; if the space
 * runs out on the way (another file took it), the slots this call took are
 * given back. Lock held (slot_assign may drop it to commit). */
static int reserve_range(struct fs *fs, struct inode *in, uint64_t first, uint64_t last)
{
	tfs_assert_held(&fs->lock);
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
		 * copies being written back: slot_assign commits (after
		 * waiting for those) to get them back. */
		uint64_t used, total;
		fs_durable_slots(fs, &used, &total);
		if (need <= (total > used ? total - used : 0) + fs->cache.nfreed + slot_moving(fs) +
				__atomic_load_n(&fs->commit.nheld, __ATOMIC_ACQUIRE))
			break;
		/* A commit that runs has its frees in hand, in neither
		 * count: wait for it (by one of our own) before saying no. */
		if (tries || !slot_commit_retiring(fs))
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
		if ((rc = slot_assign(fs, in, i)))
			break;
		/* Queued first, so that a failure leaves the slot free. */
		if ((rc = commit_pend_add(fs, in->ino, i))) {
			slot_unassign(fs, b);
			break;
		}
		b->unwritten = true;
		took[n++] = i;
	}
	if (rc)
		for (uint64_t k = 0; k < n; k++) {
			/* A commit may have recorded it already (slot_assign
			 * commits when it finds no room): freed by the next. */
			struct blk *b = fs_blk(in, took[k]);
			if (!b->ce && fs_blk_unwritten(b)) {
				slot_defer_free(fs, b->tier, b->slot);
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
	tfs_assert_held(&fs->lock);
	const struct blk *b = fs_blk(in, off / fs->bs);
	if (end > in->attr.size)
		end = in->attr.size;
	if (off >= end || !b || !fs_blk_used(b) || (!b->ce && fs_blk_unwritten(b)))
		return 0;
	int rc = data_write_locked(fs, in, off, fs->cache.zero, (size_t)(end - off), NULL, false);
	return rc < 0 ? rc : 0;
}

int cache_fallocate(struct fs *fs, struct inode *in, int mode, uint64_t off, uint64_t len)
{
	tfs_assert_held(&fs->lock);
	uint64_t end = off + len;
	if (len == 0 || end < off)
		return -EINVAL;
	if (end > fs_max_size(fs))
		return -EFBIG;
	/* As cache_write: a shrink under way sets the size last, with the
	 * lock dropped before, and must not run while this drops it. */
	while (in->resizing)
		tfs_cond_wait(&fs->cond, &fs->lock);
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
			rc = data_drop_blocks(fs, in, first, last, mode & FALLOC_FL_ZERO_RANGE);
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
	tfs_assert_held(&fs->lock);
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
