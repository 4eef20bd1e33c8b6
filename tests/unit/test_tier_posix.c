/*
 * tests/unit/test_tier_posix.c — the posix tier's storage: asynchronous
 * writes and reads of many blocks, tier_close waiting for what was
 * submitted, checksum verification, partial blocks, remount, layout checks
 * (tier.info), slab files made ahead, capacity, directory permissions and
 * sync, O_DIRECT fallback. The scheduler has test_tier_posix_sched.c.
 *
 * Runs in a fresh directory under /tmp (a disk file system here) and, for
 * the O_DIRECT cases, under /dev/shm (tmpfs).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tier_posix_fixture.h"

static int count_slabs(void)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, "slab-", 5) == 0)
			n++;
	closedir(d);
	return n;
}

/* What the kernel says about O_DIRECT in dir, found independently of the
 * tier code. */
static int dir_accepts_direct(void)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/probe", dir);
	int fd = open(p, O_RDWR | O_CREAT | O_DIRECT, 0644);
	if (fd < 0)
		return 0;
	void *b = aligned_alloc(4096, 4096);
	memset(b, 0, 4096);
	int ok = pwrite(fd, b, 4096, 0) == 4096;
	free(b);
	close(fd);
	unlink(p);
	return ok;
}

/* Write n blocks asynchronously (all submitted at once, so most wait in
 * the backend's queue), read them back asynchronously, compare. */
static void test_async_many(void **state)
{
	(void)state;
	enum { N = 300 };
	struct tier *t = open_posix(N);
	assert_int_equal(tier_slots_total(t), N);
	/* Where the kernel accepts O_DIRECT, it must really be used. */
	assert_int_equal(tier_is_direct(t), dir_accepts_direct());
	assert_true(tier_persistent(t));
	char *data = aligned_alloc(4096, (size_t)N * BS);
	char *back = aligned_alloc(4096, (size_t)N * BS);
	struct tier_io *ios = calloc(N, sizeof(*ios));
	struct counter c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
	for (int i = 0; i < N; i++) {
		int64_t s = tier_alloc(t);
		assert_int_equal(s, i);
		fill(data + (size_t)i * BS, (unsigned)i);
		ios[i] = (struct tier_io){.op = TIER_OP_WRITE,
					  .prio = TIER_PRIO_WRITEBACK,
					  .slot = (uint64_t)s,
					  .buf = data + (size_t)i * BS,
					  .done = count_cb,
					  .priv = &c};
	}
	assert_int_equal(tier_alloc(t), -ENOSPC);
	/* 300 blocks at 16 per slab: 19 slab files, not 300. */
	assert_int_equal(count_slabs(), 19);
	for (int i = 0; i < N; i++)
		assert_int_equal(tier_submit(t, &ios[i]), 0);
	wait_for(&c, N);
	assert_int_equal(c.failed, 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(ios[i].result, 0);
		assert_true(ios[i].csum == tier_checksum(data + (size_t)i * BS, BS));
	}
	assert_int_equal(tier_sync(t), 0);

	memset(back, 0, (size_t)N * BS);
	c.done = 0;
	for (int i = N - 1; i >= 0; i--) {
		ios[i].op = TIER_OP_READ;
		ios[i].prio = TIER_PRIO_PREFETCH;
		ios[i].buf = back + (size_t)i * BS;
		assert_int_equal(tier_submit(t, &ios[i]), 0);
	}
	wait_for(&c, N);
	assert_int_equal(c.failed, 0);
	assert_memory_equal(back, data, (size_t)N * BS);

	struct tier_stats st;
	tier_get_stats(t, &st);
	assert_int_equal(st.writes, N);
	assert_int_equal(st.reads, N);
	assert_int_equal(st.bytes_written, (uint64_t)N * BS);
	assert_int_equal(st.bytes_read, (uint64_t)N * BS);
	assert_int_equal(st.errors, 0);
	assert_int_equal(st.csum_errors, 0);
	assert_true(st.read_ns > 0 && st.write_ns > 0);

	/* The last slab only holds the 12 slots left. */
	struct stat sb;
	char p[128];
	snprintf(p, sizeof(p), "%s/slab-00018.dat", dir);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_size, 12 * BS);
	snprintf(p, sizeof(p), "%s/slab-00000.dat", dir);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_size, SLAB);
	/* Preallocated, not sparse. */
	assert_true((uint64_t)sb.st_blocks * 512 >= SLAB);
	tier_close(t);
	free(ios);
	free(data);
	free(back);
}

/* tier_close waits for everything submitted. */
static void test_close_waits(void **state)
{
	(void)state;
	enum { N = 64 };
	struct tier *t = open_posix(N);
	char *data = aligned_alloc(4096, (size_t)N * BS);
	struct tier_io *ios = calloc(N, sizeof(*ios));
	struct counter c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
	for (int i = 0; i < N; i++) {
		fill(data + (size_t)i * BS, (unsigned)i + 1000);
		ios[i] = (struct tier_io){.op = TIER_OP_WRITE,
					  .slot = (uint64_t)i,
					  .buf = data + (size_t)i * BS,
					  .done = count_cb,
					  .priv = &c};
		assert_int_equal(tier_submit(t, &ios[i]), 0);
	}
	tier_close(t);
	assert_int_equal(c.done, N);
	assert_int_equal(c.failed, 0);
	free(ios);
	free(data);
}

static void test_rw_checksum_mismatch(void **state)
{
	(void)state;
	struct tier *t = open_posix(32);
	char *buf = aligned_alloc(4096, BS), *out = aligned_alloc(4096, BS);
	fill(buf, 42);
	uint64_t slot = 21, csum = 0;
	assert_int_equal(tier_reserve(t, slot), 0);
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, slot, buf, 0, &csum), 0);
	assert_true(csum == tier_checksum(buf, BS));
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, slot, out, 0, &csum), 0);
	assert_memory_equal(out, buf, BS);
	assert_int_equal(tier_sync(t), 0);

	/* Corrupt one byte of slot 21 = slab 1, index 5. */
	char p[128];
	snprintf(p, sizeof(p), "%s/slab-00001.dat", dir);
	int fd = open(p, O_RDWR);
	assert_true(fd >= 0);
	char byte = (char)(buf[777] ^ 0x10);
	assert_int_equal(pwrite(fd, &byte, 1, 5 * BS + 777), 1);
	assert_int_equal(fsync(fd), 0);
	close(fd);

	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, slot, out, 0, &csum), -EIO);
	struct tier_stats st;
	tier_get_stats(t, &st);
	assert_int_equal(st.csum_errors, 1);
	assert_int_equal(st.errors, 1);
	assert_int_equal(st.reads, 1);
	/* A wrong expected checksum is caught the same way. */
	uint64_t wrong = csum ^ 1;
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, 0, out, 0, &wrong), -EIO);
	tier_close(t);
	free(buf);
	free(out);
}

/* Once allocations reach the middle of a slab, the next slab is made in
 * the background, whole, before any slot of it is allocated: tier_alloc
 * runs under the file system's lock, where fallocating a whole slab would
 * stall every request. Slabs made so, and slabs an allocation reaches
 * while one is being made, hold their blocks like any other. */
static void test_slab_ahead(void **state)
{
	(void)state;
	struct tier *t = open_posix(4 * (SLAB / BS)); /* 4 slabs of 16 */
	for (int i = 0; i < SLAB / BS / 2; i++)
		assert_int_equal(tier_alloc(t), i);
	assert_int_equal(count_slabs(), 1); /* slot 7: not past the middle yet */
	assert_int_equal(tier_alloc(t), SLAB / BS / 2);
	char path[128];
	snprintf(path, sizeof(path), "%s/slab-00001.dat", dir);
	struct stat st = {0};
	for (int ms = 0; ms < 10000; ms += 10) {
		if (stat(path, &st) == 0 && st.st_size == SLAB)
			break;
		usleep(10000);
	}
	assert_int_equal(st.st_size, SLAB);
	assert_int_equal(tier_slots_used(t), SLAB / BS / 2 + 1);
	/* The rest at once: the allocations race the thread for slabs 2, 3. */
	for (uint64_t i = SLAB / BS / 2 + 1; i < 4 * (SLAB / BS); i++)
		assert_int_equal(tier_alloc(t), (int64_t)i);
	assert_int_equal(tier_alloc(t), -ENOSPC);
	char *buf = aligned_alloc(4096, BS), *got = aligned_alloc(4096, BS);
	uint64_t csum[4 * (SLAB / BS)];
	for (unsigned i = 0; i < 4 * (SLAB / BS); i++) {
		fill(buf, i);
		assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, i, buf, 0, &csum[i]),
				 0);
	}
	for (unsigned i = 0; i < 4 * (SLAB / BS); i++) {
		fill(buf, i);
		assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, i, got, 0, &csum[i]),
				 0);
		assert_memory_equal(got, buf, BS);
	}
	tier_close(t);
	assert_int_equal(count_slabs(), 4); /* none beyond the capacity */
	free(buf);
	free(got);
}

static void test_reopen(void **state)
{
	(void)state;
	enum { N = 40 };
	char *data = aligned_alloc(4096, (size_t)N * BS), *out = aligned_alloc(4096, BS);
	uint64_t csum[N];
	struct tier *t = open_posix(N);
	for (int i = 0; i < N; i++) {
		fill(data + (size_t)i * BS, (unsigned)i + 7);
		assert_int_equal(tier_alloc(t), i);
		assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_WRITEBACK, (uint64_t)i,
					 data + (size_t)i * BS, 0, &csum[i]),
				 0);
	}
	assert_int_equal(tier_sync(t), 0);
	tier_close(t);

	/* slab_size 0 adopts the size the directory was formatted with. */
	struct tier_params p = params(N);
	p.slab_size = 0;
	assert_int_equal(tier_open(&p, &t), 0);
	assert_int_equal(tier_slots_used(t), 0);
	for (int i = N - 1; i >= 0; i--) {
		assert_int_equal(tier_reserve(t, (uint64_t)i), 0);
		assert_int_equal(
		    tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, (uint64_t)i, out, 0, &csum[i]), 0);
		assert_memory_equal(out, data + (size_t)i * BS, BS);
	}
	tier_close(t);

	/* A different block size or slab size is refused. */
	p = params(N);
	p.block_size = 2 * BS;
	t = (struct tier *)1;
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	assert_null(t);
	p = params(N);
	p.slab_size = 2 * SLAB;
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	free(data);
	free(out);
}

/* A tier directory that the tier creates is the daemon user's alone, as
 * its files are. */
static void test_dir_created_private(void **state)
{
	(void)state;
	char sub[128], path[160];
	snprintf(sub, sizeof(sub), "%s/fresh", dir);
	struct tier_params p = params(4);
	p.path = sub;
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	struct stat st;
	assert_int_equal(stat(sub, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	tier_close(t);
	snprintf(path, sizeof(path), "%s/tier.info", sub);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(sub), 0);
}

/* tier_sync_dir: the directory and its parent, whatever the spelling. */
static void test_sync_dir(void **state)
{
	(void)state;
	char sub[128], trail[160];
	snprintf(sub, sizeof(sub), "%s/d", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(tier_sync_dir(sub), 0);
	snprintf(trail, sizeof(trail), "%s//", sub);
	assert_int_equal(tier_sync_dir(trail), 0);
	assert_int_equal(tier_sync_dir("/"), 0);
	assert_int_equal(tier_sync_dir("/tmp"), 0);
	char cwd[PATH_MAX];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0);
	assert_int_equal(tier_sync_dir("d"), 0); /* parent "." */
	assert_int_equal(tier_sync_dir("missing"), -ENOENT);
	assert_int_equal(chdir(cwd), 0);
	snprintf(trail, sizeof(trail), "%s/missing/d", dir);
	assert_int_equal(tier_sync_dir(trail), -ENOENT);
	assert_int_equal(rmdir(sub), 0);
}

static void test_capacity(void **state)
{
	(void)state;
	/* 10.5 blocks round down to 10. */
	struct tier_params p = params(10);
	p.capacity += BS / 2;
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	assert_int_equal(tier_slots_total(t), 10);
	/* Slabs are created on allocation, not at open. */
	assert_int_equal(count_slabs(), 0);
	char *buf = aligned_alloc(4096, BS);
	fill(buf, 1);
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, 10, buf, 0, NULL), -ERANGE);
	assert_int_equal(tier_reserve(t, 10), -ERANGE);
	for (int i = 0; i < 10; i++)
		assert_true(tier_alloc(t) >= 0);
	assert_int_equal(tier_alloc(t), -ENOSPC);
	assert_int_equal(count_slabs(), 1);
	/* Optimizer state: readable only by the daemon's user, whatever the
	 * mount's own permissions. */
	char path[128];
	struct stat st;
	snprintf(path, sizeof(path), "%s/slab-00000.dat", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(path, sizeof(path), "%s/tier.info", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, 9, buf, 0, NULL), 0);
	tier_close(t);

	/* Slab size must be a multiple of the block size. */
	remove_dir();
	assert_int_equal(make_dir("/tmp"), 0);
	p = params(10);
	p.slab_size = BS + 4096;
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	p.path = NULL;
	assert_int_equal(tier_open(&p, &t), -EINVAL);
	free(buf);
}

/* tmpfs: O_DIRECT auto falls back where the kernel refuses it (tmpfs
 * accepts O_DIRECT since Linux 6.6); direct=1 then fails clearly. */
static void test_tmpfs_direct(void **state)
{
	(void)state;
	remove_dir();
	if (make_dir("/dev/shm")) {
		assert_int_equal(make_dir("/tmp"), 0);
		skip();
	}
	int kernel_direct = dir_accepts_direct();
	struct tier_params p = params(16);
	struct tier *t;
	assert_int_equal(tier_open(&p, &t), 0);
	assert_int_equal(tier_is_direct(t), kernel_direct);
	char *buf = aligned_alloc(4096, BS), *out = aligned_alloc(4096, BS);
	fill(buf, 3);
	uint64_t csum;
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, 3, buf, 0, &csum), 0);
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, 3, out, 0, &csum), 0);
	assert_memory_equal(out, buf, BS);
	tier_close(t);

	p.direct = 1;
	t = NULL;
	if (kernel_direct) {
		assert_int_equal(tier_open(&p, &t), 0);
		assert_true(tier_is_direct(t));
		tier_close(t);
	} else {
		assert_int_equal(tier_open(&p, &t), -EINVAL);
		assert_null(t);
	}
	p.direct = 0;
	assert_int_equal(tier_open(&p, &t), 0);
	assert_false(tier_is_direct(t));
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, 3, out, 0, &csum), 0);
	assert_memory_equal(out, buf, BS);
	tier_close(t);
	free(buf);
	free(out);
}

/* A file's last block moves its bytes up to EOF only (tier_io.len): the
 * checksum is the whole block's with the rest zeros, whatever the buffer
 * holds there, and a read of that length fills the rest with zeros. A
 * longer stale tail in the slot, from the slot's last user, must not
 * show. */
static void test_partial_len(void **state)
{
	(void)state;
	struct tier *t = open_posix(32);
	char *buf = aligned_alloc(4096, BS), *out = aligned_alloc(4096, BS);
	char *want = aligned_alloc(4096, BS);
	uint64_t slot = 7, csum = 0, full = 0;
	assert_int_equal(tier_reserve(t, slot), 0);
	fill(buf, 9); /* the slot's last user: a whole block */
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, slot, buf, 0, &full), 0);
	fill(buf, 10); /* bytes past 8 KiB stand for garbage past EOF */
	memcpy(want, buf, 8192);
	memset(want + 8192, 0, BS - 8192);
	assert_int_equal(tier_rw(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, slot, buf, 8192, &csum), 0);
	assert_true(csum == tier_checksum(want, BS));
	assert_true(csum == tier_checksum_block(buf, 8192, BS));
	memset(out, 0x5a, BS);
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, slot, out, 8192, &csum), 0);
	assert_memory_equal(out, want, BS);
	/* Read whole, the slot's stale tail fails the checksum: never
	 * returned as the block's bytes. */
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, slot, out, 0, &csum), -EIO);
	struct tier_stats st;
	tier_get_stats(t, &st);
	assert_int_equal(st.bytes_written, (uint64_t)BS + 8192);
	assert_int_equal(st.bytes_read, 8192);
	/* Lengths that are not whole pages of the block are refused. */
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, slot, out, 100, &csum),
			 -EINVAL);
	assert_int_equal(tier_rw(t, TIER_OP_READ, TIER_PRIO_DEMAND, slot, out, BS + 4096, &csum),
			 -EINVAL);
	tier_close(t);
	free(buf);
	free(out);
	free(want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_async_many, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_close_waits, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_rw_checksum_mismatch, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_partial_len, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_reopen, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_slab_ahead, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_capacity, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_dir_created_private, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_sync_dir, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_tmpfs_direct, setup_tmp, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
