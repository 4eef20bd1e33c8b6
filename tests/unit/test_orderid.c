/*
 * tests/unit/test_orderid.c — the learner's names for files (fs/orderid.c):
 * a name id depends on the directory and name only, so NAME.tmp made anew
 * each step has one id; the id leads to the newest file that has it, an
 * older one loaded again does not take it back, and a deleted file gives
 * it up only if it is the one it leads to; thousands of ids, with every
 * other one deleted, are all still found (the backward-shift delete keeps
 * the probe runs whole across growth).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"

static struct meta_inode made(uint64_t ino, uint64_t parent, const char *name)
{
	struct meta_inode a;
	memset(&a, 0, sizeof(a));
	a.ino = ino;
	fs_name_id_set(&a, parent, name);
	return a;
}

static void test_name_id(void **state)
{
	(void)state;
	struct meta_inode a = made(10, 5, "sg-00001.state.tmp"),
			  b = made(11, 5, "sg-00001.state.tmp");
	struct meta_inode c = made(12, 6, "sg-00001.state.tmp"),
			  d = made(13, 5, "sg-00002.state.tmp");
	assert_int_not_equal(fs_name_id(&a), 0);
	assert_true(fs_name_id(&a) < FS_NAME_ID);
	assert_int_equal(fs_name_id(&a), fs_name_id(&b));
	assert_int_not_equal(fs_name_id(&a), fs_name_id(&c));
	assert_int_not_equal(fs_name_id(&a), fs_name_id(&d));
	struct inode in = {.ino = 10, .attr = a};
	assert_int_equal(fs_order_id(&in), FS_NAME_ID | fs_name_id(&a));
	/* A file from before name ids: its inode number. */
	memset(&in.attr, 0, sizeof(in.attr));
	assert_int_equal(fs_order_id(&in), 10);
}

static void test_newest_wins(void **state)
{
	(void)state;
	struct fs fs;
	memset(&fs, 0, sizeof(fs));
	struct meta_inode old = made(20, 5, "x.tmp"), cur = made(30, 5, "x.tmp");
	uint64_t id = FS_NAME_ID | fs_name_id(&old);
	assert_int_equal(fs_order_id_ino(&fs, id), 0);
	assert_int_equal(fs_order_id_ino(&fs, 77), 77); /* an inode number is itself */
	assert_int_equal(fs_order_id_add(&fs, &old), 0);
	assert_int_equal(fs_order_id_ino(&fs, id), 20);
	assert_int_equal(fs_order_id_add(&fs, &cur), 0);
	assert_int_equal(fs_order_id_ino(&fs, id), 30);
	assert_int_equal(fs_order_id_add(&fs, &old), 0); /* loaded again */
	assert_int_equal(fs_order_id_ino(&fs, id), 30);
	fs_order_id_del(&fs, &old); /* the renamed-over file goes */
	assert_int_equal(fs_order_id_ino(&fs, id), 30);
	fs_order_id_del(&fs, &cur);
	assert_int_equal(fs_order_id_ino(&fs, id), 0);
	assert_int_equal(fs.eng.oid_used, 0);
	/* No name id: nothing to list. */
	struct meta_inode plain;
	memset(&plain, 0, sizeof(plain));
	plain.ino = 40;
	assert_int_equal(fs_order_id_add(&fs, &plain), 0);
	assert_int_equal(fs.eng.oid_used, 0);
	fs_order_ids_free(&fs);
}

static void test_many(void **state)
{
	(void)state;
	enum { N = 5000 };
	struct fs fs;
	memset(&fs, 0, sizeof(fs));
	static struct meta_inode a[N];
	char name[32];
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		a[i] = made(100 + (uint64_t)i, 1, name);
		assert_int_equal(fs_order_id_add(&fs, &a[i]), 0);
	}
	assert_int_equal(fs.eng.oid_used, N);
	assert_true(fs.eng.oid_used * 2 <= fs.eng.oid_mask + 1);
	for (int i = 0; i < N; i += 2)
		fs_order_id_del(&fs, &a[i]);
	assert_int_equal(fs.eng.oid_used, N / 2);
	for (int i = 0; i < N; i++)
		assert_int_equal(fs_order_id_ino(&fs, FS_NAME_ID | fs_name_id(&a[i])),
				 i % 2 ? 100 + (uint64_t)i : 0);
	fs_order_ids_free(&fs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_name_id),
	    cmocka_unit_test(test_newest_wins),
	    cmocka_unit_test(test_many),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
