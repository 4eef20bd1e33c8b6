/*
 * fs/cache/cache.h — the block cache as the rest of the daemon sees it.
 *
 * The RAM tier is a write-back block cache in front of the persistent
 * tiers. Every block a request touches is brought into a cache entry whose
 * buffer is a slot of the RAM tier; reads are answered straight from those
 * buffers (no copy in the daemon), writes are copied into them and
 * complete at once. Dirty entries are written back by the flusher in the
 * background, by fsync, and at unmount, each to a new slot (never over the
 * durable copy a crash may still need, but where the tier has no free slot
 * at all: fs/cache/writeback.c); the block map that names the new
 * slot is committed to LMDB afterwards.
 *
 * Blocks whose home is the RAM tier (a rule or pin naming it) stay in RAM
 * ("pinned") up to pin_limit and get a durable slot only when memory
 * pressure spills them, or for persistent files when fsync or unmount
 * asks.
 *
 * Where each part lives: fs/cache/entry.c (entries, LRU lists), reclaim.c
 * (the victim and the wait for RAM), horizon.c (what a learned order keeps
 * dirty), idle.c (the time between steps), slots.c (durable slots),
 * data.c and alloc.c (the operations), prefetch.c (read-ahead and the
 * prefetcher thread), writeback.c (write-back I/O), commit.c and sync.c
 * (LMDB commits, fsync), pin.c, flusher.c (the flusher and committer
 * threads), stats.c, init.c. State: fs/cache/state.h. Locks: fs/lock.h.
 */
#ifndef TIERFS_CACHE_H
#define TIERFS_CACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "fs/engine.h"

struct fs;
struct inode;
struct blk;
struct config;
struct centry;
struct engine_hooks;

int cache_init(struct fs *fs);
void cache_destroy(struct fs *fs);
/* A read's data, as the blocks' own RAM buffers (no copy in the daemon):
 * cache_read_get fills iov[0..n) (n = 0 at or past EOF) and references
 * each block so that its buffer stays in place and unchanged until
 * cache_read_put, after the reply has copied it into the kernel. */
#define CACHE_READ_STACK 32
struct cache_read {
	struct iovec *iov;
	size_t n;
	/* Private to fs/cache/data.c. */
	bool live, counted;
	struct centry **ents;
	struct iovec stack_iov[CACHE_READ_STACK];
	struct centry *stack_ents[CACHE_READ_STACK];
};
/* 0, or -errno with nothing held. No lock held. */
int cache_read_get(struct fs *fs, struct inode *in, uint64_t off, size_t len, struct cache_read *r);
void cache_read_put(struct fs *fs, struct cache_read *r); /* no lock held */
/* DONOR, if not NULL and not CACHE_NO_SLOT, is the RAM tier slot BUF lies
 * in: a whole-block write may take that slot as the block's buffer instead
 * of copying it, and then puts in *DONOR a slot it gives back. KILL_SETID:
 * the writer is unprivileged, and the write clears set-user-ID (and
 * set-group-ID with group execute), as the kernel's file_remove_privs. */
#define CACHE_NO_SLOT UINT64_MAX
int cache_write(struct fs *fs, struct inode *in, uint64_t off, const char *buf, size_t len,
		uint64_t *donor, bool kill_setid);
/* A RAM tier slot for the FUSE loop to receive requests into: CACHE_NO_SLOT
 * once all are taken. No lock held. */
uint64_t cache_landing_get(struct fs *fs);
void *cache_slot_ptr(struct fs *fs, uint64_t slot);
/* Tier I's slots, used and in all, as users see them: the RAM tier's
 * landing slots are not part of its capacity. */
void fs_tier_slots(struct fs *fs, int i, uint64_t *used, uint64_t *total);
/* The same summed over the persistent tiers: the space files live in. */
void fs_durable_slots(struct fs *fs, uint64_t *used, uint64_t *total);
/* Set the size; a shrink zeros the cut-off tail of the new last block (so
 * that growing the file again shows zeros, as POSIX wants) and drops the
 * blocks beyond. Writes of the file wait meanwhile. Lock held. */
int cache_resize(struct fs *fs, struct inode *in, uint64_t size);
/* fallocate(2) of [OFF, OFF+LEN) with MODE 0 or FALLOC_FL_KEEP_SIZE, with
 * FALLOC_FL_PUNCH_HOLE, or FALLOC_FL_ZERO_RANGE: sets slots aside for the
 * range's blocks (not for a file kept in RAM), so that writes there do not
 * get ENOSPC; a punch frees the blocks it covers whole, and both it and a
 * zero range zero the rest. Lock held. */
int cache_fallocate(struct fs *fs, struct inode *in, int mode, uint64_t off, uint64_t len);
/* lseek(2) SEEK_DATA or SEEK_HOLE (WHENCE) from OFF, at block granularity:
 * *OUT the offset found; -ENXIO at or past EOF, or no data after OFF.
 * Lock held. */
int cache_seek(struct fs *fs, struct inode *in, uint64_t off, int whence, uint64_t *out);
int cache_flush_inode(struct fs *fs, struct inode *in, bool durable); /* no lock held */
int cache_flush_all(struct fs *fs);				      /* no lock held */
int cache_forget_inode(struct fs *fs, struct inode *in); /* lock held: drop all blocks */
int cache_commit(struct fs *fs);			 /* no lock held: attrs, maps */
int cache_commit_durable(struct fs *fs); /* no lock held: cache_commit, then meta_sync */
int cache_pin(struct fs *fs, struct inode *in, int tier); /* no lock held */
/* IN's home is no longer RAM: its blocks kept there become ordinary cache
 * entries, written back to the new home. Lock held. */
void cache_rehome(struct fs *fs, struct inode *in);
/* Whether no request has touched a disk-homed block, nor the persistent
 * tiers had I/O, for a while (cache_idle_after), so background I/O has the
 * disks to itself until the next request (learned order and a tail plan
 * only; fs/cache/idle.c). Lock held. */
bool cache_disk_idle(struct fs *fs);
/* How long a stretch without disk requests lasts before it is put to work
 * (fs/cache/idle.c), ns. Lock held. */
uint64_t cache_idle_after(const struct fs *fs);
/* The longest idle stretch of the learned step that a background commit
 * must fit in (commit_fits, fs/cache/flusher.c), ns; 0 if none yet. Lock held. */
uint64_t cache_commit_gap(const struct fs *fs);
/* In an idle stretch being worked: whether it has just finished its work
 * and turned gap mode on, so that read-ahead may now take more RAM. Lock
 * held. */
bool cache_idle_progress(struct fs *fs);
/* Re-read every cached block's plan verdict: gap mode changed. Lock held. */
void cache_replan(struct fs *fs);
/* What the keep plan may promise to keep in RAM: the blocks a learned
 * order may keep beside the pinned ones and the I/O in flight
 * (keep_horizon's budget), less what requests (a block per block size
 * their up to 1 MiB spans) and read-ahead hold beyond that. Promised more,
 * the cache wrote kept blocks back for waiters every step, the last
 * written first (whole neighbouring sub-groups at large blocks), and the
 * plan's even spread was lost. Lock held. */
uint64_t cache_plan_budget(struct fs *fs);
/* Re-predict every cached block from a newly learned cycle. Lock held. */
void cache_restamp(struct fs *fs);
int flusher_start(struct fs *fs);
void flusher_stop(struct fs *fs);
uint64_t fs_placement(struct fs *fs, struct inode *in, uint64_t *bytes /* [ntiers] */);
/* Bytes of IN in RAM now (its map loaded), and in *DIRTY those of them not
 * written back. Lock held. */
uint64_t fs_cached(struct fs *fs, struct inode *in, uint64_t *dirty);
int fs_block_tier(struct fs *fs, const struct blk *b);

/* For the prefetcher: start loading block IDX of IN if it is not
 * cached and a slot can be had without evicting anything needed before
 * NEED_AT (UINT64_MAX: free slots only, evict nothing, unless no order is
 * learned: then read-ahead's own LRU victim, readahead_victim). Lock held (dropped
 * while submitting). Returns 1 if started, 0 if not worth it, -ENOSPC if
 * every block in RAM is needed before NEED_AT (so also before any later
 * time, until the lock is dropped), -errno. */
int cache_prefetch(struct fs *fs, struct inode *in, uint64_t idx, uint64_t need_at);
/* I/O the persistent tiers keep in flight together (their queue depths):
 * the write-backs the flusher keeps going, the prefetches the prefetcher
 * may start. */
unsigned fs_persistent_queue(const struct fs *fs);

/* The blocks the files hold, as the learner is sized by: durable slots in
 * use, less those a commit is about to free, plus the blocks kept in RAM
 * as their home. Lock held. */
uint64_t cache_learn_blocks(struct fs *fs);
/* What the engine asks of the cache (fs/engine.h). */
extern const struct engine_hooks cache_engine_hooks;
/* The prefetcher thread, after engine_init (it reads ahead along the
 * learned order) and stopped before engine_stop. */
int cache_prefetcher_start(struct fs *fs);
/* Start the prefetcher if it should run and does not: at mount, or once a
 * reload turns learning on. No lock held. */
int cache_prefetcher_launch(struct fs *fs);
/* conf.prefetch_depth changed (or was set): size what read-ahead may have
 * in flight, and wake the prefetcher. Lock held. */
void cache_prefetch_depth_set(struct fs *fs);
void cache_prefetcher_stop(struct fs *fs);
/* What the learner knows beside what read-ahead and the idle stretches
 * made of it, read together: the "order" line of .tierfs/stats and the
 * learner's metrics (fs/metrics.c). */
struct cache_order_snap {
	struct engine_stats es;
	uint64_t prefetches, prefetch_hits, prefetch_wasted;
	uint64_t idle_stretches, idle_worked, idle_after_ns;
	bool gap_mode;
};
/* No lock held. */
void cache_order_snapshot(struct fs *fs, struct cache_order_snap *out);
/* The "order" line of .tierfs/stats. Returns its length or -ENOSPC. No
 * lock held. */
int cache_order_stats_text(struct fs *fs, char *buf, size_t size);

#endif
