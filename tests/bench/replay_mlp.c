/*
 * tierfs-replay --mlp: MLP-Offload's in-application scheme (SC'25; DataStates'
 * DeepSpeed fork, branch dist_nvme_opt) on plain directories, so that the
 * bench can put a modified application beside tierfs under an unchanged one.
 *
 * Reproduced:
 * - whole sub-groups per path: sub-group i lives on the "minor" path when
 *   i % ratio == 0, on the other path otherwise; a static ratio, as its code
 *   has (it ran with 3), not one measured while it runs. With --mlp-ratio N
 *   the minor path is the second one, as in its code; --mlp-ratio auto
 *   picks the ratio and the minor path that give the steady step the least
 *   I/O time for the two paths' bandwidths (--path-bps), counting the
 *   sub-groups that really move in each step (mlp_best_ratio());
 * - the update order alternates: odd steps 0..N-1, even steps N-1..0;
 * - the last K sub-groups of a step stay in host buffers, unwritten, and the
 *   next step starts on them with no read; K is what the host RAM budget
 *   (--host-ram, all ranks) holds beside the gradients, or --mlp-keep;
 * - gradients are bf16 in host memory (written there by the backward phase,
 *   rounded to nearest even), upcast per sub-group just before Adam: no
 *   gradient file is written or read;
 * - one process per node reads, and one writes, at a time: a read lock and a
 *   write lock shared by the rank processes (its code's two inter-process
 *   file locks), held around each sub-group's read and each sub-group's
 *   write; a rank's own transfers may overlap, as its threads' do;
 * - the second path's cap (--dir2-cap, each way) is paced here at dispatch,
 *   as tierfs paces a tier's max_bandwidth; the disk is capped by the
 *   bench's cgroup for every setup alike;
 * - one optimizer swapper per path, each pipelined as DeepSpeed's: it reads
 *   its path's next sub-group in the order ahead of the update and writes
 *   one behind it, so both paths move data at once (five sub-group buffers
 *   in flight where DeepSpeed has three; like DeepSpeed's, they are not
 *   counted in the host RAM budget); the step ends with its writes done;
 * - the transfers are DeepSpeed's (file names, O_DIRECT, libaio, 1 MiB
 *   requests at queue depth 8).
 * Not reproduced: GPU work and the fp16/bf16 parameter copy sent back to the
 * GPU; MLP-Offload's own buffer pool sizes and its concurrent PFS client
 * (a directory stands in for the parallel file system); checkpointing of
 * the kept sub-groups mid-run (they are written after the last step,
 * outside the timed phases, before --verify).
 *
 * Content and --verify as the rest of the replay, except that the gradient
 * Adam sees is the bf16 rounding of the generated one.
 */
#include <errno.h>
#include <inttypes.h>
#include <libaio.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "replay.h"

/* Shared by the rank processes (MAP_SHARED, set up before they fork). */
struct mlp_shared {
	struct {
		pthread_mutex_t mu;
		pthread_cond_t cv;
		int owner; /* rank holding the lock, -1: none; guarded by mu */
		int count; /* that rank's transfers under it; guarded by mu */
	} lock[2];	   /* [write]: the read lock and the write lock */
	struct {
		pthread_mutex_t mu;
		double next[2]; /* [write]: when the next request may start; guarded by mu */
	} pace[2];
};

static struct mlp_shared *mlp_sh;
static size_t dir_len, dir2_len;

/* ---- the scheme's pure parts (checked by --mlp-selftest) ------------------------ */

int mlp_path_of(int sg, int ratio, int minor)
{
	return sg % ratio == 0 ? minor : 1 - minor;
}

void mlp_order(int step, int nsg, int *order)
{
	for (int j = 0; j < nsg; j++)
		order[j] = step % 2 ? j : nsg - 1 - j;
}

/* Seconds of I/O of a steady step on the busier path: each path moves its
 * reads and its writes at once (capped each way), so a path takes
 * max(read, write) bytes over its bandwidth. Averaged over an ascending
 * and a descending step: the kept sub-groups differ. */
double mlp_step_io_s(int nsg, const uint64_t *sg_bytes, int keep, int ratio, int minor,
		     const double bps[2])
{
	double total = 0;
	int order[1024];
	if (nsg > 1024)
		return -1;
	for (int step = 1; step <= 2; step++) {
		mlp_order(step, nsg, order);
		double rd[2] = {0, 0}, wr[2] = {0, 0};
		for (int j = 0; j < nsg; j++) {
			int p = mlp_path_of(order[j], ratio, minor);
			if (j >= keep) /* the previous step kept the first `keep` of this one */
				rd[p] += (double)sg_bytes[order[j]];
			if (j < nsg - keep)
				wr[p] += (double)sg_bytes[order[j]];
		}
		double worst = 0;
		for (int p = 0; p < 2; p++) {
			double b = rd[p] > wr[p] ? rd[p] : wr[p];
			if (b > 0 && bps[p] <= 0)
				return -1;
			double t = b > 0 ? b / bps[p] : 0;
			worst = t > worst ? t : worst;
		}
		total += worst;
	}
	return total / 2;
}

/* The static ratio (1..nsg) and minor path with the least mlp_step_io_s;
 * ties go to the smaller ratio, then to the disk as the minor path. A path
 * of bandwidth 0 is never used. Returns the ratio. */
int mlp_best_ratio(int nsg, const uint64_t *sg_bytes, int keep, const double bps[2], int *minor)
{
	int best = 1;
	double bt = -1;
	*minor = bps[0] > 0 ? 0 : 1;
	for (int r = 1; r <= nsg; r++)
		for (int m = 0; m < 2; m++) {
			double t = mlp_step_io_s(nsg, sg_bytes, keep, r, m, bps);
			if (t >= 0 && (bt < 0 || t < bt * (1 - 1e-9))) {
				bt = t;
				best = r;
				*minor = m;
			}
		}
	return best;
}

uint16_t mlp_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even (no NaN here) */
	return (uint16_t)(u >> 16);
}

static inline float from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* replay_adam with the gradient upcast from bf16 inside the pass, as a CPU
 * Adam that takes bf16 gradients does it: the same float operations, so
 * the same bits as upcasting first. */
static void adam_bf16(float *restrict p, float *restrict m, float *restrict v,
		      const uint16_t *restrict g16, uint64_t n)
{
	const float b1 = 0.9f, b2 = 0.999f, lr = 1e-3f, eps = 1e-8f;
	for (uint64_t i = 0; i < n; i++) {
		float g = from_bf16(g16[i]);
		float mi = b1 * m[i] + (1.0f - b1) * g;
		float vi = b2 * v[i] + (1.0f - b2) * g * g;
		m[i] = mi;
		v[i] = vi;
		p[i] -= lr * mi / (sqrtf(vi) + eps);
	}
}

/* ---- setup, before the ranks fork ------------------------------------------------ */

static int shared_mutex(pthread_mutex_t *mu, pthread_cond_t *cv)
{
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	int r = pthread_mutex_init(mu, &ma);
	pthread_mutexattr_destroy(&ma);
	if (r || !cv)
		return -r;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	r = pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
	return -r;
}

static int pace_of(const char *path);
static void pace(const char *path, bool write, uint64_t len);

int replay_mlp_setup(void)
{
	struct opts *o = &replay_opts;
	if (o->verify_only) {
		fprintf(stderr, "replay: --mlp does not take --verify-only\n");
		return -EINVAL;
	}
	dir_len = strlen(o->dir);
	dir2_len = o->dir2 ? strlen(o->dir2) : 0;
	if (o->dir2 && dir2_len > 3840) {
		fprintf(stderr, "replay: --dir2 path too long\n");
		return -ENAMETOOLONG;
	}
	mlp_sh =
	    mmap(NULL, sizeof(*mlp_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mlp_sh == MAP_FAILED) {
		fprintf(stderr, "replay: mmap the --mlp locks: %s\n", strerror(errno));
		return -errno;
	}
	for (int p = 0; p < 2; p++) {
		mlp_sh->lock[p].owner = -1;
		if (shared_mutex(&mlp_sh->lock[p].mu, &mlp_sh->lock[p].cv) ||
		    shared_mutex(&mlp_sh->pace[p].mu, NULL)) {
			fprintf(stderr, "replay: cannot set up the --mlp locks\n");
			return -EINVAL;
		}
	}
	uint64_t *sgb = calloc((size_t)replay_nsg, sizeof(*sgb));
	if (!sgb)
		return -ENOMEM;
	for (int i = 0; i < replay_nsg; i++)
		sgb[i] = replay_sgs[i].numel * 12;
	/* K: the sub-groups (the largest, the first) that fit the host RAM
	 * budget per rank beside its bf16 gradients */
	if (o->mlp_keep < 0) {
		uint64_t per = o->host_ram / (uint64_t)o->ranks, g16 = replay_rank_params * 2;
		o->mlp_keep = per > g16 ? (int)((per - g16) / sgb[0]) : 0;
	}
	if (o->mlp_keep > replay_nsg)
		o->mlp_keep = replay_nsg;
	double bps[2] = {o->path_bps[0], o->dir2 ? o->path_bps[1] : 0};
	if (!o->dir2) {
		o->mlp_ratio = 1;
		o->mlp_minor = 0;
	} else if (o->mlp_ratio > 0) {
		o->mlp_minor = 1; /* as its code: i % ratio == 0 on the second path */
	} else {
		/* unknown bandwidths count as equal */
		if (bps[0] <= 0 || bps[1] <= 0)
			bps[0] = bps[1] = 1;
		o->mlp_ratio = mlp_best_ratio(replay_nsg, sgb, o->mlp_keep, bps, &o->mlp_minor);
	}
	if (o->mlp_ratio > replay_nsg)
		o->mlp_ratio = replay_nsg;
	int on[2] = {0, 0};
	for (int i = 0; i < replay_nsg; i++)
		on[mlp_path_of(i, o->mlp_ratio, o->mlp_minor)]++;
	free(sgb);
	replay_pace_of = pace_of;
	replay_pace = pace;
	fprintf(stderr,
		"[replay] mlp: ratio %d (sub-group i on %s when i %% %d == 0): %d sub-group(s) on "
		"%s, %d on %s%s; keep %d; bf16 gradients in host memory\n",
		o->mlp_ratio, o->mlp_minor ? "dir2" : "dir", o->mlp_ratio, on[0], o->dir, on[1],
		o->dir2 ? o->dir2 : "-", o->dir2_cap ? " (paced)" : "", o->mlp_keep);
	return 0;
}

/* ---- the read and write locks, and the second path's pacing --------------------- */

static int path_of_file(const char *path)
{
	return dir2_len && !strncmp(path, replay_opts.dir2, dir2_len) && path[dir2_len] == '/';
}

/* 1: a request to this file is paced (the second path, capped) */
static int pace_of(const char *path)
{
	return replay_opts.dir2_cap && path_of_file(path);
}

/* Starts no request on the second path before its share of the cap allows. */
static void pace(const char *path, bool write, uint64_t len)
{
	(void)path;
	pthread_mutex_lock(&mlp_sh->pace[1].mu);
	double now = replay_now(), *next = &mlp_sh->pace[1].next[write];
	double t = *next > now ? *next : now;
	*next = t + (double)len / (double)replay_opts.dir2_cap;
	pthread_mutex_unlock(&mlp_sh->pace[1].mu);
	if (t > now) {
		struct timespec ts = {.tv_sec = (time_t)(t - now),
				      .tv_nsec = (long)((t - now - (time_t)(t - now)) * 1e9)};
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
}

static void dir_lock(int p, int rank)
{
	pthread_mutex_lock(&mlp_sh->lock[p].mu);
	while (mlp_sh->lock[p].owner != -1 && mlp_sh->lock[p].owner != rank)
		pthread_cond_wait(&mlp_sh->lock[p].cv, &mlp_sh->lock[p].mu);
	mlp_sh->lock[p].owner = rank;
	mlp_sh->lock[p].count++;
	pthread_mutex_unlock(&mlp_sh->lock[p].mu);
}

static void dir_unlock(int p)
{
	pthread_mutex_lock(&mlp_sh->lock[p].mu);
	if (--mlp_sh->lock[p].count == 0) {
		mlp_sh->lock[p].owner = -1;
		pthread_cond_broadcast(&mlp_sh->lock[p].cv);
	}
	pthread_mutex_unlock(&mlp_sh->lock[p].mu);
}

/* ---- one rank ---------------------------------------------------------------------- */

/* param, exp_avg, exp_avg_sq of SG, on its path. */
static int mlp_jobs(struct iojob *j, int rank, int sg, struct bufset *b)
{
	int n = replay_nstate_jobs(j, rank, sg, b, false);
	if (mlp_path_of(sg, replay_opts.mlp_ratio, replay_opts.mlp_minor) == 0)
		return n;
	for (int k = 0; k < n; k++) {
		char tmp[4096];
		int r = snprintf(tmp, sizeof(tmp), "%s%s", replay_opts.dir2, j[k].path + dir_len);
		if (r < 0 || (size_t)r >= sizeof(tmp))
			return -ENAMETOOLONG;
		memcpy(j[k].path, tmp, (size_t)r + 1);
	}
	return n;
}

static void *mlp_xfer_main(void *arg)
{
	struct xfer *x = arg;
	struct iojob jobs[MAX_FILES_PER_BATCH];
	int n = mlp_jobs(jobs, x->rank, x->sg, x->b);
	if (n < 0) {
		x->rc = n;
		return NULL;
	}
	dir_lock(x->write, x->rank);
	double t0 = replay_now(); /* --trace: the span the lock is held */
	x->rc = replay_run_batch(x->ctx, jobs, n, x->write);
	double t1 = replay_now();
	dir_unlock(x->write);
	replay_trace(x->rank, x->step, x->write ? 'W' : 'R', x->sg, t0, t1, t1);
	return NULL;
}

static int xfer_start(struct xfer *x)
{
	int r = pthread_create(&x->th, NULL, mlp_xfer_main, x);
	if (r) {
		fprintf(stderr, "replay: pthread_create: %s\n", strerror(r));
		return -r;
	}
	x->running = true;
	return 0;
}

#define FAIL_IF(expr)                                                                              \
	do {                                                                                       \
		int rc_ = (expr);                                                                  \
		if (rc_) {                                                                         \
			fprintf(stderr, "replay: rank %d: %s failed at %s:%d: %s\n", rank, #expr,  \
				__FILE__, __LINE__, strerror(rc_ < 0 ? -rc_ : rc_));               \
			replay_shm->failed = 1;                                                    \
			_exit(1);                                                                  \
		}                                                                                  \
	} while (0)

struct rankstate {
	int rank, nslots;
	struct bufset *slot;
	int *slot_of; /* sub-group -> slot holding it, -1: on its path */
	int *free_slots, nfree;
	uint16_t *g16; /* the rank's gradients, bf16, sub-group after sub-group */
	uint64_t *g16_off;
	float *g32;		       /* one sub-group's gradients, upcast for Adam */
	io_context_t rctx[2], wctx[2]; /* per path: a swapper's read and write handles */
	struct xfer rd[2], wr[2];      /* per path: the read ahead, the write behind */
	int rd_slot[2], wr_slot[2];
};

static int join_write(struct rankstate *r, int p)
{
	if (!r->wr[p].running)
		return 0;
	int rc = replay_xfer_join(&r->wr[p]);
	r->free_slots[r->nfree++] = r->wr_slot[p];
	r->wr_slot[p] = -1;
	return rc;
}

/* A free sub-group buffer; when none is, the oldest write's comes free. */
static int take_slot(struct rankstate *r)
{
	for (int p = 0; !r->nfree && p < 2; p++) {
		int rc = join_write(r, p);
		if (rc)
			return rc;
	}
	if (!r->nfree)
		return -ENOBUFS; /* more sub-groups in memory than the scheme allows */
	return r->free_slots[--r->nfree];
}

/* Each path's swapper reads one sub-group ahead: its next one in the order
 * (after position j) that is not in memory. */
static int read_ahead(struct rankstate *r, const int *order, int j)
{
	for (int p = 0; p < 2; p++) {
		if (r->rd[p].running)
			continue;
		for (int k = j + 1; k < replay_nsg; k++) {
			int sg = order[k];
			if (r->slot_of[sg] >= 0 ||
			    mlp_path_of(sg, replay_opts.mlp_ratio, replay_opts.mlp_minor) != p)
				continue;
			int sl = take_slot(r);
			if (sl < 0)
				return sl;
			r->rd[p].sg = sg;
			r->rd[p].b = &r->slot[sl];
			r->rd_slot[p] = sl;
			return xfer_start(&r->rd[p]) ?: read_ahead(r, order, j);
		}
	}
	return 0;
}

/* One update phase in the scheme's order: two pipelines, one per path,
 * as its two optimizer swappers run them. */
static void update_phase(struct rankstate *r, int s, struct stepstat *t)
{
	int rank = r->rank, nsg = replay_nsg, keep = replay_opts.mlp_keep;
	int order[nsg];
	mlp_order(s, nsg, order);
	for (int p = 0; p < 2; p++) {
		r->rd[p] = (struct xfer){.ctx = r->rctx[p], .rank = rank, .step = s};
		r->wr[p] = (struct xfer){.ctx = r->wctx[p], .rank = rank, .step = s, .write = true};
	}
	for (int j = 0; j < nsg; j++) {
		int sg = order[j],
		    p = mlp_path_of(sg, replay_opts.mlp_ratio, replay_opts.mlp_minor);
		/* the sub-group in hand: kept from the last step, read ahead, or read now */
		if (r->slot_of[sg] < 0) {
			struct xfer *rd = &r->rd[p];
			if (rd->running && rd->sg == sg) {
				FAIL_IF(replay_xfer_join(rd));
			} else {
				FAIL_IF(rd->running ? -EPROTO : 0);
				int sl = take_slot(r);
				FAIL_IF(sl < 0 ? sl : 0);
				rd->sg = sg;
				rd->b = &r->slot[sl];
				r->rd_slot[p] = sl;
				mlp_xfer_main(rd);
				FAIL_IF(rd->rc);
			}
			r->slot_of[sg] = r->rd_slot[p];
			t->rd += replay_sgs[sg].numel * 12;
		}
		FAIL_IF(read_ahead(r, order, j));
		struct bufset *b = &r->slot[r->slot_of[sg]];
		uint64_t n = replay_sgs[sg].numel;
		double c0 = replay_now();
		adam_bf16(b->p, b->m, b->v, r->g16 + r->g16_off[sg], n);
		double c1 = replay_now();
		t->upd_cpu += c1 - c0;
		if (j >= nsg - keep) {
			replay_trace(rank, s, 'A', sg, c0, c1, c1);
			continue; /* stays in memory for the next step */
		}
		/* the path's swapper waits for its previous write, then starts this one */
		FAIL_IF(join_write(r, p));
		replay_trace(rank, s, 'A', sg, c0, c1, replay_now());
		r->wr[p].sg = sg;
		r->wr[p].b = b;
		r->wr_slot[p] = r->slot_of[sg];
		r->slot_of[sg] = -1;
		t->wr += replay_sgs[sg].numel * 12;
		FAIL_IF(xfer_start(&r->wr[p]));
	}
	/* the step ends with its writes done, as DeepSpeed's */
	for (int p = 0; p < 2; p++) {
		FAIL_IF(join_write(r, p));
		FAIL_IF(r->rd[p].running ? -EPROTO : 0);
	}
}

static int verify_mlp(struct rankstate *r)
{
	int rank = r->rank, bad = 0;
	struct bufset exp = r->slot[0], got = r->slot[1];
	float *g = r->g32;
	for (int sg = 0; sg < replay_nsg; sg++) {
		uint64_t n = replay_sgs[sg].numel;
		replay_gen(exp.p, n, replay_seed_of(rank, sg, K_PARAM, 0), false);
		replay_gen(exp.m, n, replay_seed_of(rank, sg, K_EXP_AVG, 0), false);
		replay_gen(exp.v, n, replay_seed_of(rank, sg, K_EXP_AVG_SQ, 0), true);
		for (int s = 1; s <= replay_opts.steps; s++) {
			replay_gen(g, n, replay_seed_of(rank, sg, K_GRAD, s), false);
			for (uint64_t i = 0; i < n; i++)
				g[i] = from_bf16(mlp_to_bf16(g[i]));
			replay_adam(exp.p, exp.m, exp.v, g, n);
		}
		struct iojob jobs[MAX_FILES_PER_BATCH];
		int nj = mlp_jobs(jobs, rank, sg, &got);
		if (nj < 0)
			return nj;
		int rc = replay_run_batch(r->rctx[0], jobs, nj, false);
		if (rc)
			return rc;
		const float *e[3] = {exp.p, exp.m, exp.v}, *o[3] = {got.p, got.m, got.v};
		for (int k = 0; k < 3; k++) {
			if (!memcmp(e[k], o[k], n * 4))
				continue;
			uint64_t i = 0;
			while (((const char *)e[k])[i] == ((const char *)o[k])[i])
				i++;
			fprintf(
			    stderr,
			    "replay: VERIFY MISMATCH rank %d %s: first differing byte at offset "
			    "%" PRIu64 " (1 MiB block %" PRIu64 ")\n",
			    rank, jobs[k].path, i, i >> 20);
			bad++;
		}
	}
	return bad;
}

void replay_mlp_rank(int rank)
{
	struct rankstate r = {.rank = rank};
	char d[4096];
	replay_rank_dir(d, sizeof(d), rank);
	FAIL_IF(replay_mkdir_p(d));
	if (replay_opts.dir2) {
		snprintf(d, sizeof(d), "%s/zero_stage_3/optimizer/rank%d", replay_opts.dir2, rank);
		FAIL_IF(replay_mkdir_p(d));
	}
	for (int p = 0; p < 2; p++) {
		FAIL_IF(io_setup(replay_opts.qd, &r.rctx[p]));
		FAIL_IF(io_setup(replay_opts.qd, &r.wctx[p]));
	}
	uint64_t maxn = replay_sgs[0].numel;
	/* the kept sub-groups, the one in hand, and per path one read ahead
	 * and one written behind */
	r.nslots = replay_opts.mlp_keep + 5;
	r.slot = calloc((size_t)r.nslots, sizeof(*r.slot));
	r.free_slots = calloc((size_t)r.nslots, sizeof(int));
	r.slot_of = malloc((size_t)replay_nsg * sizeof(int));
	r.g16_off = malloc((size_t)replay_nsg * sizeof(uint64_t));
	FAIL_IF(!r.slot || !r.free_slots || !r.slot_of || !r.g16_off ? -ENOMEM : 0);
	for (int i = 0; i < r.nslots; i++) {
		r.slot[i].p = replay_xalloc(maxn * 4);
		r.slot[i].m = replay_xalloc(maxn * 4);
		r.slot[i].v = replay_xalloc(maxn * 4);
		r.free_slots[r.nfree++] = r.nslots - 1 - i;
	}
	r.g32 = replay_xalloc(maxn * 4);
	r.g16 = replay_xalloc(replay_rank_params * 2);
	uint64_t off = 0;
	for (int i = 0; i < replay_nsg; off += replay_sgs[i].numel, i++) {
		r.slot_of[i] = -1;
		r.g16_off[i] = off;
	}
	struct stepstat *st = &replay_shm->st[rank * (replay_opts.steps + 1)];

	/* Step 0: init writes every state file on its path; no gradient file. */
	pthread_barrier_wait(&replay_shm->bar);
	st[0].bwd_t0 = st[0].upd_t0 = replay_now();
	for (int sg = 0; sg < replay_nsg; sg++) {
		uint64_t n = replay_sgs[sg].numel;
		struct bufset *b = &r.slot[0];
		replay_gen(b->p, n, replay_seed_of(rank, sg, K_PARAM, 0), false);
		replay_gen(b->m, n, replay_seed_of(rank, sg, K_EXP_AVG, 0), false);
		replay_gen(b->v, n, replay_seed_of(rank, sg, K_EXP_AVG_SQ, 0), true);
		struct xfer x = {.ctx = r.wctx[0], .rank = rank, .sg = sg, .b = b, .write = true};
		mlp_xfer_main(&x);
		FAIL_IF(x.rc);
		st[0].wr += replay_sgs[sg].numel * 12;
	}
	st[0].bwd_t1 = st[0].upd_t1 = replay_now();
	pthread_barrier_wait(&replay_shm->bar);

	for (int s = 1; s <= replay_opts.steps; s++) {
		struct stepstat *t = &st[s];
		/* backward: the gradients land in host memory as bf16 (the rounding
		 * is timed: it is this scheme's cost in place of the gradient writes) */
		pthread_barrier_wait(&replay_shm->bar);
		t->bwd_t0 = replay_now();
		for (int sg = 0; sg < replay_nsg; sg++) {
			if (replay_opts.compute > 0) {
				double sec = replay_opts.compute / replay_nsg;
				struct timespec ts = {.tv_sec = (time_t)sec,
						      .tv_nsec = (long)((sec - (time_t)sec) * 1e9)};
				while (nanosleep(&ts, &ts) && errno == EINTR)
					;
			}
			uint64_t n = replay_sgs[sg].numel;
			replay_gen(r.g32, n, replay_seed_of(rank, sg, K_GRAD, s), false);
			double t0 = replay_now();
			uint16_t *h = r.g16 + r.g16_off[sg];
			for (uint64_t i = 0; i < n; i++)
				h[i] = mlp_to_bf16(r.g32[i]);
			t->bwd_io += replay_now() - t0;
		}
		t->bwd_t1 = replay_now();
		pthread_barrier_wait(&replay_shm->bar);

		pthread_barrier_wait(&replay_shm->bar);
		t->upd_t0 = replay_now();
		update_phase(&r, s, t);
		t->upd_t1 = replay_now();
		pthread_barrier_wait(&replay_shm->bar);
		if (rank == 0)
			fprintf(stderr, "[replay] step %d/%d: mlp update %.3f s (%s order)\n", s,
				replay_opts.steps, t->upd_t1 - t->upd_t0,
				s % 2 ? "ascending" : "descending");
	}
	/* The kept sub-groups reach their paths after the last step (untimed). */
	for (int sg = 0; sg < replay_nsg; sg++) {
		if (r.slot_of[sg] < 0)
			continue;
		struct xfer x = {.ctx = r.wctx[0],
				 .rank = rank,
				 .sg = sg,
				 .b = &r.slot[r.slot_of[sg]],
				 .write = true};
		mlp_xfer_main(&x);
		FAIL_IF(x.rc);
		r.free_slots[r.nfree++] = r.slot_of[sg];
		r.slot_of[sg] = -1;
	}
	if (replay_opts.verify) {
		if (rank == 0)
			fprintf(stderr, "[replay] verifying every state file on its path\n");
		int bad = verify_mlp(&r);
		if (bad < 0) {
			fprintf(stderr, "replay: rank %d: verify read failed: %s\n", rank,
				strerror(-bad));
			bad = 1;
		}
		if (rank < 64)
			replay_shm->verify_bad[rank] = bad;
	}
	for (int p = 0; p < 2; p++) {
		io_destroy(r.rctx[p]);
		io_destroy(r.wctx[p]);
	}
	_exit(0);
}

/* ---- --mlp-selftest: the placement, order and ratio against figures worked by hand -- */

int replay_mlp_selftest(void)
{
	int fails = 0, n = 0;
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		n++;                                                                               \
		if (cond) {                                                                        \
			printf("ok %d - ", n);                                                     \
		} else {                                                                           \
			printf("not ok %d - ", n);                                                 \
			fails++;                                                                   \
		}                                                                                  \
		printf(__VA_ARGS__);                                                               \
		putchar('\n');                                                                     \
	} while (0)
	int o[8];
	mlp_order(1, 8, o);
	CHECK(o[0] == 0 && o[7] == 7, "odd steps ascend (step 1: %d..%d)", o[0], o[7]);
	mlp_order(2, 8, o);
	CHECK(o[0] == 7 && o[7] == 0, "even steps descend (step 2: %d..%d)", o[0], o[7]);
	int on1 = 0;
	for (int i = 0; i < 9; i++)
		on1 += mlp_path_of(i, 3, 1);
	CHECK(on1 == 3 && mlp_path_of(0, 3, 1) == 1 && mlp_path_of(3, 3, 1) == 1 &&
		  mlp_path_of(4, 3, 1) == 0,
	      "ratio 3: sub-groups 0, 3, 6 of 9 on the minor path (%d there)", on1);
	CHECK(mlp_path_of(5, 1, 0) == 0 && mlp_path_of(6, 1, 0) == 0,
	      "ratio 1: every sub-group on the minor path");
	uint64_t eq[8];
	for (int i = 0; i < 8; i++)
		eq[i] = 100;
	/* 8 equal sub-groups, paths of 400 and 512, nothing kept: ratio 2
	 * puts 4 on the disk (4/400 = 0.010), ratio 3 with the disk minor 3
	 * (3/400) and 5 on the faster path (5/512 = 0.00977): 3 wins. */
	double bw[2] = {400, 512};
	int m = -1, r = mlp_best_ratio(8, eq, 0, bw, &m);
	double t = mlp_step_io_s(8, eq, 0, r, m, bw);
	CHECK(r == 3 && m == 0, "400 vs 512, keep 0: ratio 3, disk minor (got %d, minor %d)", r, m);
	CHECK(t > 0.9765 && t < 0.9766, "its step: 500 on the faster path, %.5f s", t);
	/* keep 2: an ascending step reads 2..7 and writes 0..5. Ratio 2
	 * (disk 0, 2, 4, 6) moves 3 each way on each path: 3/400 = 0.75;
	 * ratio 3 (disk 0, 3, 6) leaves 4 on the faster path: 4/512 = 0.78. */
	r = mlp_best_ratio(8, eq, 2, bw, &m);
	t = mlp_step_io_s(8, eq, 2, r, m, bw);
	CHECK(r == 2 && m == 0, "400 vs 512, keep 2: ratio 2 (got %d, minor %d)", r, m);
	CHECK(t > 0.7499 && t < 0.7501, "its step: 300 on the disk, %.4f s", t);
	CHECK(mlp_step_io_s(8, eq, 2, 3, 0, bw) > t, "ratio 3 is slower there (%.4f s)",
	      mlp_step_io_s(8, eq, 2, 3, 0, bw));
	/* a path 4 times the other: one sub-group of 8 on the slow one */
	double bw4[2] = {400, 1600};
	r = mlp_best_ratio(8, eq, 0, bw4, &m);
	CHECK(r == 8 && m == 0, "400 vs 1600: ratio 8, disk minor (got %d, minor %d)", r, m);
	/* a path of no bandwidth is never used */
	double bw0[2] = {400, 0};
	r = mlp_best_ratio(8, eq, 0, bw0, &m);
	CHECK(r == 1 && m == 0, "second path absent: everything on the disk (got %d, minor %d)", r,
	      m);
	uint16_t h = mlp_to_bf16(1.00390625f); /* halfway between 1 and 1 + 2^-7: to even */
	CHECK(h == 0x3f80 && from_bf16(mlp_to_bf16(-0.5f)) == -0.5f,
	      "bf16: ties round to even (0x%04x), exact values stay", h);
	printf("1..%d\n", n);
	return fails ? 1 : 0;
#undef CHECK
}
