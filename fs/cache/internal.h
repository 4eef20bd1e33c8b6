/*
 * fs/cache/internal.h — what the files of fs/cache/ share, and nothing
 * outside fs/cache/ may use: the face of the cache to the rest of the
 * daemon is fs/cache/cache.h. Each function is described where it is
 * defined. Locking: fs/lock.h.
 */
#ifndef TIERFS_CACHE_INTERNAL_H
#define TIERFS_CACHE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/fs.h"

/* Pending block-map updates, committed to LMDB by cache_commit. */
struct pend {
	uint64_t ino, idx;
};

enum get_mode {
	GET_READ,	/* existing data or a hole (NULL) */
	GET_WRITE_PART, /* will be partly overwritten: needs its data */
	GET_WRITE_FULL, /* will be fully overwritten: contents do not matter */
	GET_WRITE_HEAD, /* overwritten from its start to EOF: the rest reads as
			   zeros, so a new entry is zeroed, not loaded */
};

struct flush_batch {
	struct fs *fs;
	unsigned inflight; /* guarded by fs->lock */
	int err;
};

/* How many evictable entries the learned-order victim search looks at. */
#define VICTIM_SCAN 512

/* A stretch this long without a request for a disk-homed block, and
 * without tier I/O, is idle (the essay at the top of fs/cache/idle.c). */
#define DISK_IDLE_NS GAPMODE_IDLE_NS

/* entry.c */
void cache_wake(struct fs *fs);
void lru_unlink(struct fs *fs, struct centry *e);
void lru_push(struct fs *fs, struct centry *e);
void lru_restate(struct fs *fs, struct centry *e);
struct centry *lru_oldest(struct fs *fs, int s, bool pinned_too);
struct centry *lru_older(struct fs *fs, struct centry *e, bool pinned_too);
void entry_pin(struct fs *fs, struct centry *e);
void entry_unpin(struct fs *fs, struct centry *e);
void entry_mark_dirty(struct fs *fs, struct centry *e);
void entry_drop(struct fs *fs, struct centry *e);
uint32_t blk_io_len(const struct blk *b);
void blk_set_io_len(const struct fs *fs, struct blk *b, uint32_t len, uint32_t stored);
uint32_t blk_stored_len(const struct blk *b);
void entry_evict(struct fs *fs, struct centry *e);
void entry_stamp(struct fs *fs, struct centry *e, uint64_t id, uint64_t idx);
int entry_new(struct fs *fs, struct centry **out);
bool inode_is_volatile(const struct inode *in);
int entry_get(struct fs *fs, struct inode *in, uint64_t idx, enum get_mode mode,
	      struct centry **out);
void entry_put(struct fs *fs, struct centry *e);
void entry_wait_unreferenced(struct fs *fs);
void cache_note_access(struct fs *fs, struct inode *in, uint64_t idx, bool write);

/* reclaim.c */
bool entry_evictable(struct fs *fs, const struct centry *e, bool allow_pinned);
uint64_t entry_keep_until(const struct fs *fs, const struct centry *e, uint64_t stale);
struct centry *victim_farthest(struct fs *fs, unsigned lists, int s,
			       bool (*ok)(struct fs *, const struct centry *, bool), bool arg,
			       uint64_t (*when)(const struct fs *, const struct centry *,
						uint64_t));
struct centry *victim_pick_before(struct fs *fs, uint64_t need_at);
int entry_alloc(struct fs *fs, const struct inode *in, uint64_t idx, struct centry **out);

/* idle.c */
uint64_t idle_tiers_ns(struct fs *fs);
bool idle_disk_demand(struct fs *fs, const struct inode *in);
void idle_disk_demand_done(struct fs *fs, bool counted);
void cache_plans_dropped(struct fs *fs);

/* horizon.c */
bool wb_dirty_over(const struct fs *fs);
bool wb_reads_idle(struct fs *fs);
uint64_t wb_horizon(struct fs *fs);
bool wb_due_learned(struct fs *fs, const struct centry *e, uint64_t horizon);
unsigned wb_kept_limit(const struct fs *fs, unsigned max);

/* slots.c */
void slot_defer_free(struct fs *fs, uint16_t tier, uint64_t slot);
bool slot_cow_room_after(struct fs *fs, int t, uint64_t freed);
bool slot_cow_room(struct fs *fs, int t);
uint64_t slot_freed_on(const struct fs *fs, int t);
bool slot_commit_retiring(struct fs *fs);
void slot_log_short(struct fs *fs, int t);
uint64_t slot_moving(const struct fs *fs);
int commit_unlocked(struct fs *fs);
int slot_assign(struct fs *fs, struct inode *in, uint64_t idx);
void slot_unassign(struct fs *fs, struct blk *b);

/* data.c */
int data_write_locked(struct fs *fs, struct inode *in, uint64_t off, const char *buf, size_t len,
		      uint64_t *donor, bool kill_setid);
int data_drop_blocks(struct fs *fs, struct inode *in, uint64_t from, uint64_t to, bool keep_empty);

/* prefetch.c */
void cache_prefetch_idle_ended(struct fs *fs);

/* writeback.c */
bool wb_candidate(struct fs *fs, const struct centry *e, bool spill);
bool wb_must_spill(struct fs *fs);
int cache_submit_unlocked(struct fs *fs, struct tier *t, struct tier_io *io);
int flush_start(struct fs *fs, struct centry *e, struct flush_batch *batch, enum tier_prio prio);
void flush_batch_wait(struct fs *fs, struct flush_batch *batch);
int flush_block(struct fs *fs, struct inode *in, uint64_t i, struct flush_batch *batch);
int flush_block_wait(struct fs *fs, struct inode *in, uint64_t i);

/* commit.c */
bool commit_held(struct fs *fs);
int commit_pend_add(struct fs *fs, uint64_t ino, uint64_t idx);
int commit_and_free(struct fs *fs, bool durable, bool *wrote);

/* sync.c */
int sync_tiers(struct fs *fs);

#endif
