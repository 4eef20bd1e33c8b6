/*
 * cuda_update/pipeline.c — runs optimizer steps over a directory sub-group by
 * sub-group, with the read of the next sub-group and the write-back of the
 * previous one in flight (io_uring) while the current one is updated: the
 * order of the jobs (ascending or alternating), the choice of a slot for each,
 * and the update. The I/O of one sub-group is in pipeline_io.c, opening a
 * context in pipeline_open.c.
 *
 * Memory is bounded: a pool of keep+3 slots, each big enough for the largest
 * sub-group (reading i+1, updating i, writing i-1, plus the kept ones), and
 * optionally extra ones: with exactly 3, the read of i+1 cannot start before
 * the write of i-2 is done, and io_uring serializes writes to one file (one
 * io-wq worker per inode on most filesystems), so a big sub-group's write
 * often is not done yet: one more buffer lets that read start at once. A slot
 * remembers which sub-group it holds after its write completes, so a sub-group
 * needed again while still resident (the turn-around of the alternating order,
 * or a single sub-group) is not read back. With --keep K the last K
 * sub-groups of a step are not written at all until they have been updated
 * again in the next step (the final step writes everything).
 *
 * Threading: one thread drives the ring and the order; the update itself may
 * fan out to --threads workers (adam_cpu.c) or to the GPU.
 */
#include "cuda_update/pipeline_int.h"

#include <errno.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A slot holding sub-group sg's state, or a free one loading it. Gradients
 * are new every step (backward rewrites them), so a resident sub-group still
 * reads its gradients again. */
static struct slot *acquire(struct tu_ctx *c, int sg)
{
	for (int i = 0; i < c->nslots; i++)
		if (c->slots[i].sg == sg && c->slots[i].valid) {
			if (c->slots[i].in_use) {
				/* Being updated right now (the turn-around): its
				 * gradients are reloaded after that update. */
				c->slots[i].regrad = 1;
				return &c->slots[i];
			}
			c->slots[i].in_use = 1;
			if (tu_io_transfer(c, &c->slots[i], sg, XFER_READ_GRADS))
				return NULL;
			return &c->slots[i];
		}
	struct slot *best = NULL;
	for (int i = 0; i < c->nslots; i++) {
		struct slot *s = &c->slots[i];
		if (s->in_use || s->dirty)
			continue;
		/* idle before busy, then least recently used */
		if (!best || (best->pending && !s->pending) ||
		    (!best->pending == !s->pending && s->lru < best->lru))
			best = s;
	}
	if (!best) {
		tu_set_err(c, -ENOMEM, "internal: no free buffer (keep %d, %d slots)", c->o.keep,
			   c->nslots);
		return NULL;
	}
	if (tu_io_wait_slot(c, best))
		return NULL;
	best->sg = sg;
	best->valid = 1;
	best->in_use = 1;
	if (tu_io_transfer(c, best, sg, XFER_READ_ALL))
		return NULL;
	return best;
}

static int update(struct tu_ctx *c, struct slot *s, int sg, uint64_t step)
{
	const struct tu_subgroup *g = &c->li.sub[sg];
	if (g->hdr_off != UINT64_MAX) {
		struct tu_native_hdr *h = (struct tu_native_hdr *)(s->buf + g->hdr_off);
		if (memcmp(h->magic, TU_NATIVE_MAGIC, 8) || h->numel != g->numel)
			return tu_set_err(c, -EIO, "%s: header changed during the run",
					  g->seg[0].path);
		h->step = step;
	}
	if (c->o.no_compute)
		return 0;
	struct tu_tensors t = {
	    .param = (float *)(s->buf + g->p_off),
	    .exp_avg = (float *)(s->buf + g->m_off),
	    .exp_avg_sq = (float *)(s->buf + g->v_off),
	    .grad = s->buf + g->g_off,
	    .grad_dtype = g->grad_dtype,
	    .param_copy = c->o.param_copy != TU_F32 ? s->buf + g->copy_off : NULL,
	    .copy_dtype = c->o.param_copy,
	    .numel = g->numel,
	};
	int rc = c->o.device == TU_DEVICE_CUDA
		     ? tu_cuda_adam_step(&c->o.hp, step, &t)
		     : tu_adam_step(&c->o.hp, step, &t, c->o.threads, c->o.isa);
	if (rc)
		return tu_set_err(c, rc, "update of sub-group %s (step %" PRIu64 "): %s", g->name,
				  step, strerror(-rc));
	return 0;
}

/* A sub-group that an interrupted run already took to this step: its
 * state goes back as read, and its half-precision copy, if any, is made
 * from it as the update would have. */
static void resume_copy(struct tu_ctx *c, struct slot *s, const struct tu_subgroup *g)
{
	if (c->o.param_copy == TU_F32)
		return;
	const float *p = (const float *)(s->buf + g->p_off);
	uint16_t *d = (uint16_t *)(s->buf + g->copy_off);
	for (uint64_t i = 0; i < g->numel; i++)
		d[i] = c->o.param_copy == TU_BF16 ? tu_f32_to_bf16(p[i]) : tu_f32_to_f16(p[i]);
}

int tu_run(struct tu_ctx *c, int nsteps, tu_progress_fn progress, tu_step_fn step_done, void *arg)
{
	if (c->err)
		return c->err;
	int n = c->li.nsub;
	long total = (long)nsteps * n;
	if (nsteps <= 0)
		return 0;
	/* Files may have changed since the last run (new gradients, another
	 * writer): only what this run reads is trusted. */
	for (int i = 0; i < c->nslots; i++)
		if (!c->slots[i].dirty)
			c->slots[i].sg = -1;
			/* job j: step j / n of this run, position j % n in that step's order.
			 * The turn-around follows the global step, not this run's count: a
			 * trainer that runs one step per call still alternates. */
#define JOB_SG(j)                                                                                  \
	((c->o.order == TU_ORDER_ALTERNATING && (c->base_step + (j) / n) % 2)                      \
	     ? n - 1 - (int)((j) % n)                                                              \
	     : (int)((j) % n))
	double t_step = now(), compute = 0;
	uint64_t r0 = c->bytes_read, w0 = c->bytes_written;
	struct slot *cur = acquire(c, JOB_SG(0));
	for (long j = 0; j < total && cur; j++) {
		int sg = JOB_SG(j);
		long si = j / n;
		int pos = (int)(j % n);
		uint64_t step = c->base_step + (uint64_t)si + 1;
		struct slot *next = NULL;
		if (j + 1 < total && !(next = acquire(c, JOB_SG(j + 1))))
			break;
		io_uring_submit(&c->ring);
		if (tu_io_wait_slot(c, cur))
			break;
		double t0 = now();
		/* Resuming a step an interrupted run did in part: the
		 * sub-groups it finished (whole, see layout.h) are written back
		 * as they are. */
		if (c->resume && si == 0 && c->li.sub[sg].hdr_step > c->li.native_step)
			resume_copy(c, cur, &c->li.sub[sg]);
		else if (update(c, cur, sg, step))
			break;
		compute += now() - t0;
		cur->in_use = next == cur; /* the same sub-group again (turn-around) */
		cur->lru = ++c->lru_clock;
		if (si + 1 < nsteps && pos >= n - c->o.keep) {
			cur->dirty = 1;
		} else {
			cur->dirty = 0;
			if (tu_io_wait_commits(c, step) ||
			    tu_io_transfer(c, cur, sg, XFER_WRITE_STATE))
				break;
		}
		if (cur->regrad) {
			cur->regrad = 0;
			if (tu_io_transfer(c, cur, sg, XFER_READ_GRADS))
				break;
		}
		io_uring_submit(&c->ring);
		/* Kept sub-groups of the previous step are written once updated
		 * again, above; nothing else is pending. */
		if (progress)
			progress(arg, step, pos + 1, n, c->bytes_read - r0 + c->bytes_written - w0);
		if (pos == n - 1) {
			/* The last step is reported once it is durable. */
			if (si + 1 == nsteps && (tu_io_wait_slot(c, NULL) || tu_io_sync_dir(c)))
				break;
			double t1 = now();
			struct tu_step_stats st = {step,
						   n,
						   t1 - t_step,
						   compute,
						   c->bytes_read - r0,
						   c->bytes_written - w0};
			if (step_done)
				step_done(arg, &st);
			t_step = t1;
			compute = 0;
			r0 = c->bytes_read;
			w0 = c->bytes_written;
		}
		cur = next;
	}
	/* Flush whatever is still in flight even after an error, so no op
	 * outlives its buffer. */
	int err = c->err;
	c->err = 0;
	tu_io_wait_slot(c, NULL);
	if (err)
		c->err = err;
	c->resume = 0;
	if (!c->err) {
		c->base_step += (uint64_t)nsteps;
		for (int i = 0; i < c->nslots; i++)
			c->slots[i].in_use = 0;
	} else {
		/* A failed run leaves slot contents undefined. */
		for (int i = 0; i < c->nslots; i++)
			c->slots[i] = (struct slot){.buf = c->slots[i].buf, .sg = -1};
	}
	return c->err;
#undef JOB_SG
}
