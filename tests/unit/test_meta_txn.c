/*
 * tests/unit/test_meta_txn.c — the transactions of fs/meta against a real
 * LMDB environment: an abort leaves nothing behind, a read transaction
 * refuses writes, and readers see consistent snapshots while a writer
 * commits beside them.
 */
#include "meta_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_abort_and_readonly, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_readers, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
