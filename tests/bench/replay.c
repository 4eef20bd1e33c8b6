/*
 * tierfs-replay: replays DeepSpeed ZeRO-Infinity's optimizer swap I/O exactly
 * (file names, per-rank directories, O_DIRECT open flags, libaio with 1 MiB
 * requests at queue depth 8, stat() size checks before reads), so that the
 * same program measures a plain directory and a tierfs mount. See
 * /work/shared/DESIGN.md "The files DeepSpeed writes".
 *
 * One step = backward (write every gradient file) then, for sub-group
 * 0..N-1: read param, exp_avg, exp_avg_sq and the gradients, run an fp32 Adam
 * update over the buffers (touches every byte and changes the content), write
 * param, exp_avg, exp_avg_sq back. Step 0 ("init") writes every file from
 * scratch and is reported on its own. With the pipeline (DeepSpeed's
 * pipeline_read/pipeline_write), transfers overlap the updates in the order
 * DeepSpeed 0.19's PipelinedOptimizerSwapper gives them.
 *
 * All content comes from a deterministic generator keyed by (rank, sub-group,
 * kind, step), so --verify can recompute what every file must hold after the
 * last step and compare it byte for byte: a stale block or a lost write-back
 * on the file system under test shows up as a mismatch.
 *
 * Also a bandwidth probe (--probe FILE) with the same I/O engine, used by
 * scripts/bench.sh to measure the disk for the floor.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libaio.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES_PER_BATCH 64
#define PARAM_ALIGN	    256 /* params: keeps every size a multiple of 1024 bytes, as DeepSpeed's */

enum kind { K_PARAM, K_EXP_AVG, K_EXP_AVG_SQ, K_GRAD };

struct opts {
	const char *dir;
	uint64_t state;	    /* total fp32 param+m+v bytes over all ranks */
	uint64_t sg_params; /* params per sub-group */
	int ranks;
	int steps;
	bool pipeline;
	/* With the pipeline: DeepSpeed's own order (default), or read i+1 and
	 * write i-1 both joined before update i+1 (lockstep). */
	bool lockstep;
	bool verify;
	const char *stats, *stats_out; /* copy FILE into DIR after each phase (rank 0) */
	bool verify_only;	       /* files already hold the content after --steps steps */
	bool state_only;	       /* verify param/exp_avg/exp_avg_sq, not gradients */
	const char *json;
	int grad_files; /* gradient files per sub-group */
	int qd;
	size_t req;
	const char *probe;
	uint64_t probe_size;
	bool probe_read_only;
	double compute;	   /* seconds of forward+backward compute per step (--compute) */
	const char *trace; /* --trace FILE: one line per transfer and Adam pass */
};

static struct opts o = {
    .state = 256ull << 20,
    .sg_params = 0,
    .ranks = 1,
    .steps = 3,
    .pipeline = true,
    .grad_files = 2,
    .qd = 8,
    .req = 1 << 20,
    .probe_size = 1ull << 30,
};

struct subgroup {
	uint64_t numel;
	char id[64]; /* ds_id: {first_param_id}_{last_param_id} */
	uint64_t goff[MAX_FILES_PER_BATCH], gnum[MAX_FILES_PER_BATCH];
};

static struct subgroup *sgs;
/* --trace: opened before the ranks fork; O_APPEND and one write() per line,
 * so that the ranks' lines never mix. */
static int trace_fd = -1;
static int nsg;
static uint64_t rank_params;

/* Per rank and step, written by the ranks into shared memory, read by the parent. */
struct stepstat {
	double bwd_t0, bwd_t1; /* wall clock of the phase on this rank */
	double bwd_io;	       /* seconds spent in gradient writes (generation excluded) */
	double upd_t0, upd_t1;
	double upd_cpu; /* seconds in the Adam pass */
	uint64_t rd, wr;
};

struct shared {
	pthread_barrier_t bar;
	int failed;
	int verify_bad[64];
	struct stepstat st[]; /* [rank * (steps + 1) + step] */
};

static struct shared *shm;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One --trace line: rank, step, what (R read, W write, A Adam pass of the
 * sub-group, then the wait for the joins), sub-group and CLOCK_MONOTONIC
 * seconds, which other tools' samples of the same clock line up with. */
static void trace(int rank, int step, char what, int sg, double t0, double t1, double t2)
{
	if (trace_fd < 0)
		return;
	char line[128];
	int n = snprintf(line, sizeof(line), "%d %d %c %d %.6f %.6f %.6f\n", rank, step, what, sg,
			 t0, t1, t2);
	if (write(trace_fd, line, (size_t)n) != n) {
		fprintf(stderr, "replay: --trace %s: write failed: %s; tracing stops\n", o.trace,
			strerror(errno));
		trace_fd = -1;
	}
}

/* Stand in for GPU work: the disk is the file system's while it runs. */
static void compute_for(double sec)
{
	if (sec <= 0)
		return;
	struct timespec ts = {.tv_sec = (time_t)sec, .tv_nsec = (long)((sec - (time_t)sec) * 1e9)};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	uint64_t mul = 1;
	switch (*end) {
	case 'k':
	case 'K':
		mul = 1ull << 10;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1ull << 20;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1ull << 30;
		end++;
		break;
	case 't':
	case 'T':
		mul = 1ull << 40;
		end++;
		break;
	case 'e':
	case 'E':
		break;
	default:
		break;
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	*out = (uint64_t)(v * mul);
	return 0;
}

/* ---- deterministic content ---------------------------------------------------- */

static uint32_t mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

static uint32_t seed_of(int rank, int sg, int kind, int step)
{
	return mix32(mix32(mix32((uint32_t)rank * 0x9e3779b9U + (uint32_t)sg) + (uint32_t)kind) +
		     (uint32_t)step);
}

/* Values in [-1, 1) (or [0, 1) for exp_avg_sq, which Adam needs non-negative). */
static void gen(float *buf, uint64_t n, uint32_t seed, bool positive)
{
	const float scale = 1.0f / 2147483648.0f;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t x = (uint32_t)i * 2654435761U ^ seed;
		x ^= x >> 15;
		x *= 0x2c1b3c6dU;
		x ^= x >> 12;
		int32_t s = positive ? (int32_t)(x >> 1) : (int32_t)x;
		buf[i] = (float)s * scale;
	}
}

/* fp32 Adam (no bias correction: the point is to touch and change every byte). */
static void adam(float *restrict p, float *restrict m, float *restrict v, const float *restrict g,
		 uint64_t n)
{
	const float b1 = 0.9f, b2 = 0.999f, lr = 1e-3f, eps = 1e-8f;
	for (uint64_t i = 0; i < n; i++) {
		float mi = b1 * m[i] + (1.0f - b1) * g[i];
		float vi = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
		m[i] = mi;
		v[i] = vi;
		p[i] -= lr * mi / (sqrtf(vi) + eps);
	}
}

/* ---- file names ------------------------------------------------------------ */

static void rank_dir(char *out, size_t len, int rank)
{
	snprintf(out, len, "%s/zero_stage_3/optimizer/rank%d", o.dir, rank);
}

/* Names as DeepSpeed's swapper builds them; -ENAMETOOLONG rather than a truncated name. */
static int file_path(char *out, size_t len, int rank, int sg, int kind, int gi)
{
	char d[3900]; /* + the longest name (~130 bytes) fits in PATH_MAX */
	rank_dir(d, sizeof(d), rank);
	const struct subgroup *s = &sgs[sg];
	int r;
	switch (kind) {
	case K_PARAM:
		r = snprintf(out, len, "%s/%s.tensor.swp", d, s->id);
		break;
	case K_EXP_AVG:
		r = snprintf(out, len, "%s/exp_avg-%s.tensor.swp", d, s->id);
		break;
	case K_EXP_AVG_SQ:
		r = snprintf(out, len, "%s/exp_avg_sq-%s.tensor.swp", d, s->id);
		break;
	default:
		r = snprintf(out, len, "%s/%s_gradient_%" PRIu64 "_%" PRIu64 ".tensor.swp", d,
			     s->id, s->goff[gi], s->gnum[gi]);
		break;
	}
	return r < 0 || (size_t)r >= len ? -ENAMETOOLONG : 0;
}

static int mkdir_p(const char *path)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/* ---- I/O engine: DeepSpeed's aio handle, one batch of files, qd requests in flight ---- */

struct iojob {
	char path[4096];
	void *buf;
	uint64_t bytes;
};

/*
 * Submits every request of every file in jobs[] through ctx with at most o.qd
 * in flight, as DeepSpeed's swap_in_tensors/swap_out_tensors + wait() do.
 */
static int run_batch(io_context_t ctx, struct iojob *jobs, int n, bool write)
{
	int fds[MAX_FILES_PER_BATCH];
	int rc = 0;
	for (int i = 0; i < n; i++)
		fds[i] = -1;
	for (int i = 0; i < n; i++) {
		if (!write) {
			/* DeepSpeed checks the size with stat() before every read. */
			struct stat st;
			if (stat(jobs[i].path, &st)) {
				rc = -errno;
				fprintf(stderr, "replay: stat %s: %s\n", jobs[i].path,
					strerror(errno));
				goto out;
			}
			if ((uint64_t)st.st_size < jobs[i].bytes) {
				rc = -EIO;
				fprintf(stderr,
					"replay: %s: size %lld < %" PRIu64 " bytes to read\n",
					jobs[i].path, (long long)st.st_size, jobs[i].bytes);
				goto out;
			}
		}
		fds[i] = write ? open(jobs[i].path, O_WRONLY | O_CREAT | O_DIRECT, 0600)
			       : open(jobs[i].path, O_RDONLY | O_DIRECT);
		if (fds[i] < 0) {
			rc = -errno;
			fprintf(stderr, "replay: open %s (%s, O_DIRECT): %s\n", jobs[i].path,
				write ? "write" : "read", strerror(errno));
			goto out;
		}
	}
	struct iocb cbs[64], *cbp[64];
	int freelist[64], nfree = 0;
	for (int i = 0; i < o.qd; i++)
		freelist[nfree++] = i;
	int cur = 0, inflight = 0;
	uint64_t off = 0;
	while (cur < n || inflight) {
		int nsub = 0;
		while (cur < n && nfree > 0) {
			if (off >= jobs[cur].bytes) {
				cur++;
				off = 0;
				continue;
			}
			uint64_t len =
			    jobs[cur].bytes - off < o.req ? jobs[cur].bytes - off : o.req;
			int slot = freelist[--nfree];
			struct iocb *cb = &cbs[slot];
			if (write)
				io_prep_pwrite(cb, fds[cur], (char *)jobs[cur].buf + off, len,
					       (long long)off);
			else
				io_prep_pread(cb, fds[cur], (char *)jobs[cur].buf + off, len,
					      (long long)off);
			cb->data = (void *)(uintptr_t)(slot | ((uint64_t)cur << 8));
			cbp[nsub++] = cb;
			off += len;
		}
		if (nsub) {
			int r = io_submit(ctx, nsub, cbp);
			if (r != nsub) {
				rc = r < 0 ? r : -EIO;
				fprintf(stderr, "replay: io_submit %d requests (%s): %s\n", nsub,
					jobs[cur < n ? cur : n - 1].path, strerror(-rc));
				/* requests before r were submitted: reap them below */
				inflight += r > 0 ? r : 0;
				while (inflight) {
					struct io_event ev[64];
					int g = io_getevents(ctx, 1, 64, ev, NULL);
					if (g <= 0)
						break;
					inflight -= g;
				}
				goto out;
			}
			inflight += nsub;
		}
		if (!inflight)
			continue;
		struct io_event ev[64];
		int g = io_getevents(ctx, 1, 64, ev, NULL);
		if (g < 0) {
			if (g == -EINTR)
				continue;
			rc = g;
			fprintf(stderr, "replay: io_getevents: %s\n", strerror(-g));
			goto out;
		}
		for (int k = 0; k < g; k++) {
			struct iocb *cb = ev[k].obj;
			uint64_t tag = (uint64_t)(uintptr_t)cb->data;
			int slot = (int)(tag & 0xff), file = (int)(tag >> 8);
			long long res = (long long)ev[k].res;
			if (res != (long long)cb->u.c.nbytes && !rc) {
				rc = res < 0 ? (int)res : -EIO;
				fprintf(stderr,
					"replay: %s %s at offset %lld: %s (got %lld of %lu)\n",
					write ? "write" : "read", jobs[file].path, cb->u.c.offset,
					res < 0 ? strerror((int)-res) : "short transfer", res,
					cb->u.c.nbytes);
			}
			freelist[nfree++] = slot;
		}
		inflight -= g;
		if (rc && !inflight)
			goto out;
		if (rc)
			cur = n; /* stop submitting, drain */
	}
out:
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0 && close(fds[i]) && !rc) {
			rc = -errno;
			fprintf(stderr, "replay: close %s: %s\n", jobs[i].path, strerror(errno));
		}
	return rc;
}

/* ---- one rank ---------------------------------------------------------------------- */

struct bufset {
	float *p, *m, *v, *g;
};

static void *xalloc(uint64_t bytes)
{
	void *p = NULL;
	int r = posix_memalign(&p, 4096, bytes ? bytes : 4096);
	if (r) {
		fprintf(stderr, "replay: posix_memalign %" PRIu64 " bytes: %s\n", bytes,
			strerror(r));
		exit(1);
	}
	memset(p, 0, bytes); /* first touch here, not inside a timed phase */
	return p;
}

/* For the probe: huge-page backed, as the tierfs RAM tier is. With 4 KiB
 * pages a 1 MiB O_DIRECT request is split into many segments, and a virtio
 * disk then reads at 1.2-2.8 GB/s where it reads 3.2-3.7 GB/s into huge
 * pages: the probe must measure the disk, not the buffer. The replay's own
 * buffers stay plain, as DeepSpeed's pinned buffers are. */
static void *xalloc_huge(uint64_t bytes)
{
	const uint64_t huge = 2ull << 20;
	void *m =
	    mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		fprintf(stderr, "replay: mmap %" PRIu64 " bytes: %s\n", bytes, strerror(errno));
		exit(1);
	}
	char *p = (char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
	/* Trim the slack, so that munmap(p, bytes) releases it all. */
	uint64_t head = (uint64_t)(p - (char *)m);
	if ((head && munmap(m, head)) || munmap(p + bytes, huge - head)) {
		fprintf(stderr, "replay: munmap: %s\n", strerror(errno));
		exit(1);
	}
	(void)madvise(p, bytes, MADV_HUGEPAGE); /* advice: plain pages still work */
	memset(p, 0, bytes);
	return p;
}

static int nstate_jobs(struct iojob *j, int rank, int sg, struct bufset *b, bool with_grads)
{
	int n = 0;
	float *bufs[3] = {b->p, b->m, b->v};
	for (int k = 0; k < 3; k++) {
		(void)file_path(j[n].path, sizeof(j[n].path), rank, sg, k, 0);
		j[n].buf = bufs[k];
		j[n].bytes = sgs[sg].numel * 4;
		n++;
	}
	if (with_grads)
		for (int gi = 0; gi < o.grad_files; gi++) {
			(void)file_path(j[n].path, sizeof(j[n].path), rank, sg, K_GRAD, gi);
			j[n].buf = b->g + sgs[sg].goff[gi];
			j[n].bytes = sgs[sg].gnum[gi] * 4;
			n++;
		}
	return n;
}

struct xfer {
	io_context_t ctx;
	int rank, sg, step;
	struct bufset *b;
	bool write;
	int rc;
	pthread_t th;
	bool running;
};

static void *xfer_main(void *arg)
{
	struct xfer *x = arg;
	struct iojob jobs[MAX_FILES_PER_BATCH];
	int n = nstate_jobs(jobs, x->rank, x->sg, x->b, !x->write);
	double t0 = now();
	x->rc = run_batch(x->ctx, jobs, n, x->write);
	double t1 = now();
	trace(x->rank, x->step, x->write ? 'W' : 'R', x->sg, t0, t1, t1);
	return NULL;
}

static int xfer_start(struct xfer *x)
{
	int r = pthread_create(&x->th, NULL, xfer_main, x);
	if (r) {
		fprintf(stderr, "replay: pthread_create: %s\n", strerror(r));
		return -r;
	}
	x->running = true;
	return 0;
}

static int xfer_join(struct xfer *x)
{
	if (!x->running)
		return 0;
	pthread_join(x->th, NULL);
	x->running = false;
	return x->rc;
}

static uint64_t sg_bytes(int sg, bool with_grads)
{
	return sgs[sg].numel * 4 * (with_grads ? 4 : 3);
}

/*
 * Snapshot of the file system's counters (MNT/.tierfs/stats) at a phase
 * boundary, so the report can attribute tier bytes to one phase of one step.
 * Taken by rank 0 between two barriers: outside every timed phase.
 */
static void snapshot(int rank, int step, const char *phase)
{
	if (rank != 0 || !o.stats || !o.stats_out)
		return;
	char dst[4096];
	int r = snprintf(dst, sizeof(dst), "%s/step%d-%s", o.stats_out, step, phase);
	if (r < 0 || (size_t)r >= sizeof(dst))
		return;
	FILE *in = fopen(o.stats, "r");
	if (!in) {
		fprintf(stderr, "replay: stats snapshot: open %s: %s\n", o.stats, strerror(errno));
		return;
	}
	FILE *out = fopen(dst, "w");
	if (!out) {
		fprintf(stderr, "replay: stats snapshot: create %s: %s\n", dst, strerror(errno));
		fclose(in);
		return;
	}
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			break;
	if (ferror(in) || fclose(out))
		fprintf(stderr, "replay: stats snapshot %s -> %s failed\n", o.stats, dst);
	fclose(in);
}

static void barrier(void)
{
	pthread_barrier_wait(&shm->bar);
}

#define FAIL_IF(expr)                                                                              \
	do {                                                                                       \
		int rc_ = (expr);                                                                  \
		if (rc_) {                                                                         \
			fprintf(stderr, "replay: rank %d: %s failed at %s:%d: %s\n", rank, #expr,  \
				__FILE__, __LINE__, strerror(-rc_));                               \
			shm->failed = 1;                                                           \
			_exit(1);                                                                  \
		}                                                                                  \
	} while (0)

static void progress(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(int rank, const char *fmt, ...)
{
	if (rank != 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "[replay] ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int verify_rank(int rank, io_context_t ctx, struct bufset *exp, struct bufset *got)
{
	int bad = 0;
	for (int sg = 0; sg < nsg; sg++) {
		uint64_t n = sgs[sg].numel;
		gen(exp->p, n, seed_of(rank, sg, K_PARAM, 0), false);
		gen(exp->m, n, seed_of(rank, sg, K_EXP_AVG, 0), false);
		gen(exp->v, n, seed_of(rank, sg, K_EXP_AVG_SQ, 0), true);
		for (int s = 1; s <= o.steps; s++) {
			gen(exp->g, n, seed_of(rank, sg, K_GRAD, s), false);
			adam(exp->p, exp->m, exp->v, exp->g, n);
		}
		if (o.steps == 0)
			gen(exp->g, n, seed_of(rank, sg, K_GRAD, 0), false);
		struct iojob jobs[MAX_FILES_PER_BATCH];
		int nj = nstate_jobs(jobs, rank, sg, got, true);
		if (o.state_only && nj > 3)
			nj = 3; /* gradients with persistent = no do not outlive a mount */
		int rc = run_batch(ctx, jobs, nj, false);
		if (rc)
			return rc;
		for (int j = 0; j < nj; j++) {
			const char *e = (const char *)exp->p;
			const char *g = (const char *)got->p;
			if (j == 1) {
				e = (const char *)exp->m;
				g = (const char *)got->m;
			} else if (j == 2) {
				e = (const char *)exp->v;
				g = (const char *)got->v;
			} else if (j >= 3) {
				e = (const char *)(exp->g + sgs[sg].goff[j - 3]);
				g = (const char *)jobs[j].buf;
			}
			if (memcmp(e, g, jobs[j].bytes) == 0)
				continue;
			uint64_t i = 0;
			while (e[i] == g[i])
				i++;
			fprintf(stderr,
				"replay: VERIFY MISMATCH rank %d %s: first differing byte at "
				"offset %" PRIu64 " (1 MiB block %" PRIu64 ")\n",
				rank, jobs[j].path, i, i >> 20);
			bad++;
		}
	}
	return bad;
}

static void rank_main(int rank)
{
	char d[4096];
	rank_dir(d, sizeof(d), rank);
	FAIL_IF(mkdir_p(d));
	io_context_t rctx = 0, wctx = 0;
	FAIL_IF(io_setup(o.qd, &rctx));
	FAIL_IF(io_setup(o.qd, &wctx));
	uint64_t maxn = sgs[0].numel;
	int nsets = o.pipeline ? 3 : 1;
	struct bufset set[3];
	for (int i = 0; i < nsets; i++) {
		set[i].p = xalloc(maxn * 4);
		set[i].m = xalloc(maxn * 4);
		set[i].v = xalloc(maxn * 4);
		set[i].g = xalloc(maxn * 4);
	}
	struct stepstat *st = &shm->st[rank * (o.steps + 1)];

	if (o.verify_only)
		goto verify;
	/* Step 0: init writes every file from scratch. */
	barrier();
	st[0].bwd_t0 = st[0].upd_t0 = now();
	for (int sg = 0; sg < nsg; sg++) {
		uint64_t n = sgs[sg].numel;
		gen(set[0].p, n, seed_of(rank, sg, K_PARAM, 0), false);
		gen(set[0].m, n, seed_of(rank, sg, K_EXP_AVG, 0), false);
		gen(set[0].v, n, seed_of(rank, sg, K_EXP_AVG_SQ, 0), true);
		gen(set[0].g, n, seed_of(rank, sg, K_GRAD, 0), false);
		struct iojob jobs[MAX_FILES_PER_BATCH];
		int nj = nstate_jobs(jobs, rank, sg, &set[0], true);
		FAIL_IF(run_batch(wctx, jobs, nj, true));
		st[0].wr += sg_bytes(sg, true);
		progress(rank, "init: wrote sub-group %d/%d", sg + 1, nsg);
	}
	st[0].bwd_t1 = st[0].upd_t1 = now();
	barrier();
	snapshot(rank, 0, "init");

	for (int s = 1; s <= o.steps; s++) {
		struct stepstat *t = &st[s];
		/* backward: every gradient file; generation is not timed (it stands in for GPU
		 * work) */
		barrier();
		t->bwd_t0 = now();
		for (int sg = 0; sg < nsg; sg++) {
			compute_for(o.compute / nsg);
			gen(set[0].g, sgs[sg].numel, seed_of(rank, sg, K_GRAD, s), false);
			struct iojob jobs[MAX_FILES_PER_BATCH];
			int nj = 0;
			for (int gi = 0; gi < o.grad_files; gi++, nj++) {
				file_path(jobs[nj].path, sizeof(jobs[nj].path), rank, sg, K_GRAD,
					  gi);
				jobs[nj].buf = set[0].g + sgs[sg].goff[gi];
				jobs[nj].bytes = sgs[sg].gnum[gi] * 4;
			}
			double t0 = now();
			FAIL_IF(run_batch(wctx, jobs, nj, true));
			t->bwd_io += now() - t0;
			t->wr += sgs[sg].numel * 4;
		}
		t->bwd_t1 = now();
		barrier();
		snapshot(rank, s, "backward");
		progress(rank, "step %d/%d: backward %.3f s (gradient writes)", s, o.steps,
			 t->bwd_io);

		/* update phase */
		barrier();
		t->upd_t0 = now();
		if (!o.pipeline) {
			for (int sg = 0; sg < nsg; sg++) {
				struct xfer x = {
				    .ctx = rctx, .rank = rank, .sg = sg, .step = s, .b = &set[0]};
				xfer_main(&x);
				FAIL_IF(x.rc);
				double c0 = now();
				adam(set[0].p, set[0].m, set[0].v, set[0].g, sgs[sg].numel);
				double c1 = now();
				t->upd_cpu += c1 - c0;
				trace(rank, s, 'A', sg, c0, c1, c1);
				x.ctx = wctx;
				x.write = true;
				xfer_main(&x);
				FAIL_IF(x.rc);
				t->rd += sg_bytes(sg, true);
				t->wr += sg_bytes(sg, false);
			}
		} else if (!o.lockstep) {
			/* PipelinedOptimizerSwapper (DeepSpeed 0.19): swap_in(i)
			 * waits for the read of i, then starts the read of
			 * i+1; after the update, swap_out(i) waits for the
			 * write of i-1, then starts the write of i, which runs
			 * beside the rest of the read of i+1. Three buffer
			 * sets: i, i+1 being read, i-1 or i being written. */
			struct xfer rd = {.ctx = rctx, .rank = rank, .step = s},
				    wr = {.ctx = wctx, .rank = rank, .step = s, .write = true};
			for (int sg = 0; sg < nsg; sg++) {
				if (sg == 0) {
					rd.sg = 0;
					rd.b = &set[0];
					xfer_main(&rd);
					FAIL_IF(rd.rc);
				} else {
					FAIL_IF(xfer_join(&rd));
				}
				if (sg + 1 < nsg) {
					rd.sg = sg + 1;
					rd.b = &set[(sg + 1) % 3];
					FAIL_IF(xfer_start(&rd));
				}
				double c0 = now();
				struct bufset *b = &set[sg % 3];
				adam(b->p, b->m, b->v, b->g, sgs[sg].numel);
				double c1 = now();
				t->upd_cpu += c1 - c0;
				if (sg > 0)
					FAIL_IF(xfer_join(&wr));
				trace(rank, s, 'A', sg, c0, c1, now());
				wr.sg = sg;
				wr.b = b;
				/* The last write is synchronous, as DeepSpeed's. */
				if (sg + 1 < nsg) {
					FAIL_IF(xfer_start(&wr));
				} else {
					xfer_main(&wr);
					FAIL_IF(wr.rc);
				}
				t->rd += sg_bytes(sg, true);
				t->wr += sg_bytes(sg, false);
			}
		} else {
			struct xfer rd = {.ctx = rctx, .rank = rank, .step = s},
				    wr = {.ctx = wctx, .rank = rank, .step = s, .write = true};
			rd.sg = 0;
			rd.b = &set[0];
			xfer_main(&rd);
			FAIL_IF(rd.rc);
			for (int sg = 0; sg < nsg; sg++) {
				if (sg + 1 < nsg) {
					rd.sg = sg + 1;
					rd.b = &set[(sg + 1) % 3];
					FAIL_IF(xfer_start(&rd));
				}
				if (sg > 0) {
					wr.sg = sg - 1;
					wr.b = &set[(sg - 1) % 3];
					FAIL_IF(xfer_start(&wr));
				}
				double c0 = now();
				struct bufset *b = &set[sg % 3];
				adam(b->p, b->m, b->v, b->g, sgs[sg].numel);
				double c1 = now();
				t->upd_cpu += c1 - c0;
				FAIL_IF(xfer_join(&rd));
				FAIL_IF(xfer_join(&wr));
				trace(rank, s, 'A', sg, c0, c1, now());
				t->rd += sg_bytes(sg, true);
				t->wr += sg_bytes(sg, false);
			}
			wr.sg = nsg - 1;
			wr.b = &set[(nsg - 1) % 3];
			xfer_main(&wr);
			FAIL_IF(wr.rc);
		}
		t->upd_t1 = now();
		barrier();
		snapshot(rank, s, "update");
		progress(rank, "step %d/%d: update %.3f s (%.0f MB/s read+write per rank)", s,
			 o.steps, t->upd_t1 - t->upd_t0,
			 (t->rd + t->wr - rank_params * 4) / 1e6 / (t->upd_t1 - t->upd_t0));
	}

verify:
	if (o.verify) {
		progress(rank, "verifying every file");
		struct bufset exp = set[0], got;
		if (nsets < 2) {
			got.p = xalloc(maxn * 4);
			got.m = xalloc(maxn * 4);
			got.v = xalloc(maxn * 4);
			got.g = xalloc(maxn * 4);
		} else {
			got = set[1];
		}
		int bad = verify_rank(rank, rctx, &exp, &got);
		if (bad < 0) {
			fprintf(stderr, "replay: rank %d: verify read failed: %s\n", rank,
				strerror(-bad));
			bad = 1;
		}
		if (rank < 64)
			shm->verify_bad[rank] = bad;
	}
	io_destroy(rctx);
	io_destroy(wctx);
	_exit(0);
}

/* ---- probe: the disk's bandwidth with the replay's engine ------------------------ */

/*
 * One sequential pass of `size` bytes: reads from rfd and/or writes to wfd
 * (either may be -1), at most o.qd requests of each kind in flight, as the
 * pipelined update keeps a read handle and a write handle busy at once.
 * Returns seconds, or a negative value on error.
 */
static double probe_pass(io_context_t ctx, int rfd, int wfd, uint64_t size, uint64_t wbase,
			 char *buf, uint64_t chunk)
{
	struct iocb cbs[128], *cbp[1];
	int freel[128], nfree = 0, inflight[2] = {0, 0};
	uint64_t off[2] = {0, 0};
	int fds[2] = {rfd, wfd};
	for (int k = 0; k < 2 * o.qd; k++)
		freel[nfree++] = k;
	double t0 = now();
	for (;;) {
		for (int w = 0; w < 2; w++) {
			while (fds[w] >= 0 && off[w] < size && inflight[w] < o.qd) {
				uint64_t len = size - off[w] < o.req ? size - off[w] : o.req;
				int slot = freel[--nfree];
				struct iocb *cb = &cbs[slot];
				/* reads land in the second half of the buffer, writes come from the
				 * first */
				char *b = buf + (off[w] % (chunk / 2)) + (w ? 0 : chunk / 2);
				if (w)
					io_prep_pwrite(cb, fds[w], b, len,
						       (long long)(wbase + off[w]));
				else
					io_prep_pread(cb, fds[w], b, len, (long long)off[w]);
				cb->data = (void *)(uintptr_t)w;
				cbp[0] = cb;
				int r = io_submit(ctx, 1, cbp);
				if (r != 1) {
					fprintf(stderr, "replay: probe io_submit %s: %s\n", o.probe,
						strerror(r < 0 ? -r : EIO));
					return -1;
				}
				off[w] += len;
				inflight[w]++;
			}
		}
		if (!inflight[0] && !inflight[1])
			break;
		struct io_event ev[128];
		int g = io_getevents(ctx, 1, 128, ev, NULL);
		if (g < 0) {
			if (g == -EINTR)
				continue;
			fprintf(stderr, "replay: probe io_getevents: %s\n", strerror(-g));
			return -1;
		}
		for (int k = 0; k < g; k++) {
			int w = (int)(uintptr_t)ev[k].obj->data;
			if ((long long)ev[k].res != (long long)ev[k].obj->u.c.nbytes) {
				fprintf(stderr, "replay: probe %s %s at %lld: res %lld\n",
					w ? "write" : "read", o.probe, ev[k].obj->u.c.offset,
					(long long)ev[k].res);
				return -1;
			}
			inflight[w]--;
			freel[nfree++] = (int)(ev[k].obj - cbs);
		}
	}
	return now() - t0;
}

/*
 * --probe FILE: write FILE (--probe-size; new blocks: the file system
 * allocates), overwrite it (what steady-state swap writes do: DeepSpeed
 * rewrites its files in place), read it, then read its first half while
 * overwriting its second half (mixed: what a pipelined update does to one
 * device). --probe-read-only: only read the existing FILE.
 */
static int probe(void)
{
	io_context_t ctx = 0;
	int rc = io_setup(2 * o.qd, &ctx);
	if (rc) {
		fprintf(stderr, "replay: io_setup: %s\n", strerror(-rc));
		return 1;
	}
	uint64_t chunk = 256ull << 20; /* one buffer reused: the probe measures the disk */
	uint64_t size = o.probe_size;
	if (o.probe_read_only) {
		struct stat st;
		if (stat(o.probe, &st)) {
			fprintf(stderr, "replay: stat %s: %s\n", o.probe, strerror(errno));
			return 1;
		}
		size = (uint64_t)st.st_size & ~1023ull;
	}
	size &= ~((2ull << 20) - 1); /* halves of whole MiB for the mixed pass */
	if (!size) {
		fprintf(stderr, "replay: probe size must be at least 2 MiB\n");
		return 1;
	}
	char *buf = xalloc_huge(chunk);
	gen((float *)buf, chunk / 4, 12345, false);
	double at = 0, wt = 0, rt = 0, mt = 0;
	int fd = -1;
	errno = 0;
	if (!o.probe_read_only) {
		fd = open(o.probe, O_WRONLY | O_CREAT | O_DIRECT, 0600);
		if (fd < 0)
			goto err;
		at = probe_pass(ctx, -1, fd, size, 0, buf, chunk);
		wt = at < 0 ? -1 : probe_pass(ctx, -1, fd, size, 0, buf, chunk);
		if (wt < 0 || close(fd))
			goto err;
	}
	fd = open(o.probe, o.probe_read_only ? O_RDONLY | O_DIRECT : O_RDWR | O_DIRECT);
	if (fd < 0)
		goto err;
	rt = probe_pass(ctx, fd, -1, size, 0, buf, chunk);
	if (rt < 0)
		goto err;
	if (!o.probe_read_only) {
		mt = probe_pass(ctx, fd, fd, size / 2, size / 2, buf, chunk);
		if (mt < 0)
			goto err;
	}
	if (close(fd))
		goto err;
	io_destroy(ctx);
	if (munmap(buf, chunk))
		goto err;
	printf("{\"file\": \"%s\", \"bytes\": %" PRIu64 ", \"write_alloc_Bps\": %.0f, "
	       "\"write_Bps\": %.0f, \"read_Bps\": %.0f, \"mixed_Bps\": %.0f}\n",
	       o.probe, size, at > 0 ? size / at : 0, wt > 0 ? size / wt : 0, size / rt,
	       mt > 0 ? size / mt : 0);
	return 0;
err:
	fprintf(stderr, "replay: probe of %s failed%s%s\n", o.probe, errno ? ": " : "",
		errno ? strerror(errno) : "");
	return 1;
}

/* ---- main ------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: tierfs-replay --dir DIR [options]\n"
	       "  --dir DIR             nvme_path (files go to DIR/zero_stage_3/optimizer/rankR/)\n"
	       "  --state-size SIZE     fp32 param+exp_avg+exp_avg_sq bytes over all ranks (12 "
	       "B/param;\n"
	       "                        gradients add 4 B/param) [256M]\n"
	       "  --subgroup-size N     params per sub-group (e.g. 1e8, 8M) [state/12/ranks/8]\n"
	       "  --ranks N             processes, each its own rank dir [1]\n"
	       "  --steps N             steps after the init step [3]\n"
	       "  --pipeline on|lockstep|off\n"
	       "                        on: DeepSpeed's pipelined swapper: start the read of\n"
	       "                        i+1 once i is in, write i once i-1 is written, so\n"
	       "                        the write of i runs beside the read of i+1;\n"
	       "                        lockstep: read i+1 and write i-1 during update i,\n"
	       "                        both joined before i+1; off: one at a time [on]\n"
	       "  --grad-files N        gradient files per sub-group [2]\n"
	       "  --queue-depth N       [8]   --block-size SIZE  aio request size [1M]\n"
	       "  --compute SEC         forward+backward compute per step, spread before\n"
	       "                        each sub-group's gradient writes (no I/O of its own:\n"
	       "                        what a real step leaves the disk between updates) [0]\n"
	       "  --verify              check every file's content after the last step\n"
	       "  --json FILE           per-step times and bytes\n"
	       "  --trace FILE          a line per transfer and Adam pass of the update phase:\n"
	       "                        rank step R|W|A sub-group start end joined (seconds,\n"
	       "                        CLOCK_MONOTONIC; R/W: a sub-group's reads/writes,\n"
	       "                        A: its Adam pass, then the wait for the joins:\n"
	       "                        the write of i-1 (on), both transfers (lockstep))\n"
	       "  --probe FILE [--probe-size SIZE] [--probe-read-only]\n"
	       "                        measure O_DIRECT write then read bandwidth of FILE\n");
}

static double maxd(double a, double b)
{
	return a > b ? a : b;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"dir", 1, 0, 'd'},		  {"state-size", 1, 0, 's'},
	    {"subgroup-size", 1, 0, 'g'}, {"ranks", 1, 0, 'r'},
	    {"steps", 1, 0, 'n'},	  {"pipeline", 1, 0, 'p'},
	    {"verify", 0, 0, 'V'},	  {"json", 1, 0, 'j'},
	    {"grad-files", 1, 0, 'G'},	  {"queue-depth", 1, 0, 'q'},
	    {"block-size", 1, 0, 'b'},	  {"probe", 1, 0, 'P'},
	    {"probe-size", 1, 0, 'S'},	  {"probe-read-only", 0, 0, 'R'},
	    {"verify-only", 0, 0, 'O'},	  {"verify-state-only", 0, 0, 'Y'},
	    {"stats", 1, 0, 'T'},	  {"stats-out", 1, 0, 'U'},
	    {"compute", 1, 0, 'C'},	  {"trace", 1, 0, 'X'},
	    {"help", 0, 0, 'h'},	  {0, 0, 0, 0}};
	int c;
	uint64_t v;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			o.dir = optarg;
			break;
		case 's':
			if (parse_size(optarg, &o.state))
				goto bad;
			break;
		case 'g':
			if (parse_size(optarg, &o.sg_params))
				goto bad;
			break;
		case 'r':
			o.ranks = atoi(optarg);
			break;
		case 'n':
			o.steps = atoi(optarg);
			break;
		case 'p':
			o.lockstep = !strcmp(optarg, "lockstep");
			if (!strcmp(optarg, "on") || o.lockstep)
				o.pipeline = true;
			else if (!strcmp(optarg, "off"))
				o.pipeline = false;
			else
				goto bad;
			break;
		case 'V':
			o.verify = true;
			break;
		case 'j':
			o.json = optarg;
			break;
		case 'G':
			o.grad_files = atoi(optarg);
			break;
		case 'q':
			o.qd = atoi(optarg);
			break;
		case 'b':
			if (parse_size(optarg, &v))
				goto bad;
			o.req = v;
			break;
		case 'P':
			o.probe = optarg;
			break;
		case 'S':
			if (parse_size(optarg, &o.probe_size))
				goto bad;
			break;
		case 'T':
			o.stats = optarg;
			break;
		case 'U':
			o.stats_out = optarg;
			break;
		case 'Y':
			o.state_only = true;
			/* fall through */
		case 'O':
			o.verify = o.verify_only = true;
			break;
		case 'R':
			o.probe_read_only = true;
			break;
		case 'C': {
			char *end;
			errno = 0;
			o.compute = strtod(optarg, &end);
			if (errno || end == optarg || *end ||
			    !(o.compute >= 0 && o.compute <= 3600))
				goto bad;
			break;
		}
		case 'X':
			o.trace = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (o.qd < 1 || o.qd > 64 || o.req < 1024 || o.req % 1024) {
		fprintf(stderr,
			"replay: --queue-depth must be 1..64, --block-size a multiple of 1024\n");
		return 2;
	}
	if (o.probe)
		return probe();
	/* names are dir + at most ~150 bytes: checked once here, not at every open */
	if (o.dir && strlen(o.dir) > 3840) {
		fprintf(stderr, "replay: --dir path too long\n");
		return 2;
	}
	if (!o.dir || o.ranks < 1 || o.ranks > 64 || o.steps < 0 || o.grad_files < 1 ||
	    o.grad_files > MAX_FILES_PER_BATCH - 3)
		goto bad;

	rank_params = o.state / 12 / (uint64_t)o.ranks / PARAM_ALIGN * PARAM_ALIGN;
	if (rank_params < PARAM_ALIGN * (uint64_t)o.grad_files) {
		fprintf(stderr, "replay: --state-size too small for %d ranks\n", o.ranks);
		return 2;
	}
	if (o.trace) {
		trace_fd = open(o.trace, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
		if (trace_fd < 0) {
			fprintf(stderr, "replay: --trace %s: %s\n", o.trace, strerror(errno));
			return 2;
		}
	}
	if (!o.sg_params)
		o.sg_params = (rank_params + 7) / 8;
	o.sg_params = (o.sg_params + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
	if (o.sg_params < PARAM_ALIGN * (uint64_t)o.grad_files)
		o.sg_params = PARAM_ALIGN * (uint64_t)o.grad_files;
	nsg = (int)((rank_params + o.sg_params - 1) / o.sg_params);
	sgs = calloc((size_t)nsg, sizeof(*sgs));
	if (!sgs)
		return 1;
	for (int i = 0; i < nsg; i++) {
		struct subgroup *s = &sgs[i];
		uint64_t left = rank_params - (uint64_t)i * o.sg_params;
		s->numel = left < o.sg_params ? left : o.sg_params;
		/* Each sub-group spans 4 parameter tensors, as ds_id ranges do. */
		snprintf(s->id, sizeof(s->id), "%d_%d", 4 * i, 4 * i + 3);
		uint64_t units = s->numel / PARAM_ALIGN, off = 0;
		for (int g = 0; g < o.grad_files; g++) {
			uint64_t end =
			    units * (uint64_t)(g + 1) / (uint64_t)o.grad_files * PARAM_ALIGN;
			if (g == o.grad_files - 1)
				end = s->numel;
			s->goff[g] = off;
			s->gnum[g] = end - off;
			off = end;
		}
	}
	fprintf(stderr,
		"[replay] %s: %d rank(s) x %d sub-groups of %" PRIu64
		" params; state %.2f GiB + gradients %.2f GiB; %d steps; pipeline %s\n",
		o.dir, o.ranks, nsg, o.sg_params, rank_params * 12.0 * o.ranks / (1 << 30),
		rank_params * 4.0 * o.ranks / (1 << 30), o.steps,
		!o.pipeline  ? "off"
		: o.lockstep ? "lockstep"
			     : "on (DeepSpeed's order)");

	size_t shsz = sizeof(struct shared) +
		      sizeof(struct stepstat) * (size_t)o.ranks * (size_t)(o.steps + 1);
	shm = mmap(NULL, shsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED) {
		perror("replay: mmap shared stats");
		return 1;
	}
	pthread_barrierattr_t ba;
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	if (pthread_barrier_init(&shm->bar, &ba, (unsigned)o.ranks)) {
		fprintf(stderr, "replay: pthread_barrier_init failed\n");
		return 1;
	}
	fflush(NULL);
	pid_t pids[64];
	for (int r = 0; r < o.ranks; r++) {
		pids[r] = fork();
		if (pids[r] < 0) {
			perror("replay: fork");
			for (int k = 0; k < r; k++)
				kill(pids[k], SIGKILL);
			return 1;
		}
		if (pids[r] == 0) {
			/* a killed replay must not leave ranks writing behind it */
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
				_exit(1);
			rank_main(r);
		}
	}
	int failed = 0;
	for (int done = 0; done < o.ranks; done++) {
		int status;
		pid_t p = wait(&status);
		if (p < 0) {
			perror("replay: wait");
			return 1;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr,
				"replay: rank process %d failed; stopping the other ranks\n",
				(int)p);
			/* the others would wait forever at the barrier */
			for (int r = 0; r < o.ranks; r++)
				if (pids[r] != p)
					kill(pids[r], SIGKILL);
			failed = 1;
		}
	}
	if (failed)
		return 1;

	/* Phase time = first rank's start to last rank's end (CLOCK_MONOTONIC is system-wide). */
	FILE *j = NULL;
	if (o.json) {
		j = fopen(o.json, "w");
		if (!j) {
			fprintf(stderr, "replay: open %s: %s\n", o.json, strerror(errno));
			return 1;
		}
		fprintf(j,
			"{\"dir\": \"%s\", \"state_bytes\": %" PRIu64 ", \"grad_bytes\": %" PRIu64
			", \"ranks\": %d, \"subgroups_per_rank\": %d, \"subgroup_params\": %" PRIu64
			", \"grad_files\": %d, \"pipeline\": %s, \"schedule\": \"%s\", "
			"\"queue_depth\": %d, \"request_bytes\": %zu, \"compute_s\": %.3f, "
			"\"steps\": [",
			o.dir, rank_params * 12 * o.ranks, rank_params * 4 * o.ranks, o.ranks, nsg,
			o.sg_params, o.grad_files, o.pipeline ? "true" : "false",
			!o.pipeline  ? "serial"
			: o.lockstep ? "lockstep"
				     : "deepspeed",
			o.qd, o.req, o.compute);
	}
	for (int s = 0; s <= o.steps; s++) {
		double b0 = 1e300, b1 = 0, u0 = 1e300, u1 = 0, bio = 0, cpu = 0;
		uint64_t rd = 0, wr = 0;
		for (int r = 0; r < o.ranks; r++) {
			struct stepstat *t = &shm->st[r * (o.steps + 1) + s];
			b0 = t->bwd_t0 < b0 ? t->bwd_t0 : b0;
			b1 = maxd(b1, t->bwd_t1);
			u0 = t->upd_t0 < u0 ? t->upd_t0 : u0;
			u1 = maxd(u1, t->upd_t1);
			bio = maxd(bio, t->bwd_io);
			cpu = maxd(cpu, t->upd_cpu);
			rd += t->rd;
			wr += t->wr;
		}
		if (j)
			fprintf(j,
				"%s\n  {\"step\": %d, \"init\": %s, \"backward_s\": %.6f, "
				"\"backward_wall_s\": %.6f, \"update_s\": %.6f, \"update_cpu_s\": "
				"%.6f, "
				"\"bytes_read\": %" PRIu64 ", \"bytes_written\": %" PRIu64
				", \"update_rank_end_s\": [",
				s ? "," : "", s, s ? "false" : "true", s ? bio : 0.0,
				s ? b1 - b0 : 0.0, s ? u1 - u0 : b1 - b0, cpu, rd, wr);
		/* When each rank finished, from the first one's start: the
		 * step lasts as long as the slowest rank's update. */
		for (int r = 0; j && r < o.ranks; r++)
			fprintf(j, "%s%.6f", r ? ", " : "",
				shm->st[r * (o.steps + 1) + s].upd_t1 - u0);
		if (j)
			fprintf(j, "]}");
		if (s == 0 && !o.verify_only)
			fprintf(stderr, "[replay] init: %.3f s, %.2f GB written\n", b1 - b0,
				wr / 1e9);
	}
	int verify_bad = 0;
	for (int r = 0; r < o.ranks && r < 64; r++)
		verify_bad += shm->verify_bad[r];
	if (j) {
		fprintf(j, "\n], \"verify\": \"%s\"}\n",
			!o.verify    ? "skipped"
			: verify_bad ? "failed"
				     : "ok");
		if (fclose(j)) {
			fprintf(stderr, "replay: write %s: %s\n", o.json, strerror(errno));
			return 1;
		}
	}
	if (o.verify) {
		if (verify_bad) {
			fprintf(stderr, "[replay] verify: %d file(s) differ\n", verify_bad);
			return 3;
		}
		fprintf(stderr, "[replay] verify: every file matches\n");
	}
	return 0;
bad:
	usage(stderr);
	return 2;
}
