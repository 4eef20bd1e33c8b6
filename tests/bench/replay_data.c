/*
 * The files DeepSpeed's swapper writes and what they hold: the sub-group
 * layout of a rank (ds_id ranges, gradient files), the file names and rank
 * directories, the deterministic content keyed by (rank, sub-group, kind,
 * step), and the fp32 Adam update that turns one step's content into the
 * next. The rank phases write and read these files; --verify recomputes
 * their expected content from here.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "replay.h"

struct subgroup *replay_sgs;
int replay_nsg;
uint64_t replay_rank_params;

/* ---- sub-group layout ------------------------------------------------------ */

/* Splits a rank's params into sub-groups of --subgroup-size (rounded to
 * PARAM_ALIGN), each with its gradient files, as DeepSpeed's ds_id ranges
 * do; replay_rank_params is set and checked by then. */
int replay_layout(void)
{
	if (!replay_opts.sg_params)
		replay_opts.sg_params = (replay_rank_params + 7) / 8;
	replay_opts.sg_params =
	    (replay_opts.sg_params + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
	if (replay_opts.sg_params < PARAM_ALIGN * (uint64_t)replay_opts.grad_files)
		replay_opts.sg_params = PARAM_ALIGN * (uint64_t)replay_opts.grad_files;
	replay_nsg =
	    (int)((replay_rank_params + replay_opts.sg_params - 1) / replay_opts.sg_params);
	replay_sgs = calloc((size_t)replay_nsg, sizeof(*replay_sgs));
	if (!replay_sgs)
		return -ENOMEM;
	for (int i = 0; i < replay_nsg; i++) {
		struct subgroup *s = &replay_sgs[i];
		uint64_t left = replay_rank_params - (uint64_t)i * replay_opts.sg_params;
		s->numel = left < replay_opts.sg_params ? left : replay_opts.sg_params;
		/* Each sub-group spans 4 parameter tensors, as ds_id ranges do. */
		snprintf(s->id, sizeof(s->id), "%d_%d", 4 * i, 4 * i + 3);
		uint64_t units = s->numel / PARAM_ALIGN, off = 0;
		for (int g = 0; g < replay_opts.grad_files; g++) {
			uint64_t end = units * (uint64_t)(g + 1) /
				       (uint64_t)replay_opts.grad_files * PARAM_ALIGN;
			if (g == replay_opts.grad_files - 1)
				end = s->numel;
			s->goff[g] = off;
			s->gnum[g] = end - off;
			off = end;
		}
	}
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

uint32_t replay_seed_of(int rank, int sg, int kind, int step)
{
	return mix32(mix32(mix32((uint32_t)rank * 0x9e3779b9U + (uint32_t)sg) + (uint32_t)kind) +
		     (uint32_t)step);
}

/* Values in [-1, 1) (or [0, 1) for exp_avg_sq, which Adam needs non-negative). */
void replay_gen(float *buf, uint64_t n, uint32_t seed, bool positive)
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
void replay_adam(float *restrict p, float *restrict m, float *restrict v, const float *restrict g,
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

void replay_rank_dir(char *out, size_t len, int rank)
{
	snprintf(out, len, "%s/zero_stage_3/optimizer/rank%d", replay_opts.dir, rank);
}

/* Names as DeepSpeed's swapper builds them; -ENAMETOOLONG rather than a truncated name. */
int replay_file_path(char *out, size_t len, int rank, int sg, int kind, int gi)
{
	char d[3900]; /* + the longest name (~130 bytes) fits in PATH_MAX */
	replay_rank_dir(d, sizeof(d), rank);
	const struct subgroup *s = &replay_sgs[sg];
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

int replay_mkdir_p(const char *path)
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

int replay_nstate_jobs(struct iojob *j, int rank, int sg, struct bufset *b, bool with_grads)
{
	int n = 0;
	float *bufs[3] = {b->p, b->m, b->v};
	for (int k = 0; k < 3; k++) {
		(void)replay_file_path(j[n].path, sizeof(j[n].path), rank, sg, k, 0);
		j[n].buf = bufs[k];
		j[n].bytes = replay_sgs[sg].numel * 4;
		n++;
	}
	if (with_grads)
		for (int gi = 0; gi < replay_opts.grad_files; gi++) {
			(void)replay_file_path(j[n].path, sizeof(j[n].path), rank, sg, K_GRAD, gi);
			j[n].buf = b->g + replay_sgs[sg].goff[gi];
			j[n].bytes = replay_sgs[sg].gnum[gi] * 4;
			n++;
		}
	return n;
}

uint64_t replay_sg_bytes(int sg, bool with_grads)
{
	return replay_sgs[sg].numel * 4 * (with_grads ? 4 : 3);
}
