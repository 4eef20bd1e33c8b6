/*
 * fs/metrics.c — the mount's figures for Prometheus: the renderer of the
 * text exposition format (version 0.0.4) that both /metrics and
 * .tierfs/metrics serve, and the HTTP endpoint [mount] metrics asks for.
 *
 * The figures are those of .tierfs/stats, named and typed by Prometheus'
 * conventions: what only grows is a counter ending in _total (seconds, not
 * ms; bytes, not blocks, where a byte count exists), what goes up and down
 * is a gauge, each tier's I/O time is a histogram, and every family has
 * its HELP and TYPE lines. Figures derived from others (hit ratios, rates)
 * are left to the queries.
 *
 * HTTP is libmicrohttpd's, in one polling thread of its own: GET (and
 * HEAD) of /metrics only; a request it cannot parse, or whose headers
 * pass the connection's memory limit, is refused by the library. We bind
 * the listening socket ourselves, so that a port in use is reported as
 * such and fails the mount.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fs/fs.h"
#include "fs/metrics.h"
#include "fs/strbuf.h"

/* ---- the exposition --------------------------------------------------- */

static void family(struct strbuf *sb, const char *name, const char *type, const char *help)
{
	strbuf_printf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* NS as decimal seconds, exact (no float rounding): "0.0025", "12". */
static const char *secs(char *buf, size_t size, uint64_t ns)
{
	int n = snprintf(buf, size, "%llu.%09llu", (unsigned long long)(ns / 1000000000ULL),
			 (unsigned long long)(ns % 1000000000ULL));
	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = '\0';
	return buf;
}

/* One sample without labels. */
static void one(struct strbuf *sb, const char *name, const char *type, const char *help, uint64_t v)
{
	family(sb, name, type, help);
	strbuf_printf(sb, "%s %llu\n", name, (unsigned long long)v);
}

static void one_secs(struct strbuf *sb, const char *name, const char *type, const char *help,
		     uint64_t ns)
{
	char b[32];
	family(sb, name, type, help);
	strbuf_printf(sb, "%s %s\n", name, secs(b, sizeof(b), ns));
}

/* A label value as the format quotes it: \, " and newline escaped. */
static void label_escape(char *dst, size_t size, const char *v)
{
	size_t n = 0;
	for (; *v && n + 3 < size; v++) {
		if (*v == '\\' || *v == '"' || *v == '\n')
			dst[n++] = '\\';
		dst[n++] = *v == '\n' ? 'n' : *v;
	}
	dst[n] = '\0';
}

static const char *const op_name[2] = {"read", "write"};

struct tier_snap {
	char label[2 * TIER_NAME_MAX + 1];
	struct tier_stats s;
	uint64_t used, total;
	uint64_t bw[2];
};

/* A per-tier family read from struct tier_snap: one sample per tier, or
 * per tier and direction (op label) when OFF[1] is set. */
struct tier_family {
	const char *name, *type, *help;
	size_t off[2];
	bool ns; /* the field counts ns: shown as seconds */
};

#define TS(f) offsetof(struct tier_snap, f)

static const struct tier_family tier_families[] = {
    {"tierfs_tier_slots_used", "gauge", "Block slots of the tier in use.", {TS(used), 0}, 0},
    {"tierfs_tier_slots_capacity", "gauge", "Block slots the tier holds.", {TS(total), 0}, 0},
    {"tierfs_tier_reads_total", "counter", "Reads completed by the tier.", {TS(s.reads), 0}, 0},
    {"tierfs_tier_writes_total", "counter", "Writes completed by the tier.", {TS(s.writes), 0}, 0},
    {"tierfs_tier_read_bytes_total",
     "counter",
     "Bytes read from the tier.",
     {TS(s.bytes_read), 0},
     0},
    {"tierfs_tier_write_bytes_total",
     "counter",
     "Bytes written to the tier.",
     {TS(s.bytes_written), 0},
     0},
    {"tierfs_tier_errors_total",
     "counter",
     "I/Os of the tier completed with an error.",
     {TS(s.errors), 0},
     0},
    {"tierfs_tier_checksum_errors_total",
     "counter",
     "Reads of the tier that failed checksum verification.",
     {TS(s.csum_errors), 0},
     0},
    {"tierfs_tier_busy_seconds_total",
     "counter",
     "Time with at least one I/O of the direction in flight on the tier.",
     {TS(s.busy_ns[TIER_OP_READ]), TS(s.busy_ns[TIER_OP_WRITE])},
     1},
    {"tierfs_tier_bandwidth_bytes_per_second",
     "gauge",
     "Bandwidth striping assumes for the tier (configured or measured at mount; 0 unknown).",
     {TS(bw[TIER_OP_READ]), TS(bw[TIER_OP_WRITE])},
     0},
};

static uint64_t snap_u64(const struct tier_snap *t, size_t off)
{
	uint64_t v;
	memcpy(&v, (const char *)t + off, sizeof(v));
	return v;
}

static void render_tiers(struct fs *fs, struct strbuf *sb, struct tier_snap *ts, int n)
{
	family(sb, "tierfs_tier_info", "gauge",
	       "Each configured tier, with its type and whether it survives unmount (always 1).");
	for (int i = 0; i < n; i++)
		strbuf_printf(sb, "tierfs_tier_info{tier=\"%s\",type=\"%s\",persistent=\"%s\"} 1\n",
			      ts[i].label, tier_kind_name(fs->tiers[i]),
			      tier_persistent(fs->tiers[i]) ? "yes" : "no");
	char b[32];
	for (size_t f = 0; f < sizeof(tier_families) / sizeof(tier_families[0]); f++) {
		const struct tier_family *tf = &tier_families[f];
		family(sb, tf->name, tf->type, tf->help);
		for (int i = 0; i < n; i++) {
			for (int d = 0; d < (tf->off[1] ? 2 : 1); d++) {
				uint64_t v = snap_u64(&ts[i], tf->off[d]);
				char op[16] = "";
				if (tf->off[1])
					snprintf(op, sizeof(op), ",op=\"%s\"", op_name[d]);
				if (tf->ns)
					strbuf_printf(sb, "%s{tier=\"%s\"%s} %s\n", tf->name,
						      ts[i].label, op, secs(b, sizeof(b), v));
				else
					strbuf_printf(sb, "%s{tier=\"%s\"%s} %llu\n", tf->name,
						      ts[i].label, op, (unsigned long long)v);
			}
		}
	}
	const char *h = "tierfs_tier_io_latency_seconds";
	family(sb, h, "histogram",
	       "Time from submission to completion of the tier's successful I/Os.");
	for (int i = 0; i < n; i++) {
		const struct tier_stats *s = &ts[i].s;
		for (int d = 0; d < 2; d++) {
			uint64_t cum = 0;
			for (unsigned k = 0; k <= TIER_LAT_BOUNDS; k++) {
				cum += s->lat[d][k];
				const char *le = k < TIER_LAT_BOUNDS
						     ? secs(b, sizeof(b), tier_lat_bound_ns(k))
						     : "+Inf";
				strbuf_printf(
				    sb, "%s_bucket{tier=\"%s\",op=\"%s\",le=\"%s\"} %llu\n", h,
				    ts[i].label, op_name[d], le, (unsigned long long)cum);
			}
			/* The buckets and the count are read one by one, as the
			 * I/Os complete: the count is the +Inf bucket, so that
			 * the two always agree. */
			strbuf_printf(
			    sb, "%s_sum{tier=\"%s\",op=\"%s\"} %s\n", h, ts[i].label, op_name[d],
			    secs(b, sizeof(b), d == TIER_OP_READ ? s->read_ns : s->write_ns));
			strbuf_printf(sb, "%s_count{tier=\"%s\",op=\"%s\"} %llu\n", h, ts[i].label,
				      op_name[d], (unsigned long long)cum);
		}
	}
}

static void render_cache(struct fs *fs, struct strbuf *sb)
{
	tfs_lock(&fs->lock);
	uint64_t cached = fs->cache.ncached, dirty = fs->cache.ndirty, pinned = fs->cache.npinned;
	uint64_t reserve = fs->cache.wbr.reserve, runs = fs->eng.write_runs;
	uint64_t quiet_ns = fs->commit.quiet_ns, gap_ns = cache_commit_gap(fs);
	uint64_t ninodes = fs->ninodes, nmaps = 0;
	for (size_t h = 0; h < fs->itab_size; h++)
		for (const struct inode *in = fs->itab[h]; in; in = in->hnext)
			nmaps += in->map_loaded;
	tfs_unlock(&fs->lock);
	const struct fs_stats *st = &fs->stats;
	one(sb, "tierfs_block_size_bytes", "gauge", "The mount's block size.", fs->bs);
	one(sb, "tierfs_cache_blocks", "gauge", "Blocks held in the RAM cache.", cached);
	one(sb, "tierfs_cache_ram_used_bytes", "gauge", "Bytes of RAM the cached blocks hold.",
	    cached * fs->bs);
	one(sb, "tierfs_cache_dirty_blocks", "gauge",
	    "Cached blocks not yet written to their home tier.", dirty);
	one(sb, "tierfs_cache_dirty_bytes", "gauge",
	    "Bytes of the cached blocks not yet written to their home tier.", dirty * fs->bs);
	one(sb, "tierfs_cache_pinned_blocks", "gauge", "Cached blocks in use by a request.",
	    pinned);
	one(sb, "tierfs_cache_writeback_reserve_blocks", "gauge",
	    "Blocks write-back keeps free for the learned order's writes.", reserve);
	one(sb, "tierfs_learner_write_runs", "gauge",
	    "Runs of writes to disk-homed blocks in the learned cycle.", runs);
	static const struct {
		const char *name, *help;
		size_t off;
		bool ns;
	} counters[] = {
#define FS_C(n, f, h) {"tierfs_" n, h, offsetof(struct fs_stats, f), false}
#define FS_S(n, f, h)                                                                              \
	{                                                                                          \
		"tierfs_" n, h, offsetof(struct fs_stats, f), true                                 \
	}
	    FS_C("cache_hits_total", hits, "Block requests found in the RAM cache."),
	    FS_C("cache_misses_total", misses, "Block requests that had to read a tier."),
	    FS_C("cache_evictions_total", evictions, "Blocks dropped from the RAM cache."),
	    FS_C("cache_flushes_total", flushes, "Blocks written back from RAM to their home."),
	    FS_C("cache_flush_bytes_total", flush_bytes, "Bytes written back from RAM."),
	    FS_C("cache_flush_errors_total", flush_errors, "Write-backs that failed."),
	    FS_C("cache_flushes_reclaim_total", flushes_reclaim,
		 "Write-backs a request waiting for RAM asked for."),
	    FS_C("cache_flushes_kept_total", flushes_kept,
		 "Reclaim write-backs of blocks the keep plan keeps in RAM."),
	    FS_C("cache_evictions_kept_total", evictions_kept,
		 "Evictions of blocks the keep plan keeps, before their read."),
	    FS_C("cache_flushes_rewritten_total", flushes_rewritten,
		 "Write-backs of blocks overwritten while still in RAM."),
	    FS_C("cache_writes_adopted_total", writes_adopted,
		 "Whole-block writes whose buffer became the cached block."),
	    FS_C("cache_victim_scans_total", victim_scans, "Searches for a block to evict."),
	    FS_C("cache_victim_visits_total", victim_visits,
		 "Cache entries the eviction searches visited."),
	    FS_C("cache_reclaim_waits_total", reclaim_waits, "Waits of a request for RAM."),
	    FS_S("cache_reclaim_wait_seconds_total", reclaim_wait_ns,
		 "Time requests waited for RAM."),
	    FS_C("cache_idle_stalls_total", idle_stalls,
		 "Block allocations that waited with no read in flight on a persistent tier."),
	    FS_C("commits_total", commits, "Metadata commits of write-backs."),
	    FS_S("commit_seconds_total", commit_ns, "Time spent in metadata commits."),
	    FS_C("commits_forced_total", commits_forced,
		 "Background commits made with no quiet moment found."),
	    FS_C("prefetch_blocks_total", prefetches, "Blocks read ahead."),
	    FS_C("prefetch_hits_total", prefetch_hits,
		 "Blocks read ahead and then read by a request."),
	    FS_C("prefetch_wasted_total", prefetch_wasted,
		 "Blocks read ahead and dropped or overwritten unread."),
	    FS_C("idle_stretches_total", idle_stretches,
		 "Stretches without a request for a disk-homed block."),
	    FS_C("idle_worked_total", idle_worked, "Idle stretches put to work."),
#undef FS_C
#undef FS_S
	};
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
		const atomic_uint_fast64_t *p =
		    (const atomic_uint_fast64_t *)((const char *)st + counters[i].off);
		uint64_t v = atomic_load(p);
		if (counters[i].ns)
			one_secs(sb, counters[i].name, "counter", counters[i].help, v);
		else
			one(sb, counters[i].name, "counter", counters[i].help, v);
	}
	one_secs(sb, "tierfs_commit_quiet_seconds", "gauge",
		 "Quiet time a background commit waits for.", quiet_ns);
	one_secs(sb, "tierfs_commit_gap_seconds", "gauge",
		 "Longest idle stretch of the learned step a background commit must fit in.",
		 gap_ns);
	one(sb, "tierfs_inodes_cached", "gauge", "Inodes in the in-memory inode table.", ninodes);
	one(sb, "tierfs_inode_maps_loaded", "gauge", "Block maps loaded in memory.", nmaps);
}

static void render_learner(struct fs *fs, struct strbuf *sb)
{
	struct cache_order_snap o;
	cache_order_snapshot(fs, &o);
	const struct order_stats *s = &o.es.order;
	one(sb, "tierfs_learner_enabled", "gauge", "1 if the access order is being learned.",
	    o.es.enabled);
	one(sb, "tierfs_learner_learned", "gauge", "1 while a cycle of accesses is learned.",
	    s->learned);
	one(sb, "tierfs_learner_cycle_accesses", "gauge",
	    "Block accesses in the learned cycle (0 when none).", s->cycle_len);
	one(sb, "tierfs_learner_max_cycle_accesses", "gauge",
	    "Longest cycle the learner can hold, in block accesses.", o.es.max_cycle);
	one(sb, "tierfs_learner_accesses_total", "counter", "Block accesses the learner saw.",
	    s->accesses);
	one(sb, "tierfs_learner_learned_accesses_total", "counter",
	    "Accesses (repeats collapsed) made while a cycle was learned.", s->learned_accesses);
	one(sb, "tierfs_learner_predicted_hits_total", "counter",
	    "Of the learned accesses, those found where the cycle predicted.", s->predicted_hits);
	one(sb, "tierfs_learner_learns_total", "counter", "Times a cycle was learned.", s->learns);
	one(sb, "tierfs_learner_relearns_total", "counter", "Times a learned cycle broke.",
	    s->relearns);
	one(sb, "tierfs_learner_false_locks_total", "counter",
	    "Cycles dropped while still on probation.", s->false_locks);
	one(sb, "tierfs_keepplan_kept_blocks", "gauge",
	    "Blocks the keep plan keeps in RAM across the step.", o.es.plan.kept);
	one(sb, "tierfs_keepplan_candidate_blocks", "gauge", "Blocks the keep plan chose among.",
	    o.es.plan.candidates);
	one_secs(sb, "tierfs_idle_after_seconds", "gauge",
		 "How long a stretch without disk requests lasts before it is put to work.",
		 o.idle_after_ns);
	one(sb, "tierfs_gap_mode", "gauge", "1 while an idle stretch's work is done (gap mode).",
	    o.gap_mode);
	static const char *const gap_plan[] = {"no", "yes", "auto"};
	family(sb, "tierfs_gap_plan_info", "gauge", "The [expert] gap_plan setting (always 1).");
	strbuf_printf(sb, "tierfs_gap_plan_info{gap_plan=\"%s\"} 1\n", gap_plan[fs->conf.gap_plan]);
}

int metrics_text(struct fs *fs, char **out, size_t *len)
{
	struct strbuf sb = {0};
	int n = fs->conf.ntiers;
	struct tier_snap *ts = calloc((size_t)(n ? n : 1), sizeof(*ts));
	if (!ts)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		label_escape(ts[i].label, sizeof(ts[i].label), fs->conf.tiers[i].name);
		tier_get_stats(fs->tiers[i], &ts[i].s);
		fs_tier_slots(fs, i, &ts[i].used, &ts[i].total);
		ts[i].bw[TIER_OP_READ] = fs->bw_read[i];
		ts[i].bw[TIER_OP_WRITE] = fs->bw_write[i];
	}
	render_tiers(fs, &sb, ts, n);
	free(ts);
	render_cache(fs, &sb);
	render_learner(fs, &sb);
	if (sb.err) {
		free(sb.p);
		return sb.err;
	}
	*out = sb.p;
	*len = sb.len;
	return 0;
}

/* ---- the HTTP endpoint ------------------------------------------------ */

/* Headers beyond this (with the request line) are refused by the library:
 * a scrape needs a few hundred bytes. */
#define METRICS_CONN_MEMORY (16u << 10)
#define METRICS_CONN_LIMIT  32
#define METRICS_PER_IP	    8
#define METRICS_TIMEOUT_S   10
#define METRICS_LOG_NS	    10000000000ULL

struct metrics_server {
	struct MHD_Daemon *d;
	struct fs *fs;
	char where[INET6_ADDRSTRLEN + 16]; /* ADDR:PORT, for the log */
	bool named;			   /* the polling thread has its name */
	struct tier_ratelimit log_rl;
};

/* The library's own messages (a request it refused, a client gone), one
 * per period: a client that sends garbage in a loop must not fill the
 * log. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct metrics_server *m = cls;
	uint64_t skipped;
	if (!tier_ratelimit_ok(&m->log_rl, tier_now_ns(), METRICS_LOG_NS, &skipped))
		return;
	char msg[256];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	if (skipped)
		TFS_LOG("metrics %s: %s (and %llu more such messages)", m->where, msg,
			(unsigned long long)skipped);
	else
		TFS_LOG("metrics %s: %s", m->where, msg);
}

static enum MHD_Result reply_static(struct MHD_Connection *c, unsigned code, const char *text)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **req)
{
	(void)version;
	(void)upload;
	(void)req;
	struct metrics_server *m = cls;
	if (!m->named) {
		pthread_setname_np(pthread_self(), "tierfs-metrics");
		m->named = true;
	}
	/* A body is never wanted: the reply goes before it, and the library
	 * closes the connection rather than read it. */
	*upload_size = 0;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_static(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				    "method not allowed: only GET /metrics is served\n");
	if (strcmp(url, "/metrics"))
		return reply_static(c, MHD_HTTP_NOT_FOUND, "not found: only /metrics is served\n");
	char *text;
	size_t len;
	int rc = metrics_text(m->fs, &text, &len);
	if (rc)
		return reply_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
				    "cannot render the metrics: out of memory\n");
	struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4; charset=utf-8");
	enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* A listening socket on ADDR:PORT (numeric, as the config checked it), or
 * -errno, logged with the address. */
static int listen_on(const char *where, const char *addr, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	memset(&ss, 0, sizeof(ss));
	bool v6 = strchr(addr, ':') != NULL;
	if (v6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		if (inet_pton(AF_INET6, addr, &s6->sin6_addr) != 1)
			goto bad;
		sl = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		if (inet_pton(AF_INET, addr, &s4->sin_addr) != 1)
			goto bad;
		sl = sizeof(*s4);
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		int e = errno;
		TFS_LOG("metrics: cannot serve on %s: socket: %s", where, strerror(e));
		return -e;
	}
	int one = 1;
	/* A remount right after an unmount finds the old connections in
	 * TIME_WAIT: the port is still ours to take. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    (v6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one))) ||
	    bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, 64)) {
		int e = errno;
		TFS_LOG("metrics: cannot serve on %s: %s%s", where, strerror(e),
			e == EADDRINUSE ? " (another process listens there: choose another port "
					  "in [mount] metrics)"
			: e == EADDRNOTAVAIL ? " (no interface of this host has that address)"
					     : "");
		close(fd);
		return -e;
	}
	return fd;
bad:
	TFS_LOG("metrics: cannot serve on %s: not a numeric address", where);
	return -EINVAL;
}

int metrics_start(struct fs *fs)
{
	const struct config *c = &fs->conf;
	if (!c->metrics_port)
		return 0;
	struct metrics_server *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->fs = fs;
	bool v6 = strchr(c->metrics_addr, ':') != NULL;
	snprintf(m->where, sizeof(m->where), v6 ? "[%s]:%u" : "%s:%u", c->metrics_addr,
		 (unsigned)c->metrics_port);
	int fd = listen_on(m->where, c->metrics_addr, c->metrics_port);
	if (fd < 0) {
		free(m);
		return fd;
	}
	/* The logger first: the library logs the options that follow it. */
	m->d = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
		(v6 ? MHD_USE_IPv6 : 0),
	    0, NULL, NULL, handle, m, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, m,
	    MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)METRICS_CONN_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
	    (unsigned)METRICS_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_TIMEOUT_S,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_CONN_MEMORY, MHD_OPTION_END);
	if (!m->d) {
		TFS_LOG("metrics: cannot serve on %s: the HTTP server did not start", m->where);
		close(fd);
		free(m);
		return -EIO;
	}
	fs->metrics = m;
	TFS_LOG("metrics: serving http://%s/metrics", m->where);
	return 0;
}

void metrics_stop(struct fs *fs)
{
	struct metrics_server *m = fs->metrics;
	if (!m)
		return;
	/* Closes the listening socket too, and waits for the polling thread. */
	MHD_stop_daemon(m->d);
	fs->metrics = NULL;
	free(m);
}
