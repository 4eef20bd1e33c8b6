/*
 * tests/unit/test_meta_block.c — the block maps of fs/meta against a real
 * LMDB environment: put/get/delete, walks in key order per file and across
 * files, an inode delete that drops exactly its own records, and bulk
 * block-map throughput (reported as a TAP comment).
 */
#include "meta_fixture.h"

#include <errno.h>
#include <time.h>

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
	    cmocka_unit_test_setup_teardown(test_blocks, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_inode_del, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bulk_blocks, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
