/*
 * fs/fs.h — the state of a mounted tierfs, shared by the files of fs/.
 *
 * Locking: every lock, what it guards and the order they are taken in are
 * in fs/lock.h. fs->lock guards the inode table, every inode and every
 * cache entry; block data moves with it dropped.
 */
#ifndef TIERFS_FS_H
#define TIERFS_FS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fs/cache/state.h"
#include "fs/engine_state.h"
#include "fs/lock.h"
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
	/* meta_block.pages and .stored of the durable copy (blocks of at most
	 * 64 MiB: 16 bits hold either) */
	uint16_t pages;
	uint16_t stored;
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
	 * durable_size() in fs/cache/commit.c. */
	uint64_t committed_size;
	bool shrunk;
	bool map_loaded;
	bool dropping;	   /* being deleted: cache_forget_inode may wait, lock dropped */
	bool resizing;	   /* cache_resize at work: cache_write waits */
	unsigned nwriting; /* cache_write calls under way: cache_resize waits */
	bool unsynced;	   /* changed since its last durable flush (sync_on_close) */
	/* Opened without O_DIRECT since the kernel took it: the kernel's page
	 * cache may hold its pages (ops_file.c). Set under fs->lock, read
	 * without it; cleared only with the inode. */
	bool kcached;
	/* Open handles that write through the page cache (not O_DIRECT,
	 * writable): while any is, an open must not drop the cached pages
	 * (ops_file.c). fs->lock. */
	unsigned nbufwrite;
	/* Per tier (config index): the write-back epoch (commit.wb_epoch) of its
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
	bool sweep_keep;     /* scratch mark of inode_sweep (fs/cache/commit.c) */
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
	 * in RAM (wb_kept_limit, fs/cache/horizon.c): each is a disk write the keep
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
	 * block (inside update phases too), and those worked
	 * (fs/cache/idle.c). */
	atomic_uint_fast64_t idle_stretches, idle_worked;
	/* Waits of a request for a RAM block (entry_alloc), and their summed
	 * time: what a RAM tier too small, or a disk too slow to write back,
	 * costs the application. */
	atomic_uint_fast64_t reclaim_waits, reclaim_wait_ns;
	/* Blocks whose allocation waited with a learned order, and began to
	 * with no read in flight on any persistent tier (wb_reserve_adjust,
	 * fs/cache/horizon.c). */
	atomic_uint_fast64_t idle_stalls;
	/* Write-backs that failed (entry_alloc gives up on a tier that fails). */
	atomic_uint_fast64_t flush_errors;
};

struct fs {
	/* Immutable once mounted, but for the config's live keys, which a
	 * reload (fs/reload.c) changes: scalars by atomic store (read them
	 * with FS_LIVE), the rules under rules_lock, the stripe table and the
	 * bandwidths (stripe, bw_read, bw_write) under lock. */
	struct config conf;
	pthread_rwlock_t rules_lock; /* conf.rules, conf.nrules; a leaf lock */
	struct meta *meta;
	struct tier *tiers[CONF_MAX_TIERS]; /* by config index */
	uint16_t tier_id[CONF_MAX_TIERS];   /* LMDB id of each config tier */
	int ram;			    /* config index of the RAM tier */
	struct stripe stripe;
	uint64_t bw_read[CONF_MAX_TIERS], bw_write[CONF_MAX_TIERS]; /* bytes/s, 0 unknown */
	uint32_t bs;						    /* block size */
	struct fuse_session *se;
	bool cache_up; /* cache_init done: unmount writes back */
	/* An s3 tier failed to open (its store unreachable, no bucket,
	 * credentials refused, clock skew, prefix in use): the daemon exits 2,
	 * as for a bad config, since the fix is in the config or around it. */
	bool tier_open_failed;
	bool noatime; /* -o noatime: reads leave atime (else relatime) */

	/* The one mutex of the data path (fs/lock.h), and the condition that
	 * announces any change of an entry's or inode's state. */
	struct tfs_mutex lock;
	pthread_cond_t cond;
	bool stopping; /* unmount: the threads end; lock */

	/* Inode table. Guarded by lock. */
	struct inode **itab;
	size_t itab_size;
	size_t ninodes;

	/* The mechanisms, each with its own state and the locks it names. */
	struct cache cache;   /* entries, reclaim, write-back, read-ahead: fs/cache/ */
	struct idle idle;     /* the time between steps: fs/cache/idle.c */
	struct commit commit; /* LMDB commits and tier syncs: fs/cache/commit.c, sync.c */
	struct engine eng;    /* the learned order and the keep plans: fs/engine.c */

	struct fs_stats stats;
	struct metrics_server *metrics; /* fs/metrics.c; NULL when not served */
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

/* orderid.c — the learner's names for files.
 *
 * Why not the inode number: a file replaced each step by a new one, as
 * tierfs-update writes NAME.tmp and renames it over NAME (a crash leaves
 * the old step or the new one whole), is a new inode every step, and a
 * step keyed by inode numbers never repeats: the order was never
 * learned. A file made here is named by a
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

/* ctl.c — the .tierfs view: what its nodes are and hold; read-only but
 * for the reload file */
#define CTL_BASE   (1ULL << 62)
#define CTL_DIR	   (CTL_BASE | 1)
#define CTL_STATS  (CTL_BASE | 2)
#define CTL_TIERS  (CTL_BASE | 3)
#define CTL_RELOAD (CTL_BASE | 4) /* write "reload": fs/reload.c */
#define CTL_NAME   ".tierfs"
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
 * text, or nothing (*TEXT NULL) for a file under tiers/NAME/ or the reload
 * file. -EROFS for an open to write but of the reload file, which only
 * opens to write. The caller frees *TEXT. */
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
/* mount.c: the stripe table of config C's stripe tiers, weighted by their
 * weights or by BW_READ (per tier index). 0 or -errno. */
int fs_stripe_build(const struct config *c, const uint64_t *bw_read, struct stripe *out);
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

/* Stop a thread of the mount: tell every thread to stop, wake TH where it
 * waits on COND, and wait for it to end. No lock held. */
static inline void fs_thread_stop(struct fs *fs, pthread_t th, pthread_cond_t *cond)
{
	tfs_lock(&fs->lock);
	fs->stopping = true;
	pthread_cond_broadcast(cond);
	tfs_unlock(&fs->lock);
	pthread_join(th, NULL);
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

/* A config key that a reload may change while other threads read it. */
#define FS_LIVE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* A line for log_level = debug only. */
#define TFS_DEBUG(fs, fmt, ...)                                                                    \
	do {                                                                                       \
		if (FS_LIVE((fs)->conf.log_level) >= CONF_LOG_DEBUG)                               \
			TFS_LOG(fmt, ##__VA_ARGS__);                                               \
	} while (0)

/* The mechanisms' faces: they take struct fs, so they come last. */
#include "fs/cache/cache.h"
#include "fs/engine.h"

#endif
