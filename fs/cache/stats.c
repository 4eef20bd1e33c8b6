/*
 * fs/cache/stats.c — what the learner knows (asked of the engine) beside
 * what read-ahead and the idle stretches made of it, read under one hold
 * of fs->lock so that the figures agree with each other: the "order" line
 * of .tierfs/stats, and the snapshot the metrics are rendered from.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>

#include "fs/cache/internal.h"

void cache_order_snapshot(struct fs *fs, struct cache_order_snap *out)
{
	/* The prefetch counters move under fs->lock: read together, a block
	 * read ahead is counted as used or wasted only once it counts as read
	 * ahead. */
	tfs_lock(&fs->lock);
	engine_get_stats(fs, &out->es);
	out->idle_after_ns = cache_idle_after(fs);
	out->gap_mode = fs->idle.gap.on;
	out->prefetches = atomic_load(&fs->stats.prefetches);
	out->prefetch_hits = atomic_load(&fs->stats.prefetch_hits);
	out->prefetch_wasted = atomic_load(&fs->stats.prefetch_wasted);
	tfs_unlock(&fs->lock);
	out->idle_stretches = atomic_load(&fs->stats.idle_stretches);
	out->idle_worked = atomic_load(&fs->stats.idle_worked);
}

int cache_order_stats_text(struct fs *fs, char *buf, size_t size)
{
	struct cache_order_snap o;
	cache_order_snapshot(fs, &o);
	static const char *const gap_plan[] = {"no", "yes", "auto"};
	const struct engine_stats *es = &o.es;
	const struct order_stats *s = &es->order;
	double pred =
	    s->learned_accesses ? (double)s->predicted_hits / (double)s->learned_accesses : 0;
	int n = snprintf(
	    buf, size,
	    "order enabled=%s learned=%s cycle=%zu max_cycle=%zu accesses=%llu "
	    "predicted_ratio=%.4f learns=%llu relearns=%llu false_locks=%llu prefetches=%llu "
	    "prefetch_hits=%llu prefetch_wasted=%llu plan_kept=%zu plan_blocks=%zu gap_plan=%s "
	    "idle_stretches=%llu idle_worked=%llu idle_after_ms=%llu gap_mode=%s\n",
	    es->enabled ? "yes" : "no", s->learned ? "yes" : "no", s->cycle_len, es->max_cycle,
	    (unsigned long long)s->accesses, pred, (unsigned long long)s->learns,
	    (unsigned long long)s->relearns, (unsigned long long)s->false_locks,
	    (unsigned long long)o.prefetches, (unsigned long long)o.prefetch_hits,
	    (unsigned long long)o.prefetch_wasted, es->plan.kept, es->plan.candidates,
	    gap_plan[fs->conf.gap_plan], (unsigned long long)o.idle_stretches,
	    (unsigned long long)o.idle_worked, (unsigned long long)(o.idle_after_ns / 1000000ULL),
	    o.gap_mode ? "yes" : "no");
	return n < 0 || (size_t)n >= size ? -ENOSPC : n;
}
