/*
 * tests/unit/test_engine.c — the engine's life cycle against the threads
 * that read it.
 *
 * At unmount engine_stop frees the learner while the flusher still runs
 * and reads it under fs->lock (engine_now, engine_stale_before,
 * engine_cycle_len); freeing it without the lock was a use-after-free,
 * which the ASan build of this test reports. The engine asks the cache
 * through hooks, which the test gives; the one inode lookup it makes is
 * stubbed: only the learner and its lock are under test.
 *
 * engine_in_gap: an idle stretch is worked as the gap between steps only
 * where the order stands in the cycle's long run of RAM-only accesses (the
 * backward pass), not in a short one (the update's gradient reads) nor
 * among disk accesses.
 *
 * learn_max_cycle = auto: the learner grows as the files' blocks do, keeps
 * its clock (the cache's stamps stay comparable) and what it learned (fed
 * the old recording); a fixed size does not grow.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fs/fs.h"
#include "policy/order.h"

/* What the cache would answer: a fixed budget, and nothing to redo. */
static uint64_t hook_budget(struct fs *fs)
{
	(void)fs;
	return 16;
}

static void hook_none(struct fs *fs)
{
	(void)fs;
}

static const struct engine_hooks g_hooks = {
    .plan_budget = hook_budget,
    .plans_dropped = hook_none,
    .plans_installed = hook_none,
    .learned = hook_none,
};

/* The blocks the files hold, as the cache counts them (cache_learn_blocks). */
static uint64_t g_blocks;

/* An access as the cache makes it (cache_note_access): the learner's size
 * checked from time to time against the blocks the files hold. */
static void access_block(struct fs *fs, uint64_t id, uint64_t idx, bool write)
{
	if (engine_fit_due(fs, idx))
		engine_fit(fs, g_blocks);
	engine_access(fs, id, idx, write);
}

/* Inode 2 is homed in RAM (a rule's gradients); every other inode is not
 * in the table, which the engine counts as on disk. */
static struct inode g_ram_inode;

struct inode *fs_inode_find(struct fs *fs, uint64_t ino)
{
	if (ino != 2)
		return NULL;
	g_ram_inode.home = fs->ram;
	return &g_ram_inode;
}

static atomic_int g_started, g_done;

/* What the flusher does with the learner, as often as it can. */
static void *flusher_like(void *arg)
{
	struct fs *fs = arg;
	uint64_t sink = 0;
	atomic_store(&g_started, 1);
	while (!atomic_load(&g_done)) {
		tfs_lock(&fs->lock);
		sink += engine_now(fs) + engine_stale_before(fs) + engine_cycle_len(fs);
		tfs_unlock(&fs->lock);
	}
	return (void *)(uintptr_t)(sink & 1);
}

static void stop_while_read(void **state)
{
	(void)state;
	static struct fs fs;
	for (int round = 0; round < 200; round++) {
		memset(&fs, 0, sizeof(fs));
		fs.conf.learn = true;
		assert_int_equal(tfs_mutex_init(&fs.lock, "fs->lock", LOCK_FS), 0);
		assert_int_equal(pthread_cond_init(&fs.cond, NULL), 0);
		assert_int_equal(engine_init(&fs, &g_hooks, g_blocks), 0);
		assert_non_null(fs.eng.order);
		/* A learned cycle, so that the reads go deep into the learner. */
		tfs_lock(&fs.lock);
		for (int step = 0; step < 20; step++)
			for (uint64_t b = 0; b < 64; b++)
				access_block(&fs, 1, b, false);
		tfs_unlock(&fs.lock);
		atomic_store(&g_started, 0);
		atomic_store(&g_done, 0);
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, flusher_like, &fs), 0);
		while (!atomic_load(&g_started))
			;
		engine_stop(&fs);
		assert_null(fs.eng.order);
		atomic_store(&g_done, 1);
		assert_int_equal(pthread_join(t, NULL), 0);
		/* Stopped, the engine still answers, with "nothing learned". */
		tfs_lock(&fs.lock);
		assert_int_equal(engine_cycle_len(&fs), 0);
		tfs_unlock(&fs.lock);
		pthread_cond_destroy(&fs.cond);
		tfs_mutex_destroy(&fs.lock);
	}
}

/* One step: 32 disk blocks, 16 RAM blocks (the backward), 32 disk blocks
 * more, 4 RAM blocks (a sub-group's gradient reads). advance_to makes the
 * step's accesses from where the last call left off, the step over and
 * over, up to and including block BLK of inode INO (-1: a whole step). */
static const struct {
	int ino;
	uint64_t from, to;
	bool write;
} g_step[] = {{1, 0, 32, false}, {2, 0, 16, true}, {1, 32, 64, false}, {2, 16, 20, false}};
static size_t g_run, g_blk; /* where the next access is: g_step[g_run], block g_blk */

static void advance_to(struct fs *fs, int ino, uint64_t blk)
{
	size_t n = 0;
	for (;;) {
		if (g_blk == g_step[g_run].to) {
			g_run = (g_run + 1) % (sizeof(g_step) / sizeof(g_step[0]));
			g_blk = g_step[g_run].from;
		}
		int i = g_step[g_run].ino;
		uint64_t b = g_blk++;
		access_block(fs, (uint64_t)i, b, g_step[g_run].write);
		n++;
		if (ino < 0 ? n == 84 : i == ino && b == blk)
			return;
	}
}

static void gap_position(void **state)
{
	(void)state;
	static struct fs fs;
	memset(&fs, 0, sizeof(fs));
	fs.conf.learn = true;
	fs.conf.keep_plan = true;
	fs.conf.gap_plan = CONF_GAP_AUTO;
	fs.ram = 0;
	assert_int_equal(tfs_mutex_init(&fs.lock, "fs->lock", LOCK_FS), 0);
	assert_int_equal(pthread_cond_init(&fs.cond, NULL), 0);
	assert_int_equal(engine_init(&fs, &g_hooks, g_blocks), 0);
	tfs_lock(&fs.lock);
	g_run = 0;
	g_blk = 0;
	for (int step = 0; step < 6; step++)
		advance_to(&fs, -1, 0);
	assert_true(fs.eng.learned);
	/* Built by the planner, off the lock. */
	engine_plan_settle(&fs);
	assert_non_null(fs.eng.tail_plan);
	assert_int_equal(fs.eng.gap_run, 16);
	/* Next: the first RAM block of the long run. */
	advance_to(&fs, 1, 31);
	assert_true(engine_in_gap(&fs));
	/* Within it, and at its last block. */
	advance_to(&fs, 2, 7);
	assert_true(engine_in_gap(&fs));
	advance_to(&fs, 2, 14);
	assert_true(engine_in_gap(&fs));
	/* Among the disk accesses. */
	advance_to(&fs, 1, 40);
	assert_false(engine_in_gap(&fs));
	/* Before the short RAM run, and in it. */
	advance_to(&fs, 1, 63);
	assert_false(engine_in_gap(&fs));
	advance_to(&fs, 2, 17);
	assert_false(engine_in_gap(&fs));
	tfs_unlock(&fs.lock);
	engine_stop(&fs);
	pthread_cond_destroy(&fs.cond);
	tfs_mutex_destroy(&fs.lock);
}

static void feed(struct fs *fs, int steps, uint64_t blocks)
{
	for (int step = 0; step < steps; step++)
		for (uint64_t b = 0; b < blocks; b++)
			access_block(fs, 1, b, false);
}

/* An engine with learn_max_cycle = auto over USED blocks; returns with
 * the lock held. */
static void learner_setup(struct fs *fs, uint64_t used)
{
	memset(fs, 0, sizeof(*fs));
	fs->conf.learn = true;
	fs->conf.ntiers = 1;
	assert_int_equal(tfs_mutex_init(&fs->lock, "fs->lock", LOCK_FS), 0);
	assert_int_equal(pthread_cond_init(&fs->cond, NULL), 0);
	g_blocks = used;
	assert_int_equal(engine_init(fs, &g_hooks, g_blocks), 0);
	tfs_lock(&fs->lock);
}

/* The learner's size once the planner thread has grown it, if it was
 * asked to (engine.c grow_run). Lock held. */
static size_t max_cycle_settled(struct fs *fs)
{
	engine_plan_settle(fs);
	return order_max_cycle(fs->eng.order);
}

static void learner_grows(void **state)
{
	(void)state;
	static struct fs fs;
	learner_setup(&fs, 100);
	assert_int_equal(max_cycle_settled(&fs), 1u << 16);
	/* A cycle of 1000 accesses, learned at the smallest size. */
	feed(&fs, 6, 1000);
	assert_true(fs.eng.learned);
	uint64_t t0 = engine_now(&fs);
	/* The data grows to 60000 blocks: about 150000 accesses a step. */
	g_blocks = 60000;
	feed(&fs, 5, 1000);
	assert_int_equal(max_cycle_settled(&fs), 1u << 18);
	assert_true(fs.eng.learned); /* fed the old recording: still learned */
	assert_int_equal(engine_cycle_len(&fs), 1000);
	assert_true(engine_now(&fs) >= t0 + 4096); /* the clock went on */
	assert_true(engine_now(&fs) <= t0 + 5000);
	feed(&fs, 6, 1000);
	assert_true(fs.eng.learned); /* learned again */
	assert_int_equal(engine_cycle_len(&fs), 1000);
	/* No growth while the data fits. */
	feed(&fs, 10, 1000);
	assert_int_equal(max_cycle_settled(&fs), 1u << 18);
	/* Twice the data: twice the learner. */
	g_blocks = 120000;
	feed(&fs, 5, 1000);
	assert_int_equal(max_cycle_settled(&fs), 1u << 19);
	tfs_unlock(&fs.lock);
	engine_stop(&fs);

	/* A fixed size stays, however large the data. */
	memset(&fs, 0, sizeof(fs));
	fs.conf.learn = true;
	fs.conf.ntiers = 1;
	fs.conf.learn_max_cycle = 4096;
	g_blocks = 60000;
	assert_int_equal(engine_init(&fs, &g_hooks, g_blocks), 0);
	tfs_lock(&fs.lock);
	feed(&fs, 10, 1000);
	assert_int_equal(max_cycle_settled(&fs), 4096);
	assert_true(fs.eng.learn_fit_done);
	assert_true(fs.eng.learned); /* a step that fits is still learned */
	tfs_unlock(&fs.lock);
	engine_stop(&fs);
	pthread_cond_destroy(&fs.cond);
	tfs_mutex_destroy(&fs.lock);
}

/* One step of N keys forwards, the next backwards: the order repeats
 * every two steps (tierfs-update's default). */
static unsigned g_alt_steps;

static void feed_alternating(struct fs *fs, int steps, uint64_t n)
{
	for (int step = 0; step < steps; step++, g_alt_steps++)
		for (uint64_t b = 0; b < n; b++)
			access_block(fs, 1, g_alt_steps % 2 ? n - 1 - b : b, false);
}

static void learner_long_cycle(void **state)
{
	(void)state;
	static struct fs fs;
	/* 30000 blocks: sized for 75000 accesses, 131072. A step of 70000,
	 * two steps 140000: more than it holds. */
	learner_setup(&fs, 30000);
	assert_int_equal(max_cycle_settled(&fs), 1u << 17);
	feed_alternating(&fs, 5, 70000); /* 350000 accesses, under 3 x 131072 */
	assert_false(fs.eng.learned);
	assert_false(fs.eng.learn_long);
	assert_int_equal(max_cycle_settled(&fs), 1u << 17);
	feed_alternating(&fs, 1, 70000);
	assert_true(fs.eng.learn_long);
	assert_int_equal(max_cycle_settled(&fs), 1u << 18);
	for (int step = 0; step < 8 && !fs.eng.learned; step++)
		feed_alternating(&fs, 1, 70000);
	assert_true(fs.eng.learned);
	/* Two steps, less the repeat that collapses at each turn. */
	assert_int_equal(engine_cycle_len(&fs), 139998);
	tfs_unlock(&fs.lock);
	engine_stop(&fs);

	pthread_cond_destroy(&fs.cond);
	tfs_mutex_destroy(&fs.lock);

	/* A step that repeats within its length never makes it long. */
	learner_setup(&fs, 30000);
	feed(&fs, 12, 70000);
	assert_true(fs.eng.learned);
	assert_false(fs.eng.learn_long);
	assert_int_equal(max_cycle_settled(&fs), 1u << 17);
	tfs_unlock(&fs.lock);
	engine_stop(&fs);
	pthread_cond_destroy(&fs.cond);
	tfs_mutex_destroy(&fs.lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(stop_while_read),
	    cmocka_unit_test(gap_position),
	    cmocka_unit_test(learner_grows),
	    cmocka_unit_test(learner_long_cycle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
