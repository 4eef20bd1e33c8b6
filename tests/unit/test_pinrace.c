/*
 * tests/unit/test_pinrace.c — a pin that moves a file while a new block of
 * it waits in entry_alloc, forced.
 *
 * Through a mount the window cannot be reached: the kernel holds the
 * inode's lock across a FUSE write and across setxattr (t_pinrace). Here
 * the cache runs without FUSE (fs_mount_prepare on a RAM tier and a posix
 * tier capped at 2 MiB/s of writes), RAM is full of another file's dirty
 * blocks, and a thread writes a new block while the test waits for it to
 * stand in entry_alloc (fs->cache.reclaim_waiters), then pins the file. The new
 * block must follow the pin (2147f5b, 7474cdc):
 *   - pinned to RAM: it is pinned there, with no disk slot (before: it
 *     kept the disk slot chosen for the striped home);
 *   - moved from RAM to the disk tier: it is not pinned, and the write-back
 *     takes it to the disk (before: pinned in RAM for good).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "fs/fs.h"
#include "fs/meta.h"
#include "fs/config/config_load.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BS (64 * 1024)

struct fix {
	char root[64];
	struct fs *fs;
	char *buf;
};

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	strcpy(f->root, "/tmp/tierfs-test-pinrace.XXXXXX");
	if (!mkdtemp(f->root)) {
		free(f);
		return -1;
	}
	char conf[128], tier[128];
	snprintf(conf, sizeof(conf), "%s/c.conf", f->root);
	snprintf(tier, sizeof(tier), "%s/nvme0", f->root);
	if (mkdir(tier, 0755))
		goto fail;
	FILE *c = fopen(conf, "w");
	if (!c)
		goto fail;
	/* 4 MiB of RAM at 64 KiB blocks with 2 threads leaves about 16 blocks
	 * beside the cache's reserve to pin; write-back at 2 MiB/s frees a
	 * block every 30 ms. */
	fprintf(c,
		"[mount]\nmetadata = %s/meta\nblock_size = 64K\nthreads = 2\n"
		"[tier ram]\ntype = ram\ncapacity = 4M\n"
		"[tier nvme0]\ntype = posix\npath = %s/nvme0\ncapacity = 64M\n"
		"max_bandwidth_write = 2M/s\n"
		"[policy]\nstripe = nvme0\n",
		f->root, f->root);
	if (fclose(c))
		goto fail;
	f->fs = calloc(1, sizeof(*f->fs));
	f->buf = malloc(BS);
	if (!f->fs || !f->buf)
		goto fail;
	char err[256] = "";
	if (config_load(conf, &f->fs->conf, err, sizeof(err))) {
		fprintf(stderr, "config: %s\n", err);
		goto fail;
	}
	int rc = fs_mount_prepare(f->fs);
	if (rc) {
		fprintf(stderr, "fs_mount_prepare: %s\n", strerror(-rc));
		goto fail;
	}
	*state = f;
	return 0;
fail:
	nftw(f->root, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
	free(f->buf);
	free(f->fs);
	free(f);
	return -1;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	fs_unmount_finish(f->fs);
	nftw(f->root, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
	free(f->buf);
	free(f->fs);
	free(f);
	return 0;
}

/* A regular file in the root, as ops_make_node (fs/ops_ns.c) makes one. */
static struct inode *new_file(struct fs *fs, const char *name)
{
	struct meta_txn *t;
	uint64_t ino;
	assert_int_equal(meta_txn_begin(fs->meta, true, &t), 0);
	assert_int_equal(meta_ino_alloc(t, &ino), 0);
	struct meta_inode a = {.ino = ino,
			       .parent = META_ROOT_INO,
			       .mode = S_IFREG | 0644,
			       .nlink = 1,
			       .pin_tier = -1};
	assert_int_equal(meta_inode_put(t, &a), 0);
	assert_int_equal(meta_dirent_put(t, META_ROOT_INO, name, ino), 0);
	assert_int_equal(meta_txn_commit(t), 0);
	struct inode *in;
	tfs_lock(&fs->lock);
	int rc = fs_inode_get(fs, ino, &in);
	/* Looked up, as the kernel holds a file it writes or pins: else a
	 * commit's sweep may free the inode under the test. */
	if (!rc)
		in->nlookup++;
	tfs_unlock(&fs->lock);
	assert_int_equal(rc, 0);
	return in;
}

static void write_block(struct fix *f, struct inode *in, uint64_t idx, char fill)
{
	memset(f->buf, fill, BS);
	uint64_t donor = 0;
	assert_int_equal(cache_write(f->fs, in, idx * BS, f->buf, BS, &donor, false), BS);
}

/* Another file's dirty blocks, more than RAM holds: a new block waits. */
static void fill_ram(struct fix *f, int attempt)
{
	char name[16];
	snprintf(name, sizeof(name), "a%d", attempt);
	struct inode *a = new_file(f->fs, name);
	uint64_t n = f->fs->cache.cache_slots + 8;
	for (uint64_t i = 0; i < n; i++)
		write_block(f, a, i, 'a');
}

struct writer {
	struct fix *f;
	struct inode *in;
	int rc; /* cache_write's: the bytes written, or -errno */
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	char *buf = malloc(BS);
	uint64_t donor = 0;
	w->rc = -ENOMEM;
	if (buf) {
		memset(buf, 'n', BS);
		w->rc = cache_write(w->f->fs, w->in, 0, buf, BS, &donor, false);
		free(buf);
	}
	return NULL;
}

/* Start a write of block 0 of IN, wait until it stands in entry_alloc,
 * then pin IN to TIER; return once the write is done. The write waits for
 * as long as write-back takes to free a block; a test thread kept off the
 * CPU for longer (a loaded machine) finds it done: false, nothing pinned,
 * and the caller sets the scene again. */
static bool pin_during_write(struct fix *f, struct inode *in, int tier)
{
	struct fs *fs = f->fs;
	struct writer w = {.f = f, .in = in};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, writer_main, &w), 0);
	bool waiting = false;
	tfs_lock(&fs->lock);
	for (int i = 0; i < 5000 && !waiting; i++) {
		waiting = fs->cache.reclaim_waiters > 0;
		struct blk *b = fs_blk(in, 0);
		if (!waiting && b && b->ce)
			break; /* missed: the write got its block */
		if (!waiting) {
			tfs_unlock(&fs->lock);
			nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
			tfs_lock(&fs->lock);
		}
	}
	tfs_unlock(&fs->lock);
	/* Still waiting when the pin takes the lock: write-back frees a block
	 * every 30 ms, and the lock comes at once. */
	if (waiting)
		assert_int_equal(cache_pin(fs, in, tier), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(w.rc, BS);
	return waiting;
}

/* A new file F<N>, pinned to RAM first if FROM_RAM, RAM full of another
 * file's blocks, and a write of its block 0 pinned to TIER while it waits
 * for RAM; tries again where the wait was missed. */
static struct inode *scene(struct fix *f, bool from_ram, int tier)
{
	for (int attempt = 0; attempt < 5; attempt++) {
		char name[16];
		snprintf(name, sizeof(name), "f%d", attempt);
		struct inode *in = new_file(f->fs, name);
		if (from_ram)
			assert_int_equal(cache_pin(f->fs, in, f->fs->ram), 0);
		fill_ram(f, attempt);
		if (pin_during_write(f, in, tier))
			return in;
		print_message("the write got its block before the test saw it wait: again\n");
	}
	fail_msg("the write never waited for RAM in 5 tries");
	return NULL;
}

static void test_pin_to_ram_while_waiting(void **state)
{
	struct fix *f = *state;
	struct fs *fs = f->fs;
	struct inode *in = scene(f, false, fs->ram);
	tfs_lock(&fs->lock);
	struct blk *b = fs_blk(in, 0);
	bool cached = b && b->ce, pinned = cached && b->ce->pinned;
	uint16_t tier = b ? b->tier : TIER_NONE;
	tfs_unlock(&fs->lock);
	assert_true(cached);
	assert_true(pinned);
	/* No disk slot: the one chosen for the striped home went back. */
	assert_int_equal(tier, TIER_NONE);
}

static void test_pin_from_ram_while_waiting(void **state)
{
	struct fix *f = *state;
	struct fs *fs = f->fs;
	int nvme0 = config_tier_index(&fs->conf, "nvme0");
	assert_true(nvme0 >= 0);
	struct inode *in = scene(f, true, nvme0);
	tfs_lock(&fs->lock);
	struct blk *b = fs_blk(in, 0);
	bool pinned = b && b->ce && b->ce->pinned;
	tfs_unlock(&fs->lock);
	assert_false(pinned);
	/* And the write-back takes it to its new home. */
	assert_int_equal(cache_flush_inode(fs, in, true), 0);
	tfs_lock(&fs->lock);
	uint16_t tier = fs_blk(in, 0)->tier;
	tfs_unlock(&fs->lock);
	assert_int_equal(tier, nvme0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_pin_to_ram_while_waiting, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pin_from_ram_while_waiting, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
