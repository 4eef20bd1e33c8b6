/*
 * cuda_update/tests/test_kernels.c — the CPU Adam/AdamW kernels against a
 * float64 reference: every ISA the CPU has (others reported skipped), fp32,
 * bf16 and fp16 gradients, sizes that are not multiples of the vector width,
 * several steps with fresh gradients each step, one and several threads.
 * Also the half-precision conversions and the optional bf16/fp16 param copy.
 */
#include "cuda_update/tierfs_update.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define NSTEPS 4

static uint64_t rng = 88172645463325252ULL;
static double urand(void) /* [-1, 1) */
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) * 0x1p-52 - 1.0;
}

/* torch.optim.AdamW / Adam in float64. mp and mm track the magnitude of the
 * terms that make up p and m (sums of absolute values): the scale at which
 * fp32 rounding happens, since p and m can be small differences of larger
 * terms (m = 0.9 m + 0.1 g with opposite signs). */
static void ref_step(const struct tu_hparams *hp, uint64_t t, double *p, double *m, double *v,
		     double *mp, double *mm, const double *g, size_t n)
{
	double bc1 = 1 - pow(hp->beta1, (double)t), bc2 = 1 - pow(hp->beta2, (double)t);
	for (size_t i = 0; i < n; i++) {
		double gi = g[i], ga = fabs(g[i]);
		if (hp->opt == TU_ADAM) {
			gi += hp->weight_decay * p[i];
			ga += hp->weight_decay * mp[i];
		} else {
			p[i] *= 1 - hp->lr * hp->weight_decay;
			mp[i] *= 1 - hp->lr * hp->weight_decay;
		}
		m[i] = hp->beta1 * m[i] + (1 - hp->beta1) * gi;
		mm[i] = hp->beta1 * mm[i] + (1 - hp->beta1) * ga;
		v[i] = hp->beta2 * v[i] + (1 - hp->beta2) * gi * gi;
		double denom = sqrt(v[i]) / sqrt(bc2) + hp->eps;
		p[i] -= hp->lr / bc1 * m[i] / denom;
		mp[i] += hp->lr / bc1 * mm[i] / denom;
	}
}

/* Largest per-element error relative to the magnitude of what was summed
 * into the value (mag NULL: the value itself, no cancellation possible). */
static double max_rel_err(const float *a, const double *r, const double *mag, size_t n)
{
	double worst = 0;
	for (size_t i = 0; i < n; i++) {
		double s = fmax(fabs(r[i]), mag ? mag[i] : 0);
		double d = fabs((double)a[i] - r[i]);
		if (s > 0)
			d /= s;
		worst = fmax(worst, d);
	}
	return worst;
}

static void run_case(enum tu_isa isa, enum tu_dtype gdt, enum tu_optimizer opt, size_t n,
		     int threads)
{
	struct tu_hparams hp = {opt, 1e-3, 0.9, 0.999, 1e-8, 0.05};
	float *p = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
	void *g = malloc(n * 4);
	double *rp = malloc(n * 8), *rm = malloc(n * 8), *rv = malloc(n * 8), *rg = malloc(n * 8);
	double *mp = malloc(n * 8), *mm = malloc(n * 8);
	assert_non_null(p && m && v && g && rp && rm && rv && rg && mp && mm);
	for (size_t i = 0; i < n; i++) {
		p[i] = (float)urand();
		m[i] = (float)(0.01 * urand());
		float r = (float)urand();
		/* v bounded below as after a few real steps: m/sqrt(v) stays O(1),
		 * so the test measures rounding, not an ill-conditioned start. */
		v[i] = 1e-4f * (0.25f + r * r);
		rp[i] = p[i];
		rm[i] = m[i];
		rv[i] = v[i];
		mp[i] = fabs(rp[i]);
		mm[i] = fabs(rm[i]);
	}
	for (uint64_t t = 1; t <= NSTEPS; t++) {
		for (size_t i = 0; i < n; i++) {
			float x = (float)(0.05 * urand());
			if (gdt == TU_BF16) {
				((uint16_t *)g)[i] = tu_f32_to_bf16(x);
				rg[i] = tu_bf16_to_f32(((uint16_t *)g)[i]);
			} else if (gdt == TU_F16) {
				((uint16_t *)g)[i] = tu_f32_to_f16(x);
				rg[i] = tu_f16_to_f32(((uint16_t *)g)[i]);
			} else {
				((float *)g)[i] = x;
				rg[i] = x;
			}
		}
		struct tu_tensors ts = {p, m, v, g, gdt, NULL, TU_F32, n};
		assert_int_equal(tu_adam_step(&hp, t, &ts, threads, isa), 0);
		ref_step(&hp, t, rp, rm, rv, mp, mm, rg, n);
	}
	double ep = max_rel_err(p, rp, mp, n), em = max_rel_err(m, rm, mm, n),
	       ev = max_rel_err(v, rv, NULL, n);
	if (getenv("TU_VERBOSE") || ep >= 1e-6 || em >= 1e-6 || ev >= 1e-6)
		print_error("%s n=%zu threads=%d: relative error p %.3g m %.3g v %.3g\n",
			    tu_isa_name(isa), n, threads, ep, em, ev);
	assert_true(ep < 1e-6);
	assert_true(em < 1e-6);
	assert_true(ev < 1e-6);
	free(p);
	free(m);
	free(v);
	free(g);
	free(rp);
	free(rm);
	free(rv);
	free(rg);
	free(mp);
	free(mm);
}

struct kcase {
	enum tu_isa isa;
	enum tu_dtype gdt;
	enum tu_optimizer opt;
};

static void test_kernel(void **state)
{
	const struct kcase *k = *state;
	if (!tu_isa_available(k->isa))
		skip();
	static const size_t sizes[] = {1, 7, 15, 17, 1000003};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		run_case(k->isa, k->gdt, k->opt, sizes[i], 1);
	/* threads: chunk edges at 16-float boundaries, odd total */
	run_case(k->isa, k->gdt, k->opt, 1000003, 3);
}

/* Every ISA gives the same bits as every other on the same input would be
 * too strict (FMA contraction differs), but one ISA must be deterministic
 * whatever the thread count: the pipeline's order tests rely on it. */
static void test_threads_bitwise(void **state)
{
	(void)state;
	size_t n = 300007;
	float *a[2][3];
	float *g = malloc(n * 4);
	assert_non_null(g);
	for (size_t i = 0; i < n; i++)
		g[i] = (float)(0.05 * urand());
	for (int r = 0; r < 2; r++)
		for (int k = 0; k < 3; k++) {
			a[r][k] = malloc(n * 4);
			assert_non_null(a[r][k]);
			for (size_t i = 0; i < n; i++)
				a[r][k][i] = 0.5f + (float)i * 1e-6f;
		}
	struct tu_hparams hp = {TU_ADAMW, 1e-3, 0.9, 0.999, 1e-8, 0.01};
	for (int r = 0; r < 2; r++) {
		struct tu_tensors t = {a[r][0], a[r][1], a[r][2], g, TU_F32, NULL, TU_F32, n};
		assert_int_equal(tu_adam_step(&hp, 3, &t, r ? 4 : 1, TU_ISA_AUTO), 0);
	}
	for (int k = 0; k < 3; k++)
		assert_memory_equal(a[0][k], a[1][k], n * 4);
	for (int r = 0; r < 2; r++)
		for (int k = 0; k < 3; k++)
			free(a[r][k]);
	free(g);
}

static void test_half_conversions(void **state)
{
	(void)state;
	/* every half value survives f16 -> f32 -> f16 (NaNs stay NaN) */
	for (uint32_t h = 0; h < 65536; h++) {
		float f = tu_f16_to_f32((uint16_t)h);
		uint16_t back = tu_f32_to_f16(f);
		if (isnan(f))
			assert_true((back & 0x7c00) == 0x7c00 && (back & 0x3ff));
		else
			assert_int_equal(back, h);
		float b = tu_bf16_to_f32((uint16_t)h);
		if (!isnan(b))
			assert_int_equal(tu_f32_to_bf16(b), h);
	}
	/* known values and round-to-nearest-even */
	assert_true(tu_f16_to_f32(0x3c00) == 1.0f);
	assert_true(tu_f16_to_f32(0x0001) == 0x1p-24f);
	assert_int_equal(tu_f32_to_f16(65520.0f), 0x7c00);
	assert_int_equal(tu_f32_to_f16(65519.0f), 0x7bff);
	assert_int_equal(tu_f32_to_f16(1.0f + 0x1p-11f), 0x3c00); /* tie -> even */
	assert_int_equal(tu_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
	assert_int_equal(tu_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80); /* tie -> even */
	assert_int_equal(tu_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
}

/* The optional half-precision param copy equals the converted fp32 result. */
static void test_param_copy(void **state)
{
	(void)state;
	size_t n = 1037;
	for (int isa = TU_ISA_SCALAR; isa <= TU_ISA_AVX512; isa++) {
		if (!tu_isa_available((enum tu_isa)isa))
			continue;
		for (int dt = TU_BF16; dt <= TU_F16; dt++) {
			float p[1037], m[1037], v[1037], g[1037];
			uint16_t c[1037];
			for (size_t i = 0; i < n; i++) {
				p[i] = (float)urand() * 100.0f;
				m[i] = v[i] = 0;
				g[i] = (float)urand();
			}
			struct tu_hparams hp = {TU_ADAMW, 1e-2, 0.9, 0.999, 1e-8, 0.0};
			struct tu_tensors t = {p, m, v, g, TU_F32, c, (enum tu_dtype)dt, n};
			assert_int_equal(tu_adam_step(&hp, 1, &t, 1, (enum tu_isa)isa), 0);
			for (size_t i = 0; i < n; i++)
				assert_int_equal(c[i], dt == TU_BF16 ? tu_f32_to_bf16(p[i])
								     : tu_f32_to_f16(p[i]));
		}
	}
}

static void test_bad_args(void **state)
{
	(void)state;
	float x = 0;
	struct tu_hparams hp = {TU_ADAMW, 1e-3, 0.9, 0.999, 1e-8, 0.01};
	struct tu_tensors t = {&x, &x, &x, &x, TU_F32, NULL, TU_F32, 1};
	assert_int_equal(tu_adam_step(&hp, 0, &t, 1, TU_ISA_AUTO), -EINVAL);
	t.grad = NULL;
	assert_int_equal(tu_adam_step(&hp, 1, &t, 1, TU_ISA_AUTO), -EINVAL);
}

int main(void)
{
	static struct kcase cases[18];
	struct CMUnitTest tests[24];
	static char names[18][48];
	int nt = 0;
	for (int isa = TU_ISA_SCALAR; isa <= TU_ISA_AVX512; isa++)
		for (int dt = TU_F32; dt <= TU_F16; dt++)
			for (int opt = TU_ADAMW; opt <= TU_ADAM; opt++) {
				static const char *dn[] = {"fp32", "bf16", "fp16"};
				cases[nt] = (struct kcase){(enum tu_isa)isa, (enum tu_dtype)dt,
							   (enum tu_optimizer)opt};
				snprintf(names[nt], sizeof(names[nt]), "kernel_%s_%s_grad_%s",
					 tu_isa_name((enum tu_isa)isa), opt ? "adam" : "adamw",
					 dn[dt]);
				tests[nt] = (struct CMUnitTest){names[nt], test_kernel, NULL, NULL,
								&cases[nt]};
				nt++;
			}
	tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_threads_bitwise);
	tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_half_conversions);
	tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_param_copy);
	tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_bad_args);
	return _cmocka_run_group_tests("cuda_update_kernels", tests, (size_t)nt, NULL, NULL);
}
