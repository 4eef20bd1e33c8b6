/*
 * fs/lock.h — every lock of the daemon, the order they are taken in, and
 * the checks of both.
 *
 * Lock order (a thread holding one may take only those below it):
 *
 *   0. the reload lock (fs/reload.c) — one reload at a time, from reading
 *      the config to the last live key set; a plain mutex, taken with
 *      nothing else held.
 *   1. ns_lock (fs/ops.c) — one namespace operation at a time, from its
 *      reads of LMDB to its update of the inode table.
 *   2. fs->commit.lock — one commit at a time, from its snapshot of the
 *      pending block maps to its LMDB commit (fs/cache/commit.c).
 *   3. fs->commit.sync_lock — one round of tier syncs at a time
 *      (fs/cache/sync.c); a commit syncs the tiers under commit.lock.
 *   4. an LMDB write transaction (meta_txn_begin(write)) — LMDB's own
 *      writer lock; not a struct tfs_mutex, so the checks below do not see
 *      it: never begin one while holding fs->lock.
 *   5. fs->lock — the inode table, every inode's attributes and block map,
 *      every cache entry's state, and the state of the cache, idle, commit
 *      and engine structs where their fields say so. Everything done under
 *      it is short: no I/O, no memcpy of block data, no LMDB write
 *      transaction. Block data moves with it dropped, a reference
 *      (centry.refs) keeping the buffer in place; fs->cond announces every
 *      change of an entry's or inode's state.
 *   6. leaf locks, under which nothing else is taken: the file-handle
 *      table's (fs/handle.c), a directory snapshot's (fs/ops.c), the
 *      rules' (fs->rules_lock, a rwlock: creates read them), and the
 *      tiers' own (tiers/: slab allocation, submission queues, idle and
 *      busy accounting, syncs), which tier calls take under fs->lock.
 *
 * The locks of levels 1, 2, 3 and 5 are struct tfs_mutex. Built with
 * TIERFS_LOCK_CHECKS (the sanitizer build, in which the whole test suite
 * runs), each knows its owner and every thread the levels it holds:
 * taking a lock at or above a level held, unlocking a lock not held, or
 * tfs_assert_held() on a lock the caller does not hold print what happened
 * and abort — the spirit of the kernel's lockdep_assert_held. Without it
 * they are plain pthread mutexes.
 */
#ifndef TIERFS_LOCK_H
#define TIERFS_LOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

enum lock_level {
	LOCK_NS = 1,
	LOCK_COMMIT = 2,
	LOCK_SYNC = 3,
	LOCK_FS = 5,
};

struct tfs_mutex {
	pthread_mutex_t m;
	const char *name;
	enum lock_level level;
	/* The owning thread's tfs_self(), 0 when free (checks only). */
	_Atomic uintptr_t owner;
};

#define TFS_MUTEX_INIT(name_, level_)                                                              \
	{                                                                                          \
		.m = PTHREAD_MUTEX_INITIALIZER, .name = (name_), .level = (level_), .owner = 0     \
	}

int tfs_mutex_init(struct tfs_mutex *l, const char *name, enum lock_level level);
void tfs_mutex_destroy(struct tfs_mutex *l);

#ifdef TIERFS_LOCK_CHECKS
void tfs_lock(struct tfs_mutex *l);
void tfs_unlock(struct tfs_mutex *l);
int tfs_cond_wait(pthread_cond_t *c, struct tfs_mutex *l);
int tfs_cond_timedwait(pthread_cond_t *c, struct tfs_mutex *l, const struct timespec *ts);
void tfs_assert_held(const struct tfs_mutex *l);
void tfs_assert_not_held(const struct tfs_mutex *l);
#else
static inline void tfs_lock(struct tfs_mutex *l)
{
	pthread_mutex_lock(&l->m);
}
static inline void tfs_unlock(struct tfs_mutex *l)
{
	pthread_mutex_unlock(&l->m);
}
static inline int tfs_cond_wait(pthread_cond_t *c, struct tfs_mutex *l)
{
	return pthread_cond_wait(c, &l->m);
}
static inline int tfs_cond_timedwait(pthread_cond_t *c, struct tfs_mutex *l,
				     const struct timespec *ts)
{
	return pthread_cond_timedwait(c, &l->m, ts);
}
static inline void tfs_assert_held(const struct tfs_mutex *l)
{
	(void)l;
}
static inline void tfs_assert_not_held(const struct tfs_mutex *l)
{
	(void)l;
}
#endif

#endif
