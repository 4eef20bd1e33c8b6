/*
 * fs/engine_state.h — the state of the engine (fs/engine.c): the order
 * learner, the keep plans built from its cycle, and the name ids that key
 * files in it. struct fs embeds one (fs->eng). Every field is guarded by
 * fs->lock unless it says otherwise; the lock order is in fs/lock.h.
 */
#ifndef TIERFS_ENGINE_STATE_H
#define TIERFS_ENGINE_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct order;
struct orderid_slot;
struct keepplan;
struct engine_hooks;

struct engine {
	/* What the engine asks of the cache (fs/engine.h); immutable. */
	const struct engine_hooks *hooks;
	/* Learned access order (policy/order.h). */
	struct order *order;
	/* The newest file of each name id (fs/orderid.c). */
	struct orderid_slot *oid;
	size_t oid_mask, oid_used;
	bool learned; /* order_learned(), cached */
	/* learn = no by a reload: no access is fed to the learner, nothing
	 * is predicted, until learn = yes again. */
	bool paused;
	uint64_t learn_count; /* order_learn_count() when last seen */
	/* The learner's clock at its last size check (learner_fit), and
	 * whether checks are over (at the largest size, out of memory, or a
	 * fixed learn_max_cycle already found short). */
	uint64_t learn_fit_at;
	bool learn_fit_done;
	/* Whether auto sizes the learner for a cycle of two steps
	 * (learn_need), and the learner's clock since when it has looked for
	 * a cycle at its size: made or grown, or its cycle lost. */
	bool learn_long;
	uint64_t learn_since;
	/* Growing the learner (grow_run) on the planner thread: grow_to, the
	 * size asked for (0: none), with the blocks it was worked out for;
	 * grow_busy while the new learner is fed the old one's recording off
	 * the lock, meanwhile every access also goes to grow_keys/grow_writes
	 * (grow_n of grow_cap) for it, and grow_lost if one could not. */
	size_t grow_to;
	uint64_t grow_blocks;
	bool grow_busy, grow_lost;
	uint64_t *grow_keys;
	uint8_t *grow_writes;
	size_t grow_n, grow_cap;
	/* Which blocks stay in RAM across the step (policy/keepplan.h),
	 * built when a cycle is learned; NULL without one. tail_plan is gap
	 * mode's instead (fs/cache/idle.c). */
	struct keepplan *plan;
	struct keepplan *tail_plan;
	/* The learned cycle's runs of writes to disk-homed blocks (for the
	 * write-back reserve), and its longest run of accesses to blocks
	 * whose home is not a disk (the backward pass; 0 without a tail
	 * plan). */
	size_t write_runs;
	size_t gap_run;
	/* The planner thread builds both plans off the lock (plan_main):
	 * plan_want asks it for the cycle learned at plan_gen, which every
	 * learn and loss of the cycle bumps, so that a plan of an older one
	 * is thrown away; plan_busy while it builds. plan_cond (on fs->lock)
	 * wakes it. */
	pthread_t planner;
	bool planner_running, plan_want, plan_busy;
	uint64_t plan_gen;
	pthread_cond_t plan_cond;
};

#endif
