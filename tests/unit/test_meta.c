/*
 * tests/unit/test_meta.c — fs/meta against a real LMDB environment: the
 * environment, the super keys and tier ids, and the namespace (inodes,
 * directory entries, xattrs, symlinks): every call, its error contract and
 * persistence across reopen. Block maps and transactions have programs of
 * their own (test_meta_block.c, test_meta_txn.c).
 */
#include "meta_fixture.h"

#include <errno.h>
#include <limits.h>
#include <sys/xattr.h>

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
	    cmocka_unit_test_setup_teardown(test_tiers, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
