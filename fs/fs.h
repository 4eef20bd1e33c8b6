/*
 * fs/fs.h — the state of a mounted tierfs, shared by the files of fs/.
 *
 * Locking, in the order they may be taken:
 *   1. an LMDB write transaction (meta_txn_begin(write)) — LMDB's own lock;
 *   2. fs->lock — one mutex for the inode table, every inode's attributes
 *      and block map, and every cache entry's state. Everything done under
 *      it is short (no I/O, no memcpy of block data, no LMDB write txn).
 * Block data moves outside fs->lock: a reference (centry.refs) keeps an
 * entry's buffer alive and in place; the state flags say what may be done
 * with it and fs->cond announces every change of state.
 */
#ifndef TIERFS_FS_H
#define TIERFS_FS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fs/meta.h"
#include "policy/config.h"
#include "policy/placement.h"
#include "tiers/tier.h"

#define TIER_NONE 0xffff

/* Blocks of one file at most (16 TiB at 1 MiB blocks): the learner's keys
 * hold 24 bits of block index. Beyond: EFBIG. */
#define FS_MAX_BLOCKS (1ull << 24)

/* The block map is a table of chunks of FS_MAP_CHUNK records, a chunk
 * allocated when one of its blocks is first written or loaded: a write at
 * a huge offset costs one chunk (16 KiB), not a record for every block
 * before it, and walks over the map skip a chunk of holes at a time. */
#define FS_MAP_CHUNK_SHIFT 9
#define FS_MAP_CHUNK	   (1ull << FS_MAP_CHUNK_SHIFT)

/* One block of a file, in memory. Guarded by fs->lock. */
struct blk {
	uint16_t tier; /* config index of the durable copy, TIER_NONE if none */
	/* The slot was set aside by fallocate: the commit keeps its record
	 * (META_B_UNWRITTEN). Means something only while csum is 0: see
	 * fs_blk_unwritten. */
	bool unwritten;
	uint32_t pages; /* meta_block.pages of the durable copy: 0, the whole block */
	uint64_t slot;
	uint64_t csum;
	struct centry *ce; /* cached copy or NULL */
};

struct inode {
	uint64_t ino;
	struct meta_inode attr; /* attr.size is exact at every moment */
	uint64_t nlookup;	/* kernel references */
	unsigned nopen;		/* open file handles */
	bool attr_dirty;	/* attr differs from LMDB */
	/* The size LMDB holds, and whether the file shrank since: see
	 * durable_size() in fs/cache.c. */
	uint64_t committed_size;
	bool shrunk;
	bool map_loaded;
	bool dropping;	   /* being deleted: cache_forget_inode may wait, lock dropped */
	bool resizing;	   /* cache_resize at work: cache_write waits */
	unsigned nwriting; /* cache_write calls under way: cache_resize waits */
	bool unsynced;	   /* changed since its last durable flush (sync_on_close) */
	/* Per tier (config index): the write-back epoch (fs/cache.c) of its
	 * first write-back to that tier that no good sync of the tier has
	 * covered yet, 0 none; and the error of a tier sync that failed after
	 * a write-back of it, which every fsync reports from then on: the
	 * bytes may be lost, and a later good sync does not bring them back.
	 * A failing tier is not charged to files with nothing new on it.
	 * Cleared by a truncate to 0. */
	uint64_t wb_first[CONF_MAX_TIERS];
	uint64_t wb_last[CONF_MAX_TIERS]; /* epoch of its latest write-back there */
	int wb_err;
	int home;	     /* rule/pin target tier (config index), -1 = stripe */
	struct blk **chunks; /* block map (fs_blk), NULL = a chunk of holes */
	uint64_t nchunks;
	uint64_t nblocks; /* nchunks * FS_MAP_CHUNK: no block at or beyond */
	uint64_t ndirty;  /* dirty cached blocks */
	uint64_t nce;	  /* blocks with a cache entry (blk.ce) */
	/* Blocks with data while the map is not loaded (st_blocks), from the
	 * metadata on first use; -1 unknown. */
	int64_t nused;
	bool sweep_keep;     /* scratch mark of cache.c's inode sweep */
	uint64_t nflushing;  /* blocks being written back */
	uint64_t ra_next;    /* block a sequential reader asks for next (readahead) */
	struct inode *hnext; /* inode hash chain */
};

/* Block IDX's record, or NULL for a hole in a chunk never written. A
 * record does not move while its inode lives. Lock held. */
static inline struct blk *fs_blk(const struct inode *in, uint64_t idx)
{
	uint64_t c = idx >> FS_MAP_CHUNK_SHIFT;
	if (c >= in->nchunks || !in->chunks[c])
		return NULL;
	return &in->chunks[c][idx & (FS_MAP_CHUNK - 1)];
}

/* Whether block record B holds data: a slot on a tier, or a cache entry
 * (not yet written back). What st_blocks counts and fallocate need not
 * find room for. */
static inline bool fs_blk_used(const struct blk *b)
{
	return b->tier != TIER_NONE || b->ce;
}

/* Whether B has a slot set aside by fallocate that holds nothing yet: it
 * reads as zeros, and its first write-back goes into that slot. */
static inline bool fs_blk_unwritten(const struct blk *b)
{
	return b->tier != TIER_NONE && b->unwritten && b->csum == 0;
}

/* The first block from IDX on that has a record, nblocks if none. */
static inline uint64_t fs_blk_next(const struct inode *in, uint64_t idx)
{
	for (uint64_t c = idx >> FS_MAP_CHUNK_SHIFT; c < in->nchunks;
	     c++, idx = c << FS_MAP_CHUNK_SHIFT)
		if (in->chunks[c])
			return idx;
	return in->nblocks;
}

/* Each block number I of IN from FROM on that has a record. */
#define fs_for_each_blk(in, i, from)                                                               \
	for (uint64_t i = fs_blk_next(in, from); i < (in)->nblocks; i = fs_blk_next(in, i + 1))

/* The LRU list a cache entry is on (fs.lru_head): neither dirty nor being
 * written back (what may be evicted), dirty, or being written back. */
enum lru_state { LRU_CLEAN, LRU_DIRTY, LRU_FLUSHING, LRU_NSTATES, LRU_NONE = 255 };

enum ce_state {
	CE_LOADING, /* buf is being filled (tier read, whole-block write); wait */
	CE_VALID,   /* buf holds the block (dirty or clean) */
};

/* A block held in RAM: its buffer is a slot of the RAM tier. */
struct centry {
	struct inode *inode;
	uint64_t idx;
	uint64_t slot; /* RAM tier slot */
	void *buf;
	enum ce_state state;
	int refs;
	bool dirty;
	bool flushing;	    /* a write-back is in flight: writers wait */
	bool pinned;	    /* RAM is this block's home (rule or pin): evict last */
	bool prefetched;    /* loaded ahead of use, not yet used */
	bool written_back;  /* clean through a write-back since it was last written */
	bool wb_failed;	    /* its last write-back failed (cache_flush_all) */
	uint16_t wb_tier;   /* the tier that write-back failed on (wb_held_back) */
	uint64_t stamp;	    /* last use, for LRU */
	uint64_t next_read; /* predicted engine_now() of its next read, UINT64_MAX unknown */
	uint64_t next_use;  /* same, of its next access of any kind (a read or a write) */
	uint8_t plan;	    /* enum keepplan_verdict from the learned cycle's plan */
	struct centry *prev, *next; /* LRU list, most recent at head */
	uint8_t lru;		    /* which: enum lru_state, LRU_NONE on none */
};

struct fs_stats {
	atomic_uint_fast64_t hits, misses, evictions, flushes, flush_bytes;
	/* Blocks read ahead; of those, read by a request; dropped unread or
	 * overwritten whole (the read was for nothing: RAM was short, or the
	 * prediction wrong). */
	atomic_uint_fast64_t prefetches, prefetch_hits, prefetch_wasted;
	/* Write-backs a waiting caller asked for; write-backs of blocks then
	 * overwritten while still in RAM (a disk write a longer stay in RAM
	 * would have saved). */
	atomic_uint_fast64_t flushes_reclaim, flushes_rewritten;
	/* Of the reclaim write-backs, those of blocks the learned order keeps
	 * in RAM (kept_wb_limit in cache.c): each is a disk write the keep
	 * plan meant to save, paid because a caller waited for RAM. */
	atomic_uint_fast64_t flushes_kept;
	/* Evictions of blocks the keep plan keeps, before the read it keeps
	 * them for: each is a disk read the plan meant to save. */
	atomic_uint_fast64_t evictions_kept;
	/* Metadata commits of write-backs and their time: each waits for the
	 * metadata disk (LMDB syncs its data pages). */
	atomic_uint_fast64_t commits, commit_ns;
	atomic_uint_fast64_t commits_forced; /* background, no quiet moment found */
	/* Whole-block writes whose data the FUSE loop received straight into
	 * a RAM slot, which the block took instead of a copy. */
	atomic_uint_fast64_t writes_adopted;
	/* Victim searches, and the cache entries their walks visited. */
	atomic_uint_fast64_t victim_scans, victim_visits;
	/* Stretches of DISK_IDLE_NS or more without a request for a disk-homed
	 * block (inside update phases too), and those worked (cache.c "Idle
	 * disk"). */
	atomic_uint_fast64_t idle_stretches, idle_worked;
	/* Waits of a request for a RAM block (entry_alloc), and their summed
	 * time: what a RAM tier too small, or a disk too slow to write back,
	 * costs the application. */
	atomic_uint_fast64_t reclaim_waits, reclaim_wait_ns;
	/* Blocks whose allocation waited with a learned order, and began to
	 * with no read in flight on any persistent tier (cache.c
	 * wb_reserve_adjust). */
	atomic_uint_fast64_t idle_stalls;
	/* Write-backs that failed (entry_alloc gives up on a tier that fails). */
	atomic_uint_fast64_t flush_errors;
};

struct order;
struct orderid_slot;

struct fs {
	struct config conf;
	struct meta *meta;
	struct tier *tiers[CONF_MAX_TIERS]; /* by config index */
	uint16_t tier_id[CONF_MAX_TIERS];   /* LMDB id of each config tier */
	int ram;			    /* config index of the RAM tier */
	struct stripe stripe;
	uint64_t bw_read[CONF_MAX_TIERS], bw_write[CONF_MAX_TIERS]; /* bytes/s, 0 unknown */
	uint32_t bs;						    /* block size */
	struct fuse_session *se;

	bool cache_up; /* cache_init done: unmount writes back */
	bool noatime;  /* -o noatime: reads leave atime (else relatime). Immutable. */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* any entry/inode state change */

	/* Inode table. Guarded by lock. */
	struct inode **itab;
	size_t itab_size;
	size_t ninodes;

	/* Cache. Guarded by lock. */
	/* LRU lists, most recent at head, one per value of centry.pinned and
	 * write-back state: searches for a victim or a write-back walk only
	 * the blocks they may take, not the gradients a rule keeps in RAM
	 * (two thirds of the bench's cache, walked on every eviction when
	 * both shared a list), nor, for a victim, the dirty blocks that a
	 * learned order keeps (nearly all of them: with 16 Ki RAM blocks each
	 * search walked thousands). */
	struct centry *lru_head[2][LRU_NSTATES], *lru_tail[2][LRU_NSTATES];
	uint64_t ncached, ndirty, npinned;
	uint64_t cache_slots; /* RAM tier slots the cache may fill */
	/* RAM tier slots beyond the capacity configured, one per FUSE worker,
	 * which receives requests into it (fs/loop.c); free ones stacked in
	 * landing[]. */
	uint64_t nlanding, landing_free;
	uint64_t *landing;
	uint64_t pin_limit;   /* RAM-home blocks beyond this become ordinary */
	uint64_t clock;	      /* stamp source */
	uint64_t learn_clock; /* clock when a cycle was last learned (cache_restamp) */
	/* entry_alloc's waiters (reclaim_waiters of them), woken one at a
	 * time: each event that may free a block wakes one, and one that
	 * leaves wakes the next. A broadcast had every waiter search for a
	 * victim on every event, 7-8 searches per miss. */
	pthread_cond_t reclaim_cond;
	unsigned reclaim_waiters;
	unsigned ref_waiters;	/* threads waiting for an entry's last reference */
	uint64_t *wb_scratch;	/* cache_slots long: the write-back horizon's sort space */
	uint64_t wb_horizon;	/* the last keep_horizon() result ... */
	uint64_t wb_horizon_at; /* ... and engine_now() when it was computed */
	bool wb_horizon_ok;

	/* Slots to free once the block map that stopped using them is committed. */
	struct freed_slot *freed;
	size_t nfreed, freed_cap;
	/* Tiers whose shortness of slots was logged (bit per tier). */
	uint32_t short_logged;
	/* Per tier, write-backs in flight to a new slot whose old slot, on
	 * that tier, is retired once they complete (cache.c flush_start). */
	uint32_t moving[CONF_MAX_TIERS];

	/* Flusher thread. */
	pthread_t flusher;
	bool flusher_running;
	bool stopping;
	pthread_cond_t flusher_cond;
	/* Committer thread: commits the block maps of finished write-backs,
	 * so that the flusher never waits on the metadata disk. commit_wanted
	 * and commit_stop are guarded by lock; commit_cond wakes it. */
	pthread_t committer;
	bool committer_running;
	bool commit_wanted, commit_stop;
	pthread_cond_t commit_cond;

	/* Learned access order (policy/order.h) and the prefetcher. The
	 * learner is guarded by lock. */
	struct order *order;
	/* The newest file of each name id (fs/orderid.c), guarded by lock. */
	struct orderid_slot *oid;
	size_t oid_mask, oid_used;
	bool learned;	      /* order_learned(), cached under lock */
	uint64_t learn_count; /* order_learn_count() when last seen, under lock */
	/* The learner's clock at its last size check (engine.c learner_fit),
	 * and whether checks are over (at the largest size, out of memory,
	 * or a fixed learn_max_cycle already found short); under lock. */
	uint64_t learn_fit_at;
	bool learn_fit_done;
	/* Whether auto sizes the learner for a cycle of two steps (engine.c
	 * learn_need), and the learner's clock since when it has looked for
	 * a cycle at its size: made or grown, or its cycle lost; under lock. */
	bool learn_long;
	uint64_t learn_since;
	/* Growing the learner (engine.c grow_run) on the planner thread:
	 * grow_to, the size asked for (0: none), with the blocks it was
	 * worked out for; grow_busy while the new learner is fed the old
	 * one's recording off the lock, meanwhile every access also goes to
	 * grow_keys/grow_writes (grow_n of grow_cap) for it, and grow_lost
	 * if one could not. Under lock. */
	size_t grow_to;
	uint64_t grow_blocks;
	bool grow_busy, grow_lost;
	uint64_t *grow_keys;
	uint8_t *grow_writes;
	size_t grow_n, grow_cap;
	/* Which blocks stay in RAM across the step (policy/keepplan.h),
	 * built when a cycle is learned; NULL without one. Under lock. */
	struct keepplan *plan;
	struct keepplan *tail_plan; /* gap mode's instead (cache.c "Idle disk") */
	/* The planner thread builds both off the lock (engine.c plan_main):
	 * plan_want asks it for the cycle learned at plan_gen, which every
	 * learn and loss of the cycle bumps, so that a plan of an older one
	 * is thrown away; plan_busy while it builds. Under lock. */
	pthread_t planner;
	bool planner_running, plan_want, plan_busy;
	uint64_t plan_gen;
	pthread_cond_t plan_cond;
	pthread_t prefetcher;
	bool prefetcher_running;
	pthread_cond_t prefetch_cond;
	unsigned prefetch_inflight; /* guarded by lock */
	uint64_t nprefetched;	    /* entries loaded ahead and not used yet; lock */
	unsigned prefetch_max;
	/* The prefetcher's own record of whether read-ahead pays (engine.c
	 * prefetch_pays), guarded by lock: the used and wasted counts when
	 * its window began, and the learner's clock until which it pauses. */
	uint64_t pf_used0, pf_wasted0, pf_pause_until;
	uint64_t pf_signalled; /* the learner's clock when engine_access last woke it */
	/* Time between training steps (policy: fs/cache.c, "Idle disk"),
	 * guarded by lock: when a request last touched a block whose home is
	 * a disk tier, the learner's clock (+1) when an idle stretch last
	 * wrote everything back and read ahead all it could, and whether the
	 * cache follows the tail plan for such stretches (gap mode); with
	 * gap_plan = auto, the longest stretch that ended before its work;
	 * when the stretch being worked began (0: none is). */
	uint64_t disk_demand_ns;
	/* When a request last touched a disk-homed block (learned or not),
	 * and the longest time without one within the last two cycles,
	 * with the learner's clock when it was seen (cache.c gap_seen), and
	 * the longest of the two cycles before those; lock. */
	uint64_t disk_req_ns, gap_seen_ns, gap_seen_clock, gap_prev_ns;
	/* Requests for disk-homed blocks being served (cache.c disk_demand);
	 * disk_req_ns is also set when the last of them is done; lock. */
	unsigned disk_reqs;
	/* Whether gap_seen_ns or gap_prev_ns holds a measured stretch (0 ns
	 * when the tiers were busy at every request), and how long commits
	 * in a quiet moment took lately (a running mean, 0: none yet), for
	 * cache.c commit_fits; lock. */
	bool gap_measured;
	uint64_t commit_quiet_ns;
	/* When the last commit (cache.c commit_run) began and ended: one in
	 * an idle stretch leaves it unjudged. Atomic: set outside lock. */
	_Atomic uint64_t commit_began_ns, commit_ended_ns;
	/* The learned cycle's longest run of accesses to blocks whose home
	 * is not a disk (the backward pass), 0 without a tail plan; lock. */
	size_t gap_run;
	/* Write bursts (cache.c wb_reserve_adjust), guarded by lock: the
	 * learned cycle's runs of writes to disk-homed blocks (engine.c
	 * plan_make); the blocks the write-back horizon leaves out of the
	 * kept set for such a burst; the blocks whose allocation waited for
	 * RAM with no read in flight since the learner's clock was at
	 * stall_clock (both reset by cache_restamp). */
	size_t write_runs;
	uint64_t wb_reserve, idle_stalls, stall_clock;
	uint64_t idle_short_ns;
	uint64_t idle_from_ns;
	uint64_t gap_ok_clock;
	bool gap_mode;
	uint64_t gap_on_ns; /* when gap mode last came on; lock */

	struct fs_stats stats;
	void *zero; /* one block of zeros, read-only replies for holes */
};

struct freed_slot {
	uint16_t tier;
	uint64_t slot;
};

extern struct fs *g_fs;

/* inode.c */
int fs_inode_get(struct fs *fs, uint64_t ino, struct inode **out); /* lock held; loads */
struct inode *fs_inode_find(struct fs *fs, uint64_t ino);	   /* lock held; cached only */
int fs_inode_load_map(struct fs *fs, struct inode *in);		   /* lock held */
/* Make block IDX's record exist (a hole until set). Lock held. */
int fs_map_reserve(struct fs *fs, struct inode *in, uint64_t idx);
void fs_map_free(struct inode *in);
/* Free IN's loaded block map, which LMDB holds as it is (nothing cached,
 * pending or under way); the next use loads it again. Lock held. */
void fs_map_unload(struct fs *fs, struct inode *in);
void fs_inode_drop(struct fs *fs, struct inode *in); /* lock held: a deleted file: unlist, free */
int fs_attr_to_stat(struct fs *fs, struct inode *in, struct stat *st);	/* lock held */
int fs_inode_path(struct fs *fs, uint64_t ino, char *buf, size_t size); /* no lock needed */
int fs_tier_of_id(struct fs *fs, uint16_t id);
int fs_name_in_dir(struct meta_txn *t, uint64_t parent, uint64_t ino, char *name);
void fs_now(int64_t *sec, uint32_t *nsec);
void fs_touch_mc(struct meta_inode *a); /* mtime and ctime = now */
/* What an unprivileged write or truncate does to a regular file's mode, as
 * the kernel's should_remove_suid(): set-user-ID goes, set-group-ID only
 * with group execute (without, it marks mandatory locking). */
void fs_kill_setid(struct meta_inode *attr);
/* A read of IN: move atime as Linux's default relatime does (when it is
 * older than mtime or ctime, or a day old), unless -o noatime. Lock held. */
void fs_read_atime(struct fs *fs, struct inode *in);
int fs_home_for(struct fs *fs, const struct meta_inode *attr, const char *path);

/* cache.c */
int cache_init(struct fs *fs);
void cache_destroy(struct fs *fs);
/* Replies to REQ with the data and returns 1, or returns -errno for the
 * caller to reply with. */
int cache_read(struct fs *fs, struct inode *in, uint64_t off, size_t len, fuse_req_t req);
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
 * only; cache.c "Idle disk"). Lock held. */
bool cache_disk_idle(struct fs *fs);
/* How long a stretch without disk requests lasts before it is put to work
 * (cache.c, "Idle disk"), ns. Lock held. */
uint64_t cache_idle_after(const struct fs *fs);
/* The longest idle stretch of the learned step that a background commit
 * must fit in (cache.c commit_fits), ns; 0 if none yet. Lock held. */
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
 * written first (whole neighbouring sub-groups at 256 KiB blocks, 40 of
 * 304 blocks on the bench with two paths), and the plan's even spread was
 * lost. Lock held. */
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

/* orderid.c — the learner's names for files.
 *
 * Why not the inode number: a file replaced each step by a new one, as
 * tierfs-update writes NAME.tmp and renames it over NAME (a crash leaves
 * the old step or the new one whole), is a new inode every step, and a
 * step keyed by inode numbers never repeats: the order was never learned
 * (8 steps of 8 sub-groups, learned=no). A file made here is named by a
 * hash of the directory and name it was created under, kept across
 * renames: NAME.tmp's blocks are the same keys step after step, as read
 * (the file renamed to NAME last step) and as written (this step's
 * NAME.tmp). The learner then also knows the old file's blocks for dead
 * once read, since the key's next access is the new file's write. Files
 * from before the name id keep their inode number. Ids of 2^39 and up
 * are name ids; inode numbers stay below. Two files created under one
 * name, both kept and used each step, share a key and blur each other's
 * predictions: a cost to speed only, never to data. */
#define FS_NAME_ID (1ULL << 39)

static inline uint64_t fs_name_id(const struct meta_inode *a)
{
	return ((uint64_t)a->name_hi << 32 | a->name_lo) & (FS_NAME_ID - 1);
}

static inline uint64_t fs_order_id(const struct inode *in)
{
	uint64_t n = fs_name_id(&in->attr);
	return n ? FS_NAME_ID | n : in->ino;
}

/* Set A's name id from the directory and NAME it is created under. */
void fs_name_id_set(struct meta_inode *a, uint64_t parent, const char *name);
/* The inode of A is loaded: its name id leads to it, unless to a newer
 * file (a higher inode number). Returns 0 or -ENOMEM. Lock held. */
int fs_order_id_add(struct fs *fs, const struct meta_inode *a);
/* The inode of A is deleted: its id no longer leads to it. Lock held. */
void fs_order_id_del(struct fs *fs, const struct meta_inode *a);
/* The inode number of order id ID: ID itself, or the newest file of a name
 * id (0: none known). Lock held. */
uint64_t fs_order_id_ino(struct fs *fs, uint64_t id);
void fs_order_ids_free(struct fs *fs);

/* engine.c — learned order, eviction predictions, prefetch */
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
 * cycle's longest (fs->gap_run). True when no plan says (nothing to
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
/* cache.c, for the prefetcher: start loading block IDX of IN if it is not
 * cached and a slot can be had without evicting anything needed before
 * NEED_AT (UINT64_MAX: free slots only, evict nothing). Lock held (dropped
 * while submitting). Returns 1 if started, 0 if not worth it, -ENOSPC if
 * every block in RAM is needed before NEED_AT (so also before any later
 * time, until the lock is dropped), -errno. */
int cache_prefetch(struct fs *fs, struct inode *in, uint64_t idx, uint64_t need_at);
/* I/O the persistent tiers keep in flight together (their queue depths):
 * the write-backs the flusher keeps going, the prefetches the prefetcher
 * may start. */
unsigned fs_persistent_queue(const struct fs *fs);

/* ctl.c — the read-only .tierfs view: what its nodes are and hold */
#define CTL_BASE  (1ULL << 62)
#define CTL_DIR	  (CTL_BASE | 1)
#define CTL_STATS (CTL_BASE | 2)
#define CTL_TIERS (CTL_BASE | 3)
#define CTL_NAME  ".tierfs"
static inline bool ctl_ino(uint64_t ino)
{
	return ino & CTL_BASE;
}
/* Attributes of control node INO; -ENOENT if it does not exist. */
int ctl_getattr(struct fs *fs, uint64_t ino, struct stat *st);
/* The entry of NAME in control directory PARENT, or of .tierfs itself
 * where PARENT is the root; -ENOENT where there is none. */
int ctl_lookup(struct fs *fs, uint64_t parent, const char *name, struct fuse_entry_param *e);
/* Pass each entry of control directory INO to ADD, "." and ".." first:
 * its name, inode and file type. -ENOTDIR for a control file, or ADD's
 * first error (which ends the listing). */
int ctl_list(struct fs *fs, uint64_t ino,
	     int (*add)(void *arg, const char *name, uint64_t ino, mode_t mode), void *arg);
/* What control file INO holds for an open with open(2)'s FLAGS: the stats
 * text, or nothing (*TEXT NULL) for a file under tiers/NAME/. -EROFS for
 * an open to write. The caller frees *TEXT. */
int ctl_open(struct fs *fs, uint64_t ino, int flags, char **text, size_t *len);
int ctl_stats_text(struct fs *fs, char **out, size_t *len);

/* xattr.c — extended attributes: the user's, and tierfs's computed ones.
 * A value or list is appended whole to OUT (the caller frees out->p,
 * whatever the result); errors are -errno as getxattr(2) and its kin
 * report them (-ENODATA: no such attribute). */
struct strbuf;
int xattr_get(struct fs *fs, uint64_t ino, const char *name, struct strbuf *out);
/* The names, each followed by a NUL byte. */
int xattr_list(struct fs *fs, uint64_t ino, struct strbuf *out);
int xattr_set(struct fs *fs, uint64_t ino, const char *name, const char *value, size_t size,
	      int flags);
int xattr_remove(struct fs *fs, uint64_t ino, const char *name);

/* ops.c */
extern const struct fuse_lowlevel_ops tierfs_ops;
int fs_mount_prepare(struct fs *fs); /* open meta + tiers, root, orphans */
void fs_unmount_finish(struct fs *fs);

/* The largest request the kernel sends (max_write, max_read): libfuse
 * 3.14's limit. */
#define FS_MAX_REQUEST (1u << 20)

/* Whether IN's blocks go to a disk tier: its home is not RAM (a rule's
 * gradients) and it is written back at all (not persistent = no). */
static inline bool fs_disk_homed(const struct fs *fs, const struct inode *in)
{
	return in->home != fs->ram && !(in->attr.flags & META_F_VOLATILE);
}

/* Blocks the largest request spans: at least one. */
static inline uint64_t fs_request_blocks(const struct fs *fs)
{
	return fs->bs && fs->bs < FS_MAX_REQUEST ? FS_MAX_REQUEST / fs->bs : 1;
}

/* RAM tier slots the FUSE workers receive requests into (fs/loop.c), one
 * each, beyond the RAM tier's capacity; none where a block cannot hold a
 * whole request. */
static inline uint64_t fs_landing_slots(const struct fs *fs)
{
	return fs->bs >= FS_MAX_REQUEST ? fs->conf.threads : 0;
}

/* The largest size a file may have (FS_MAX_BLOCKS blocks). */
static inline uint64_t fs_max_size(const struct fs *fs)
{
	return FS_MAX_BLOCKS * fs->bs;
}

/* The fewest RAM tier blocks the cache can work with: each FUSE worker
 * holds at most one request's blocks at a time, and the flusher a few. */
static inline uint64_t fs_cache_min_blocks(const struct config *c)
{
	return ((uint64_t)FS_MAX_REQUEST / c->block_size + 2) * c->threads + 8;
}

#define TFS_LOG(fmt, ...) fprintf(stderr, "tierfs: " fmt "\n", ##__VA_ARGS__)

#endif
