/*
 * fs/cache/init.c — setting the cache up at mount and tearing it down at
 * unmount.
 *
 * Locking: fs/lock.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/cache/internal.h"

int cache_init(struct fs *fs)
{
	struct tier *ram = fs->tiers[fs->ram];
	/* The landing slots come first, so no cache entry takes them. */
	fs->cache.nlanding = fs_landing_slots(fs);
	fs->cache.landing = calloc(fs->cache.nlanding + 1, sizeof(*fs->cache.landing));
	if (!fs->cache.landing)
		return -ENOMEM;
	for (uint64_t i = 0; i < fs->cache.nlanding; i++) {
		int64_t slot = tier_alloc(ram);
		if (slot < 0)
			return (int)slot;
		fs->cache.landing[fs->cache.landing_free++] = (uint64_t)slot;
	}
	fs->cache.cache_slots = tier_slots_total(ram) - fs->cache.nlanding;
	uint64_t need = fs_cache_min_blocks(&fs->conf);
	if (fs->cache.cache_slots < need) {
		TFS_LOG("%s: tier %s: capacity %llu bytes is too small for the cache: need at "
			"least %llu blocks of %u bytes",
			fs->conf.path, tier_name(ram),
			(unsigned long long)fs->cache.cache_slots * fs->bs,
			(unsigned long long)need, fs->bs);
		return -EINVAL;
	}
	uint64_t reserve = need > fs->cache.cache_slots / 8 ? need : fs->cache.cache_slots / 8;
	fs->cache.pin_limit = fs->cache.cache_slots - reserve;
	fs->cache.wb_scratch = calloc(fs->cache.cache_slots, sizeof(*fs->cache.wb_scratch));
	fs->cache.zero = aligned_alloc(4096, fs->bs);
	if (!fs->cache.zero || !fs->cache.wb_scratch)
		return -ENOMEM;
	memset(fs->cache.zero, 0, fs->bs);
	return 0;
}

void cache_destroy(struct fs *fs)
{
	for (int l = 0; l < 2; l++)
		for (int st = 0; st < LRU_NSTATES; st++)
			while (fs->cache.lru_head[l][st]) {
				struct centry *e = fs->cache.lru_head[l][st];
				lru_unlink(fs, e);
				free(e);
			}
	free(fs->cache.zero);
	free(fs->cache.wb_scratch);
	free(fs->cache.landing);
	free(fs->cache.freed);
	free(fs->commit.held); /* a failed last sync: the next mount finds them free */
	fs->commit.held = NULL;
	fs->commit.nheld = 0;
	free(fs->commit.pend);
	fs->commit.pend = NULL;
	fs->commit.npend = fs->commit.pend_cap = 0;
}

const struct engine_hooks cache_engine_hooks = {
    .plan_budget = cache_plan_budget,
    .plans_dropped = cache_plans_dropped,
    .plans_installed = cache_replan,
    .learned = cache_restamp,
};
