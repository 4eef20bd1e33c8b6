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

int engine_init(struct fs *fs);
void engine_stop(struct fs *fs);
/* ID is the file's order id (fs_order_id). */
void engine_access(struct fs *fs, uint64_t id, uint64_t idx, bool write); /* lock held */
/* Predicted engine_now() of the block's next read (UINT64_MAX: unknown, or
 * overwritten first) and, in *next_use, of its next access of any kind. */
uint64_t engine_next_read(struct fs *fs, uint64_t id, uint64_t idx,
			  uint64_t *next_use); /* lock held */
/* Wait until the planner thread has nothing left to do: the learner
 * grown, if that was asked, and the plans of the cycle learned built
 * (tests). Lock held, dropped while waiting. */
void engine_plan_settle(struct fs *fs);
/* The keep plan's verdict on the block (enum keepplan_verdict). Lock held. */
uint8_t engine_plan(struct fs *fs, uint64_t id, uint64_t idx);
/* An idle stretch of the disks ended (cache.c, "Idle disk"): read-ahead
 * judges itself afresh. What it read while the disks were idle cost
 * nothing, and the pause a window of it earned held read-ahead off the
 * whole next update (82-196 blocks read ahead a step instead of 800 on the
 * bench with 2.4 s of compute). Lock held. */
void engine_idle_ended(struct fs *fs);
/* Whether the learned order stands in the step's gap: the run of accesses
 * to blocks not homed on a disk around its position is at least half the
 * cycle's longest (fs->eng.gap_run). True when no plan says (nothing to
 * tell by). Lock held. */
bool engine_in_gap(struct fs *fs);
/* The learner's clock, the unit of next_read (0 when learning is off). */
uint64_t engine_now(struct fs *fs); /* lock held */
/* Block accesses in one learned cycle, 0 when none is learned. Lock held. */
size_t engine_cycle_len(struct fs *fs);
/* A predicted access time (engine_now units) before this is stale: the
 * access is overdue by more than the learner's jitter tolerance, so it did
 * not happen where the order said. Lock held. */
uint64_t engine_stale_before(struct fs *fs);
int engine_stats_text(struct fs *fs, char *buf, size_t size);

#endif
