/*
 * tests/unit/test_meta.c — fs/meta.c against a real LMDB environment in a
 * fresh mkdtemp directory per test: every call, its error contract,
 * persistence across reopen, snapshot isolation under a concurrent writer,
 * and bulk block-map throughput (reported as a TAP comment).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "fs/meta.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

struct fix {
	char root[64]; /* the mkdtemp dir, removed in teardown */
	char dir[128]; /* the metadata dir: a not-yet-existing subdir of root */
	struct meta *m;
};

static int setup(void **state)
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

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	struct fix *f = *state;
	meta_close(f->m);
	int rc = nftw(f->root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return rc;
}

static void reopen(struct fix *f)
{
	meta_close(f->m);
	f->m = NULL;
	assert_int_equal(meta_open(f->dir, &f->m), 0);
}

static struct meta_txn *wtxn(struct fix *f)
{
	struct meta_txn *t;
	assert_int_equal(meta_txn_begin(f->m, true, &t), 0);
	return t;
}

static struct meta_txn *rtxn(struct fix *f)
{
	struct meta_txn *t;
	assert_int_equal(meta_txn_begin(f->m, false, &t), 0);
	return t;
}

static struct meta_inode mk_inode(uint64_t ino, uint64_t size)
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

static struct meta_block mk_block(uint64_t ino, uint64_t idx)
{
	struct meta_block b;
	memset(&b, 0, sizeof(b));
	b.tier_id = (uint16_t)(1 + idx % 3);
	b.slot = ino * 1000003 + idx;
	b.flags = idx % 2 ? META_B_UNWRITTEN : 0; /* kept as stored */
	b.csum = ~(ino ^ (idx << 20));
	return b;
}

/* ---- open / super / ino ------------------------------------------------- */

static void test_open_mkdir_and_bad_dir(void **state)
{
	struct fix *f = *state;
	struct stat st;
	assert_int_equal(stat(f->dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);

	/* A regular file in the way: must fail with -errno, not crash. */
	char bad[160];
	snprintf(bad, sizeof(bad), "%s/file", f->root);
	FILE *fp = fopen(bad, "w");
	assert_non_null(fp);
	fclose(fp);
	snprintf(bad, sizeof(bad), "%s/file/meta", f->root);
	struct meta *m = (struct meta *)0x1;
	int rc = meta_open(bad, &m);
	assert_true(rc < 0);
	assert_null(m);
	assert_int_equal(meta_open("", &m), -EINVAL);
}

static void test_super_and_ino_alloc(void **state)
{
	struct fix *f = *state;
	struct meta_txn *t = wtxn(f);
	uint64_t v = 0;
	assert_int_equal(meta_super_get(t, "block_size", &v), -ENOENT);
	assert_int_equal(meta_super_put(t, "block_size", 1 << 20), 0);
	assert_int_equal(meta_super_get(t, "block_size", &v), 0);
	assert_int_equal(v, 1 << 20);
	assert_int_equal(meta_super_put(t, "", 1), -EINVAL);

	uint64_t a, b, c;
	assert_int_equal(meta_ino_alloc(t, &a), 0);
	assert_int_equal(meta_ino_alloc(t, &b), 0);
	assert_int_equal(a, 2);
	assert_int_equal(b, 3);
	assert_int_equal(meta_txn_commit(t), 0);

	reopen(f);
	t = wtxn(f);
	assert_int_equal(meta_ino_alloc(t, &c), 0);
	assert_int_equal(c, 4);
	assert_int_equal(meta_super_get(t, "block_size", &v), 0);
	assert_int_equal(v, 1 << 20);
	assert_int_equal(meta_txn_commit(t), 0);
	assert_int_equal(meta_sync(f->m), 0);
}

/* ---- inodes ------------------------------------------------------------- */

struct ino_seen {
	uint64_t inos[16];
	int n;
	int stop_at; /* return 42 from the callback at this count; 0 = never */
};

static int ino_cb(const struct meta_inode *in, void *arg)
{
	struct ino_seen *s = arg;
	if (s->n < 16)
		s->inos[s->n] = in->ino;
	s->n++;
	struct meta_inode want = mk_inode(in->ino, in->ino * 7);
	if (memcmp(in, &want, sizeof(want)) != 0)
		return -1000;
	return s->stop_at && s->n == s->stop_at ? 42 : 0;
}

static void test_inode_put_get_iter(void **state)
{
	struct fix *f = *state;
	struct meta_txn *t = wtxn(f);
	/* 256 > 1 but its little-endian bytes sort first: checks BE keys. */
	const uint64_t inos[] = {256, 1, 3, 1ull << 40, 2};
	for (size_t i = 0; i < 5; i++) {
		struct meta_inode in = mk_inode(inos[i], inos[i] * 7);
		assert_int_equal(meta_inode_put(t, &in), 0);
	}
	struct meta_inode zero = mk_inode(0, 0);
	assert_int_equal(meta_inode_put(t, &zero), -EINVAL);
	assert_int_equal(meta_txn_commit(t), 0);

	reopen(f);
	t = rtxn(f);
	struct meta_inode got, want = mk_inode(1ull << 40, (1ull << 40) * 7);
	assert_int_equal(meta_inode_get(t, 1ull << 40, &got), 0);
	assert_memory_equal(&got, &want, sizeof(got));
	assert_int_equal(meta_inode_get(t, 99, &got), -ENOENT);

	struct ino_seen s = {0};
	assert_int_equal(meta_inode_iter(t, ino_cb, &s), 0);
	assert_int_equal(s.n, 5);
	const uint64_t order[] = {1, 2, 3, 256, 1ull << 40};
	for (int i = 0; i < 5; i++)
		assert_int_equal(s.inos[i], order[i]);

	struct ino_seen s2 = {.stop_at = 2};
	assert_int_equal(meta_inode_iter(t, ino_cb, &s2), 42);
	assert_int_equal(s2.n, 2);
	meta_txn_abort(t);
}

/* ---- dirents ------------------------------------------------------------ */

struct dir_seen {
	char names[16][NAME_MAX + 1];
	uint64_t inos[16];
	int n;
	int stop_at;
};

static int dir_cb(const char *name, uint64_t ino, void *arg)
{
	struct dir_seen *s = arg;
	if (s->n < 16) {
		/* strlen must stop at the name: proves NUL termination. */
		assert_true(strlen(name) <= NAME_MAX);
		strcpy(s->names[s->n], name);
		s->inos[s->n] = ino;
	}
	s->n++;
	return s->stop_at && s->n == s->stop_at ? 7 : 0;
}

static void test_dirents(void **state)
{
	struct fix *f = *state;
	struct meta_txn *t = wtxn(f);
	assert_int_equal(meta_dir_is_empty(t, 1), 1);
	/* Neighbouring parents on both sides must not leak into parent 256. */
	assert_int_equal(meta_dirent_put(t, 255, "zz", 900), 0);
	assert_int_equal(meta_dirent_put(t, 257, "aa", 901), 0);
	assert_int_equal(meta_dir_is_empty(t, 256), 1);
	const char *names[] = {"rank1", "a", "exp_avg-0_9.tensor.swp", "B", "rank0", "ab"};
	for (uint64_t i = 0; i < 6; i++)
		assert_int_equal(meta_dirent_put(t, 256, names[i], 10 + i), 0);
	assert_int_equal(meta_dir_is_empty(t, 256), 0);
	assert_int_equal(meta_txn_commit(t), 0);

	reopen(f);
	t = rtxn(f);
	uint64_t ino;
	assert_int_equal(meta_dirent_get(t, 256, "rank0", &ino), 0);
	assert_int_equal(ino, 14);
	assert_int_equal(meta_dirent_get(t, 256, "rank2", &ino), -ENOENT);
	assert_int_equal(meta_dirent_get(t, 255, "rank0", &ino), -ENOENT);

	struct dir_seen s = {0};
	assert_int_equal(meta_dir_iter(t, 256, dir_cb, &s), 0);
	assert_int_equal(s.n, 6);
	const char *order[] = {"B", "a", "ab", "exp_avg-0_9.tensor.swp", "rank0", "rank1"};
	const uint64_t oino[] = {13, 11, 15, 12, 14, 10};
	for (int i = 0; i < 6; i++) {
		assert_string_equal(s.names[i], order[i]);
		assert_int_equal(s.inos[i], oino[i]);
	}
	struct dir_seen s2 = {.stop_at = 3};
	assert_int_equal(meta_dir_iter(t, 256, dir_cb, &s2), 7);
	assert_int_equal(s2.n, 3);
	struct dir_seen s3 = {0};
	assert_int_equal(meta_dir_iter(t, 258, dir_cb, &s3), 0);
	assert_int_equal(s3.n, 0);
	meta_txn_abort(t);

	t = wtxn(f);
	for (int i = 0; i < 6; i++)
		assert_int_equal(meta_dirent_del(t, 256, names[i]), 0);
	assert_int_equal(meta_dirent_del(t, 256, "a"), -ENOENT);
	assert_int_equal(meta_dir_is_empty(t, 256), 1);
	assert_int_equal(meta_dir_is_empty(t, 255), 0);
	assert_int_equal(meta_txn_commit(t), 0);
}

static void test_name_limits(void **state)
{
	struct fix *f = *state;
	char n255[256], n256[257];
	memset(n255, 'x', 255);
	n255[255] = '\0';
	memset(n256, 'y', 256);
	n256[256] = '\0';
	struct meta_txn *t = wtxn(f);
	uint64_t ino;
	assert_int_equal(meta_dirent_put(t, 1, n255, 5), 0);
	assert_int_equal(meta_dirent_get(t, 1, n255, &ino), 0);
	assert_int_equal(ino, 5);
	assert_int_equal(meta_dirent_put(t, 1, n256, 5), -ENAMETOOLONG);
	assert_int_equal(meta_dirent_get(t, 1, n256, &ino), -ENAMETOOLONG);
	assert_int_equal(meta_dirent_del(t, 1, n256), -ENAMETOOLONG);
	assert_int_equal(meta_dirent_put(t, 1, "", 5), -EINVAL);
	assert_int_equal(meta_dirent_put(t, 1, NULL, 5), -EINVAL);
	assert_int_equal(meta_xattr_set(t, 1, n256, "v", 1, 0), -ENAMETOOLONG);
	assert_int_equal(meta_xattr_set(t, 1, "", "v", 1, 0), -EINVAL);
	uint16_t id;
	assert_int_equal(meta_tier_id(t, n256, true, &id), -ENAMETOOLONG);
	assert_int_equal(meta_tier_id(t, "", true, &id), -EINVAL);

	struct dir_seen s = {0};
	assert_int_equal(meta_dir_iter(t, 1, dir_cb, &s), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.names[0], n255);
	assert_int_equal(meta_txn_commit(t), 0);
}

/* ---- xattrs ------------------------------------------------------------- */

static void test_xattrs(void **state)
{
	struct fix *f = *state;
	struct meta_txn *t = wtxn(f);
	char buf[128];
	assert_int_equal(meta_xattr_get(t, 5, "user.a", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(meta_xattr_set(t, 5, "user.b", "hello", 5, 0), 0);
	assert_int_equal(meta_xattr_set(t, 5, "user.a", "x", 1, XATTR_CREATE), 0);
	assert_int_equal(meta_xattr_set(t, 5, "user.a", "y", 1, XATTR_CREATE), -EEXIST);
	assert_int_equal(meta_xattr_set(t, 5, "user.c", "z", 1, XATTR_REPLACE), -ENODATA);
	assert_int_equal(meta_xattr_set(t, 5, "user.b", "world!", 6, XATTR_REPLACE), 0);
	assert_int_equal(meta_xattr_set(t, 5, "user.e", "", 0, 0), 0); /* empty value */
	assert_int_equal(meta_xattr_set(t, 6, "user.other", "o", 1, 0), 0);
	assert_int_equal(meta_xattr_set(t, 4, "user.other", "o", 1, 0), 0);
	assert_int_equal(meta_txn_commit(t), 0);

	reopen(f);
	t = rtxn(f);
	assert_int_equal(meta_xattr_get(t, 5, "user.b", NULL, 0), 6);
	assert_int_equal(meta_xattr_get(t, 5, "user.b", buf, 5), -ERANGE);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(meta_xattr_get(t, 5, "user.b", buf, 6), 6);
	assert_memory_equal(buf, "world!", 6);
	assert_int_equal(meta_xattr_get(t, 5, "user.a", buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], 'x');
	assert_int_equal(meta_xattr_get(t, 5, "user.e", buf, sizeof(buf)), 0);
	assert_int_equal(meta_xattr_get(t, 5, "user.c", buf, sizeof(buf)), -ENODATA);

	const char want[] = "user.a\0user.b\0user.e"; /* + final NUL = 21 */
	assert_int_equal(meta_xattr_list(t, 5, NULL, 0), 21);
	assert_int_equal(meta_xattr_list(t, 5, buf, 20), -ERANGE);
	memset(buf, 0x55, sizeof(buf));
	assert_int_equal(meta_xattr_list(t, 5, buf, sizeof(buf)), 21);
	assert_memory_equal(buf, want, 21);
	assert_int_equal(meta_xattr_list(t, 7, buf, sizeof(buf)), 0);
	meta_txn_abort(t);

	t = wtxn(f);
	assert_int_equal(meta_xattr_del(t, 5, "user.a"), 0);
	assert_int_equal(meta_xattr_del(t, 5, "user.a"), -ENODATA);
	assert_int_equal(meta_xattr_list(t, 5, buf, sizeof(buf)), 14);
	assert_memory_equal(buf, "user.b\0user.e", 14);
	assert_int_equal(meta_txn_commit(t), 0);
}

static void test_xattr_size_limit(void **state)
{
	struct fix *f = *state;
	size_t max = 64 * 1024;
	unsigned char *big = malloc(max + 1), *back = malloc(max);
	assert_non_null(big);
	assert_non_null(back);
	for (size_t i = 0; i <= max; i++)
		big[i] = (unsigned char)(i * 31 + 7);
	struct meta_txn *t = wtxn(f);
	assert_int_equal(meta_xattr_set(t, 9, "user.big", big, max + 1, 0), -E2BIG);
	assert_int_equal(meta_xattr_set(t, 9, "user.big", big, max, 0), 0);
	assert_int_equal(meta_xattr_get(t, 9, "user.big", NULL, 0), (int)max);
	assert_int_equal(meta_xattr_get(t, 9, "user.big", back, max), (int)max);
	assert_memory_equal(back, big, max);
	assert_int_equal(meta_xattr_set(t, 9, "user.x", "v", 1, XATTR_CREATE | XATTR_REPLACE),
			 -EINVAL);
	assert_int_equal(meta_txn_commit(t), 0);
	free(big);
	free(back);
}

/* ---- symlinks ----------------------------------------------------------- */

static void test_links(void **state)
{
	struct fix *f = *state;
	struct meta_txn *t = wtxn(f);
	char buf[64];
	assert_int_equal(meta_link_get(t, 3, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(meta_link_put(t, 3, "../target/file"), 0);
	assert_int_equal(meta_link_put(t, 4, ""), -EINVAL);
	assert_int_equal(meta_txn_commit(t), 0);
	reopen(f);
	t = rtxn(f);
	assert_int_equal(meta_link_get(t, 3, buf, 14), -ENAMETOOLONG); /* no room for NUL */
	memset(buf, 'Q', sizeof(buf));
	assert_int_equal(meta_link_get(t, 3, buf, 15), 0);
	assert_string_equal(buf, "../target/file");
	meta_txn_abort(t);
}

/* ---- blocks ------------------------------------------------------------- */

struct blk_seen {
	uint64_t ino[32], idx[32];
	int n;
	int stop_at;
	int bad; /* records whose contents did not match mk_block */
};

static int blk_all_cb(uint64_t ino, uint64_t idx, const struct meta_block *b, void *arg)
{
	struct blk_seen *s = arg;
	struct meta_block want = mk_block(ino, idx);
	if (memcmp(b, &want, sizeof(want)) != 0)
		s->bad++;
	if (s->n < 32) {
		s->ino[s->n] = ino;
		s->idx[s->n] = idx;
	}
	s->n++;
	return s->stop_at && s->n == s->stop_at ? 99 : 0;
}

struct blk_one {
	uint64_t ino;
	struct blk_seen s;
};

static int blk_one_cb(uint64_t idx, const struct meta_block *b, void *arg)
{
	struct blk_one *o = arg;
	return blk_all_cb(o->ino, idx, b, &o->s);
}

static void test_blocks(void **state)
{
	struct fix *f = *state;
	struct meta_txn *t = wtxn(f);
	const uint64_t idxs[] = {0, 1, 2, 255, 256, 1ull << 40};
	for (uint64_t ino = 1; ino <= 3; ino++)
		for (size_t i = 0; i < 6; i++) {
			struct meta_block b = mk_block(ino, idxs[i]);
			assert_int_equal(meta_block_put(t, ino, idxs[i], &b), 0);
		}
	struct meta_block b = mk_block(300, 5);
	assert_int_equal(meta_block_put(t, 300, 5, &b), 0);
	assert_int_equal(meta_txn_commit(t), 0);

	reopen(f);
	t = rtxn(f);
	struct meta_block got, want = mk_block(2, 256);
	assert_int_equal(meta_block_get(t, 2, 256, &got), 0);
	assert_memory_equal(&got, &want, sizeof(got));
	assert_int_equal(meta_block_get(t, 2, 3, &got), -ENOENT);
	assert_int_equal(meta_block_get(t, 4, 0, &got), -ENOENT);

	/* From index 2: 2, 255, 256, 2^40 of inode 2 only. */
	struct blk_one o = {.ino = 2};
	assert_int_equal(meta_block_iter(t, 2, 2, blk_one_cb, &o), 0);
	assert_int_equal(o.s.n, 4);
	assert_int_equal(o.s.bad, 0);
	assert_int_equal(o.s.idx[0], 2);
	assert_int_equal(o.s.idx[1], 255);
	assert_int_equal(o.s.idx[2], 256);
	assert_int_equal(o.s.idx[3], 1ull << 40);
	/* From a missing index: starts at the next present one. */
	struct blk_one o2 = {.ino = 2};
	assert_int_equal(meta_block_iter(t, 2, 3, blk_one_cb, &o2), 0);
	assert_int_equal(o2.s.n, 3);
	assert_int_equal(o2.s.idx[0], 255);
	/* Past the end, and an inode without blocks. */
	struct blk_one o3 = {.ino = 3};
	assert_int_equal(meta_block_iter(t, 3, (1ull << 40) + 1, blk_one_cb, &o3), 0);
	assert_int_equal(o3.s.n, 0);
	struct blk_one o4 = {.ino = 4};
	assert_int_equal(meta_block_iter(t, 4, 0, blk_one_cb, &o4), 0);
	assert_int_equal(o4.s.n, 0);
	struct blk_one o5 = {.ino = 1, .s.stop_at = 2};
	assert_int_equal(meta_block_iter(t, 1, 0, blk_one_cb, &o5), 99);
	assert_int_equal(o5.s.n, 2);

	struct blk_seen all = {0};
	assert_int_equal(meta_block_iter_all(t, blk_all_cb, &all), 0);
	assert_int_equal(all.n, 19);
	assert_int_equal(all.bad, 0);
	for (int i = 0; i < 18; i++) {
		assert_int_equal(all.ino[i], 1 + i / 6);
		assert_int_equal(all.idx[i], idxs[i % 6]);
	}
	assert_int_equal(all.ino[18], 300);
	assert_int_equal(all.idx[18], 5);
	meta_txn_abort(t);

	t = wtxn(f);
	assert_int_equal(meta_block_del(t, 2, 255), 0);
	assert_int_equal(meta_block_del(t, 2, 255), -ENOENT);
	assert_int_equal(meta_block_get(t, 2, 255, &got), -ENOENT);
	assert_int_equal(meta_txn_commit(t), 0);
}

/* ---- inode_del ---------------------------------------------------------- */

static int count_blocks(struct meta_txn *t, uint64_t ino)
{
	struct blk_one o = {.ino = ino};
	assert_int_equal(meta_block_iter(t, ino, 0, blk_one_cb, &o), 0);
	assert_int_equal(o.s.bad, 0);
	return o.s.n;
}

static void test_inode_del(void **state)
{
	struct fix *f = *state;
	struct meta_txn *t = wtxn(f);
	/* Victim 5 between neighbours 4 and 6 that share xattr names. */
	for (uint64_t ino = 4; ino <= 6; ino++) {
		struct meta_inode in = mk_inode(ino, ino * 7);
		assert_int_equal(meta_inode_put(t, &in), 0);
		assert_int_equal(meta_xattr_set(t, ino, "user.a", "1", 1, 0), 0);
		assert_int_equal(meta_xattr_set(t, ino, "user.b", "2", 1, 0), 0);
		assert_int_equal(meta_link_put(t, ino, "tgt"), 0);
		/* 2500 blocks: the range delete crosses many B-tree pages. */
		for (uint64_t i = 0; i < 2500; i++) {
			struct meta_block b = mk_block(ino, i);
			assert_int_equal(meta_block_put(t, ino, i, &b), 0);
		}
	}
	assert_int_equal(meta_txn_commit(t), 0);

	t = wtxn(f);
	assert_int_equal(meta_inode_del(t, 5), 0);
	assert_int_equal(meta_txn_commit(t), 0);

	reopen(f);
	t = rtxn(f);
	struct meta_inode in;
	char buf[64];
	assert_int_equal(meta_inode_get(t, 5, &in), -ENOENT);
	assert_int_equal(meta_xattr_list(t, 5, buf, sizeof(buf)), 0);
	assert_int_equal(meta_link_get(t, 5, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(count_blocks(t, 5), 0);
	for (uint64_t ino = 4; ino <= 6; ino += 2) {
		assert_int_equal(meta_inode_get(t, ino, &in), 0);
		assert_int_equal(in.size, ino * 7);
		assert_int_equal(meta_xattr_list(t, ino, buf, sizeof(buf)), 14);
		assert_int_equal(meta_link_get(t, ino, buf, sizeof(buf)), 0);
		assert_string_equal(buf, "tgt");
		assert_int_equal(count_blocks(t, ino), 2500);
	}
	meta_txn_abort(t);

	t = wtxn(f);
	assert_int_equal(meta_inode_del(t, 5), -ENOENT);
	assert_int_equal(meta_txn_commit(t), 0);
}

/* ---- tiers -------------------------------------------------------------- */

struct tier_seen {
	char names[8][32];
	uint16_t ids[8];
	int n;
};

static int tier_cb(const char *name, uint16_t id, void *arg)
{
	struct tier_seen *s = arg;
	if (s->n < 8) {
		snprintf(s->names[s->n], sizeof(s->names[0]), "%s", name);
		s->ids[s->n] = id;
	}
	s->n++;
	return 0;
}

static void test_tiers(void **state)
{
	struct fix *f = *state;
	struct meta_txn *t = wtxn(f);
	uint16_t id = 0;
	assert_int_equal(meta_tier_id(t, "nvme0", false, &id), -ENOENT);
	assert_int_equal(meta_tier_id(t, "ram", true, &id), 0);
	assert_int_equal(id, 1);
	assert_int_equal(meta_tier_id(t, "nvme0", true, &id), 0);
	assert_int_equal(id, 2);
	assert_int_equal(meta_tier_id(t, "ram", true, &id), 0); /* existing: same id */
	assert_int_equal(id, 1);
	assert_int_equal(meta_txn_commit(t), 0);

	reopen(f);
	t = wtxn(f);
	/* Config order changed: ids stay, a new tier gets the next one. */
	assert_int_equal(meta_tier_id(t, "lustre", true, &id), 0);
	assert_int_equal(id, 3);
	assert_int_equal(meta_tier_id(t, "nvme0", false, &id), 0);
	assert_int_equal(id, 2);
	assert_int_equal(meta_tier_id(t, "ram", false, &id), 0);
	assert_int_equal(id, 1);
	struct tier_seen s = {0};
	assert_int_equal(meta_tier_iter(t, tier_cb, &s), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.names[0], "lustre");
	assert_int_equal(s.ids[0], 3);
	assert_string_equal(s.names[1], "nvme0");
	assert_int_equal(s.ids[1], 2);
	assert_string_equal(s.names[2], "ram");
	assert_int_equal(s.ids[2], 1);
	assert_int_equal(meta_txn_commit(t), 0);
}

/* ---- transactions ------------------------------------------------------- */

static void test_abort_and_readonly(void **state)
{
	struct fix *f = *state;
	struct meta_txn *t = wtxn(f);
	assert_int_equal(meta_dirent_put(t, 1, "keep", 2), 0);
	assert_int_equal(meta_txn_commit(t), 0);

	t = wtxn(f);
	struct meta_inode in = mk_inode(2, 14);
	assert_int_equal(meta_inode_put(t, &in), 0);
	assert_int_equal(meta_dirent_put(t, 1, "gone", 3), 0);
	assert_int_equal(meta_dirent_del(t, 1, "keep"), 0);
	uint64_t ino;
	assert_int_equal(meta_ino_alloc(t, &ino), 0);
	meta_txn_abort(t);

	t = rtxn(f);
	assert_int_equal(meta_inode_get(t, 2, &in), -ENOENT);
	assert_int_equal(meta_dirent_get(t, 1, "gone", &ino), -ENOENT);
	assert_int_equal(meta_dirent_get(t, 1, "keep", &ino), 0);
	assert_int_equal(ino, 2);
	/* A read txn refuses writes with an errno, not a crash. */
	int rc = meta_dirent_put(t, 1, "x", 4);
	assert_true(rc < 0);
	assert_int_equal(meta_txn_commit(t), 0); /* commit of a read txn just ends it */

	t = wtxn(f);
	assert_int_equal(meta_ino_alloc(t, &ino), 0);
	assert_int_equal(ino, 2); /* the aborted allocation did not count */
	meta_txn_abort(t);
}

/* ---- concurrency -------------------------------------------------------- */

#define CONC_COMMITS 300
#define CONC_READERS 3

struct conc {
	struct meta *m;
	atomic_bool done;
	atomic_int errors;
	atomic_long reads;
};

static void *writer_main(void *arg)
{
	struct conc *c = arg;
	for (uint64_t i = 1; i <= CONC_COMMITS; i++) {
		struct meta_txn *t;
		if (meta_txn_begin(c->m, true, &t) != 0) {
			c->errors++;
			break;
		}
		/* Each commit: counter = i, block (7, i-1) and dirent "f<i-1>". */
		struct meta_block b = mk_block(7, i - 1);
		char name[32];
		snprintf(name, sizeof(name), "f%llu", (unsigned long long)(i - 1));
		if (meta_block_put(t, 7, i - 1, &b) || meta_dirent_put(t, 1, name, i) ||
		    meta_super_put(t, "counter", i)) {
			c->errors++;
			meta_txn_abort(t);
			break;
		}
		if (meta_txn_commit(t) != 0) {
			c->errors++;
			break;
		}
	}
	c->done = true;
	return NULL;
}

static int count_cb(uint64_t idx, const struct meta_block *b, void *arg)
{
	(void)idx;
	(void)b;
	(*(uint64_t *)arg)++;
	return 0;
}

static void *reader_main(void *arg)
{
	struct conc *c = arg;
	uint64_t last = 0;
	while (!c->done) {
		struct meta_txn *t;
		if (meta_txn_begin(c->m, false, &t) != 0) {
			c->errors++;
			return NULL;
		}
		uint64_t ctr = 0, nblk = 0, ino = 0;
		int rc = meta_super_get(t, "counter", &ctr);
		if (rc == -ENOENT)
			ctr = 0;
		else if (rc)
			c->errors++;
		/* Snapshot isolation: the snapshot holds exactly CTR blocks. */
		if (meta_block_iter(t, 7, 0, count_cb, &nblk) != 0 || nblk != ctr)
			c->errors++;
		if (ctr > 0) {
			char name[32];
			snprintf(name, sizeof(name), "f%llu", (unsigned long long)(ctr - 1));
			if (meta_dirent_get(t, 1, name, &ino) != 0 || ino != ctr)
				c->errors++;
		}
		if (ctr < last) /* commits never go backwards */
			c->errors++;
		last = ctr;
		meta_txn_abort(t);
		c->reads++;
	}
	return NULL;
}

static void test_concurrent_readers(void **state)
{
	struct fix *f = *state;
	struct conc c = {.m = f->m};
	atomic_init(&c.done, false);
	atomic_init(&c.errors, 0);
	atomic_init(&c.reads, 0);
	pthread_t w, r[CONC_READERS];
	for (int i = 0; i < CONC_READERS; i++)
		assert_int_equal(pthread_create(&r[i], NULL, reader_main, &c), 0);
	assert_int_equal(pthread_create(&w, NULL, writer_main, &c), 0);
	assert_int_equal(pthread_join(w, NULL), 0);
	for (int i = 0; i < CONC_READERS; i++)
		assert_int_equal(pthread_join(r[i], NULL), 0);
	assert_int_equal(atomic_load(&c.errors), 0);
	assert_true(atomic_load(&c.reads) > 0);
	printf("# concurrency: %d commits, %ld read txns, 0 errors\n", CONC_COMMITS,
	       atomic_load(&c.reads));

	struct meta_txn *t = rtxn(f);
	uint64_t ctr = 0, n = 0;
	assert_int_equal(meta_super_get(t, "counter", &ctr), 0);
	assert_int_equal(ctr, CONC_COMMITS);
	assert_int_equal(meta_block_iter(t, 7, 0, count_cb, &n), 0);
	assert_int_equal(n, CONC_COMMITS);
	meta_txn_abort(t);
}

/* ---- bulk --------------------------------------------------------------- */

#define BULK_N	   100000
#define BULK_BATCH 1000

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct bulk_seen {
	uint64_t count;
	uint64_t last_ino, last_idx;
	int bad;
};

static int bulk_all_cb(uint64_t ino, uint64_t idx, const struct meta_block *b, void *arg)
{
	struct bulk_seen *s = arg;
	struct meta_block want = mk_block(ino, idx);
	if (memcmp(b, &want, sizeof(want)) != 0 || ino < 10 || ino > 13 || idx >= BULK_N / 4)
		s->bad++;
	/* Strictly increasing (ino, idx): the key order is the promised one. */
	if (s->count > 0 && (ino < s->last_ino || (ino == s->last_ino && idx <= s->last_idx)))
		s->bad++;
	s->last_ino = ino;
	s->last_idx = idx;
	s->count++;
	return 0;
}

static void test_bulk_blocks(void **state)
{
	struct fix *f = *state;
	double t0 = now_s();
	/* 4 files (inodes 10..13) of 25000 blocks, written interleaved the way
	 * striping writers would: record k = (ino 10 + k%4, idx k/4). */
	for (uint64_t k = 0; k < BULK_N; k += BULK_BATCH) {
		struct meta_txn *t = wtxn(f);
		for (uint64_t j = k; j < k + BULK_BATCH; j++) {
			uint64_t ino = 10 + j % 4, idx = j / 4;
			struct meta_block b = mk_block(ino, idx);
			assert_int_equal(meta_block_put(t, ino, idx, &b), 0);
		}
		assert_int_equal(meta_txn_commit(t), 0);
	}
	double t1 = now_s();
	struct meta_txn *t = rtxn(f);
	struct bulk_seen s = {0};
	assert_int_equal(meta_block_iter_all(t, bulk_all_cb, &s), 0);
	double t2 = now_s();
	assert_int_equal(s.bad, 0);
	assert_int_equal(s.count, BULK_N);
	uint64_t n11 = 0;
	assert_int_equal(meta_block_iter(t, 11, 0, count_cb, &n11), 0);
	assert_int_equal(n11, BULK_N / 4);
	meta_txn_abort(t);
	double t3 = now_s();
	assert_int_equal(meta_sync(f->m), 0);
	double t4 = now_s();
	printf("# bulk: %d block records in txns of %d: put %.0f rec/s (%.3f s), "
	       "iter_all %.0f rec/s (%.3f s), sync %.3f s\n",
	       BULK_N, BULK_BATCH, BULK_N / (t1 - t0), t1 - t0, BULK_N / (t2 - t1), t2 - t1,
	       t4 - t3);
	fflush(stdout);

	/* Deleting one file's map drops exactly its 25000 records. */
	t = wtxn(f);
	double t5 = now_s();
	assert_int_equal(meta_inode_del(t, 12), -ENOENT); /* no inode record, map gone */
	assert_int_equal(meta_txn_commit(t), 0);
	double t6 = now_s();
	t = rtxn(f);
	struct bulk_seen s2 = {0};
	assert_int_equal(meta_block_iter_all(t, bulk_all_cb, &s2), 0);
	assert_int_equal(s2.count, BULK_N - BULK_N / 4);
	meta_txn_abort(t);
	printf("# bulk: inode_del of %d block records: %.3f s\n", BULK_N / 4, t6 - t5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_open_mkdir_and_bad_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_super_and_ino_alloc, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_inode_put_get_iter, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dirents, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_name_limits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_xattrs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_xattr_size_limit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_links, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_blocks, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_inode_del, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tiers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_abort_and_readonly, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_readers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bulk_blocks, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
