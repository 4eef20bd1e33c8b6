/*
 * tests/unit/test_engine.c — the engine's life cycle against the threads
 * that read it.
 *
 * At unmount engine_stop frees the learner while the flusher still runs
 * and reads it under fs->lock (engine_now, engine_stale_before,
 * engine_cycle_len); freeing it without the lock was a use-after-free,
 * which the ASan build of this test reports. The cache and inode calls the
 * engine makes are stubbed: only the learner and its lock are under test.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fs/fs.h"

int fs_inode_get(struct fs *fs, uint64_t ino, struct inode **out)
{
	(void)fs;
	(void)ino;
	(void)out;
	return -ENOENT;
}

int fs_inode_load_map(struct fs *fs, struct inode *in)
{
	(void)fs;
	(void)in;
	return -ENOENT;
}

int cache_prefetch(struct fs *fs, struct inode *in, uint64_t idx, uint64_t n)
{
	(void)fs;
	(void)in;
	(void)idx;
	(void)n;
	return 0;
}

unsigned fs_persistent_queue(const struct fs *fs)
{
	(void)fs;
	return 8;
}

void cache_restamp(struct fs *fs)
{
	(void)fs;
}

uint64_t cache_plan_budget(struct fs *fs)
{
	(void)fs;
	return 16;
}

bool cache_disk_idle(struct fs *fs)
{
	(void)fs;
	return false;
}

uint64_t cache_idle_after(const struct fs *fs)
{
	(void)fs;
	return 0;
}

bool cache_idle_progress(struct fs *fs)
{
	(void)fs;
	return false;
}

struct inode *fs_inode_find(struct fs *fs, uint64_t ino)
{
	(void)fs;
	(void)ino;
	return NULL;
}

static atomic_int g_started, g_done;

/* What the flusher does with the learner, as often as it can. */
static void *flusher_like(void *arg)
{
	struct fs *fs = arg;
	uint64_t sink = 0;
	atomic_store(&g_started, 1);
	while (!atomic_load(&g_done)) {
		pthread_mutex_lock(&fs->lock);
		sink += engine_now(fs) + engine_stale_before(fs) + engine_cycle_len(fs);
		pthread_mutex_unlock(&fs->lock);
	}
	return (void *)(uintptr_t)(sink & 1);
}

static void stop_while_read(void **state)
{
	(void)state;
	static struct fs fs;
	for (int round = 0; round < 200; round++) {
		memset(&fs, 0, sizeof(fs));
		fs.conf.learn = true;
		fs.conf.prefetch_depth = 0; /* no prefetcher: the flusher alone reads */
		assert_int_equal(pthread_mutex_init(&fs.lock, NULL), 0);
		assert_int_equal(pthread_cond_init(&fs.cond, NULL), 0);
		assert_int_equal(engine_init(&fs), 0);
		assert_non_null(fs.order);
		/* A learned cycle, so that the reads go deep into the learner. */
		pthread_mutex_lock(&fs.lock);
		for (int step = 0; step < 20; step++)
			for (uint64_t b = 0; b < 64; b++)
				engine_access(&fs, 1, b, false);
		pthread_mutex_unlock(&fs.lock);
		atomic_store(&g_started, 0);
		atomic_store(&g_done, 0);
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, flusher_like, &fs), 0);
		while (!atomic_load(&g_started))
			;
		engine_stop(&fs);
		assert_null(fs.order);
		atomic_store(&g_done, 1);
		assert_int_equal(pthread_join(t, NULL), 0);
		/* Stopped, the engine still answers, with "nothing learned". */
		pthread_mutex_lock(&fs.lock);
		assert_int_equal(engine_cycle_len(&fs), 0);
		pthread_mutex_unlock(&fs.lock);
		pthread_cond_destroy(&fs.cond);
		pthread_mutex_destroy(&fs.lock);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(stop_while_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
