/*
 * tests/unit/meta_fixture.h — what the fs/meta unit tests share: a fresh
 * metadata environment per test in a mkdtemp directory (removed in
 * teardown), reopening it to prove persistence, transaction shorthands,
 * and the records the tests write and check back.
 */
#ifndef TIERFS_TEST_META_FIXTURE_H
#define TIERFS_TEST_META_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "fs/meta.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct fix {
	char root[64]; /* the mkdtemp dir, removed in teardown */
	char dir[128]; /* the metadata dir: a not-yet-existing subdir of root */
	struct meta *m;
};

static inline int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	strcpy(f->root, "/tmp/tierfs-test-meta.XXXXXX");
	if (!mkdtemp(f->root)) {
		free(f);
		return -1;
	}
	/* Two missing levels: meta_open must behave like mkdir -p. */
	snprintf(f->dir, sizeof(f->dir), "%s/a/meta", f->root);
	if (meta_open(f->dir, &f->m) != 0) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static inline int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static inline int teardown(void **state)
{
	struct fix *f = *state;
	meta_close(f->m);
	int rc = nftw(f->root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return rc;
}

static inline void reopen(struct fix *f)
{
	meta_close(f->m);
	f->m = NULL;
	assert_int_equal(meta_open(f->dir, &f->m), 0);
}

static inline struct meta_txn *wtxn(struct fix *f)
{
	struct meta_txn *t;
	assert_int_equal(meta_txn_begin(f->m, true, &t), 0);
	return t;
}

static inline struct meta_txn *rtxn(struct fix *f)
{
	struct meta_txn *t;
	assert_int_equal(meta_txn_begin(f->m, false, &t), 0);
	return t;
}

static inline struct meta_inode mk_inode(uint64_t ino, uint64_t size)
{
	struct meta_inode in;
	memset(&in, 0, sizeof(in));
	in.ino = ino;
	in.parent = META_ROOT_INO;
	in.size = size;
	in.mode = 0100600;
	in.nlink = 1;
	in.pin_tier = -1;
	in.mtime_sec = (int64_t)ino * 10;
	in.mtime_nsec = 123;
	return in;
}

static inline struct meta_block mk_block(uint64_t ino, uint64_t idx)
{
	struct meta_block b;
	memset(&b, 0, sizeof(b));
	b.tier_id = (uint16_t)(1 + idx % 3);
	b.slot = ino * 1000003 + idx;
	b.flags = idx % 2 ? META_B_UNWRITTEN : 0; /* kept as stored */
	b.csum = ~(ino ^ (idx << 20));
	/* Some records with a stored length (the long form), the others in
	 * the short form every daemon before the codec wrote. */
	b.stored = idx % 3 == 2 ? (uint32_t)(1 + ino % 7) : 0;
	return b;
}

/* A meta_block_iter callback that counts the records into *(uint64_t *)ARG. */
static inline int count_cb(uint64_t idx, const struct meta_block *b, void *arg)
{
	(void)idx;
	(void)b;
	(*(uint64_t *)arg)++;
	return 0;
}

#endif
