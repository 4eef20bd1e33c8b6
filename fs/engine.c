/*
 * fs/engine.c — the multi-path engine's brain on the daemon side: feeds every
 * block access to the order learner (policy/order.c), turns its predictions
 * into "when will this block be read next" for eviction and read-ahead (the
 * cache's prefetcher, fs/cache/prefetch.c, asks what comes next), and runs
 * the planner that works out which blocks stay in RAM across a step.
 *
 * Training steps repeat the same block order, so once the learner has seen
 * the cycle the cache can do what Belady's MIN does: evict the block whose
 * next read is farthest away, and read ahead exactly what comes next. Until
 * a cycle is learned (or after it breaks) the cache falls back to LRU and
 * the prefetcher sleeps.
 *
 * Keys are id << 24 | block index, the id being the file's order id
 * (fs_order_id: its inode number, or the name id of a file made here):
 * 16 Mi blocks per file (16 TiB with 1 MiB blocks) and 2^40 ids, which
 * fits any optimizer state.
 *
 * Locking: the learner and every field used here are guarded by fs->lock.
 * The planner thread (plan_main) works without it on a copy of the cycle,
 * or of the learner's recording when it grows the learner, and takes it
 * to put the plans, or the grown learner, in place.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"
#include "policy/keepplan.h"
#include "policy/order.h"

#define KEY_IDX_BITS 24

static int learner_start(struct fs *fs, uint64_t blocks);

static uint64_t key_of(uint64_t id, uint64_t idx)
{
	return id << KEY_IDX_BITS | (idx & ((1u << KEY_IDX_BITS) - 1));
}

/* Whether KEY's block goes to a disk tier: not one whose home is RAM (a
 * rule's gradients) nor one never written back (persistent = no). An inode
 * not in the table counts as on disk. */
static bool disk_key(uint64_t key, void *arg)
{
	struct fs *fs = arg;
	struct inode *in = fs_inode_find(fs, fs_order_id_ino(fs, key >> KEY_IDX_BITS));
	return !in || fs_disk_homed(fs, in);
}

/* The plans go; what the cache did by them (gap mode) ends with them. */
static void plan_drop(struct fs *fs)
{
	keepplan_free(fs->eng.plan);
	keepplan_free(fs->eng.tail_plan);
	fs->eng.plan = fs->eng.tail_plan = NULL;
	fs->eng.gap_run = 0;
	if (fs->eng.hooks) /* NULL: a mount that failed before engine_init */
		fs->eng.hooks->plans_dropped(fs);
}

/* A learned cycle as the planner works on it, off the lock: its accesses,
 * which of them overwrote their block, and which are to a disk tier's
 * block (disk_key, asked under the lock when the copy was taken). */
struct plan_input {
	size_t n;
	uint64_t *keys;
	uint8_t *writes, *ondisk;
	uint64_t budget;
	bool keep_plan, gap_plan;
};

/* What the planner made of it, to be put in place under the lock. */
struct plan_output {
	struct keepplan *plan, *tail_plan;
	size_t write_runs, gap_run;
};

static void plan_input_free(struct plan_input *in)
{
	free(in->keys);
	free(in->writes);
	free(in->ondisk);
	memset(in, 0, sizeof(*in));
}

/* Copy the cycle learned, with what the plans need to know of the cache.
 * Lock held. 0 or -ENOMEM. */
static int plan_input_take(struct fs *fs, struct plan_input *in)
{
	tfs_assert_held(&fs->lock);
	const uint64_t *keys;
	const uint8_t *writes;
	size_t n = order_cycle(fs->eng.order, &keys, &writes);
	memset(in, 0, sizeof(*in));
	if (!n)
		return 0;
	in->keys = malloc(n * sizeof(*keys));
	in->writes = malloc(n);
	in->ondisk = malloc(n);
	if (!in->keys || !in->writes || !in->ondisk) {
		plan_input_free(in);
		return -ENOMEM;
	}
	in->n = n;
	memcpy(in->keys, keys, n * sizeof(*keys));
	memcpy(in->writes, writes, n);
	/* Asked once per run of one file's accesses, not per access: this
	 * copy is all of the planning done under the lock. */
	uint64_t last = UINT64_MAX;
	bool ondisk = false;
	for (size_t i = 0; i < n; i++) {
		if (keys[i] >> KEY_IDX_BITS != last) {
			last = keys[i] >> KEY_IDX_BITS;
			ondisk = disk_key(keys[i], fs);
		}
		in->ondisk[i] = ondisk;
	}
	in->budget = fs->eng.hooks->plan_budget(fs);
	in->keep_plan = fs->conf.keep_plan;
	in->gap_plan = fs->conf.gap_plan != CONF_GAP_NO;
	return 0;
}

/* The keep plan of the cycle, over the RAM the cache may keep beside its
 * pinned blocks and the I/O in flight (cache_plan_budget), and the tail
 * plan that gap mode follows instead (fs/cache/idle.c). Without them
 * (no memory, keep_plan = no) the cache keeps by next use alone; without
 * a tail plan (no stretch of RAM-only accesses in the cycle) there is no
 * gap mode. No lock: logs only. */
static void plan_make(const struct plan_input *in, struct plan_output *out)
{
	memset(out, 0, sizeof(*out));
	size_t n = in->n;
	/* Write bursts: a write to a disk-homed block after a read of one. */
	bool was_write = true;
	for (size_t i = 0; i < n; i++) {
		if (!in->ondisk[i])
			continue;
		out->write_runs += in->writes[i] && !was_write;
		was_write = in->writes[i];
	}
	if (!n || !in->keep_plan)
		return;
	int rc = keepplan_build(in->keys, in->writes, n, in->ondisk, in->budget, &out->plan);
	if (rc) {
		TFS_LOG("keep plan: %s: blocks stay in RAM by next use alone", strerror(-rc));
		return;
	}
	struct keepplan_stats st;
	keepplan_get_stats(out->plan, &st);
	TFS_LOG("keep plan: %zu of %zu disk blocks stay in RAM across the step, spread along it "
		"(%llu of %llu disk I/Os per step saved)",
		st.kept, st.candidates, (unsigned long long)st.saved, (unsigned long long)st.ios);
	if (!in->gap_plan)
		return;
	rc = keepplan_build_tail(in->keys, in->writes, n, in->ondisk, in->budget, &out->tail_plan);
	if (rc) {
		TFS_LOG("gap_plan: %s: the idle time between steps is not used",
			rc == -ENOENT ? "no stretch of the step leaves the disks idle"
				      : strerror(-rc));
		return;
	}
	/* The longest run, around the cycle's end too. */
	size_t run = 0;
	for (size_t i = 0; i < 2 * n && out->gap_run < n; i++) {
		run = in->ondisk[i % n] ? 0 : run + 1;
		if (run > out->gap_run)
			out->gap_run = run;
	}
}

/* Put a plan in place. Lock held. */
static void plan_install(struct fs *fs, struct plan_output *out)
{
	tfs_assert_held(&fs->lock);
	plan_drop(fs);
	fs->eng.plan = out->plan;
	fs->eng.tail_plan = out->tail_plan;
	fs->eng.write_runs = out->write_runs;
	fs->eng.gap_run = out->tail_plan ? out->gap_run : 0;
	fs->eng.hooks->plans_installed(fs);
}

static void grow_run(struct fs *fs);

/* The planner: builds the plans of each cycle learned off fs->lock. With
 * the learner at its largest the two plans took long enough to stall
 * every rank, under the lock every request waits for; meanwhile the cache keeps by
 * next use alone, as it does before any cycle is learned. It also grows
 * the learner when the data outgrows it (grow_run), first: a cycle
 * learned meanwhile is planned from the grown learner. */
static void *plan_main(void *arg)
{
	struct fs *fs = arg;
	tfs_lock(&fs->lock);
	for (;;) {
		while (!fs->stopping && !fs->eng.plan_want && !fs->eng.grow_to)
			tfs_cond_wait(&fs->eng.plan_cond, &fs->lock);
		if (fs->stopping)
			break;
		if (fs->eng.grow_to) {
			grow_run(fs);
			pthread_cond_broadcast(&fs->eng.plan_cond);
			continue;
		}
		fs->eng.plan_want = false;
		uint64_t gen = fs->eng.plan_gen, t0 = tier_now_ns();
		struct plan_input in;
		if (plan_input_take(fs, &in)) {
			TFS_LOG("keep plan: %s: blocks stay in RAM by next use alone",
				strerror(ENOMEM));
			continue;
		}
		fs->eng.plan_busy = true;
		uint64_t t1 = tier_now_ns();
		tfs_unlock(&fs->lock);
		struct plan_output out;
		plan_make(&in, &out);
		size_t n = in.n;
		plan_input_free(&in);
		tfs_lock(&fs->lock);
		uint64_t t2 = tier_now_ns();
		fs->eng.plan_busy = false;
		if (gen == fs->eng.plan_gen && fs->eng.learned && !fs->stopping) {
			bool made = out.plan != NULL;
			plan_install(fs, &out);
			if (made)
				TFS_LOG("keep plan: %zu accesses planned in %.3f s, %.3f s "
					"of it under the lock (its copy) and %.3f s to put "
					"it in place",
					n, (double)(tier_now_ns() - t0) / 1e9,
					(double)(t1 - t0) / 1e9,
					(double)(tier_now_ns() - t2) / 1e9);
		} else {
			keepplan_free(out.plan);
			keepplan_free(out.tail_plan);
		}
		pthread_cond_broadcast(&fs->eng.plan_cond);
	}
	tfs_unlock(&fs->lock);
	return NULL;
}

/* A cycle was learned or lost: the plans of the one before go, and the
 * planner builds the new one's. Lock held. */
static void plan_request(struct fs *fs, bool learned)
{
	tfs_assert_held(&fs->lock);
	plan_drop(fs);
	fs->eng.write_runs = 0;
	fs->eng.plan_gen++;
	fs->eng.plan_want = learned;
	if (learned)
		pthread_cond_broadcast(&fs->eng.plan_cond);
}

void engine_plan_settle(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	while (fs->eng.planner_running &&
	       (fs->eng.grow_to || fs->eng.plan_want || fs->eng.plan_busy))
		tfs_cond_wait(&fs->eng.plan_cond, &fs->lock);
}

/* Why the position and not only the clock: a pause inside an update phase
 * (every rank waiting on the disks, or on a CPU pass) looks idle to the
 * tiers and to the requests for as long as a gap does, and working it as
 * one wrote back the blocks the tail plan keeps and filled RAM with the
 * next step's reads, so the step's last writes waited for the disk (steps
 * visibly longer, where that happened). A gap is where the
 * order stands in the backward pass, whose gradient writes stay in RAM;
 * the update's own RAM-only runs (its gradient reads, a sub-group at a
 * time) are a fraction of it. */
bool engine_in_gap(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	size_t n = engine_cycle_len(fs);
	if (!n || !fs->eng.gap_run)
		return true;
	const uint64_t *keys;
	const uint8_t *writes;
	(void)order_cycle(fs->eng.order, &keys, &writes);
	size_t cur = order_position(fs->eng.order), need = (fs->eng.gap_run + 1) / 2, run = 0;
	for (size_t j = 0; j < n && run < need && !disk_key(keys[(cur + j) % n], fs); j++)
		run++;
	for (size_t j = 1; j <= n && run < need && !disk_key(keys[(cur + n - j) % n], fs); j++)
		run++;
	return run >= need;
}

/* learn_max_cycle = auto sizes the learner by the data, so that a node
 * with more optimizer state than the default covers still learns its
 * step (a fixed size covers only so much state; beyond it the
 * cache ran as plain LRU, and said nothing). A step reads and writes every
 * block of the state once, and the backward pass writes every gradient
 * block that the update then reads: about two accesses a block, and a
 * quarter more for partial blocks and strays. The learner costs
 * ORDER_BYTES_PER_ACCESS per access it can hold, so it starts small
 * (LEARN_AUTO_MIN) and doubles as files grow, up to LEARN_AUTO_MAX.
 * The larger learner is fed the recording of the one it replaces, so a
 * cycle learned, or half seen, goes on (grow_run, on the planner thread).
 * Growing is rare: each doubles the size.
 * Some cycles span two steps: tierfs-update's default order runs the
 * sub-groups backwards every other step (MLP-Offload's alternation), well
 * over three accesses a block per cycle, which a learner sized at 2.5 a block
 * holds only where the rounding up to a power of two left room. A learner
 * that has seen three times its length without finding a cycle is sized
 * for twice the need, once (learn_long): the price is memory, only where
 * the step did not repeat within one step's length. */
#define LEARN_AUTO_MIN	(1u << 16)
#define LEARN_AUTO_MAX	(1u << 23)
#define LEARN_FIT_EVERY 4096

/* BLOCKS: the blocks the files hold, as the cache counts them
 * (cache_learn_blocks). */
static uint64_t learn_need(const struct fs *fs, uint64_t blocks)
{
	return blocks * 5 / 2 << fs->eng.learn_long;
}

/* The blocks a need was worked out from (learn_need). */
static uint64_t need_blocks(const struct fs *fs, uint64_t need)
{
	return (need >> fs->eng.learn_long) * 2 / 5;
}

static size_t learn_size(uint64_t need)
{
	size_t n = LEARN_AUTO_MIN;
	while (n < need && n < LEARN_AUTO_MAX)
		n <<= 1;
	return n;
}

/* Whether the learner can hold a step over the data, BLOCKS blocks; grows
 * it where it may (auto), says so once where it may not. Lock held. */
static void learner_fit(struct fs *fs, uint64_t blocks)
{
	tfs_assert_held(&fs->lock);
	if (fs->eng.grow_to)
		return; /* asked already, or under way */
	size_t have = order_max_cycle(fs->eng.order);
	if (!fs->conf.learn_max_cycle && !fs->eng.learn_long && !fs->eng.learned &&
	    order_now(fs->eng.order) - fs->eng.learn_since >= 3 * (uint64_t)have) {
		fs->eng.learn_long = true;
		TFS_LOG("order learner: no cycle in %llu block accesses, three times what it "
			"holds: sized from now on for a cycle of two steps",
			(unsigned long long)(order_now(fs->eng.order) - fs->eng.learn_since));
	}
	uint64_t need = learn_need(fs, blocks);
	if (need <= have)
		return;
	if (fs->conf.learn_max_cycle || have >= LEARN_AUTO_MAX) {
		TFS_LOG("order learner: the files hold %llu blocks; a step that reads and "
			"writes them all takes about %llu block accesses, more than the "
			"learner holds (%zu, %s): such a step is not learned, and the cache "
			"runs it as LRU; learn_max_cycle = %llu in [expert] would hold it "
			"(about %llu MiB)",
			(unsigned long long)need_blocks(fs, need), (unsigned long long)need, have,
			fs->conf.learn_max_cycle ? "learn_max_cycle" : "the most auto takes",
			(unsigned long long)need,
			(unsigned long long)(need * ORDER_BYTES_PER_ACCESS >> 20));
		fs->eng.learn_fit_done = true;
		return;
	}
	fs->eng.grow_to = learn_size(need);
	fs->eng.grow_blocks = need_blocks(fs, need);
	pthread_cond_broadcast(&fs->eng.plan_cond);
}

/* Hand the learner grown (grow_run) every access the old one got since
 * its recording was copied; an access it cannot keep loses the grow. Lock
 * held. */
static void grow_note(struct fs *fs, uint64_t key, bool write)
{
	if (fs->eng.grow_lost)
		return;
	if (fs->eng.grow_n == fs->eng.grow_cap) {
		size_t cap = fs->eng.grow_cap ? 2 * fs->eng.grow_cap : 4096;
		uint64_t *k = realloc(fs->eng.grow_keys, cap * sizeof(*k));
		if (k)
			fs->eng.grow_keys = k;
		uint8_t *w = k ? realloc(fs->eng.grow_writes, cap) : NULL;
		if (w)
			fs->eng.grow_writes = w;
		if (!k || !w) {
			fs->eng.grow_lost = true;
			return;
		}
		fs->eng.grow_cap = cap;
	}
	fs->eng.grow_keys[fs->eng.grow_n] = key;
	fs->eng.grow_writes[fs->eng.grow_n++] = write;
}

static void grow_pending_free(struct fs *fs)
{
	free(fs->eng.grow_keys);
	free(fs->eng.grow_writes);
	fs->eng.grow_keys = NULL;
	fs->eng.grow_writes = NULL;
	fs->eng.grow_n = fs->eng.grow_cap = 0;
	fs->eng.grow_lost = false;
}

/* The learner learned a cycle, or lost it: the plans and the cache's
 * stamps follow. Lock held. */
static void learn_sync(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	bool learned = order_learned(fs->eng.order);
	uint64_t count = order_learn_count(fs->eng.order);
	if (learned != fs->eng.learned || (learned && count != fs->eng.learn_count)) {
		bool was = fs->eng.learned;
		fs->eng.learned = learned;
		fs->eng.learn_count = count;
		if (learned) {
			TFS_LOG("%s: a cycle of %zu block accesses",
				was ? "part of the access order changed, relearned"
				    : "learned the access order",
				order_cycle_len(fs->eng.order));
			plan_request(fs, true);
			fs->eng.hooks->learned(fs);
		} else {
			TFS_LOG("the access order changed: back to LRU until it is relearned");
			plan_request(fs, false);
			fs->eng.learn_since = order_now(fs->eng.order);
		}
	}
}

/* Grow the learner to grow_to on the planner thread. Feeding the larger
 * learner the old one's recording took long enough for a large learner to
 * stall every rank, under the lock every request of every
 * rank waits for; now only the copy of the recording and the accesses
 * made meanwhile are fed under it, and the old learner goes on
 * predicting until the new one takes its place. Lock held; dropped while
 * the new learner is fed. */
static void grow_run(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	size_t size = fs->eng.grow_to, have = order_max_cycle(fs->eng.order);
	uint64_t blocks = fs->eng.grow_blocks, t0 = tier_now_ns();
	struct order_seed *seed;
	struct order *o = NULL;
	int rc = order_seed_take(fs->eng.order, size, &seed);
	if (!rc) {
		fs->eng.grow_busy = true;
		uint64_t t1 = tier_now_ns();
		tfs_unlock(&fs->lock);
		rc = order_seed_grow(seed, &o);
		order_seed_free(seed);
		tfs_lock(&fs->lock);
		fs->eng.grow_busy = false;
		if (!rc && fs->eng.grow_lost)
			rc = -ENOMEM;
		if (!rc && !fs->stopping && fs->eng.order) {
			uint64_t t2 = tier_now_ns();
			size_t late = fs->eng.grow_n;
			for (size_t i = 0; i < late; i++)
				order_access(o, fs->eng.grow_keys[i], fs->eng.grow_writes[i]);
			order_grow_finish(o, fs->eng.order);
			struct order *old = fs->eng.order;
			fs->eng.order = o;
			o = old; /* destroyed below */
			fs->eng.learn_since = order_now(fs->eng.order);
			fs->eng.learn_fit_done = size >= LEARN_AUTO_MAX;
			TFS_LOG("order learner: grown to %zu block accesses for the %llu blocks "
				"the files hold%s (about %zu MiB) in %.3f s, %.3f s of it under "
				"the lock (%zu accesses made meanwhile)",
				size, (unsigned long long)blocks,
				fs->eng.learn_long ? ", a cycle of two steps" : "",
				size * ORDER_BYTES_PER_ACCESS >> 20,
				(double)(tier_now_ns() - t0) / 1e9,
				(double)(t1 - t0 + tier_now_ns() - t2) / 1e9, late);
			learn_sync(fs);
		}
	}
	if (rc) {
		TFS_LOG("order learner: growing it to %zu block accesses for %llu blocks: %s; "
			"it stays at %zu",
			size, (unsigned long long)blocks, strerror(-rc), have);
		fs->eng.learn_fit_done = true;
	}
	fs->eng.grow_to = 0;
	grow_pending_free(fs);
	if (o) {
		tfs_unlock(&fs->lock);
		order_destroy(o);
		tfs_lock(&fs->lock);
	}
}

bool engine_fit_due(struct fs *fs, uint64_t idx)
{
	tfs_assert_held(&fs->lock);
	return fs->eng.order && !(idx >> KEY_IDX_BITS) && !fs->eng.learn_fit_done &&
	       order_now(fs->eng.order) - fs->eng.learn_fit_at >= LEARN_FIT_EVERY;
}

void engine_fit(struct fs *fs, uint64_t blocks)
{
	tfs_assert_held(&fs->lock);
	fs->eng.learn_fit_at = order_now(fs->eng.order);
	learner_fit(fs, blocks);
}

void engine_access(struct fs *fs, uint64_t id, uint64_t idx, bool write)
{
	tfs_assert_held(&fs->lock);
	if (!fs->eng.order || fs->eng.paused || idx >> KEY_IDX_BITS)
		return;
	uint64_t key = key_of(id, idx);
	order_access(fs->eng.order, key, write);
	if (fs->eng.grow_busy)
		grow_note(fs, key, write);
	learn_sync(fs);
}

uint8_t engine_plan(struct fs *fs, uint64_t id, uint64_t idx, bool gap_mode)
{
	tfs_assert_held(&fs->lock);
	if (!fs->eng.learned || idx >> KEY_IDX_BITS)
		return KEEPPLAN_NONE;
	return (uint8_t)keepplan_lookup(
	    gap_mode && fs->eng.tail_plan ? fs->eng.tail_plan : fs->eng.plan, key_of(id, idx));
}

uint64_t engine_now(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	return fs->eng.order ? order_now(fs->eng.order) : 0;
}

uint64_t engine_stale_before(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	if (!fs->eng.order)
		return 0;
	uint64_t now = order_now(fs->eng.order), tol = order_tolerance(fs->eng.order);
	return now > tol ? now - tol : 0;
}

size_t engine_cycle_len(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	return fs->eng.order && fs->eng.learned ? order_cycle_len(fs->eng.order) : 0;
}

uint64_t engine_next_read(struct fs *fs, uint64_t id, uint64_t idx, uint64_t *next_use)
{
	tfs_assert_held(&fs->lock);
	*next_use = UINT64_MAX;
	if (!fs->eng.learned || idx >> KEY_IDX_BITS)
		return UINT64_MAX;
	uint64_t key = key_of(id, idx);
	uint64_t u = order_next_use(fs->eng.order, key);
	if (u != UINT64_MAX)
		*next_use = order_now(fs->eng.order) + u;
	uint64_t d = order_next_read(fs->eng.order, key);
	/* Overwritten before it is read again (a sub-group's block between its
	 * read and its write-back): what RAM holds is dead, and dropping it
	 * costs nothing, so it is the first to go. */
	if (d == UINT64_MAX || d != u)
		return UINT64_MAX;
	return order_now(fs->eng.order) + d;
}

size_t engine_upcoming(struct fs *fs, bool reads, size_t n, uint64_t *keys, uint32_t *dist)
{
	tfs_assert_held(&fs->lock);
	return reads ? order_upcoming_reads(fs->eng.order, n, keys, dist)
		     : order_upcoming(fs->eng.order, n, keys);
}

uint64_t engine_key_next(struct fs *fs, uint64_t key, uint64_t *next_use)
{
	tfs_assert_held(&fs->lock);
	*next_use = order_next_use(fs->eng.order, key);
	return order_next_read(fs->eng.order, key);
}

void engine_key_split(uint64_t key, uint64_t *id, uint64_t *idx)
{
	*id = key >> KEY_IDX_BITS;
	*idx = key & ((1u << KEY_IDX_BITS) - 1);
}

int engine_init(struct fs *fs, const struct engine_hooks *hooks, uint64_t blocks)
{
	fs->eng.hooks = hooks;
	if (!fs->conf.learn)
		return 0;
	return learner_start(fs, blocks);
}

int engine_set_learn(struct fs *fs, bool on, uint64_t blocks)
{
	tfs_lock(&fs->lock);
	fs->eng.paused = !on;
	if (!on && fs->eng.learned) {
		/* As when the order is lost: the cache goes back to LRU. */
		fs->eng.learned = false;
		plan_request(fs, false);
	}
	bool start = on && !fs->eng.order;
	tfs_unlock(&fs->lock);
	return start ? learner_start(fs, blocks) : 0;
}

/* Make the learner and start the planner: at mount, or once a reload
 * turns learning on. No lock held. */
static int learner_start(struct fs *fs, uint64_t blocks)
{
	/* auto: as large as the data already there needs (a remount of a
	 * large state does not grow it step by step) */
	struct order_params op = {.max_cycle = fs->conf.learn_max_cycle
						   ? fs->conf.learn_max_cycle
						   : learn_size(learn_need(fs, blocks))};
	struct order *o;
	int rc = order_create(&op, &o);
	if (rc) {
		TFS_LOG("order learner of %zu block accesses: %s", op.max_cycle, strerror(-rc));
		return rc;
	}
	pthread_cond_init(&fs->eng.plan_cond, NULL);
	/* Under the lock: the flusher already runs, and reads the learner. */
	tfs_lock(&fs->lock);
	fs->eng.order = o;
	learner_fit(fs, blocks); /* a fixed size already short says so at mount */
	tfs_unlock(&fs->lock);
	rc = pthread_create(&fs->eng.planner, NULL, plan_main, fs);
	if (rc)
		return -rc;
	(void)pthread_setname_np(fs->eng.planner, "tierfs-plan");
	fs->eng.planner_running = true;
	return 0;
}

void engine_stop(struct fs *fs)
{
	if (fs->eng.planner_running) {
		fs_thread_stop(fs, fs->eng.planner, &fs->eng.plan_cond);
		fs->eng.planner_running = false;
		pthread_cond_destroy(&fs->eng.plan_cond);
	}
	/* Under the lock: the flusher, still running, reads the learner
	 * under it (engine_now, engine_stale_before) until flusher_stop. */
	tfs_lock(&fs->lock);
	struct order *o = fs->eng.order;
	fs->eng.order = NULL;
	plan_drop(fs);
	tfs_unlock(&fs->lock);
	if (o)
		order_destroy(o);
}

void engine_get_stats(struct fs *fs, struct engine_stats *st)
{
	tfs_assert_held(&fs->lock);
	memset(st, 0, sizeof(*st));
	st->enabled = fs->eng.order != NULL;
	if (st->enabled) {
		order_get_stats(fs->eng.order, &st->order);
		st->max_cycle = order_max_cycle(fs->eng.order);
	}
	keepplan_get_stats(fs->eng.plan, &st->plan);
}
