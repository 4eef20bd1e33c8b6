/*
 * tests/unit/test_lock.c — the lock checks of fs/lock.h fail when they
 * should: a lock taken out of order, a function that requires a lock
 * entered without it, an unlock by a thread that does not hold it. Each
 * case runs in a child, which must die of SIGABRT with the check's line;
 * the orders the daemon really uses must pass. Only the build with
 * TIERFS_LOCK_CHECKS (the sanitizer build) has the checks: the plain build
 * skips the death cases.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs/lock.h"

static struct tfs_mutex g_fs, g_commit, g_sync, g_ns = TFS_MUTEX_INIT("ns_lock", LOCK_NS);

static int setup(void **state)
{
	(void)state;
	if (tfs_mutex_init(&g_fs, "fs->lock", LOCK_FS) ||
	    tfs_mutex_init(&g_commit, "fs->commit.lock", LOCK_COMMIT) ||
	    tfs_mutex_init(&g_sync, "fs->commit.sync_lock", LOCK_SYNC))
		return -1;
	return 0;
}

/* Run FN in a child; whether it died of SIGABRT. */
static bool aborts(void (*fn)(void))
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* The check's message goes to stderr; keep the TAP output clean. */
		if (!freopen("/dev/null", "w", stderr))
			_exit(3);
		fn();
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static void commit_under_fs(void)
{
	tfs_lock(&g_fs);
	tfs_lock(&g_commit); /* fs->lock comes after commit.lock */
}

static void held_without(void)
{
	tfs_assert_held(&g_fs);
}

static void fs_twice(void)
{
	tfs_lock(&g_fs);
	tfs_lock(&g_fs);
}

static void *unlock_other(void *arg)
{
	(void)arg;
	tfs_unlock(&g_fs); /* locked by the main thread */
	return NULL;
}

static void unlock_not_owner(void)
{
	tfs_lock(&g_fs);
	pthread_t t;
	if (pthread_create(&t, NULL, unlock_other, NULL) == 0)
		pthread_join(t, NULL);
}

static void the_daemons_order(void)
{
	/* A namespace operation that commits, and a commit that syncs and
	 * then updates the maps under fs->lock. */
	tfs_lock(&g_ns);
	tfs_lock(&g_commit);
	tfs_lock(&g_sync);
	tfs_lock(&g_fs);
	tfs_assert_held(&g_fs);
	tfs_unlock(&g_fs);
	tfs_unlock(&g_sync);
	tfs_unlock(&g_commit);
	tfs_unlock(&g_ns);
	/* A condition wait gives the lock up and takes it back. */
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	tfs_lock(&g_fs);
	tfs_cond_timedwait(&c, &g_fs, &ts);
	tfs_assert_held(&g_fs);
	tfs_unlock(&g_fs);
	tfs_assert_not_held(&g_fs);
}

static void order_ok(void **state)
{
	(void)state;
	assert_false(aborts(the_daemons_order));
}

static void violations_abort(void **state)
{
	(void)state;
#ifdef TIERFS_LOCK_CHECKS
	assert_true(aborts(commit_under_fs));
	assert_true(aborts(held_without));
	assert_true(aborts(fs_twice));
	assert_true(aborts(unlock_not_owner));
#else
	(void)commit_under_fs;
	(void)held_without;
	(void)fs_twice;
	(void)unlock_not_owner;
	skip(); /* the plain build has no lock checks */
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(order_ok),
	    cmocka_unit_test(violations_abort),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
