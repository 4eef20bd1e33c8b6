/*
 * cuda_update/tests/test_pipeline.c — the sub-group pipeline on a temporary
 * directory: native and DeepSpeed layouts, ascending and alternating order,
 * with and without --keep, content checked after several steps against a
 * float64 reference; alternating and ascending must agree bit for bit;
 * the step count must persist in the native header; mis-sized and missing
 * files must be reported by name with both sizes.
 */
#include "cuda_update/layout.h"
#include "cuda_update/tierfs_update.h"

#include <dlfcn.h>
#include <errno.h>
#include <liburing.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* io_uring_submit fails while this is set (test_submit_fails); the
 * pipeline, linked into this program, calls this one. */
static int fail_submit;

int io_uring_submit(struct io_uring *ring)
{
	static int (*real)(struct io_uring *);
	if (fail_submit)
		return -EIO;
	if (!real)
		real = (int (*)(struct io_uring *))dlsym(RTLD_NEXT, "io_uring_submit");
	return real ? real(ring) : -ENOSYS;
}

/* While set, every commit of a native state file (the rename of
 * sg-NNNNN.state.tmp over sg-NNNNN.state) checks that the files already in
 * place are at most one step behind the one being committed: a kill right
 * after it must leave a model the next run can resume
 * (test_commits_in_step_order). */
static const char *commit_dir;
static int commit_nsub, commit_bad;

static uint64_t header_step(const char *path)
{
	struct tu_native_hdr h;
	int fd = open(path, O_RDONLY);
	if (fd < 0 || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		h.step = UINT64_MAX;
	if (fd >= 0)
		close(fd);
	return h.step;
}

int rename(const char *from, const char *to)
{
	static int (*real)(const char *, const char *);
	if (!real)
		real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
	if (commit_dir) {
		uint64_t t = header_step(from);
		char path[512];
		for (int i = 0; i < commit_nsub; i++) {
			snprintf(path, sizeof(path), "%s/sg-%05d.state", commit_dir, i);
			if (strcmp(path, to) == 0)
				continue;
			uint64_t u = header_step(path);
			if (u + 1 < t) {
				if (!commit_bad)
					print_error("%s committed at step %" PRIu64
						    " while %s is still at step %" PRIu64
						    ": a kill now leaves them two steps apart\n",
						    to, t, path, u);
				commit_bad++;
			}
		}
	}
	return real ? real(from, to) : -1;
}

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

static void read_all(const char *path, void *buf, size_t len)
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

static void load(const char *dir, enum tu_layout layout, struct model *md)
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

static void unload(struct model *md)
{
	free(md->p);
	free(md->m);
	free(md->v);
	free(md->g);
	free(md->native_step);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p);
}

static char *mktmp(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *d = malloc(strlen(base) + 32);
	assert_non_null(d);
	sprintf(d, "%s/tu-pipe.XXXXXX", base);
	assert_non_null(mkdtemp(d));
	return d;
}

static void rmtmp(char *d)
{
	nftw(d, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	free(d);
}

static struct tu_options opts(enum tu_layout layout, enum tu_order order, int keep)
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

static void run(const char *dir, const struct tu_options *o, int steps)
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
 * magnitude of the summed terms, as in test_kernels.c. */
static void check_against_reference2(const struct model *init, const double *const *grads,
				     const struct model *out, const struct tu_hparams *hp,
				     int steps, uint64_t t0);
static void check_against_reference(const struct model *init, const struct model *out,
				    const struct tu_hparams *hp, int steps, uint64_t t0)
{
	const double *g[16];
	for (int s = 0; s < steps && s < 16; s++)
		g[s] = init->g;
	check_against_reference2(init, g, out, hp, steps, t0);
}

/* grads[s]: the gradients of step s+1. */
static void check_against_reference2(const struct model *init, const double *const *grads,
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

static void one_case(enum tu_layout layout, enum tu_dtype gdt, enum tu_order order, int keep)
{
	char *d = mktmp();
	char msg[512] = "";
	int rc = tu_init_dir(d, layout, PARAMS, SUBGROUP, gdt, 0, 7, msg, sizeof(msg));
	if (rc)
		print_error("init: %s\n", msg);
	assert_int_equal(rc, 0);
	struct model init, out;
	load(d, layout, &init);
	assert_int_equal(init.n, PARAMS);
	assert_int_equal(init.nsub, (PARAMS + SUBGROUP - 1) / SUBGROUP);
	struct tu_options o = opts(layout, order, keep);
	run(d, &o, STEPS);
	load(d, layout, &out);
	check_against_reference(&init, &out, &o.hp, STEPS, 0);
	if (layout == TU_LAYOUT_NATIVE)
		for (int i = 0; i < out.nsub; i++)
			assert_int_equal(out.native_step[i], STEPS);
	unload(&init);
	unload(&out);
	rmtmp(d);
}

static void test_native_ascending(void **s)
{
	(void)s;
	one_case(TU_LAYOUT_NATIVE, TU_BF16, TU_ORDER_ASCENDING, 0);
}

static void test_native_alternating_keep(void **s)
{
	(void)s;
	one_case(TU_LAYOUT_NATIVE, TU_F16, TU_ORDER_ALTERNATING, 2);
}

static void test_deepspeed_ascending(void **s)
{
	(void)s;
	one_case(TU_LAYOUT_DEEPSPEED, TU_BF16, TU_ORDER_ASCENDING, 0);
}

static void test_deepspeed_alternating(void **s)
{
	(void)s;
	one_case(TU_LAYOUT_DEEPSPEED, TU_BF16, TU_ORDER_ALTERNATING, 1);
}

static void test_native_ascending_keep(void **s)
{
	(void)s;
	one_case(TU_LAYOUT_NATIVE, TU_BF16, TU_ORDER_ASCENDING, 2);
}

static void test_deepspeed_extra_buffers(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256];
	assert_int_equal(
	    tu_init_dir(d, TU_LAYOUT_DEEPSPEED, PARAMS, SUBGROUP, TU_BF16, 0, 2, msg, 256), 0);
	struct model init, out;
	load(d, TU_LAYOUT_DEEPSPEED, &init);
	struct tu_options o = opts(TU_LAYOUT_DEEPSPEED, TU_ORDER_ALTERNATING, 1);
	o.extra_buffers = 2;
	run(d, &o, STEPS);
	load(d, TU_LAYOUT_DEEPSPEED, &out);
	check_against_reference(&init, &out, &o.hp, STEPS, 0);
	unload(&init);
	unload(&out);
	rmtmp(d);
}

static void test_keep_all(void **s)
{
	(void)s;
	one_case(TU_LAYOUT_NATIVE, TU_BF16, TU_ORDER_ALTERNATING, 100);
}

/* Same files, several ways to run them: identical bytes. */
static void same_bytes(const char *a, const char *b, enum tu_layout layout)
{
	struct model x, y;
	load(a, layout, &x);
	load(b, layout, &y);
	assert_int_equal(x.n, y.n);
	assert_memory_equal(x.p, y.p, x.n * 4);
	assert_memory_equal(x.m, y.m, x.n * 4);
	assert_memory_equal(x.v, y.v, x.n * 4);
	assert_memory_equal(x.native_step, y.native_step, (size_t)x.nsub * 8);
	unload(&x);
	unload(&y);
}

static void bitwise_orders(enum tu_layout layout)
{
	char *a = mktmp(), *b = mktmp(), *c = mktmp();
	char msg[256];
	assert_int_equal(tu_init_dir(a, layout, PARAMS, SUBGROUP, TU_BF16, 0, 3, msg, 256), 0);
	assert_int_equal(tu_init_dir(b, layout, PARAMS, SUBGROUP, TU_BF16, 0, 3, msg, 256), 0);
	assert_int_equal(tu_init_dir(c, layout, PARAMS, SUBGROUP, TU_BF16, 0, 3, msg, 256), 0);
	struct tu_options asc = opts(layout, TU_ORDER_ASCENDING, 0);
	struct tu_options alt = opts(layout, TU_ORDER_ALTERNATING, 1);
	struct tu_options buf = opts(layout, TU_ORDER_ALTERNATING, 0);
	buf.buffered = 1;
	buf.threads = 1;
	run(a, &asc, 4);
	run(b, &alt, 4);
	run(c, &buf, 4);
	same_bytes(a, b, layout);
	same_bytes(a, c, layout);
	rmtmp(a);
	rmtmp(b);
	rmtmp(c);
}

static void test_alternating_equals_ascending_native(void **s)
{
	(void)s;
	bitwise_orders(TU_LAYOUT_NATIVE);
}

static void test_alternating_equals_ascending_deepspeed(void **s)
{
	(void)s;
	bitwise_orders(TU_LAYOUT_DEEPSPEED);
}

/* 3 steps then 2 in a new run == 5 in one run: the step count persists. */
static void test_step_persists(void **s)
{
	(void)s;
	char *a = mktmp(), *b = mktmp();
	char msg[256];
	assert_int_equal(tu_init_dir(a, TU_LAYOUT_NATIVE, 5000, 1500, TU_BF16, 0, 9, msg, 256), 0);
	assert_int_equal(tu_init_dir(b, TU_LAYOUT_NATIVE, 5000, 1500, TU_BF16, 0, 9, msg, 256), 0);
	struct tu_options o = opts(TU_LAYOUT_NATIVE, TU_ORDER_ALTERNATING, 1);
	run(a, &o, 3);
	run(a, &o, 2);
	run(b, &o, 5);
	same_bytes(a, b, TU_LAYOUT_NATIVE);
	struct model x;
	load(a, TU_LAYOUT_NATIVE, &x);
	assert_int_equal(x.native_step[0], 5);
	unload(&x);
	rmtmp(a);
	rmtmp(b);
}

static void expect_open_error(const char *dir, enum tu_layout layout, const char *needle1,
			      const char *needle2)
{
	struct tu_ctx *c;
	struct tu_options o = opts(layout, TU_ORDER_ASCENDING, 0);
	int rc = tu_open(&c, dir, &o);
	assert_true(rc < 0);
	const char *m = tu_errmsg(c);
	if (!strstr(m, needle1) || (needle2 && !strstr(m, needle2)))
		print_error("message '%s' lacks '%s' / '%s'\n", m, needle1, needle2 ? needle2 : "");
	assert_non_null(strstr(m, needle1));
	if (needle2)
		assert_non_null(strstr(m, needle2));
	tu_close(c);
}

/* Headers two steps apart are no interrupted run: refused, by name. */
static void test_steps_far_apart(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_NATIVE, 5000, 1500, TU_BF16, 0, 9, msg, 256), 0);
	snprintf(path, sizeof(path), "%s/sg-00001.state", d);
	int fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	uint64_t two = 2;
	assert_int_equal(pwrite(fd, &two, 8, offsetof(struct tu_native_hdr, step)), 8);
	assert_int_equal(close(fd), 0);
	expect_open_error(d, TU_LAYOUT_NATIVE, "sg-00001.state", "more than one step apart");
	rmtmp(d);
}

static void test_errors_name_the_file(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	/* DeepSpeed: exp_avg one float short */
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_DEEPSPEED, 4096, 2048, TU_BF16, 0, 1, msg, 256),
			 0);
	snprintf(path, sizeof(path), "%s/zero_stage_3/optimizer/rank0/exp_avg-3_5.tensor.swp", d);
	assert_int_equal(truncate(path, 8188), 0);
	expect_open_error(d, TU_LAYOUT_DEEPSPEED, "exp_avg-3_5.tensor.swp: size 8188",
			  "expected 8192");
	/* missing exp_avg_sq */
	assert_int_equal(truncate(path, 8192), 0);
	snprintf(path, sizeof(path), "%s/zero_stage_3/optimizer/rank0/exp_avg_sq-0_2.tensor.swp",
		 d);
	assert_int_equal(unlink(path), 0);
	expect_open_error(d, TU_LAYOUT_DEEPSPEED, "exp_avg_sq-0_2.tensor.swp", "missing");
	/* native: truncated state, missing gradients */
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_NATIVE, 4096, 2048, TU_BF16, 0, 1, msg, 256), 0);
	snprintf(path, sizeof(path), "%s/sg-00001.state", d);
	assert_int_equal(truncate(path, 4096 + 100), 0);
	expect_open_error(d, TU_LAYOUT_NATIVE, "sg-00001.state: size 4196", "expected 28672");
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_NATIVE, 4096, 2048, TU_BF16, 0, 1, msg, 256), 0);
	snprintf(path, sizeof(path), "%s/sg-00000.grad", d);
	assert_int_equal(unlink(path), 0);
	expect_open_error(d, TU_LAYOUT_NATIVE, "sg-00000.grad", "No such file");
	/* numel with bit 63 set: 12 * numel wraps around to the real size */
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_NATIVE, 4096, 2048, TU_BF16, 0, 1, msg, 256), 0);
	snprintf(path, sizeof(path), "%s/sg-00001.state", d);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint64_t numel;
	assert_int_equal(pread(fd, &numel, 8, offsetof(struct tu_native_hdr, numel)), 8);
	numel ^= UINT64_C(1) << 63;
	assert_int_equal(pwrite(fd, &numel, 8, offsetof(struct tu_native_hdr, numel)), 8);
	assert_int_equal(close(fd), 0);
	expect_open_error(d, TU_LAYOUT_NATIVE, "sg-00001.state: header says 9223372036854777856",
			  "corrupted header");
	rmtmp(d);
	char *e = mktmp();
	expect_open_error(e, TU_LAYOUT_DEEPSPEED, "rank0", NULL);
	rmtmp(e);
}

/* --param-copy: the bf16 file holds the rounded updated params. */
static void test_param_copy_file(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	assert_int_equal(
	    tu_init_dir(d, TU_LAYOUT_NATIVE, PARAMS, SUBGROUP, TU_BF16, 0, 4, msg, 256), 0);
	/* left from a bigger model: the stale tail must go */
	snprintf(path, sizeof(path), "%s/sg-00000.param16", d);
	assert_int_equal(truncate(path, 0) == 0 || errno == ENOENT, 1);
	FILE *old = fopen(path, "wb");
	assert_non_null(old);
	assert_int_equal(fseek(old, 3 * SUBGROUP - 1, SEEK_SET), 0);
	assert_int_equal(fputc(1, old), 1);
	assert_int_equal(fclose(old), 0);
	struct tu_options o = opts(TU_LAYOUT_NATIVE, TU_ORDER_ALTERNATING, 1);
	o.param_copy = TU_BF16;
	run(d, &o, 2);
	struct model x;
	load(d, TU_LAYOUT_NATIVE, &x);
	uint16_t *h = malloc(x.n * 2);
	assert_non_null(h);
	size_t at = 0;
	for (int i = 0; i < x.nsub; i++) {
		size_t n = i < x.nsub - 1 ? SUBGROUP : PARAMS - (size_t)SUBGROUP * (size_t)i;
		snprintf(path, sizeof(path), "%s/sg-%05d.param16", d, i);
		struct stat st;
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_size, 2 * n);
		read_all(path, h + at, 2 * n);
		at += n;
	}
	for (size_t i = 0; i < x.n; i++)
		assert_int_equal(h[i], tu_f32_to_bf16(x.p[i]));
	free(h);
	unload(&x);
	rmtmp(d);
}

/* DeepSpeed pads swap files to 1024 B: a param file 100 floats longer than
 * its gradient files is accepted, the padding gets zero gradients; 256 or
 * more uncovered elements are an error naming the sub-group. */
static void test_deepspeed_padding(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_DEEPSPEED, 28672, 8192, TU_BF16, 0, 6, msg, 256),
			 0);
	const char *pre[] = {"", "exp_avg-", "exp_avg_sq-"};
	for (int k = 0; k < 3; k++) {
		snprintf(path, sizeof(path), "%s/zero_stage_3/optimizer/rank0/%s9_11.tensor.swp", d,
			 pre[k]);
		assert_int_equal(truncate(path, 4 * (4096 + 100)), 0);
	}
	struct model init, out;
	load(d, TU_LAYOUT_DEEPSPEED, &init);
	/* 4 sub-groups, the padded last one smaller than the others: its
	 * padding lands in a reused buffer where another sub-group's v was */
	assert_int_equal(init.n, 28672 + 100);
	for (size_t i = 28672; i < 28772; i++)
		init.g[i] = 0; /* what the updater must use for padding */
	struct tu_options o = opts(TU_LAYOUT_DEEPSPEED, TU_ORDER_ALTERNATING, 0);
	run(d, &o, 2);
	load(d, TU_LAYOUT_DEEPSPEED, &out);
	check_against_reference(&init, &out, &o.hp, 2, 0);
	unload(&init);
	unload(&out);
	for (int k = 0; k < 3; k++) {
		snprintf(path, sizeof(path), "%s/zero_stage_3/optimizer/rank0/%s9_11.tensor.swp", d,
			 pre[k]);
		assert_int_equal(truncate(path, 4 * (4096 + 256)), 0);
	}
	expect_open_error(d, TU_LAYOUT_DEEPSPEED, "gradients cover 4096 elements", "expected 4352");
	rmtmp(d);
}

/* Real DeepSpeed leaves gaps in a sub-group's gradient files: small
 * tensors, and each tensor's last numel mod 256 elements, stay in its
 * memory. A sub-group whose gradients do not all come from files is
 * refused with the elements missing and why, never updated with zeros. */
static void test_deepspeed_gap(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_DEEPSPEED, 28672, 8192, TU_BF16, 0, 6, msg, 256),
			 0);
	snprintf(path, sizeof(path),
		 "%s/zero_stage_3/optimizer/rank0/9_11_gradient_0_1024.tensor.swp", d);
	assert_int_equal(unlink(path), 0);
	expect_open_error(d, TU_LAYOUT_DEEPSPEED, "elements 0-1023 of sub-group 9_11",
			  "DeepSpeed keeps gradients");
	rmtmp(d);
}

/* The training-loop use: one context, one tu_run per step, new gradients
 * written between steps (as backward does). Resident sub-groups must not
 * keep the previous step's gradients. */
static void test_new_gradients_each_step(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	assert_int_equal(
	    tu_init_dir(d, TU_LAYOUT_NATIVE, PARAMS, SUBGROUP, TU_BF16, 0, 5, msg, 256), 0);
	struct model init;
	load(d, TU_LAYOUT_NATIVE, &init);
	struct tu_options o = opts(TU_LAYOUT_NATIVE, TU_ORDER_ALTERNATING, 1);
	struct tu_ctx *c;
	assert_int_equal(tu_open(&c, d, &o), 0);
	double *g[3];
	for (int st = 0; st < 3; st++) {
		g[st] = malloc(init.n * 8);
		assert_non_null(g[st]);
		size_t at = 0;
		for (int i = 0; i < init.nsub; i++) {
			size_t n =
			    i < init.nsub - 1 ? SUBGROUP : PARAMS - (size_t)SUBGROUP * (size_t)i;
			uint16_t *h = malloc(n * 2);
			assert_non_null(h);
			for (size_t k = 0; k < n; k++) {
				h[k] = tu_f32_to_bf16(st == 0 ? (float)init.g[at + k]
							      : 0.01f * (float)((at + k) % 97) -
								    0.4f * (float)st);
				g[st][at + k] = tu_bf16_to_f32(h[k]);
			}
			snprintf(path, sizeof(path), "%s/sg-%05d.grad", d, i);
			FILE *f = fopen(path, "r+b");
			assert_non_null(f);
			assert_int_equal(fwrite(h, 2, n, f), n);
			assert_int_equal(fclose(f), 0);
			free(h);
			at += n;
		}
		assert_int_equal(tu_run(c, 1, NULL, NULL, NULL), 0);
	}
	tu_close(c);
	struct model out;
	load(d, TU_LAYOUT_NATIVE, &out);
	const double *gg[3] = {g[0], g[1], g[2]};
	check_against_reference2(&init, gg, &out, &o.hp, 3, 0);
	for (int st = 0; st < 3; st++)
		free(g[st]);
	unload(&init);
	unload(&out);
	rmtmp(d);
}

/* Sub-groups big enough that a state file takes several write requests
 * (MAX_OP_BYTES is 8 MiB): an in-place write-back torn by a kill would be
 * seen as a file matching neither the old nor the new state. */
#define KILL_SUB  1000003
#define KILL_NSUB 3

static char **read_states(const char *dir, size_t *bytes)
{
	char **st = calloc(KILL_NSUB, sizeof(*st));
	assert_non_null(st);
	char path[512];
	for (int i = 0; i < KILL_NSUB; i++) {
		snprintf(path, sizeof(path), "%s/sg-%05d.state", dir, i);
		struct stat sb;
		assert_int_equal(stat(path, &sb), 0);
		bytes[i] = (size_t)sb.st_size;
		st[i] = malloc(bytes[i]);
		assert_non_null(st[i]);
		read_all(path, st[i], bytes[i]);
	}
	return st;
}

static void free_states(char **st)
{
	for (int i = 0; i < KILL_NSUB; i++)
		free(st[i]);
	free(st);
}

/* A native model of KILL_NSUB sub-groups at step 0 (before) and after one
 * step (after), and a directory a to interrupt that step in. */
struct two_steps {
	char *a, *b;
	char **before, **after;
	size_t nb[KILL_NSUB], nb1[KILL_NSUB];
	struct tu_options o;
};

static void two_steps_init(struct two_steps *w)
{
	char msg[256];
	w->a = mktmp();
	w->b = mktmp();
	w->o = opts(TU_LAYOUT_NATIVE, TU_ORDER_ASCENDING, 0);
	w->o.threads = 1;
	w->o.extra_buffers = 0;
	assert_int_equal(tu_init_dir(w->b, TU_LAYOUT_NATIVE, (uint64_t)KILL_SUB * KILL_NSUB,
				     KILL_SUB, TU_BF16, 0, 8, msg, 256),
			 0);
	w->before = read_states(w->b, w->nb);
	run(w->b, &w->o, 1);
	w->after = read_states(w->b, w->nb1);
}

/* A fresh step-0 model in a, to interrupt. */
static void two_steps_reset(struct two_steps *w)
{
	char msg[256];
	assert_int_equal(tu_init_dir(w->a, TU_LAYOUT_NATIVE, (uint64_t)KILL_SUB * KILL_NSUB,
				     KILL_SUB, TU_BF16, 0, 8, msg, 256),
			 0);
}

/* Every sub-group in a is whole at step 0 or at step 1; returns how many
 * at step 1. WHAT, N: for messages. */
static int two_steps_check(const struct two_steps *w, const char *what, int n)
{
	size_t nx[KILL_NSUB];
	char **x = read_states(w->a, nx);
	int at1 = 0;
	for (int i = 0; i < KILL_NSUB; i++) {
		int old = nx[i] == w->nb[i] && !memcmp(x[i], w->before[i], w->nb[i]);
		int new = nx[i] == w->nb1[i] && !memcmp(x[i], w->after[i], w->nb1[i]);
		if (!old && !new)
			print_error("%s %d: sg-%05d.state is neither step 0 nor step 1 (header "
				    "says %" PRIu64 ")\n",
				    what, n, i, ((struct tu_native_hdr *)x[i])->step);
		assert_true(old || new);
		at1 += new;
	}
	free_states(x);
	return at1;
}

/* The next run of one step finishes the interrupted one: every file ends
 * as the uninterrupted run left it, bit for bit, whether or not it is told
 * the step (FIRST_STEP). */
static void two_steps_resume(const struct two_steps *w, int first_step, const char *what, int n)
{
	struct tu_options r = w->o;
	r.first_step = (uint64_t)first_step;
	run(w->a, &r, 1);
	size_t nx[KILL_NSUB];
	char **x = read_states(w->a, nx);
	for (int i = 0; i < KILL_NSUB; i++) {
		if (nx[i] != w->nb1[i] || memcmp(x[i], w->after[i], w->nb1[i]))
			print_error("%s %d: sg-%05d.state differs after the resumed step\n", what,
				    n, i);
		assert_true(nx[i] == w->nb1[i] && !memcmp(x[i], w->after[i], w->nb1[i]));
	}
	free_states(x);
}

static void two_steps_free(struct two_steps *w)
{
	free_states(w->before);
	free_states(w->after);
	rmtmp(w->a);
	rmtmp(w->b);
}

/* A SIGKILL in the middle of the write-back (TIERFS_UPDATE_CRASH_AFTER, see
 * pipeline.c) must leave every sub-group entirely at step 0 or entirely at
 * step 1: its header and data from the same step; the next run resumes.
 * With in-place writes this failed only sometimes (whether the kernel
 * still carries out a killed process's submitted requests depends on how
 * far they got); the deterministic check is test_state_file_replaced_whole. */
static void test_kill_during_write_back(void **s)
{
	(void)s;
	struct two_steps w;
	two_steps_init(&w);
	static const int kill_at[] = {1, 2, 3, 5, 8, 11};
	for (size_t t = 0; t < sizeof(kill_at) / sizeof(kill_at[0]); t++) {
		two_steps_reset(&w);
		fflush(NULL);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			char n[16];
			snprintf(n, sizeof(n), "%d", kill_at[t]);
			setenv("TIERFS_UPDATE_CRASH_AFTER", n, 1);
			struct tu_ctx *c;
			if (tu_open(&c, w.a, &w.o) || tu_run(c, 1, NULL, NULL, NULL))
				_exit(3);
			_exit(0);
		}
		int ws;
		assert_int_equal(waitpid(pid, &ws, 0), pid);
		if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGKILL)
			print_error("kill after %d writes: child status %#x\n", kill_at[t], ws);
		assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
		if (two_steps_check(&w, "kill after writes:", kill_at[t]) < KILL_NSUB)
			two_steps_resume(&w, (int)(t % 2), "kill after writes:", kill_at[t]);
	}
	two_steps_free(&w);
}

/* A write that fails (EIO at the N-th write request): the run fails, and
 * drains what it had in flight, but commits no state file it did not write
 * whole; every sub-group is at step 0 or 1, and the next run finishes the
 * step as an uninterrupted run would have. */
static void test_write_fails(void **s)
{
	(void)s;
	struct two_steps w;
	two_steps_init(&w);
	for (int n = 1; n <= 12; n++) {
		two_steps_reset(&w);
		char env[16];
		snprintf(env, sizeof(env), "%d", n);
		setenv("TIERFS_UPDATE_FAIL_AFTER", env, 1);
		struct tu_ctx *c;
		assert_int_equal(tu_open(&c, w.a, &w.o), 0);
		int rc = tu_run(c, 1, NULL, NULL, NULL);
		unsetenv("TIERFS_UPDATE_FAIL_AFTER");
		tu_close(c);
		if (rc == 0)
			break; /* fewer writes than n: nothing failed */
		two_steps_check(&w, "failed write", n);
		two_steps_resume(&w, 0, "failed write", n);
	}
	two_steps_free(&w);
}

/* The state file is never rewritten in place: the new one is written
 * beside it and renamed over it, so at every instant (and after a crash or
 * power loss at any point) sg-NNNNN.state is one whole step. A descriptor
 * opened before the run still reads the old file, all of it. */
static void test_state_file_replaced_whole(void **s)
{
	(void)s;
	char *d = mktmp();
	char msg[256], path[512];
	assert_int_equal(tu_init_dir(d, TU_LAYOUT_NATIVE, 5000, 2500, TU_BF16, 0, 3, msg, 256), 0);
	snprintf(path, sizeof(path), "%s/sg-00000.state", d);
	size_t bytes = 4096 + 12 * 2500;
	char *before = malloc(bytes), *seen = malloc(bytes);
	assert_non_null(before && seen);
	read_all(path, before, bytes);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	struct tu_options o = opts(TU_LAYOUT_NATIVE, TU_ORDER_ASCENDING, 0);
	run(d, &o, 1);
	assert_int_equal(pread(fd, seen, bytes, 0), (ssize_t)bytes);
	assert_int_equal(close(fd), 0);
	assert_memory_equal(seen, before, bytes);
	read_all(path, seen, bytes);
	assert_int_equal(((struct tu_native_hdr *)seen)->step, 1);
	snprintf(path, sizeof(path), "%s/sg-00000.state.tmp", d);
	assert_int_equal(access(path, F_OK), -1);
	free(before);
	free(seen);
	rmtmp(d);
}

static void write_floats(const char *path, const float *x, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(x, 4, n, f), n);
	assert_int_equal(fclose(f), 0);
}

/* DeepSpeed writes one gradient file per parameter tensor: a sub-group may
 * have thousands, more than RLIMIT_NOFILE allows open at once. */
#define MANY_GRADS 1500
#define GRAD_NUMEL 16
/* A DeepSpeed rank directory of one sub-group with MANY_GRADS gradient
 * files; returns the temporary directory. */
static char *make_many_grads(void)
{
	char *d = mktmp();
	char path[512], rdir[400];
	snprintf(rdir, sizeof(rdir), "%s/zero_stage_3", d);
	assert_int_equal(mkdir(rdir, 0700), 0);
	snprintf(rdir, sizeof(rdir), "%s/zero_stage_3/optimizer", d);
	assert_int_equal(mkdir(rdir, 0700), 0);
	snprintf(rdir, sizeof(rdir), "%s/zero_stage_3/optimizer/rank0", d);
	assert_int_equal(mkdir(rdir, 0700), 0);
	size_t n = (size_t)MANY_GRADS * GRAD_NUMEL;
	float *x = malloc(n * 4);
	assert_non_null(x);
	static const char *pre[] = {"", "exp_avg-", "exp_avg_sq-"};
	for (int k = 0; k < 3; k++) {
		for (size_t i = 0; i < n; i++)
			x[i] = k == 0 ? 0.001f * (float)(i % 997) : k == 1 ? 0.0f : 1e-6f;
		snprintf(path, sizeof(path), "%s/%s0_99.tensor.swp", rdir, pre[k]);
		write_floats(path, x, n);
	}
	for (int g = 0; g < MANY_GRADS; g++) {
		for (size_t i = 0; i < GRAD_NUMEL; i++)
			x[i] = 0.01f * (float)((g + (int)i) % 13) - 0.06f;
		snprintf(path, sizeof(path), "%s/0_99_gradient_%d_%d.tensor.swp", rdir,
			 g * GRAD_NUMEL, GRAD_NUMEL);
		write_floats(path, x, GRAD_NUMEL);
	}
	free(x);
	return d;
}

static void test_deepspeed_many_gradient_files(void **s)
{
	(void)s;
	char *d = make_many_grads();
	struct model init, out;
	load(d, TU_LAYOUT_DEEPSPEED, &init);
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 256;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	struct tu_options o = opts(TU_LAYOUT_DEEPSPEED, TU_ORDER_ASCENDING, 0);
	struct tu_ctx *c;
	int rc = tu_open(&c, d, &o);
	if (!rc)
		rc = tu_run(c, 2, NULL, NULL, NULL);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	if (rc)
		print_error("%s\n", tu_errmsg(c));
	assert_int_equal(rc, 0);
	tu_close(c);
	load(d, TU_LAYOUT_DEEPSPEED, &out);
	check_against_reference(&init, &out, &o.hp, 2, 0);
	unload(&init);
	unload(&out);
	rmtmp(d);
}

/* More requests than the ring holds, and the kernel refuses the submit
 * that would make room: the run must end with the error, not wait for
 * completions of requests that were never queued. */
static void test_submit_fails(void **s)
{
	(void)s;
	char *d = make_many_grads();
	struct tu_options o = opts(TU_LAYOUT_DEEPSPEED, TU_ORDER_ASCENDING, 0);
	struct tu_ctx *c;
	assert_int_equal(tu_open(&c, d, &o), 0);
	fail_submit = 1;
	int rc = tu_run(c, 1, NULL, NULL, NULL);
	fail_submit = 0;
	assert_int_equal(rc, -EIO);
	assert_non_null(strstr(tu_errmsg(c), "io_uring_submit"));
	tu_close(c);
	rmtmp(d);
}

/* One native sub-group file pair of numel params at step 0. */
static void write_native_sg(const char *dir, int i, int nsub, size_t numel)
{
	char path[512];
	size_t bytes = TU_HDR_BYTES + 12 * numel;
	char *buf = calloc(1, bytes);
	uint16_t *g = malloc(2 * numel);
	assert_non_null(buf && g);
	struct tu_native_hdr *h = (struct tu_native_hdr *)buf;
	memcpy(h->magic, TU_NATIVE_MAGIC, 8);
	h->version = TU_NATIVE_VERSION;
	h->grad_dtype = TU_BF16;
	h->numel = numel;
	h->index = (uint64_t)i;
	h->nsub = (uint64_t)nsub;
	float *p = (float *)(buf + TU_HDR_BYTES), *v = p + 2 * numel;
	for (size_t k = 0; k < numel; k++) {
		p[k] = 0.001f * (float)(k % 1000);
		v[k] = 1e-6f;
		g[k] = tu_f32_to_bf16(0.01f * (float)(k % 7) - 0.03f);
	}
	snprintf(path, sizeof(path), "%s/sg-%05d.state", dir, i);
	write_floats(path, (const float *)buf, bytes / 4);
	snprintf(path, sizeof(path), "%s/sg-%05d.grad", dir, i);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(g, 2, numel, f), numel);
	assert_int_equal(fclose(f), 0);
	free(buf);
	free(g);
}

/* Several steps in one run, sub-groups of very different sizes: the small
 * first sub-group's write-back of step 2 finishes long before the big
 * one's of step 1. Committing it first meant that a kill in between left
 * sg-00000 at step 2 and sg-00001 at step 0, which tu_open refuses ("more
 * than one step apart ... restore a checkpoint"). Every commit must find
 * the other files at most one step behind. */
static void test_commits_in_step_order(void **s)
{
	(void)s;
	static const size_t sizes[] = {1024, 6000000, 1024};
	const int nsub = 3;
	for (int order = 0; order < 2; order++) {
		char *d = mktmp();
		for (int i = 0; i < nsub; i++)
			write_native_sg(d, i, nsub, sizes[i]);
		struct tu_options o =
		    opts(TU_LAYOUT_NATIVE, order ? TU_ORDER_ALTERNATING : TU_ORDER_ASCENDING, 0);
		commit_dir = d;
		commit_nsub = nsub;
		commit_bad = 0;
		run(d, &o, 4);
		commit_dir = NULL;
		if (commit_bad)
			print_error("order %s: %d commits ran ahead\n",
				    order ? "alternating" : "ascending", commit_bad);
		assert_int_equal(commit_bad, 0);
		rmtmp(d);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_native_ascending),
	    cmocka_unit_test(test_native_alternating_keep),
	    cmocka_unit_test(test_deepspeed_ascending),
	    cmocka_unit_test(test_deepspeed_alternating),
	    cmocka_unit_test(test_native_ascending_keep),
	    cmocka_unit_test(test_deepspeed_extra_buffers),
	    cmocka_unit_test(test_keep_all),
	    cmocka_unit_test(test_alternating_equals_ascending_native),
	    cmocka_unit_test(test_alternating_equals_ascending_deepspeed),
	    cmocka_unit_test(test_step_persists),
	    cmocka_unit_test(test_errors_name_the_file),
	    cmocka_unit_test(test_param_copy_file),
	    cmocka_unit_test(test_new_gradients_each_step),
	    cmocka_unit_test(test_deepspeed_padding),
	    cmocka_unit_test(test_deepspeed_gap),
	    cmocka_unit_test(test_kill_during_write_back),
	    cmocka_unit_test(test_state_file_replaced_whole),
	    cmocka_unit_test(test_deepspeed_many_gradient_files),
	    cmocka_unit_test(test_submit_fails),
	    cmocka_unit_test(test_steps_far_apart),
	    cmocka_unit_test(test_write_fails),
	    cmocka_unit_test(test_commits_in_step_order),
	};
	return cmocka_run_group_tests_name("cuda_update_pipeline", tests, NULL, NULL);
}
