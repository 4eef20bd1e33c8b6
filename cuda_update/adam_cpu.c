/*
 * cuda_update/adam_cpu.c — the CPU Adam/AdamW update: scalar, AVX2+FMA+F16C and
 * AVX-512 variants chosen at run time, split over threads.
 *
 * The ISA variants are compiled with per-function target attributes rather
 * than global -m flags so that one binary runs on any x86-64 and still uses
 * the widest vectors present. Gradient upcast (bf16/fp16 -> fp32) is fused
 * into the update so the half-precision gradients are read once and never
 * expanded into a full fp32 buffer ("delayed conversion").
 *
 * Arithmetic follows torch.optim.AdamW (single-tensor path):
 *   p *= 1 - lr*wd;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;
 *   p -= (lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps)
 * and torch.optim.Adam adds wd*p to g instead of decaying p. Division and
 * sqrt are IEEE (no rsqrt approximations): results stay within fp32
 * rounding of a float64 reference.
 */
#include "cuda_update/tierfs_update.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TU_X86 1
#endif

/* Scalars precomputed once per call; float because torch applies them to
 * fp32 tensors. */
struct kconst {
	int adam; /* 1: L2 into the gradient (Adam); 0: decoupled decay (AdamW) */
	float b1, omb1, b2, omb2, eps, decay, wd, step_size, sqrt_bc2;
};

union f32u {
	float f;
	uint32_t u;
};

float tu_bf16_to_f32(uint16_t h)
{
	union f32u x = {.u = (uint32_t)h << 16};
	return x.f;
}

uint16_t tu_f32_to_bf16(float f)
{
	union f32u x = {.f = f};
	if ((x.u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x.u >> 16) | 0x40); /* keep NaN a quiet NaN */
	x.u += 0x7fffu + ((x.u >> 16) & 1);
	return (uint16_t)(x.u >> 16);
}

float tu_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	union f32u x;
	if (exp == 0x1f) {
		x.u = sign | 0x7f800000u | (man << 13);
	} else if (exp == 0) {
		/* subnormal (or zero): value = man * 2^-24, exact in fp32 */
		x.f = (float)man * 0x1p-24f;
		x.u |= sign;
	} else {
		x.u = sign | ((exp + 112) << 23) | (man << 13);
	}
	return x.f;
}

uint16_t tu_f32_to_f16(float f)
{
	union f32u x = {.f = f};
	uint16_t sign = (uint16_t)((x.u >> 16) & 0x8000);
	uint32_t a = x.u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return sign | 0x7e00;
	if (a >= 0x477ff000u) /* rounds to >= 65520: infinity */
		return sign | 0x7c00;
	if (a < 0x38800000u) { /* below 2^-14: subnormal half */
		/* rint in the current (nearest-even) mode does the rounding */
		float s = fabsf(f) * 0x1p24f;
		return sign | (uint16_t)lrintf(s);
	}
	uint32_t r = a + 0xfffu + ((a >> 13) & 1) - (112u << 23);
	return sign | (uint16_t)(r >> 13);
}

static inline float load_grad1(const void *g, enum tu_dtype dt, size_t i)
{
	switch (dt) {
	case TU_BF16:
		return tu_bf16_to_f32(((const uint16_t *)g)[i]);
	case TU_F16:
		return tu_f16_to_f32(((const uint16_t *)g)[i]);
	default:
		return ((const float *)g)[i];
	}
}

static inline void store_copy1(void *c, enum tu_dtype dt, size_t i, float p)
{
	if (dt == TU_BF16)
		((uint16_t *)c)[i] = tu_f32_to_bf16(p);
	else if (dt == TU_F16)
		((uint16_t *)c)[i] = tu_f32_to_f16(p);
}

/* Elements [lo, hi) one at a time: the scalar kernel and every vector tail. */
static void adam_scalar(const struct kconst *k, const struct tu_tensors *t, size_t lo, size_t hi)
{
	float *p = t->param, *m = t->exp_avg, *v = t->exp_avg_sq;
	for (size_t i = lo; i < hi; i++) {
		float g = load_grad1(t->grad, t->grad_dtype, i);
		float pi = p[i];
		if (k->adam)
			g = g + k->wd * pi;
		else
			pi = pi * k->decay;
		float mi = k->b1 * m[i] + k->omb1 * g;
		float vi = k->b2 * v[i] + k->omb2 * (g * g);
		float denom = sqrtf(vi) / k->sqrt_bc2 + k->eps;
		pi = pi - k->step_size * (mi / denom);
		p[i] = pi;
		m[i] = mi;
		v[i] = vi;
		if (t->param_copy)
			store_copy1(t->param_copy, t->copy_dtype, i, pi);
	}
}

#ifdef TU_X86
__attribute__((target("avx2,fma,f16c"))) static inline __m256 avx2_bf16_load(const uint16_t *s)
{
	__m128i h = _mm_loadu_si128((const __m128i *)s);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* fp32 -> bf16 round-to-nearest-even on 8 lanes (NaN payloads not preserved:
 * an update producing NaN has already failed). */
__attribute__((target("avx2,fma,f16c"))) static inline __m128i avx2_to_bf16(__m256 x)
{
	__m256i u = _mm256_castps_si256(x);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	u = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
	u = _mm256_srli_epi32(u, 16);
	/* packus works within 128-bit lanes: fix the order with a permute */
	__m256i packed = _mm256_packus_epi32(u, u);
	packed = _mm256_permute4x64_epi64(packed, 0x08);
	return _mm256_castsi256_si128(packed);
}

__attribute__((target("avx2,fma,f16c"))) static void
adam_avx2(const struct kconst *k, const struct tu_tensors *t, size_t lo, size_t hi)
{
	float *p = t->param, *m = t->exp_avg, *v = t->exp_avg_sq;
	const __m256 b1 = _mm256_set1_ps(k->b1), omb1 = _mm256_set1_ps(k->omb1);
	const __m256 b2 = _mm256_set1_ps(k->b2), omb2 = _mm256_set1_ps(k->omb2);
	const __m256 eps = _mm256_set1_ps(k->eps), decay = _mm256_set1_ps(k->decay);
	const __m256 wd = _mm256_set1_ps(k->wd), ss = _mm256_set1_ps(k->step_size);
	const __m256 sbc2 = _mm256_set1_ps(k->sqrt_bc2);
	size_t i = lo;
	for (; i + 8 <= hi; i += 8) {
		__m256 g;
		if (t->grad_dtype == TU_BF16)
			g = avx2_bf16_load((const uint16_t *)t->grad + i);
		else if (t->grad_dtype == TU_F16)
			g = _mm256_cvtph_ps(
			    _mm_loadu_si128((const __m128i *)((const uint16_t *)t->grad + i)));
		else
			g = _mm256_loadu_ps((const float *)t->grad + i);
		__m256 pi = _mm256_loadu_ps(p + i);
		if (k->adam)
			g = _mm256_fmadd_ps(wd, pi, g);
		else
			pi = _mm256_mul_ps(pi, decay);
		__m256 mi = _mm256_fmadd_ps(b1, _mm256_loadu_ps(m + i), _mm256_mul_ps(omb1, g));
		__m256 vi = _mm256_fmadd_ps(b2, _mm256_loadu_ps(v + i),
					    _mm256_mul_ps(omb2, _mm256_mul_ps(g, g)));
		__m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), sbc2), eps);
		pi = _mm256_fnmadd_ps(ss, _mm256_div_ps(mi, denom), pi);
		_mm256_storeu_ps(p + i, pi);
		_mm256_storeu_ps(m + i, mi);
		_mm256_storeu_ps(v + i, vi);
		if (t->param_copy) {
			__m128i h = t->copy_dtype == TU_F16
					? _mm256_cvtps_ph(pi, _MM_FROUND_TO_NEAREST_INT)
					: avx2_to_bf16(pi);
			_mm_storeu_si128((__m128i *)((uint16_t *)t->param_copy + i), h);
		}
	}
	adam_scalar(k, t, i, hi);
}

__attribute__((target("avx512f"))) static void
adam_avx512(const struct kconst *k, const struct tu_tensors *t, size_t lo, size_t hi)
{
	float *p = t->param, *m = t->exp_avg, *v = t->exp_avg_sq;
	const __m512 b1 = _mm512_set1_ps(k->b1), omb1 = _mm512_set1_ps(k->omb1);
	const __m512 b2 = _mm512_set1_ps(k->b2), omb2 = _mm512_set1_ps(k->omb2);
	const __m512 eps = _mm512_set1_ps(k->eps), decay = _mm512_set1_ps(k->decay);
	const __m512 wd = _mm512_set1_ps(k->wd), ss = _mm512_set1_ps(k->step_size);
	const __m512 sbc2 = _mm512_set1_ps(k->sqrt_bc2);
	size_t i = lo;
	for (; i + 16 <= hi; i += 16) {
		__m512 g;
		if (t->grad_dtype == TU_BF16) {
			__m256i h =
			    _mm256_loadu_si256((const __m256i *)((const uint16_t *)t->grad + i));
			g = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
		} else if (t->grad_dtype == TU_F16) {
			g = _mm512_cvtph_ps(
			    _mm256_loadu_si256((const __m256i *)((const uint16_t *)t->grad + i)));
		} else {
			g = _mm512_loadu_ps((const float *)t->grad + i);
		}
		__m512 pi = _mm512_loadu_ps(p + i);
		if (k->adam)
			g = _mm512_fmadd_ps(wd, pi, g);
		else
			pi = _mm512_mul_ps(pi, decay);
		__m512 mi = _mm512_fmadd_ps(b1, _mm512_loadu_ps(m + i), _mm512_mul_ps(omb1, g));
		__m512 vi = _mm512_fmadd_ps(b2, _mm512_loadu_ps(v + i),
					    _mm512_mul_ps(omb2, _mm512_mul_ps(g, g)));
		__m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), sbc2), eps);
		pi = _mm512_fnmadd_ps(ss, _mm512_div_ps(mi, denom), pi);
		_mm512_storeu_ps(p + i, pi);
		_mm512_storeu_ps(m + i, mi);
		_mm512_storeu_ps(v + i, vi);
		if (t->param_copy) {
			__m256i h;
			if (t->copy_dtype == TU_F16) {
				h = _mm512_cvtps_ph(pi, _MM_FROUND_TO_NEAREST_INT);
			} else {
				__m512i u = _mm512_castps_si512(pi);
				__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16),
							       _mm512_set1_epi32(1));
				u = _mm512_add_epi32(
				    u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
				h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16));
			}
			_mm256_storeu_si256((__m256i *)((uint16_t *)t->param_copy + i), h);
		}
	}
	adam_scalar(k, t, i, hi);
}
#endif

int tu_isa_available(enum tu_isa isa)
{
	switch (isa) {
	case TU_ISA_AUTO:
	case TU_ISA_SCALAR:
		return 1;
#ifdef TU_X86
	case TU_ISA_AVX2:
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
		       __builtin_cpu_supports("f16c");
	case TU_ISA_AVX512:
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx512f");
#endif
	default:
		return 0;
	}
}

enum tu_isa tu_isa_best(void)
{
	if (tu_isa_available(TU_ISA_AVX512))
		return TU_ISA_AVX512;
	if (tu_isa_available(TU_ISA_AVX2))
		return TU_ISA_AVX2;
	return TU_ISA_SCALAR;
}

const char *tu_isa_name(enum tu_isa isa)
{
	static const char *names[] = {"auto", "scalar", "avx2", "avx512"};
	return (unsigned)isa < 4 ? names[isa] : "?";
}

typedef void (*kernel_fn)(const struct kconst *, const struct tu_tensors *, size_t, size_t);

struct chunk {
	kernel_fn fn;
	const struct kconst *k;
	const struct tu_tensors *t;
	size_t lo, hi;
};

static void *chunk_main(void *arg)
{
	struct chunk *c = arg;
	c->fn(c->k, c->t, c->lo, c->hi);
	return NULL;
}

/* Below this a thread costs more than it saves. */
#define TU_MIN_PER_THREAD 32768
#define TU_MAX_THREADS	  256

int tu_adam_step(const struct tu_hparams *hp, uint64_t step, const struct tu_tensors *t,
		 int nthreads, enum tu_isa isa)
{
	if (!hp || !t || step == 0 ||
	    (t->numel && (!t->param || !t->exp_avg || !t->exp_avg_sq || !t->grad)))
		return -EINVAL;
	if (t->grad_dtype > TU_F16 ||
	    (t->param_copy && t->copy_dtype != TU_BF16 && t->copy_dtype != TU_F16))
		return -EINVAL;
	if (isa == TU_ISA_AUTO)
		isa = tu_isa_best();
	if (!tu_isa_available(isa))
		return -ENOTSUP;
	/* Scalars in double as torch computes them in Python, then fp32. */
	struct kconst k = {
	    .adam = hp->opt == TU_ADAM,
	    .b1 = (float)hp->beta1,
	    .omb1 = (float)(1.0 - hp->beta1),
	    .b2 = (float)hp->beta2,
	    .omb2 = (float)(1.0 - hp->beta2),
	    .eps = (float)hp->eps,
	    .decay = (float)(1.0 - hp->lr * hp->weight_decay),
	    .wd = (float)hp->weight_decay,
	    .step_size = (float)(hp->lr / (1.0 - pow(hp->beta1, (double)step))),
	    .sqrt_bc2 = (float)sqrt(1.0 - pow(hp->beta2, (double)step)),
	};
	kernel_fn fn = adam_scalar;
#ifdef TU_X86
	if (isa == TU_ISA_AVX2)
		fn = adam_avx2;
	else if (isa == TU_ISA_AVX512)
		fn = adam_avx512;
#endif
	size_t n = t->numel;
	if (nthreads > TU_MAX_THREADS)
		nthreads = TU_MAX_THREADS;
	if (nthreads > 1 && n / (size_t)nthreads < TU_MIN_PER_THREAD)
		nthreads = (int)(n / TU_MIN_PER_THREAD);
	if (nthreads <= 1) {
		fn(&k, t, 0, n);
		return 0;
	}
	/* Chunks are multiples of 16 floats (64 B, a cache line of fp32 and the
	 * AVX-512 width) so no two threads share a line of p, m or v. */
	size_t per = ((n + (size_t)nthreads - 1) / (size_t)nthreads + 15) & ~(size_t)15;
	struct chunk ch[TU_MAX_THREADS];
	pthread_t tid[TU_MAX_THREADS];
	int started = 0, err = 0;
	for (int i = 0; i < nthreads; i++) {
		size_t lo = (size_t)i * per, hi = lo + per < n ? lo + per : n;
		ch[i] = (struct chunk){fn, &k, t, lo < n ? lo : n, hi};
	}
	for (int i = 1; i < nthreads; i++) {
		int rc = pthread_create(&tid[i], NULL, chunk_main, &ch[i]);
		if (rc) {
			/* Not enough threads: do the rest on this one. */
			for (int j = i; j < nthreads; j++)
				chunk_main(&ch[j]);
			err = 0;
			break;
		}
		started = i;
	}
	chunk_main(&ch[0]);
	for (int i = 1; i <= started; i++)
		pthread_join(tid[i], NULL);
	return err;
}
