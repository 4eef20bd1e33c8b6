/*
 * fs/engine.h — the engine: the learned access order and what it predicts
 * (when a block is read next, whether the keep plan keeps it). State:
 * fs/engine_state.h. Locks: fs/lock.h.
 */
#ifndef TIERFS_ENGINE_H
#define TIERFS_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fs;

#include "policy/keepplan.h"
#include "policy/order.h"

/* What the engine asks of the cache, which owns the RAM its plans share
 * out and the blocks they speak of. The planner runs on a thread of its
 * own and asks at the moment it plans, so these come as calls the cache
 * hands down at engine_init, not as values; the engine calls nothing else
 * of the cache. Each is called with fs->lock held. */
struct engine_hooks {
	/* The RAM the keep plan may promise to keep (cache_plan_budget). */
	uint64_t (*plan_budget)(struct fs *fs);
	/* The plans of the cycle before are gone: a cycle learned or lost,
	 * or the engine stopped. */
	void (*plans_dropped)(struct fs *fs);
	/* New plans are in place: every block's verdict is read again. */
	void (*plans_installed)(struct fs *fs);
	/* A cycle was learned: every block's prediction is read again. */
	void (*learned)(struct fs *fs);
};

/* BLOCKS: the blocks the files hold now, which learn_max_cycle = auto
 * sizes the learner for. */
int engine_init(struct fs *fs, const struct engine_hooks *hooks, uint64_t blocks);
void engine_stop(struct fs *fs);
/* learn = yes or no, by a reload: off stops feeding the learner and drops
 * what it predicts (LRU until on again); on resumes it, making the learner
 * where the mount had none, sized for BLOCKS as engine_init. No lock held.
 * 0 or -errno. */
int engine_set_learn(struct fs *fs, bool on, uint64_t blocks);
/* Whether the learner's size is due for a check against the data, at an
 * access to block IDX; then engine_fit, with the blocks the files hold.
 * Lock held. */
bool engine_fit_due(struct fs *fs, uint64_t idx);
void engine_fit(struct fs *fs, uint64_t blocks);
/* ID is the file's order id (fs_order_id). Lock held. */
void engine_access(struct fs *fs, uint64_t id, uint64_t idx, bool write);
/* Predicted engine_now() of the block's next read (UINT64_MAX: unknown, or
 * overwritten first) and, in *next_use, of its next access of any kind.
 * Lock held. */
uint64_t engine_next_read(struct fs *fs, uint64_t id, uint64_t idx, uint64_t *next_use);
/* Wait until the planner thread has nothing left to do: the learner
 * grown, if that was asked, and the plans of the cycle learned built
 * (tests). Lock held, dropped while waiting. */
void engine_plan_settle(struct fs *fs);
/* The keep plan's verdict on the block (enum keepplan_verdict); GAP_MODE:
 * the tail plan's instead, where there is one. Lock held. */
uint8_t engine_plan(struct fs *fs, uint64_t id, uint64_t idx, bool gap_mode);
/* Whether the learned order stands in the step's gap: the run of accesses
 * to blocks not homed on a disk around its position is at least half the
 * cycle's longest (eng.gap_run). True when no plan says (nothing to
 * tell by). Lock held. */
bool engine_in_gap(struct fs *fs);
/* The learner's clock, the unit of next_read (0 when learning is off).
 * Lock held. */
uint64_t engine_now(struct fs *fs);
/* Block accesses in one learned cycle, 0 when none is learned. Lock held. */
size_t engine_cycle_len(struct fs *fs);
/* A predicted access time (engine_now units) before this is stale: the
 * access is overdue by more than the learner's jitter tolerance, so it did
 * not happen where the order said. Lock held. */
uint64_t engine_stale_before(struct fs *fs);

/* For read-ahead. The next N keys of the learned order, from its position
 * (READS: the next N reads, past any writes, with in DIST[i] how many
 * accesses ahead each is). A key names a file's order id and a block:
 * engine_key_split. Lock held. */
size_t engine_upcoming(struct fs *fs, bool reads, size_t n, uint64_t *keys, uint32_t *dist);
/* How many accesses from now KEY is read next, and in *NEXT_USE accessed
 * at all (UINT64_MAX: not predicted). Lock held. */
uint64_t engine_key_next(struct fs *fs, uint64_t key, uint64_t *next_use);
void engine_key_split(uint64_t key, uint64_t *id, uint64_t *idx);

struct engine_stats {
	bool enabled; /* a learner runs (learn = yes) */
	size_t max_cycle;
	struct order_stats order;
	struct keepplan_stats plan;
};
/* Lock held. */
void engine_get_stats(struct fs *fs, struct engine_stats *st);

#endif
