/*
 * One rank, in a process of its own: the init step that writes every file,
 * then per step the backward phase (every gradient file) and the update
 * phase (read, Adam, write back each sub-group) in the schedule --pipeline
 * picks, with barriers between phases so that phase times line up across
 * ranks; then --verify. Timings go to the shared stats the parent reports.
 */
#include <errno.h>
#include <inttypes.h>
#include <libaio.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "replay.h"

struct shared *replay_shm;

/* Stand in for GPU work: the disk is the file system's while it runs. */
static void compute_for(double sec)
{
	if (sec <= 0)
		return;
	struct timespec ts = {.tv_sec = (time_t)sec, .tv_nsec = (long)((sec - (time_t)sec) * 1e9)};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Snapshot of the file system's counters (MNT/.tierfs/stats) at a phase
 * boundary, so the report can attribute tier bytes to one phase of one step.
 * Taken by rank 0 between two barriers: outside every timed phase.
 */
static void snapshot(int rank, int step, const char *phase)
{
	if (rank != 0 || !replay_opts.stats || !replay_opts.stats_out)
		return;
	char dst[4096];
	int r = snprintf(dst, sizeof(dst), "%s/step%d-%s", replay_opts.stats_out, step, phase);
	if (r < 0 || (size_t)r >= sizeof(dst))
		return;
	FILE *in = fopen(replay_opts.stats, "r");
	if (!in) {
		fprintf(stderr, "replay: stats snapshot: open %s: %s\n", replay_opts.stats,
			strerror(errno));
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
		fprintf(stderr, "replay: stats snapshot %s -> %s failed\n", replay_opts.stats, dst);
	fclose(in);
}

static void barrier(void)
{
	pthread_barrier_wait(&replay_shm->bar);
}

#define FAIL_IF(expr)                                                                              \
	do {                                                                                       \
		int rc_ = (expr);                                                                  \
		if (rc_) {                                                                         \
			fprintf(stderr, "replay: rank %d: %s failed at %s:%d: %s\n", rank, #expr,  \
				__FILE__, __LINE__, strerror(-rc_));                               \
			replay_shm->failed = 1;                                                    \
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
	for (int sg = 0; sg < replay_nsg; sg++) {
		uint64_t n = replay_sgs[sg].numel;
		replay_gen(exp->p, n, replay_seed_of(rank, sg, K_PARAM, 0), false);
		replay_gen(exp->m, n, replay_seed_of(rank, sg, K_EXP_AVG, 0), false);
		replay_gen(exp->v, n, replay_seed_of(rank, sg, K_EXP_AVG_SQ, 0), true);
		for (int s = 1; s <= replay_opts.steps; s++) {
			replay_gen(exp->g, n, replay_seed_of(rank, sg, K_GRAD, s), false);
			replay_adam(exp->p, exp->m, exp->v, exp->g, n);
		}
		if (replay_opts.steps == 0)
			replay_gen(exp->g, n, replay_seed_of(rank, sg, K_GRAD, 0), false);
		struct iojob jobs[MAX_FILES_PER_BATCH];
		int nj = replay_nstate_jobs(jobs, rank, sg, got, true);
		if (replay_opts.state_only && nj > 3)
			nj = 3; /* gradients with persistent = no do not outlive a mount */
		int rc = replay_run_batch(ctx, jobs, nj, false);
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
				e = (const char *)(exp->g + replay_sgs[sg].goff[j - 3]);
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

void replay_rank_main(int rank)
{
	char d[4096];
	replay_rank_dir(d, sizeof(d), rank);
	FAIL_IF(replay_mkdir_p(d));
	io_context_t rctx = 0, wctx = 0;
	FAIL_IF(io_setup(replay_opts.qd, &rctx));
	FAIL_IF(io_setup(replay_opts.qd, &wctx));
	uint64_t maxn = replay_sgs[0].numel;
	int nsets = replay_opts.pipeline ? 3 : 1;
	struct bufset set[3];
	for (int i = 0; i < nsets; i++) {
		set[i].p = replay_xalloc(maxn * 4);
		set[i].m = replay_xalloc(maxn * 4);
		set[i].v = replay_xalloc(maxn * 4);
		set[i].g = replay_xalloc(maxn * 4);
	}
	struct stepstat *st = &replay_shm->st[rank * (replay_opts.steps + 1)];

	if (replay_opts.verify_only)
		goto verify;
	/* Step 0: init writes every file from scratch. */
	barrier();
	st[0].bwd_t0 = st[0].upd_t0 = replay_now();
	for (int sg = 0; sg < replay_nsg; sg++) {
		uint64_t n = replay_sgs[sg].numel;
		replay_gen(set[0].p, n, replay_seed_of(rank, sg, K_PARAM, 0), false);
		replay_gen(set[0].m, n, replay_seed_of(rank, sg, K_EXP_AVG, 0), false);
		replay_gen(set[0].v, n, replay_seed_of(rank, sg, K_EXP_AVG_SQ, 0), true);
		replay_gen(set[0].g, n, replay_seed_of(rank, sg, K_GRAD, 0), false);
		struct iojob jobs[MAX_FILES_PER_BATCH];
		int nj = replay_nstate_jobs(jobs, rank, sg, &set[0], true);
		FAIL_IF(replay_run_batch(wctx, jobs, nj, true));
		st[0].wr += replay_sg_bytes(sg, true);
		progress(rank, "init: wrote sub-group %d/%d", sg + 1, replay_nsg);
	}
	st[0].bwd_t1 = st[0].upd_t1 = replay_now();
	barrier();
	snapshot(rank, 0, "init");

	for (int s = 1; s <= replay_opts.steps; s++) {
		struct stepstat *t = &st[s];
		/* backward: every gradient file; generation is not timed (it stands in for GPU
		 * work) */
		barrier();
		t->bwd_t0 = replay_now();
		for (int sg = 0; sg < replay_nsg; sg++) {
			compute_for(replay_opts.compute / replay_nsg);
			replay_gen(set[0].g, replay_sgs[sg].numel,
				   replay_seed_of(rank, sg, K_GRAD, s), false);
			struct iojob jobs[MAX_FILES_PER_BATCH];
			int nj = 0;
			for (int gi = 0; gi < replay_opts.grad_files; gi++, nj++) {
				replay_file_path(jobs[nj].path, sizeof(jobs[nj].path), rank, sg,
						 K_GRAD, gi);
				jobs[nj].buf = set[0].g + replay_sgs[sg].goff[gi];
				jobs[nj].bytes = replay_sgs[sg].gnum[gi] * 4;
			}
			double t0 = replay_now();
			FAIL_IF(replay_run_batch(wctx, jobs, nj, true));
			t->bwd_io += replay_now() - t0;
			t->wr += replay_sgs[sg].numel * 4;
		}
		t->bwd_t1 = replay_now();
		barrier();
		snapshot(rank, s, "backward");
		progress(rank, "step %d/%d: backward %.3f s (gradient writes)", s,
			 replay_opts.steps, t->bwd_io);

		/* update phase */
		barrier();
		t->upd_t0 = replay_now();
		if (!replay_opts.pipeline) {
			for (int sg = 0; sg < replay_nsg; sg++) {
				struct xfer x = {
				    .ctx = rctx, .rank = rank, .sg = sg, .step = s, .b = &set[0]};
				replay_xfer_main(&x);
				FAIL_IF(x.rc);
				double c0 = replay_now();
				replay_adam(set[0].p, set[0].m, set[0].v, set[0].g,
					    replay_sgs[sg].numel);
				double c1 = replay_now();
				t->upd_cpu += c1 - c0;
				replay_trace(rank, s, 'A', sg, c0, c1, c1);
				x.ctx = wctx;
				x.write = true;
				replay_xfer_main(&x);
				FAIL_IF(x.rc);
				t->rd += replay_sg_bytes(sg, true);
				t->wr += replay_sg_bytes(sg, false);
			}
		} else if (!replay_opts.lockstep) {
			/* PipelinedOptimizerSwapper (DeepSpeed 0.19): swap_in(i)
			 * waits for the read of i, then starts the read of
			 * i+1; after the update, swap_out(i) waits for the
			 * write of i-1, then starts the write of i, which runs
			 * beside the rest of the read of i+1. Three buffer
			 * sets: i, i+1 being read, i-1 or i being written. */
			struct xfer rd = {.ctx = rctx, .rank = rank, .step = s},
				    wr = {.ctx = wctx, .rank = rank, .step = s, .write = true};
			for (int sg = 0; sg < replay_nsg; sg++) {
				if (sg == 0) {
					rd.sg = 0;
					rd.b = &set[0];
					replay_xfer_main(&rd);
					FAIL_IF(rd.rc);
				} else {
					FAIL_IF(replay_xfer_join(&rd));
				}
				if (sg + 1 < replay_nsg) {
					rd.sg = sg + 1;
					rd.b = &set[(sg + 1) % 3];
					FAIL_IF(replay_xfer_start(&rd));
				}
				double c0 = replay_now();
				struct bufset *b = &set[sg % 3];
				replay_adam(b->p, b->m, b->v, b->g, replay_sgs[sg].numel);
				double c1 = replay_now();
				t->upd_cpu += c1 - c0;
				if (sg > 0)
					FAIL_IF(replay_xfer_join(&wr));
				replay_trace(rank, s, 'A', sg, c0, c1, replay_now());
				wr.sg = sg;
				wr.b = b;
				/* The last write is synchronous, as DeepSpeed's. */
				if (sg + 1 < replay_nsg) {
					FAIL_IF(replay_xfer_start(&wr));
				} else {
					replay_xfer_main(&wr);
					FAIL_IF(wr.rc);
				}
				t->rd += replay_sg_bytes(sg, true);
				t->wr += replay_sg_bytes(sg, false);
			}
		} else {
			struct xfer rd = {.ctx = rctx, .rank = rank, .step = s},
				    wr = {.ctx = wctx, .rank = rank, .step = s, .write = true};
			rd.sg = 0;
			rd.b = &set[0];
			replay_xfer_main(&rd);
			FAIL_IF(rd.rc);
			for (int sg = 0; sg < replay_nsg; sg++) {
				if (sg + 1 < replay_nsg) {
					rd.sg = sg + 1;
					rd.b = &set[(sg + 1) % 3];
					FAIL_IF(replay_xfer_start(&rd));
				}
				if (sg > 0) {
					wr.sg = sg - 1;
					wr.b = &set[(sg - 1) % 3];
					FAIL_IF(replay_xfer_start(&wr));
				}
				double c0 = replay_now();
				struct bufset *b = &set[sg % 3];
				replay_adam(b->p, b->m, b->v, b->g, replay_sgs[sg].numel);
				double c1 = replay_now();
				t->upd_cpu += c1 - c0;
				FAIL_IF(replay_xfer_join(&rd));
				FAIL_IF(replay_xfer_join(&wr));
				replay_trace(rank, s, 'A', sg, c0, c1, replay_now());
				t->rd += replay_sg_bytes(sg, true);
				t->wr += replay_sg_bytes(sg, false);
			}
			wr.sg = replay_nsg - 1;
			wr.b = &set[(replay_nsg - 1) % 3];
			replay_xfer_main(&wr);
			FAIL_IF(wr.rc);
		}
		t->upd_t1 = replay_now();
		barrier();
		snapshot(rank, s, "update");
		progress(rank, "step %d/%d: update %.3f s (%.0f MB/s read+write per rank)", s,
			 replay_opts.steps, t->upd_t1 - t->upd_t0,
			 (t->rd + t->wr - replay_rank_params * 4) / 1e6 / (t->upd_t1 - t->upd_t0));
	}

verify:
	if (replay_opts.verify) {
		progress(rank, "verifying every file");
		struct bufset exp = set[0], got;
		if (nsets < 2) {
			got.p = replay_xalloc(maxn * 4);
			got.m = replay_xalloc(maxn * 4);
			got.v = replay_xalloc(maxn * 4);
			got.g = replay_xalloc(maxn * 4);
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
			replay_shm->verify_bad[rank] = bad;
	}
	io_destroy(rctx);
	io_destroy(wctx);
	_exit(0);
}
