/*
 * tiers/posix_int.h — what the files of the posix backend share: the state
 * of one open posix tier and the functions that cross its files. Private
 * to posix*.c; the rest of tierfs sees the backend only through
 * tier_posix_backend (backend.h).
 *
 *   posix.c       open and close, the layout record, the O_DIRECT probe,
 *                 the backend's table
 *   posix_slab.c  slab files: opening, preallocating, making ahead
 *   posix_io.c    the data path: scheduler, io_uring, completion thread
 *   posix_sync.c  making completed writes durable
 *
 * Locks: slab_lock, sq_lock and sync_lock are never held together, nor
 * across a call out of the backend (tier_io_complete, a completion
 * callback): each guards its own fields, named below.
 */
#ifndef TIERFS_POSIX_INT_H
#define TIERFS_POSIX_INT_H

#include "tiers/backend.h"
#include "tiers/sched.h"

#include <limits.h>
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* user_data of the NOP that tells the completion thread to exit. */
#define STOP_TOKEN UINT64_MAX

struct posix_tier {
	/* Immutable after open. */
	struct tier *t;
	char dir[PATH_MAX];
	int dirfd;
	bool direct;
	/* Bytes of slots per slab, a multiple of block_size: a slab holds
	 * slab_size / block_size slots of t->slot_size bytes each (more than
	 * a block where the tier encrypts). */
	uint64_t slab_size;
	uint64_t slots_per_slab;
	uint64_t nslabs;

	/* One fd per slab, -1 until the slab exists. Written under slab_lock,
	 * read without it (atomic loads) on the I/O path. */
	int *fds;
	/* Per slab: the bytes preallocated, from its start: a slot below it
	 * may be allocated. A slab that a full disk kept from growing to its
	 * size is still open: the blocks it holds stay readable, and the
	 * slots it has room for are used. Same locking as fds. */
	uint64_t *grown;
	/* After a failure to grow a slab for lack of space, allocations on
	 * this tier fail at once until this time (tier_now_ns) instead of
	 * trying a doomed fallocate under slab_lock for every block, and
	 * only the first failure is logged. Under slab_lock. */
	uint64_t full_until_ns;
	bool full_logged; /* under slab_lock */
	/* files_gone has logged (atomic). */
	bool gone_logged;
	/* Per slab: a write to it completed since its last fdatasync; and a
	 * slab was created or removed since the directory's last fsync.
	 * Atomic: set by the completion and slab paths, taken by
	 * posix_sync, which a commit runs every few seconds: a sync of
	 * every slab each time would cost a flush per slab on a tier of
	 * hundreds. */
	bool *written;
	bool dir_changed;
	/* posix_sync's own ring, made at its first sync of several slabs:
	 * their fdatasyncs go out together. One after the other, a commit
	 * would wait for each in turn, and on a parallel file system each is a
	 * round trip to its storage servers. sync_lock serializes posix_sync
	 * and guards the three; a ring that could not be made leaves the
	 * syncs one after the other (sync_ring_failed). */
	pthread_mutex_t sync_lock;
	struct io_uring sync_ring;	     /* under sync_lock */
	bool sync_ring_ok, sync_ring_failed; /* under sync_lock */
	pthread_mutex_t slab_lock;
	/* The slab the ahead thread is asked to make (-1: none), the one it is
	 * making now outside slab_lock (posix_ensure_slab waits for that one
	 * rather than race it), and the last one it could not make (not asked
	 * for again: allocation makes it, or reports the lack of space). Under
	 * slab_lock; read without it (atomic loads) to skip taking it.
	 * slab_cond wakes the thread, and the waiters for ahead_busy. */
	int64_t ahead_want, ahead_busy, ahead_failed;
	bool ahead_stop;    /* under slab_lock */
	bool ahead_running; /* immutable after open */
	pthread_cond_t slab_cond;
	pthread_t ahead_thread; /* immutable after open */

	/* sq_lock guards the submission side of ring, sched, timer_armed,
	 * timer_due_ns, timer_ts and timer_move_ts. The completion side of
	 * ring is touched only by cq_thread. */
	struct io_uring ring;
	pthread_mutex_t sq_lock;
	struct sched sched;
	/* A TIMER_TOKEN timeout is pending in the ring: at most one, so a
	 * throttled queue does not pile up timers. It fires at timer_due_ns
	 * (tier_now_ns); a shorter wait (the other direction's cap) moves it
	 * earlier through timer_move_ts. */
	bool timer_armed;
	uint64_t timer_due_ns;
	struct __kernel_timespec timer_ts, timer_move_ts;
	pthread_t cq_thread; /* immutable after open */
};

/* posix_slab.c */
void posix_slab_path(const struct posix_tier *pt, uint64_t idx, char *buf, size_t len);
bool posix_no_space(int err);
int posix_ensure_slab(struct posix_tier *pt, uint64_t idx, uint64_t slot, bool need_space);
void *posix_ahead_thread(void *arg);
int posix_prepare_slot(struct tier *t, uint64_t slot, bool need_space);
int posix_open_existing_slabs(struct posix_tier *pt);

/* posix_io.c */
bool posix_submit_ring(struct posix_tier *pt, const char *what);
int posix_submit(struct tier *t, struct tier_io *io);
void *posix_completion_thread(void *arg);

/* posix_sync.c */
int posix_sync(struct tier *t);

#endif
