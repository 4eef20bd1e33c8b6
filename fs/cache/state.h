/*
 * fs/cache/state.h — the state of the block cache, one struct per
 * mechanism, each field with the lock that guards it.
 *
 * struct fs embeds one of each (fs->cache, fs->idle, fs->commit); the
 * mechanisms' code lives in fs/cache/, one file per concern, and its
 * functions are declared in fs/cache/cache.h (the face other modules use)
 * and fs/cache/internal.h (what the files of fs/cache/ share). The lock
 * names and their order are in fs/lock.h.
 */
#ifndef TIERFS_CACHE_STATE_H
#define TIERFS_CACHE_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fs/lock.h"
#include "policy/pacing.h"
#include "policy/config.h"
#include "policy/gap.h"
#include "policy/wbhorizon.h"
#include "tiers/tier.h"

struct inode;
struct freed_slot;
struct pend;

/* The LRU list a cache entry is on (cache.lru_head): neither dirty nor
 * being written back (what may be evicted), dirty, or being written back. */
enum lru_state { LRU_CLEAN, LRU_DIRTY, LRU_FLUSHING, LRU_NSTATES, LRU_NONE = 255 };

enum ce_state {
	CE_LOADING, /* buf is being filled (tier read, whole-block write); wait */
	CE_VALID,   /* buf holds the block (dirty or clean) */
};

/* A block held in RAM: its buffer is a slot of the RAM tier. Every field
 * is guarded by fs->lock; the bytes of buf are not (a reference, refs,
 * keeps the buffer in place while they are copied or moved). */
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

/* Back-off of background write-back to one tier that fails its writes
 * (fs/cache/writeback.c). Guarded by fs->lock. */
struct wb_backoff {
	uint64_t retry_at; /* 0: not backing off */
	uint64_t backoff;  /* the delay now */
	bool probing;	   /* a write-back probes the tier */
	uint64_t failed;   /* failures since the last success */
	struct tier_ratelimit log;
};

/* Entries, LRU lists, RAM slots, reclaim, write-back and read-ahead.
 * Guarded by fs->lock unless a field says otherwise. */
struct cache {
	/* LRU lists, most recent at head, one per value of centry.pinned and
	 * write-back state: searches for a victim or a write-back walk only
	 * the blocks they may take, not the blocks a rule keeps in RAM, nor,
	 * for a victim, the dirty blocks that a learned order keeps. */
	struct centry *lru_head[2][LRU_NSTATES], *lru_tail[2][LRU_NSTATES];
	uint64_t ncached, ndirty, npinned;
	uint64_t cache_slots; /* RAM tier slots the cache may fill */
	/* RAM tier slots beyond the capacity configured, one per FUSE worker,
	 * which receives requests into it (fs/loop.c); free ones stacked in
	 * landing[]. nlanding is immutable once the cache is up. */
	uint64_t nlanding, landing_free;
	uint64_t *landing;
	uint64_t pin_limit;   /* RAM-home blocks beyond this become ordinary */
	uint64_t clock;	      /* stamp source */
	uint64_t learn_clock; /* clock when a cycle was last learned (cache_restamp) */
	/* entry_alloc's waiters (reclaim_waiters of them), woken one at a
	 * time: each event that may free a block wakes one, and one that
	 * leaves wakes the next. A broadcast had every waiter search for a
	 * victim on every event. Waits on fs->lock. */
	pthread_cond_t reclaim_cond;
	unsigned reclaim_waiters;
	unsigned ref_waiters; /* threads waiting for an entry's last reference */
	void *zero;	      /* one block of zeros, read-only replies for holes; immutable */

	/* Write-back horizon of a learned order (fs/cache/horizon.c). */
	uint64_t *wb_scratch;	   /* cache_slots long: the horizon's sort space */
	struct wbhorizon_memo wbh; /* the last keep_horizon() result, and when; fs->lock */
	/* Write bursts (wb_reserve_adjust): the blocks the write-back horizon
	 * leaves out of the kept set for such a burst, and the allocations
	 * that waited for RAM with no read in flight since the count began
	 * (restarted by cache_restamp). fs->lock. */
	struct wbreserve wbr;

	/* Slots to free once the block map that stopped using them is
	 * committed. */
	struct freed_slot *freed;
	size_t nfreed, freed_cap;
	/* Tiers whose shortness of slots was logged (bit per tier). */
	uint32_t short_logged;
	/* Per tier, write-backs in flight to a new slot whose old slot, on
	 * that tier, is retired once they complete (flush_start). */
	uint32_t moving[CONF_MAX_TIERS];
	/* Per tier index, background write-back's back-off; and how many
	 * tiers have retry_at set, so that the flusher's walks ask nothing
	 * more while it is 0. */
	struct wb_backoff wb[CONF_MAX_TIERS];
	unsigned wb_nheld;

	/* The flusher thread; flusher_cond (on fs->lock) wakes it. */
	pthread_t flusher;
	bool flusher_running;
	pthread_cond_t flusher_cond;

	/* The prefetcher thread reads ahead along the learned order;
	 * prefetch_cond (on fs->lock) wakes it. */
	pthread_t prefetcher;
	bool prefetcher_running;
	pthread_cond_t prefetch_cond;
	unsigned prefetch_inflight;
	uint64_t nprefetched; /* entries loaded ahead and not used yet */
	unsigned prefetch_max;
	/* Whether read-ahead pays, window by window (policy/pacing.h). */
	struct pacing pacing;
	uint64_t pf_signalled; /* the learner's clock when an access last woke it */
};

/* The time between training steps (fs/cache/idle.c). */
struct idle {
	/* The idle stretches seen and worked, and whether the cache follows
	 * the tail plan for them (gap mode): policy/gap.h, which describes
	 * each field. fs->lock. */
	struct gapmode gap;
};

/* Commits of block maps to LMDB and syncs of the tiers
 * (fs/cache/commit.c, fs/cache/sync.c). Each field names its lock. */
struct commit {
	/* One commit at a time, from its snapshot of the pending work to its
	 * LMDB commit, so that commits land in the order their snapshots were
	 * taken. Without it, a flusher tick that took file F's size and then
	 * waited for LMDB's writer lock could commit after an fsync's newer
	 * size and put the old one back; or re-insert a block record that a
	 * truncate's commit had deleted, whose slot was then freed and handed
	 * to another block. */
	struct tfs_mutex lock;
	/* Pending block-map updates, committed to LMDB by cache_commit;
	 * fs->lock. */
	struct pend *pend;
	size_t npend, pend_cap;
	/* The slots the last commit freed. LMDB makes a commit durable only
	 * at its next sync (MDB_NOMETASYNC, fs/meta.c): a slot used again
	 * before that would, after a power failure, be named by the map the
	 * disk kept, over other bytes. They are freed by a meta_sync begun
	 * after their commit ended (commit_sync), which every commit that
	 * freed some is followed by; that sync runs outside commit.lock, so
	 * that the fsyncs of many writers do not each wait for the others'
	 * commits. commit.lock; nheld is also read without it as a hint. */
	struct freed_slot *held;
	size_t nheld;
	/* Commits that held frees so far (atomic: commit_sync reads it
	 * without the lock), and the last of them; commit.lock. */
	_Atomic uint64_t commits;
	uint64_t held_from;
	/* Heap bytes the inode sweeps gave back since the last malloc_trim;
	 * commit.lock. */
	uint64_t swept_bytes;

	/* Tier syncs, one round at a time (sync_lock), and per tier the epoch
	 * that says which write-backs each sync covered: a write-back to tier
	 * T completed in epoch E is on stable storage once a sync of T that
	 * began after E returns 0. After a failed fdatasync the kernel drops
	 * the pages and a retry returns 0, so the failure must be charged to
	 * the files written back to T before it, or their fsync would say
	 * the bytes are safe; files whose new bytes went to other tiers are
	 * not concerned. wb_epoch is atomic so that a failed sync can close
	 * its epoch the moment it returns, without fs->lock. */
	struct tfs_mutex sync_lock;
	_Atomic uint64_t wb_epoch[CONF_MAX_TIERS];
	/* Sync rounds begun (atomic) and ended, and the last one's result:
	 * a caller whose write-backs completed before round R began is served
	 * by R (group commit). Written under sync_lock. */
	_Atomic uint64_t rounds_begun;
	uint64_t rounds_done;
	int round_rc;

	/* The committer thread commits the block maps of finished
	 * write-backs, so that the flusher never waits on the metadata disk.
	 * wanted and stop are guarded by fs->lock; cond (on fs->lock) wakes
	 * it. */
	pthread_t committer;
	bool committer_running;
	bool wanted, stop;
	pthread_cond_t cond;
	/* How long commits in a quiet moment took lately (a running mean,
	 * 0: none yet), for commit_fits; fs->lock. */
	uint64_t quiet_ns;
	/* When the last commit (commit_run) began and ended: one in an idle
	 * stretch leaves it unjudged. Atomic: set outside fs->lock. */
	_Atomic uint64_t began_ns, ended_ns;
};

#endif
