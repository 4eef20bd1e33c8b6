/*
 * fs/cache/slots.c — durable slots: choosing where a block's durable copy goes
 * when it is first written, freeing the slots a committed map no longer
 * names, and the RAM tier's landing slots for the FUSE workers.
 *
 * Why the durable slot is chosen at the first write and not at write-back:
 * a full tier must fail the write that would overflow it (ENOSPC to the
 * writer), never a background write-back of data the writer was already
 * told is safe. A slot freed by a commit is reused only after the commit
 * is durable (fs/cache/commit.c).
 *
 * Locking: fs/lock.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/cache/internal.h"

void slot_defer_free(struct fs *fs, uint16_t tier, uint64_t slot)
{
	if (fs->cache.nfreed == fs->cache.freed_cap) {
		size_t n = fs->cache.freed_cap ? fs->cache.freed_cap * 2 : 256;
		struct freed_slot *f = realloc(fs->cache.freed, n * sizeof(*f));
		if (!f) {
			/* Leaking one slot until the next mount beats freeing a slot
			 * the committed map may still name. */
			TFS_LOG("tier %s: slot %llu leaked until remount (out of memory)",
				tier_name(fs->tiers[tier]), (unsigned long long)slot);
			return;
		}
		fs->cache.freed = f;
		fs->cache.freed_cap = n;
	}
	fs->cache.freed[fs->cache.nfreed++] = (struct freed_slot){tier, slot};
}

static bool tier_full(struct fs *fs, int t)
{
	return tier_slots_used(fs->tiers[t]) >= tier_slots_total(fs->tiers[t]);
}

/* Whether tier T has room for a write-back to a new slot (flush_start):
 * the old slot is freed only at the next commit, so such copies hold
 * slots a while; a reserve of 1/64 of the tier (at least 64 slots) stays
 * for new blocks, which would otherwise spill elsewhere or get ENOSPC. */
bool slot_cow_room_after(struct fs *fs, int t, uint64_t freed)
{
	uint64_t total = tier_slots_total(fs->tiers[t]);
	uint64_t reserve = total / 64 > 64 ? total / 64 : 64;
	uint64_t used = tier_slots_used(fs->tiers[t]);
	return (used > freed ? used - freed : 0) + reserve < total;
}

bool slot_cow_room(struct fs *fs, int t)
{
	return slot_cow_room_after(fs, t, 0);
}

/* How many slots of tier T wait for a commit to come free. Lock held. */
uint64_t slot_freed_on(const struct fs *fs, int t)
{
	tfs_assert_held(&fs->lock);
	uint64_t n = 0;
	for (size_t i = 0; i < fs->cache.nfreed; i++)
		n += fs->cache.freed[i].tier == t;
	return n;
}

/* Whether a commit has slots in hand that it frees once it is on disk:
 * while one runs they are in neither fs->cache.freed nor the held list, and
 * the tier looks as if every slot held a live block. Lock held. */
bool slot_commit_retiring(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	return commit_held(fs) ||
	       atomic_load(&fs->commit.began_ns) > atomic_load(&fs->commit.ended_ns);
}

/* Say once per tier that its write-backs wait for commits to free slots:
 * each such wait is a commit in the middle of the I/O. Lock held. */
void slot_log_short(struct fs *fs, int t)
{
	tfs_assert_held(&fs->lock);
	if (fs->cache.short_logged & 1u << t)
		return;
	fs->cache.short_logged |= 1u << t;
	TFS_LOG("tier %s: short of free slots (fewer than 1/64 of them, or 64); write-backs "
		"wait for the commit that frees their earlier copies' slots, a stall in "
		"the middle of the I/O; a tier with more room runs without",
		tier_name(fs->tiers[t]));
}

/* Write-backs to a new slot in flight, all tiers: each old slot comes
 * free at the commit after it completes. Lock held. */
uint64_t slot_moving(const struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	uint64_t n = 0;
	for (int i = 0; i < fs->conf.ntiers; i++)
		n += fs->cache.moving[i];
	return n;
}

/* cache_commit from a caller that holds fs->lock, which the commit takes
 * itself: dropped meanwhile, so whatever the caller read under it may
 * have changed. */
int commit_unlocked(struct fs *fs)
{
	tfs_unlock(&fs->lock);
	int rc = cache_commit(fs);
	tfs_lock(&fs->lock);
	return rc;
}

/* Give block IDX of IN a slot on a persistent tier. Lock held. */
int slot_assign(struct fs *fs, struct inode *in, uint64_t idx)
{
	tfs_assert_held(&fs->lock);
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
		if (t < 0 && (fs->cache.nfreed || slot_commit_retiring(fs)) && !committed) {
			/* Slots of deleted blocks come back only once their
			 * removal is committed: do that now rather than fail
			 * (and after a commit that has some in hand, which
			 * shows none in fs->cache.freed while it runs). */
			committed = true;
			(void)commit_unlocked(fs);
			if (b->tier != TIER_NONE)
				return 0;
			memset(full, 0, sizeof(full));
			continue;
		}
		if (t < 0 && slot_moving(fs) && waits++ < 64) {
			/* Copies being written back hold two slots each, the
			 * old one retired once they are whole and committed:
			 * wait for one (every completion broadcasts), then
			 * commit again. */
			tfs_cond_wait(&fs->cond, &fs->lock);
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

/* Undo slot_assign for B while its slot is still unused: no entry took
 * the block, nothing was written there, nothing committed. Lock held. */
void slot_unassign(struct fs *fs, struct blk *b)
{
	tfs_assert_held(&fs->lock);
	if (!b->ce && b->csum == 0 && b->tier != TIER_NONE && !b->unwritten) {
		tier_free(fs->tiers[b->tier], b->slot);
		b->tier = TIER_NONE;
	}
}

uint64_t cache_landing_get(struct fs *fs)
{
	tfs_lock(&fs->lock);
	uint64_t slot =
	    fs->cache.landing_free ? fs->cache.landing[--fs->cache.landing_free] : CACHE_NO_SLOT;
	tfs_unlock(&fs->lock);
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
		u = u > fs->cache.nlanding ? u - fs->cache.nlanding : 0;
		t -= fs->cache.nlanding;
	}
	*used = u;
	*total = t;
}

uint64_t cache_learn_blocks(struct fs *fs)
{
	uint64_t used, total;
	fs_durable_slots(fs, &used, &total);
	/* A block rewritten takes a new slot and frees its old one only at
	 * the next commit: counted, a step would count its blocks up to
	 * twice, and the learner grow past what the data needs. The blocks
	 * whose home is RAM (a rule's gradients) are the pinned entries; the
	 * RAM tier's other slots are copies. Slots a commit under way frees
	 * still count. */
	used = used > fs->cache.nfreed ? used - fs->cache.nfreed : 0;
	return used + fs->cache.npinned;
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
