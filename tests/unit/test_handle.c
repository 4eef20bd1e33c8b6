/*
 * tests/unit/test_handle.c — file handle ids (fs/handle.c): a release while
 * a reply holds the handle defers the destroy to the reply's put; a lookup
 * after the release finds nothing; ids are unique and never 0; a second
 * release of the same id is harmless; handles in one hash bucket stay apart.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>

#include "fs/handle.h"

struct obj {
	struct fh_node node;
	int *destroyed;
};

static void obj_destroy(struct fh_node *n)
{
	struct obj *o = fh_entry(n, struct obj, node);
	(*o->destroyed)++;
	free(o);
}

static uint64_t open_obj(int *destroyed)
{
	struct obj *o = calloc(1, sizeof(*o));
	assert_non_null(o);
	o->destroyed = destroyed;
	return fh_publish(&o->node, obj_destroy);
}

static void test_release_during_reply(void **state)
{
	(void)state;
	int destroyed = 0;
	uint64_t id = open_obj(&destroyed);
	assert_int_not_equal(id, 0);
	struct fh_node *n = fh_get(id);
	assert_non_null(n);
	assert_int_equal(n->id, id);
	fh_release(id); /* RELEASE arrives while the reply still copies */
	assert_int_equal(destroyed, 0);
	assert_null(fh_get(id)); /* no new reply finds it */
	fh_put(n);
	assert_int_equal(destroyed, 1);
	fh_release(id); /* a stray second release: nothing left to free */
	assert_int_equal(destroyed, 1);
}

static void test_release_idle(void **state)
{
	(void)state;
	int destroyed = 0;
	uint64_t id = open_obj(&destroyed);
	struct fh_node *n = fh_get(id);
	fh_put(n);
	assert_int_equal(destroyed, 0);
	fh_release(id);
	assert_int_equal(destroyed, 1);
}

/* 1000 handles, more than the buckets: each found as itself, released in
 * another order than opened, each destroyed once. */
static void test_many(void **state)
{
	(void)state;
	enum { N = 1000 };
	static uint64_t ids[N];
	int destroyed = 0;
	for (int i = 0; i < N; i++) {
		ids[i] = open_obj(&destroyed);
		for (int j = 0; j < i; j++)
			if (ids[j] == ids[i])
				fail_msg("id %llu given twice", (unsigned long long)ids[i]);
	}
	for (int i = 0; i < N; i++) {
		struct fh_node *n = fh_get(ids[i]);
		assert_non_null(n);
		assert_int_equal(n->id, ids[i]);
		fh_put(n);
	}
	for (int i = N - 1; i >= 0; i -= 2)
		fh_release(ids[i]);
	assert_int_equal(destroyed, N / 2);
	for (int i = 0; i < N; i++) {
		struct fh_node *n = fh_get(ids[i]);
		if (i % 2) {
			assert_null(n);
		} else {
			assert_non_null(n); /* its neighbours' release left it alone */
			fh_put(n);
		}
	}
	for (int i = 0; i < N; i += 2)
		fh_release(ids[i]);
	assert_int_equal(destroyed, N);
	for (int i = 0; i < N; i++)
		assert_null(fh_get(ids[i]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_release_during_reply),
	    cmocka_unit_test(test_release_idle),
	    cmocka_unit_test(test_many),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
