/*
 * The posix tier's unit tests' shared fixture: a fresh tier directory per
 * test (under /tmp, or /dev/shm for the O_DIRECT fallback), the tier's
 * parameters, block contents, and a completion counter. Header-only, static
 * inline, so that each test program takes what it uses.
 */
#ifndef TIERFS_TEST_TIER_POSIX_FIXTURE_H
#define TIERFS_TEST_TIER_POSIX_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiers/tier.h"

#define BS   (64 * 1024)
#define SLAB (1024 * 1024) /* 16 blocks per slab */

static char dir[64];

static inline int make_dir(const char *base)
{
	snprintf(dir, sizeof(dir), "%s/tierfs-test-XXXXXX", base);
	return mkdtemp(dir) ? 0 : -errno;
}

static inline void remove_dir(void)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || e->d_name[1] == '.'))
			continue;
		char p[512];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

static inline int setup_tmp(void **state)
{
	(void)state;
	return make_dir("/tmp");
}

static inline int teardown(void **state)
{
	(void)state;
	remove_dir();
	return 0;
}

static inline struct tier_params params(uint64_t nblocks)
{
	struct tier_params p = {.name = "nvme0",
				.kind = TIER_POSIX,
				.path = dir,
				.capacity = nblocks * BS,
				.block_size = BS,
				.persistent = true,
				.direct = -1,
				.queue_depth = 8,
				.slab_size = SLAB};
	return p;
}

static inline struct tier *open_posix(uint64_t nblocks)
{
	struct tier_params p = params(nblocks);
	struct tier *t = NULL;
	assert_int_equal(tier_open(&p, &t), 0);
	return t;
}

static inline void fill(void *buf, unsigned seed)
{
	uint32_t *w = buf;
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < BS / 4; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		w[i] = x;
	}
}

/* Counts completions; the test thread waits for a target. */
struct counter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done, failed;
};

static inline void count_cb(struct tier_io *io)
{
	struct counter *c = io->priv;
	pthread_mutex_lock(&c->lock);
	c->done++;
	if (io->result)
		c->failed++;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static inline void wait_for(struct counter *c, int n)
{
	pthread_mutex_lock(&c->lock);
	while (c->done < n)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

#endif
