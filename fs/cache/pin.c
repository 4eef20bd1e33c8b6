/*
 * fs/cache/pin.c — pinning a file to a tier (setfattr user.tierfs.pin): its blocks
 * move there through ordinary write-backs to a new slot, and blocks whose
 * home becomes RAM stay there.
 *
 * Locking: fs/lock.h.
 */
#include <errno.h>

#include "fs/cache/internal.h"

/* Block IDX of IN, a slot set aside and nothing written, to tier TIER: a
 * slot there instead (none for RAM). Where TIER has none free, the block
 * keeps its old one, which cache_pin reports. Lock held. */
static int move_unwritten(struct fs *fs, struct inode *in, uint64_t idx, int tier)
{
	tfs_assert_held(&fs->lock);
	struct blk *b = fs_blk(in, idx);
	int64_t slot = -1;
	if (tier != fs->ram && (slot = tier_alloc(fs->tiers[tier])) < 0)
		return 0;
	/* The record's change is queued before the old slot is freed, as in
	 * data_drop_blocks. */
	int rc = commit_pend_add(fs, in->ino, idx);
	if (rc) {
		if (slot >= 0)
			tier_free(fs->tiers[tier], (uint64_t)slot);
		return rc;
	}
	slot_defer_free(fs, b->tier, b->slot);
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
	tfs_lock(&fs->lock);
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
			tfs_cond_wait(&fs->cond, &fs->lock);
		if (tier == fs->ram) {
			if (b->tier != TIER_NONE) {
				/* The record's removal is queued before its slot
				 * is freed, as in data_drop_blocks. */
				if ((rc = commit_pend_add(fs, in->ino, i))) {
					entry_put(fs, e);
					break;
				}
				slot_defer_free(fs, b->tier, b->slot);
				b->tier = TIER_NONE;
				b->csum = 0;
			}
			entry_pin(fs, e);
		}
		entry_mark_dirty(fs, e);
		entry_put(fs, e);
	}
	tfs_unlock(&fs->lock);
	if (rc || (rc = cache_flush_inode(fs, in, true)))
		return rc;
	/* A block that found no free slot there stays where it was: say so,
	 * rather than report a pin that did not happen. */
	tfs_lock(&fs->lock);
	uint64_t left = 0;
	if (tier != fs->ram)
		fs_for_each_blk (in, i, 0) {
			uint16_t t = fs_blk(in, i)->tier;
			if (t != TIER_NONE && t != tier)
				left++;
		}
	tfs_unlock(&fs->lock);
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
	tfs_assert_held(&fs->lock);
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
