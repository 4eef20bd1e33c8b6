/*
 * fs/lock.c — the checked side of fs/lock.h: who owns each lock, which
 * levels each thread holds, and an abort with both names when the order
 * is broken. Built only with TIERFS_LOCK_CHECKS; the plain build's locks
 * are the inline pthread calls of the header.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs/lock.h"

int tfs_mutex_init(struct tfs_mutex *l, const char *name, enum lock_level level)
{
	l->name = name;
	l->level = level;
	atomic_store(&l->owner, 0);
	return -pthread_mutex_init(&l->m, NULL);
}

void tfs_mutex_destroy(struct tfs_mutex *l)
{
	pthread_mutex_destroy(&l->m);
}

#ifdef TIERFS_LOCK_CHECKS

/* Bit N set: this thread holds a lock of level N. */
static __thread unsigned t_levels;
/* Its address is the thread's identity: unique among live threads. */
static __thread char t_self;

static uintptr_t tfs_self(void)
{
	return (uintptr_t)&t_self;
}

static void lock_fail(const char *what, const struct tfs_mutex *l)
{
	fprintf(stderr, "tierfs: lock check: %s %s (level %d; levels held 0x%x)\n", what, l->name,
		(int)l->level, t_levels);
	abort();
}

static void note_taken(struct tfs_mutex *l)
{
	atomic_store(&l->owner, tfs_self());
	t_levels |= 1u << l->level;
}

static void note_released(struct tfs_mutex *l)
{
	if (atomic_load(&l->owner) != tfs_self())
		lock_fail("unlock of a lock this thread does not hold:", l);
	atomic_store(&l->owner, 0);
	t_levels &= ~(1u << l->level);
}

void tfs_lock(struct tfs_mutex *l)
{
	if (atomic_load(&l->owner) == tfs_self())
		lock_fail("taking again", l);
	/* A level at or above this one is held: the order says it comes
	 * after. */
	if (t_levels >> l->level)
		lock_fail("lock order: taking", l);
	int rc = pthread_mutex_lock(&l->m);
	if (rc) {
		errno = rc;
		lock_fail("pthread_mutex_lock failed on", l);
	}
	note_taken(l);
}

void tfs_unlock(struct tfs_mutex *l)
{
	note_released(l);
	pthread_mutex_unlock(&l->m);
}

int tfs_cond_wait(pthread_cond_t *c, struct tfs_mutex *l)
{
	note_released(l);
	int rc = pthread_cond_wait(c, &l->m);
	note_taken(l);
	return rc;
}

int tfs_cond_timedwait(pthread_cond_t *c, struct tfs_mutex *l, const struct timespec *ts)
{
	note_released(l);
	int rc = pthread_cond_timedwait(c, &l->m, ts);
	note_taken(l);
	return rc;
}

void tfs_assert_held(const struct tfs_mutex *l)
{
	if (atomic_load(&l->owner) != tfs_self())
		lock_fail("not held, as the caller requires:", l);
}

void tfs_assert_not_held(const struct tfs_mutex *l)
{
	if (atomic_load(&l->owner) == tfs_self())
		lock_fail("held, where the caller must not hold it:", l);
}

#endif
