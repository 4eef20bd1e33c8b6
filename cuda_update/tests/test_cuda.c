/*
 * cuda_update/tests/test_cuda.c — the CUDA path against the CPU path: the
 * fused kernel on pinned and pageable memory, every gradient dtype, sizes
 * across the chunk and stream boundaries, the half-precision param copy, and
 * a pipelined run with --device cuda. Exits 77 (skipped) without a GPU or
 * when built without CUDA.
 */
#include "cuda_update/tierfs_update.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>

#include <cmocka.h>

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static float urand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((double)(rng >> 11) * 0x1p-52 - 1.0);
}

/* CUDA and CPU agree to a few fp32 ulps: both use IEEE sqrt/div and FMA
 * where the AVX code does, but contraction may differ by one rounding. */
static void compare(const float *a, const float *b, size_t n, const char *what)
{
	double worst = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]) / fmax(fabs((double)b[i]), 1e-6);
		worst = fmax(worst, d);
	}
	if (worst >= 2e-6)
		print_error("%s: relative difference %.3g\n", what, worst);
	assert_true(worst < 2e-6);
}

static void one(size_t n, enum tu_dtype gdt, int pinned, enum tu_optimizer opt)
{
	float *x[2][3];
	uint16_t *copy[2];
	void *g = pinned ? tu_cuda_host_alloc(n * 4) : malloc(n * 4);
	assert_non_null(g);
	for (int r = 0; r < 2; r++) {
		for (int k = 0; k < 3; k++) {
			x[r][k] = pinned && r ? tu_cuda_host_alloc(n * 4) : malloc(n * 4);
			assert_non_null(x[r][k]);
		}
		copy[r] = malloc(n * 2);
		assert_non_null(copy[r]);
	}
	for (size_t i = 0; i < n; i++) {
		float p = urand(), m = 0.01f * urand(), r = urand(), gi = 0.05f * urand();
		for (int k = 0; k < 2; k++) {
			x[k][0][i] = p;
			x[k][1][i] = m;
			x[k][2][i] = 1e-4f * (0.25f + r * r);
		}
		if (gdt == TU_F32)
			((float *)g)[i] = gi;
		else
			((uint16_t *)g)[i] =
			    gdt == TU_BF16 ? tu_f32_to_bf16(gi) : tu_f32_to_f16(gi);
	}
	struct tu_hparams hp = {opt, 1e-3, 0.9, 0.999, 1e-8, 0.05};
	for (uint64_t t = 1; t <= 3; t++) {
		struct tu_tensors a = {x[0][0], x[0][1], x[0][2], g, gdt, copy[0], TU_BF16, n};
		struct tu_tensors b = {x[1][0], x[1][1], x[1][2], g, gdt, copy[1], TU_BF16, n};
		assert_int_equal(tu_adam_step(&hp, t, &a, 2, TU_ISA_AUTO), 0);
		assert_int_equal(tu_cuda_adam_step(&hp, t, &b), 0);
	}
	compare(x[1][0], x[0][0], n, "param");
	compare(x[1][1], x[0][1], n, "exp_avg");
	compare(x[1][2], x[0][2], n, "exp_avg_sq");
	for (size_t i = 0; i < n; i++)
		assert_int_equal(copy[1][i], tu_f32_to_bf16(x[1][0][i]));
	for (int r = 0; r < 2; r++) {
		for (int k = 0; k < 3; k++) {
			if (pinned && r)
				tu_cuda_host_free(x[r][k]);
			else
				free(x[r][k]);
		}
		free(copy[r]);
	}
	if (pinned)
		tu_cuda_host_free(g);
	else
		free(g);
}

static void test_sizes_and_dtypes(void **s)
{
	(void)s;
	static const size_t sizes[] = {1, 7, 17, 1000003, 20000001};
	for (size_t i = 0; i < 5; i++)
		for (int dt = TU_F32; dt <= TU_F16; dt++)
			one(sizes[i], (enum tu_dtype)dt, i % 2, dt == TU_F16 ? TU_ADAM : TU_ADAMW);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p);
}

static void test_pipeline_cuda_equals_cpu(void **s)
{
	(void)s;
	char a[] = "/tmp/tu-cuda.XXXXXX", b[] = "/tmp/tu-cuda.XXXXXX";
	assert_non_null(mkdtemp(a));
	assert_non_null(mkdtemp(b));
	char msg[256];
	for (int k = 0; k < 2; k++)
		assert_int_equal(tu_init_dir(k ? b : a, TU_LAYOUT_DEEPSPEED, 3000017, 1000003,
					     TU_BF16, 0, 5, msg, sizeof(msg)),
				 0);
	for (int k = 0; k < 2; k++) {
		struct tu_options o;
		memset(&o, 0, sizeof(o));
		o.layout = TU_LAYOUT_DEEPSPEED;
		o.order = TU_ORDER_ALTERNATING;
		o.device = k ? TU_DEVICE_CUDA : TU_DEVICE_CPU;
		o.threads = 2;
		o.hp = (struct tu_hparams){TU_ADAMW, 1e-3, 0.9, 0.999, 1e-8, 0.01};
		struct tu_ctx *c;
		assert_int_equal(tu_open(&c, k ? b : a, &o), 0);
		assert_int_equal(tu_run(c, 3, NULL, NULL, NULL), 0);
		tu_close(c);
	}
	/* compare the param files */
	char pa[512], pb[512];
	snprintf(pa, sizeof(pa), "%s/zero_stage_3/optimizer/rank0/0_2.tensor.swp", a);
	snprintf(pb, sizeof(pb), "%s/zero_stage_3/optimizer/rank0/0_2.tensor.swp", b);
	FILE *fa = fopen(pa, "rb"), *fb = fopen(pb, "rb");
	assert_non_null(fa);
	assert_non_null(fb);
	size_t n = 1000003;
	float *xa = malloc(n * 4), *xb = malloc(n * 4);
	assert_non_null(xa && xb);
	assert_int_equal(fread(xa, 4, n, fa), n);
	assert_int_equal(fread(xb, 4, n, fb), n);
	fclose(fa);
	fclose(fb);
	compare(xb, xa, n, "pipeline param");
	free(xa);
	free(xb);
	nftw(a, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	nftw(b, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const char *why = NULL;
	if (tu_cuda_probe(&why)) {
		printf("# skipped: %s\n", why);
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sizes_and_dtypes),
	    cmocka_unit_test(test_pipeline_cuda_equals_cpu),
	};
	return cmocka_run_group_tests_name("cuda_update_cuda", tests, NULL, NULL);
}
