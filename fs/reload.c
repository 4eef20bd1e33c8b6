/*
 * fs/reload.c — reloading the config file while mounted: SIGHUP, or a
 * write to .tierfs/reload (for a user who does not know the pid).
 *
 * A reload parses the file as a mount does: a file with an error changes
 * nothing and is reported in the mount's form, "FILE:LINE: key 'x': why".
 * Otherwise it is compared with the running config key by key. A change
 * that needs a remount is refused on its own, "FILE:LINE: key 'x': needs
 * a remount", and the rest applies at once, each change logged "old ->
 * new". What changes live:
 *   [mount]   dirty_ratio, flush_interval, log_level
 *   [tier]    weight, bandwidth*, max_bandwidth*
 *   [policy]  learn
 *   [expert]  prefetch_depth
 *   [rule]    all of them, for files created from then on
 * How each reaches its readers without a stall: scalars are stored
 * atomically (readers load them with FS_LIVE); the rules are copied in
 * under fs->rules_lock, which a create holds for reading; the stripe
 * table and the bandwidths are swapped under fs->lock, which their readers
 * hold; the caps go to each tier's scheduler under its submission lock.
 * No request waits on a reload longer than one of those swaps.
 *
 * SIGHUP is blocked in every thread (main blocks it before any exists)
 * and taken by this module's thread with sigwaitinfo(), so no thread's
 * system call is interrupted by it; signals sent while a reload runs
 * merge into one pending signal, so a storm costs a few reloads. Reloads
 * are serialised by reload_lock, level 0 of fs/lock.h.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"
#include "fs/reload.h"

static struct {
	pthread_mutex_t lock; /* the reload lock: every field below */
	char path[PATH_MAX];
	struct config_lines *lines; /* the mounted config's key lines */
	pthread_t th;
	bool running;
	_Atomic bool stop;
} rl = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* One reload's comparison: the running config, the file's, and NEXT, the
 * running one with the live keys set to the file's values. */
struct rctx {
	struct fs *fs;
	const struct config *old, *nw;
	struct config *next;
	const struct config_lines *lines;
	int map[CONF_MAX_TIERS]; /* the file's tier index -> running, -1 new */
	unsigned changed, refused;
	bool rules_changed, stripe_changed, caps_changed[CONF_MAX_TIERS];
};

static void refuse(struct rctx *x, const char *sect, int idx, const char *key)
{
	int line = config_key_line(x->lines, sect, idx, key);
	if (line)
		TFS_LOG("%s:%d: key '%s': needs a remount", x->nw->path, line, key);
	else
		TFS_LOG("%s: key '%s': needs a remount", x->nw->path, key);
	x->refused++;
}

static void changed(struct rctx *x, const char *sect, const char *key, const char *from,
		    const char *to)
{
	TFS_LOG("reload: [%s] %s: %s -> %s", sect, key, from, to);
	x->changed++;
}

/* V bytes (or bytes/s with SUFFIX "/s") the way the config writes them. */
static const char *fmt_size(char *b, size_t n, uint64_t v, const char *zero, const char *suffix)
{
	static const char units[] = "KMGT";
	int u = -1;
	if (!v)
		return zero;
	while (u < 3 && !(v & 1023)) {
		v >>= 10;
		u++;
	}
	if (u < 0)
		snprintf(b, n, "%llu%s", (unsigned long long)v, suffix);
	else
		snprintf(b, n, "%llu%c%s", (unsigned long long)v, units[u], suffix);
	return b;
}

static void live_uint(struct rctx *x, const char *sect, const char *key, unsigned from, unsigned to,
		      unsigned *dst)
{
	char a[32], b[32];
	if (from == to)
		return;
	snprintf(a, sizeof(a), "%u", from);
	snprintf(b, sizeof(b), "%u", to);
	changed(x, sect, key, a, b);
	*dst = to;
}

static void live_ms(struct rctx *x, const char *sect, const char *key, unsigned from, unsigned to,
		    unsigned *dst)
{
	char a[32], b[32];
	if (from == to)
		return;
	snprintf(a, sizeof(a), "%gs", from / 1000.0);
	snprintf(b, sizeof(b), "%gs", to / 1000.0);
	changed(x, sect, key, a, b);
	*dst = to;
}

static void live_bool(struct rctx *x, const char *sect, const char *key, bool from, bool to,
		      bool *dst)
{
	if (from == to)
		return;
	changed(x, sect, key, from ? "yes" : "no", to ? "yes" : "no");
	*dst = to;
}

static void live_bw(struct rctx *x, const char *sect, const char *key, uint64_t from, uint64_t to,
		    uint64_t *dst, const char *zero)
{
	char a[32], b[32];
	if (from == to)
		return;
	changed(x, sect, key, fmt_size(a, sizeof(a), from, zero, "/s"),
		fmt_size(b, sizeof(b), to, zero, "/s"));
	*dst = to;
}

static void compare_mount(struct rctx *x)
{
	const struct config *o = x->old, *n = x->nw;
	struct config *t = x->next;
	static const char *const level[] = {"info", "debug"};

	if (o->block_size != n->block_size)
		refuse(x, "mount", -1, "block_size");
	if (strcmp(o->metadata, n->metadata))
		refuse(x, "mount", -1, "metadata");
	if (o->sync_on_close != n->sync_on_close)
		refuse(x, "mount", -1, "sync_on_close");
	if (o->allow_other != n->allow_other)
		refuse(x, "mount", -1, "allow_other");
	if (o->threads != n->threads)
		refuse(x, "mount", -1, "threads");
	if (o->commit_interval_ms != n->commit_interval_ms)
		refuse(x, "mount", -1, "commit_interval");
	if (o->writeback_timeout_ms != n->writeback_timeout_ms)
		refuse(x, "mount", -1, "writeback_timeout");
	if (strcmp(o->metrics_addr, n->metrics_addr) || o->metrics_port != n->metrics_port)
		refuse(x, "mount", -1, "metrics");
	live_uint(x, "mount", "dirty_ratio", o->dirty_ratio, n->dirty_ratio, &t->dirty_ratio);
	live_ms(x, "mount", "flush_interval", o->flush_interval_ms, n->flush_interval_ms,
		&t->flush_interval_ms);
	if (o->log_level != n->log_level) {
		changed(x, "mount", "log_level", level[o->log_level], level[n->log_level]);
		t->log_level = n->log_level;
	}
}

/* The keys of tier J of the file, which runs as tier I. */
static void compare_tier(struct rctx *x, int j, int i)
{
	const struct conf_tier *o = &x->old->tiers[i], *n = &x->nw->tiers[j];
	struct conf_tier *t = &x->next->tiers[i];
	char sect[TIER_NAME_MAX + 8];
	snprintf(sect, sizeof(sect), "tier %s", o->name);

	if (o->kind != n->kind)
		refuse(x, "tier", j, "type");
	if (strcmp(o->path, n->path))
		refuse(x, "tier", j, "path");
	/* A posix tier without a capacity gets the free space, which moves:
	 * compare only what either file gave. */
	if (o->capacity != n->capacity &&
	    (o->kind == TIER_RAM || config_key_given(x->lines, "tier", j, "capacity") ||
	     (rl.lines && config_key_given(rl.lines, "tier", i, "capacity"))))
		refuse(x, "tier", j, "capacity");
	if (o->persistent != n->persistent)
		refuse(x, "tier", j, "persistent");
	if (o->direct != n->direct)
		refuse(x, "tier", j, "direct");
	if (o->queue_depth != n->queue_depth)
		refuse(x, "tier", j, "queue_depth");
	if (o->slab_size != n->slab_size)
		refuse(x, "tier", j, "slab_size");
	/* The codec and where an s3 tier's objects live are read when the
	 * tier opens: a running tier keeps what it opened with. */
	if (o->compress != n->compress)
		refuse(x, "tier", j, "compress");
	if (o->encrypt != n->encrypt)
		refuse(x, "tier", j, "encrypt");
	if (strcmp(o->key_file, n->key_file))
		refuse(x, "tier", j, "key_file");
	if (o->kind == TIER_S3 && n->kind == TIER_S3) {
		const struct tier_s3_params *a = &o->s3, *b = &n->s3;
		static const struct {
			const char *key;
			size_t off, len;
		} f[] = {
#define S3F(k, m) {k, offsetof(struct tier_s3_params, m), sizeof(((struct tier_s3_params *)0)->m)}
		    S3F("endpoint", endpoint),
		    S3F("bucket", bucket),
		    S3F("prefix", prefix),
		    S3F("region", region),
		    S3F("credentials_file", credentials_file),
		    S3F("profile", profile),
		    S3F("ca_file", ca_file),
		    S3F("tls_verify", tls_verify),
		    S3F("addressing", virtual_host),
		    S3F("retries", retries),
		    S3F("retry_time", retry_time_ms),
		    S3F("request_timeout", request_timeout_ms),
		    S3F("connect_timeout", connect_timeout_ms),
		    S3F("lease_timeout", lease_timeout_ms),
#undef S3F
		};
		for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
			if (memcmp((const char *)a + f[k].off, (const char *)b + f[k].off,
				   f[k].len))
				refuse(x, "tier", j, f[k].key);
	}

	unsigned before = x->changed;
	if (o->weight != n->weight || o->weight_set != n->weight_set) {
		char a[32], b[32];
		snprintf(a, sizeof(a), o->weight_set ? "%llu" : "default",
			 (unsigned long long)o->weight);
		snprintf(b, sizeof(b), n->weight_set ? "%llu" : "default",
			 (unsigned long long)n->weight);
		changed(x, sect, "weight", a, b);
		t->weight = n->weight;
		t->weight_set = n->weight_set;
	}
	live_bw(x, sect, "bandwidth_read", o->bandwidth_read, n->bandwidth_read, &t->bandwidth_read,
		"auto");
	live_bw(x, sect, "bandwidth_write", o->bandwidth_write, n->bandwidth_write,
		&t->bandwidth_write, "auto");
	unsigned caps = x->changed;
	live_bw(x, sect, "max_bandwidth_read", o->max_bandwidth_read, n->max_bandwidth_read,
		&t->max_bandwidth_read, "none");
	live_bw(x, sect, "max_bandwidth_write", o->max_bandwidth_write, n->max_bandwidth_write,
		&t->max_bandwidth_write, "none");
	x->caps_changed[i] = x->changed != caps;
	if (x->changed != before)
		x->stripe_changed = true;
}

static void compare_tiers(struct rctx *x)
{
	const struct config *o = x->old, *n = x->nw;
	bool kept[CONF_MAX_TIERS] = {0};

	for (int j = 0; j < n->ntiers; j++) {
		int i = config_tier_index(o, n->tiers[j].name);
		x->map[j] = i;
		if (i < 0) {
			TFS_LOG("%s:%d: section [tier %s]: needs a remount (a tier added)", n->path,
				n->tiers[j].line, n->tiers[j].name);
			x->refused++;
			continue;
		}
		kept[i] = true;
		compare_tier(x, j, i);
	}
	for (int i = 0; i < o->ntiers; i++) {
		if (!kept[i]) {
			TFS_LOG(
			    "%s: section [tier %s]: needs a remount (the file no longer has it)",
			    n->path, o->tiers[i].name);
			x->refused++;
		}
	}
}

static void compare_policy(struct rctx *x)
{
	const struct config *o = x->old, *n = x->nw;
	bool same = o->nstripe == n->nstripe;
	for (int k = 0; same && k < n->nstripe; k++)
		same = x->map[n->stripe[k]] == o->stripe[k];
	if (!same)
		refuse(x, "policy", -1, "stripe");
	live_bool(x, "policy", "learn", o->learn, n->learn, &x->next->learn);

	live_uint(x, "expert", "prefetch_depth", o->prefetch_depth, n->prefetch_depth,
		  &x->next->prefetch_depth);
	if (o->learn_max_cycle != n->learn_max_cycle)
		refuse(x, "expert", -1, "learn_max_cycle");
	if (o->keep_plan != n->keep_plan)
		refuse(x, "expert", -1, "keep_plan");
	if (o->gap_plan != n->gap_plan)
		refuse(x, "expert", -1, "gap_plan");
}

static int rule_index(const struct config *c, const char *name)
{
	for (int r = 0; r < c->nrules; r++)
		if (!strcmp(c->rules[r].name, name))
			return r;
	return -1;
}

/* The rules go whole or not at all: their order decides which matches. */
static void compare_rules(struct rctx *x)
{
	const struct config *o = x->old, *n = x->nw;
	struct config *t = x->next;
	char sect[CONF_NAME_MAX + 8];

	for (int r = 0; r < n->nrules; r++) {
		if (x->map[n->rules[r].tier] < 0) {
			refuse(x, "rule", r, "tier");
			TFS_LOG("reload: %s: the rules stay as they were", n->path);
			return;
		}
	}
	for (int r = 0; r < n->nrules; r++) {
		const struct conf_rule *nr = &n->rules[r];
		int p = rule_index(o, nr->name);
		const char *tier = o->tiers[x->map[nr->tier]].name;
		snprintf(sect, sizeof(sect), "rule %s", nr->name);
		if (p < 0) {
			TFS_LOG("reload: [%s] added: match = %s, tier = %s, persistent = %s",
				nr->name, nr->match, tier, nr->persistent ? "yes" : "no");
			x->changed++;
			x->rules_changed = true;
			continue;
		}
		const struct conf_rule * or = &o->rules[p];
		unsigned before = x->changed;
		if (strcmp(or->match, nr->match))
			changed(x, sect, "match", or->match, nr->match);
		if (or->tier != x->map[nr->tier])
			changed(x, sect, "tier", o->tiers[or->tier].name, tier);
		if (or->persistent != nr->persistent)
			changed(x, sect, "persistent", or->persistent ? "yes" : "no",
				nr->persistent ? "yes" : "no");
		if (p != r) {
			char a[16], b[16];
			snprintf(a, sizeof(a), "%d", p + 1);
			snprintf(b, sizeof(b), "%d", r + 1);
			changed(x, sect, "position", a, b);
		}
		x->rules_changed = x->rules_changed || x->changed != before;
	}
	for (int p = 0; p < o->nrules; p++) {
		if (rule_index(n, o->rules[p].name) < 0) {
			TFS_LOG("reload: [rule %s] removed", o->rules[p].name);
			x->changed++;
			x->rules_changed = true;
		}
	}
	if (!x->rules_changed)
		return;
	t->nrules = n->nrules;
	for (int r = 0; r < n->nrules; r++) {
		t->rules[r] = n->rules[r];
		t->rules[r].tier = x->map[n->rules[r].tier];
	}
}

/* Put NEXT's live keys in place. No lock held. */
static void apply(struct rctx *x)
{
	struct fs *fs = x->fs;
	struct config *c = &fs->conf;
	const struct config *t = x->next;

	if (x->rules_changed) {
		pthread_rwlock_wrlock(&fs->rules_lock);
		memcpy(c->rules, t->rules, (size_t)t->nrules * sizeof(t->rules[0]));
		__atomic_store_n(&c->nrules, t->nrules, __ATOMIC_RELAXED);
		pthread_rwlock_unlock(&fs->rules_lock);
	}

	for (int i = 0; i < c->ntiers; i++) {
		if (!x->caps_changed[i])
			continue;
		uint64_t caps[2] = {t->tiers[i].max_bandwidth_read,
				    t->tiers[i].max_bandwidth_write};
		int rc = tier_set_max_bandwidth(fs->tiers[i], caps);
		if (rc)
			TFS_LOG("reload: tier %s: cannot change max_bandwidth: %s",
				c->tiers[i].name, strerror(-rc));
	}

	/* The stripe, built off the lock from the new weights and
	 * bandwidths; a bandwidth back to auto keeps the figure in use. */
	uint64_t bw_r[CONF_MAX_TIERS], bw_w[CONF_MAX_TIERS];
	struct stripe *st = NULL;
	tfs_lock(&fs->lock);
	for (int i = 0; i < c->ntiers; i++) {
		bw_r[i] = t->tiers[i].bandwidth_read ? t->tiers[i].bandwidth_read : fs->bw_read[i];
		bw_w[i] =
		    t->tiers[i].bandwidth_write ? t->tiers[i].bandwidth_write : fs->bw_write[i];
	}
	tfs_unlock(&fs->lock);
	if (x->stripe_changed && t->nstripe && (st = malloc(sizeof(*st)))) {
		int rc = fs_stripe_build(t, bw_r, st);
		if (rc) {
			TFS_LOG("reload: stripe weights: %s; the stripe stays as it was",
				strerror(-rc));
			free(st);
			st = NULL;
		}
	}

	tfs_lock(&fs->lock);
	for (int i = 0; i < c->ntiers; i++) {
		struct conf_tier *ct = &c->tiers[i];
		const struct conf_tier *nt = &t->tiers[i];
		ct->weight = nt->weight;
		ct->weight_set = nt->weight_set;
		ct->bandwidth_read = nt->bandwidth_read;
		ct->bandwidth_write = nt->bandwidth_write;
		ct->max_bandwidth_read = nt->max_bandwidth_read;
		ct->max_bandwidth_write = nt->max_bandwidth_write;
		if (st) {
			fs->bw_read[i] = bw_r[i];
			fs->bw_write[i] = bw_w[i];
		}
	}
	if (st) {
		fs->stripe = *st;
		TFS_DEBUG(fs, "reload: the stripe is %d positions a round", st->seqlen);
	}
	__atomic_store_n(&c->dirty_ratio, t->dirty_ratio, __ATOMIC_RELAXED);
	__atomic_store_n(&c->flush_interval_ms, t->flush_interval_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&c->log_level, t->log_level, __ATOMIC_RELAXED);
	__atomic_store_n(&c->prefetch_depth, t->prefetch_depth, __ATOMIC_RELAXED);
	bool learn_changed = c->learn != t->learn;
	__atomic_store_n(&c->learn, t->learn, __ATOMIC_RELAXED);
	/* The flusher and the prefetcher wait with the old values. */
	pthread_cond_broadcast(&fs->cache.flusher_cond);
	if (fs->cache.prefetcher_running)
		cache_prefetch_depth_set(fs);
	uint64_t blocks = learn_changed && t->learn ? cache_learn_blocks(fs) : 0;
	tfs_unlock(&fs->lock);
	free(st);

	if (learn_changed) {
		int rc = engine_set_learn(fs, t->learn, blocks);
		if (!rc && t->learn)
			rc = cache_prefetcher_launch(fs);
		if (rc)
			TFS_LOG("reload: learn = yes: %s", strerror(-rc));
	}
}

static void warn_log(void *arg, const char *msg)
{
	(void)arg;
	TFS_LOG("%s", msg);
}

int fs_reload(struct fs *fs, const char *who)
{
	char err[PATH_MAX + 512];
	struct config_lines *lines = NULL;
	struct config *nw = malloc(sizeof(*nw)), *next = malloc(sizeof(*next));
	struct rctx *x = calloc(1, sizeof(*x));
	int rc = -ENOMEM;

	pthread_mutex_lock(&rl.lock);
	if (!nw || !next || !x) {
		TFS_LOG("reload (%s): %s", who, strerror(ENOMEM));
		goto out;
	}
	TFS_LOG("reload (%s): %s", who, rl.path);
	rc = config_load_lines(rl.path, nw, err, sizeof(err), warn_log, NULL, &lines);
	if (rc) {
		TFS_LOG("%s", err);
		TFS_LOG("reload: %s: not applied, nothing changed", rl.path);
		goto out;
	}
	/* Only this thread writes fs->conf, under the reload lock: a copy
	 * needs no other lock. */
	*next = fs->conf;
	*x = (struct rctx){.fs = fs, .old = &fs->conf, .nw = nw, .next = next, .lines = lines};
	compare_mount(x);
	compare_tiers(x);
	compare_policy(x);
	compare_rules(x);
	apply(x);
	if (x->refused)
		TFS_LOG("reload: %s: %u change%s applied, %u refused (need a remount)", rl.path,
			x->changed, x->changed == 1 ? "" : "s", x->refused);
	else
		TFS_LOG("reload: %s: %u change%s applied", rl.path, x->changed,
			x->changed == 1 ? "" : "s");
out:
	pthread_mutex_unlock(&rl.lock);
	config_lines_free(lines);
	free(nw);
	free(next);
	free(x);
	return rc;
}

static void *reload_main(void *arg)
{
	struct fs *fs = arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	(void)pthread_setname_np(pthread_self(), "tierfs-reload");
	while (!atomic_load(&rl.stop)) {
		if (sigwaitinfo(&set, NULL) < 0)
			continue; /* EINTR */
		if (!atomic_load(&rl.stop))
			fs_reload(fs, "SIGHUP");
	}
	return NULL;
}

/* A SIGHUP that reached a thread that had not blocked it (one a library
 * started with its own mask) goes on to the reload thread. */
static void sighup_forward(int sig)
{
	(void)sig;
	if (rl.running)
		pthread_kill(rl.th, SIGHUP);
}

int fs_reload_start(struct fs *fs, const char *path, struct config_lines *lines)
{
	if (strlen(path) >= sizeof(rl.path))
		return -ENAMETOOLONG;
	snprintf(rl.path, sizeof(rl.path), "%s", path);
	rl.lines = lines;
	atomic_store(&rl.stop, false);
	int rc = pthread_create(&rl.th, NULL, reload_main, fs);
	if (rc)
		return -rc;
	rl.running = true;
	/* libfuse's handler would end the session on SIGHUP. */
	struct sigaction sa = {.sa_handler = sighup_forward, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGHUP, &sa, NULL))
		return -errno;
	return 0;
}

void fs_reload_stop(struct fs *fs)
{
	(void)fs;
	if (rl.running) {
		atomic_store(&rl.stop, true);
		pthread_kill(rl.th, SIGHUP);
		pthread_join(rl.th, NULL);
		rl.running = false;
	}
	signal(SIGHUP, SIG_DFL);
	config_lines_free(rl.lines);
	rl.lines = NULL;
}
