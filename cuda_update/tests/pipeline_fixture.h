/*
 * cuda_update/tests/pipeline_fixture.h — what the pipeline's test programs
 * share: a model read back whole from its files, temporary directories, the
 * options and the run every test starts from, and the float64 AdamW
 * reference the updated values are checked against.
 */
#ifndef TU_PIPELINE_FIXTURE_H
#define TU_PIPELINE_FIXTURE_H

#include "cuda_update/layout.h"
#include "cuda_update/tierfs_update.h"

#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define PARAMS	 100003
#define SUBGROUP 30011
#define STEPS	 3

/* The whole model in memory, sub-groups concatenated. */
struct model {
	size_t n;
	float *p, *m, *v;
	double *g; /* upcast gradients */
	uint64_t *native_step;
	int nsub;
};

static inline void read_all(const char *path, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	size_t got = 0;
	while (got < len) {
		ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)got);
		assert_true(r > 0);
		got += (size_t)r;
	}
	close(fd);
}

static inline void load(const char *dir, enum tu_layout layout, struct model *md)
{
	struct tu_layout_info li;
	char msg[512];
	int rc = tu_layout_scan(dir, layout, 0, &li, msg, sizeof(msg));
	if (rc)
		print_error("%s\n", msg);
	assert_int_equal(rc, 0);
	md->n = li.total_params;
	md->nsub = li.nsub;
	md->p = malloc(md->n * 4);
	md->m = malloc(md->n * 4);
	md->v = malloc(md->n * 4);
	md->g = malloc(md->n * 8);
	md->native_step = calloc((size_t)li.nsub, 8);
	assert_non_null(md->p && md->m && md->v && md->g && md->native_step);
	size_t at = 0;
	for (int i = 0; i < li.nsub; i++) {
		struct tu_subgroup *s = &li.sub[i];
		char *buf = calloc(1, s->buf_bytes);
		assert_non_null(buf);
		for (int k = 0; k < s->nseg; k++)
			read_all(s->seg[k].path, buf + s->seg[k].buf_off, s->seg[k].bytes);
		memcpy(md->p + at, buf + s->p_off, s->numel * 4);
		memcpy(md->m + at, buf + s->m_off, s->numel * 4);
		memcpy(md->v + at, buf + s->v_off, s->numel * 4);
		for (size_t k = 0; k < s->numel; k++) {
			const void *g = buf + s->g_off;
			md->g[at + k] =
			    s->grad_dtype == TU_BF16  ? tu_bf16_to_f32(((uint16_t *)g)[k])
			    : s->grad_dtype == TU_F16 ? tu_f16_to_f32(((uint16_t *)g)[k])
						      : ((float *)g)[k];
		}
		if (s->hdr_off != UINT64_MAX)
			md->native_step[i] = ((struct tu_native_hdr *)(buf + s->hdr_off))->step;
		at += s->numel;
		free(buf);
	}
	tu_layout_free(&li);
}

static inline void unload(struct model *md)
{
	free(md->p);
	free(md->m);
	free(md->v);
	free(md->g);
	free(md->native_step);
}

static inline int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p);
}

static inline char *mktmp(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *d = malloc(strlen(base) + 32);
	assert_non_null(d);
	sprintf(d, "%s/tu-pipe.XXXXXX", base);
	assert_non_null(mkdtemp(d));
	return d;
}

static inline void rmtmp(char *d)
{
	nftw(d, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	free(d);
}

static inline struct tu_options opts(enum tu_layout layout, enum tu_order order, int keep)
{
	struct tu_options o;
	memset(&o, 0, sizeof(o));
	o.layout = layout;
	o.order = order;
	o.keep = keep;
	o.threads = 2;
	o.hp = (struct tu_hparams){TU_ADAMW, 1e-3, 0.9, 0.999, 1e-8, 0.01};
	return o;
}

static inline void run(const char *dir, const struct tu_options *o, int steps)
{
	struct tu_ctx *c;
	int rc = tu_open(&c, dir, o);
	if (rc)
		print_error("tu_open: %s\n", c ? tu_errmsg(c) : "ENOMEM");
	assert_int_equal(rc, 0);
	rc = tu_run(c, steps, NULL, NULL, NULL);
	if (rc)
		print_error("tu_run: %s\n", tu_errmsg(c));
	assert_int_equal(rc, 0);
	tu_close(c);
}

/* float64 AdamW from the initial model; every step uses the same gradients
 * (the files do not change between steps here). Errors are relative to the
 * magnitude of the summed terms, as the kernel tests do. */
static inline void check_against_reference2(const struct model *init, const double *const *grads,
					    const struct model *out, const struct tu_hparams *hp,
					    int steps, uint64_t t0);
static inline void check_against_reference(const struct model *init, const struct model *out,
					   const struct tu_hparams *hp, int steps, uint64_t t0)
{
	const double *g[16];
	for (int s = 0; s < steps && s < 16; s++)
		g[s] = init->g;
	check_against_reference2(init, g, out, hp, steps, t0);
}

/* grads[s]: the gradients of step s+1. */
static inline void check_against_reference2(const struct model *init, const double *const *grads,
					    const struct model *out, const struct tu_hparams *hp,
					    int steps, uint64_t t0)
{
	size_t n = init->n;
	double worst = 0;
	for (size_t i = 0; i < n; i++) {
		double p = init->p[i], m = init->m[i], v = init->v[i];
		double mp = fabs(p), mm = fabs(m);
		for (int s = 1; s <= steps; s++) {
			uint64_t t = t0 + (uint64_t)s;
			double bc1 = 1 - pow(hp->beta1, (double)t),
			       bc2 = 1 - pow(hp->beta2, (double)t);
			double g = grads[s - 1][i];
			p *= 1 - hp->lr * hp->weight_decay;
			mp *= 1 - hp->lr * hp->weight_decay;
			m = hp->beta1 * m + (1 - hp->beta1) * g;
			mm = hp->beta1 * mm + (1 - hp->beta1) * fabs(g);
			v = hp->beta2 * v + (1 - hp->beta2) * g * g;
			double d = sqrt(v) / sqrt(bc2) + hp->eps;
			p -= hp->lr / bc1 * m / d;
			mp += hp->lr / bc1 * mm / d;
		}
		double e[3] = {fabs(out->p[i] - p) / fmax(mp, fabs(p)),
			       fabs(out->m[i] - m) / fmax(mm, fabs(m)), fabs(out->v[i] - v) / v};
		for (int k = 0; k < 3; k++)
			worst = fmax(worst, e[k]);
	}
	if (worst >= 1e-6)
		print_error("worst relative error %.3g\n", worst);
	assert_true(worst < 1e-6);
}

static inline void write_floats(const char *path, const float *x, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(x, 4, n, f), n);
	assert_int_equal(fclose(f), 0);
}

#endif
