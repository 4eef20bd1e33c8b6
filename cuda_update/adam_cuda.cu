/*
 * cuda_update/adam_cuda.cu — the fused Adam/AdamW kernel on the GPU and the
 * host side that streams a shard through it.
 *
 * A shard lives in host memory (pinned by tu_cuda_host_alloc so copies run at
 * PCIe speed and asynchronously). It is cut into chunks that alternate over
 * two streams, each stream with its own device buffers: the copy in of chunk
 * c+1, the kernel on chunk c and the copy out of chunk c-1 overlap, so the
 * update is bounded by PCIe rather than by the kernel. Arithmetic is the
 * same as adam_cpu.c (IEEE sqrt and division, fp32) so both paths agree to
 * rounding.
 */
#include "cuda_update/tierfs_update.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>

struct kconst {
	int adam;
	float b1, omb1, b2, omb2, eps, decay, wd, step_size, sqrt_bc2;
};

template <int DT> __device__ __forceinline__ float load_grad(const void *g, size_t i)
{
	if (DT == TU_BF16)
		return __bfloat162float(((const __nv_bfloat16 *)g)[i]);
	if (DT == TU_F16)
		return __half2float(((const __half *)g)[i]);
	return ((const float *)g)[i];
}

template <int DT>
__global__ void adam_kernel(kconst k, float *__restrict__ p, float *__restrict__ m,
			    float *__restrict__ v, const void *__restrict__ g, void *copy,
			    int copy_dt, size_t n)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		float gi = load_grad<DT>(g, i);
		float pi = p[i];
		if (k.adam)
			gi = __fmaf_rn(k.wd, pi, gi);
		else
			pi = __fmul_rn(pi, k.decay);
		float mi = __fmaf_rn(k.b1, m[i], __fmul_rn(k.omb1, gi));
		float vi = __fmaf_rn(k.b2, v[i], __fmul_rn(k.omb2, __fmul_rn(gi, gi)));
		float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.sqrt_bc2), k.eps);
		pi = __fmaf_rn(-k.step_size, __fdiv_rn(mi, denom), pi);
		p[i] = pi;
		m[i] = mi;
		v[i] = vi;
		if (copy) {
			if (copy_dt == TU_BF16)
				((__nv_bfloat16 *)copy)[i] = __float2bfloat16_rn(pi);
			else
				((__half *)copy)[i] = __float2half_rn(pi);
		}
	}
}

#define NSTREAMS 2
#define CHUNK	 (8u << 20) /* elements per chunk: 32 MiB per fp32 array */

/* Device buffers per stream; one caller at a time (guarded by lock). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cudaStream_t streams[NSTREAMS];
static float *dbuf[NSTREAMS]; /* p, m, v, g (as fp32 room), copy: 5 * CHUNK floats */
static int ready;
static char why_buf[256];

static int cuda_err(cudaError_t e, const char *what)
{
	snprintf(why_buf, sizeof(why_buf), "%s: %s", what, cudaGetErrorString(e));
	fprintf(stderr, "tierfs-update: CUDA %s\n", why_buf);
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

extern "C" int tu_cuda_probe(const char **why)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0) {
		snprintf(why_buf, sizeof(why_buf), "no CUDA device: %s",
			 e != cudaSuccess ? cudaGetErrorString(e) : "no device found");
		if (why)
			*why = why_buf;
		return -ENODEV;
	}
	return 0;
}

static int setup(void)
{
	if (ready)
		return 0;
	cudaError_t e;
	for (int s = 0; s < NSTREAMS; s++) {
		if ((e = cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking)) !=
		    cudaSuccess)
			return cuda_err(e, "cudaStreamCreate");
		if ((e = cudaMalloc(&dbuf[s], 5ull * CHUNK * sizeof(float))) != cudaSuccess)
			return cuda_err(e, "cudaMalloc of the chunk buffers");
	}
	ready = 1;
	return 0;
}

static kconst make_const(const tu_hparams *hp, uint64_t step)
{
	kconst k;
	k.adam = hp->opt == TU_ADAM;
	k.b1 = (float)hp->beta1;
	k.omb1 = (float)(1.0 - hp->beta1);
	k.b2 = (float)hp->beta2;
	k.omb2 = (float)(1.0 - hp->beta2);
	k.eps = (float)hp->eps;
	k.decay = (float)(1.0 - hp->lr * hp->weight_decay);
	k.wd = (float)hp->weight_decay;
	k.step_size = (float)(hp->lr / (1.0 - pow(hp->beta1, (double)step)));
	k.sqrt_bc2 = (float)sqrt(1.0 - pow(hp->beta2, (double)step));
	return k;
}

static void launch(const kconst &k, float *p, float *m, float *v, const void *g, int gdt,
		   void *copy, int cdt, size_t n, cudaStream_t st)
{
	int threads = 256;
	size_t blocks = (n + threads - 1) / threads;
	if (blocks > 65535u * 8)
		blocks = 65535u * 8;
	if (gdt == TU_BF16)
		adam_kernel<TU_BF16>
		    <<<(unsigned)blocks, threads, 0, st>>>(k, p, m, v, g, copy, cdt, n);
	else if (gdt == TU_F16)
		adam_kernel<TU_F16>
		    <<<(unsigned)blocks, threads, 0, st>>>(k, p, m, v, g, copy, cdt, n);
	else
		adam_kernel<TU_F32>
		    <<<(unsigned)blocks, threads, 0, st>>>(k, p, m, v, g, copy, cdt, n);
}

extern "C" int tu_cuda_adam_step(const struct tu_hparams *hp, uint64_t step,
				 const struct tu_tensors *t)
{
	if (!hp || !t || step == 0)
		return -EINVAL;
	if (tu_cuda_probe(NULL))
		return -ENODEV;
	pthread_mutex_lock(&lock);
	int rc = setup();
	kconst k = make_const(hp, step);
	size_t gsz = t->grad_dtype == TU_F32 ? 4 : 2;
	cudaError_t e = cudaSuccess;
	for (size_t lo = 0, c = 0; !rc && lo < t->numel; lo += CHUNK, c++) {
		size_t n = t->numel - lo < CHUNK ? t->numel - lo : CHUNK;
		int s = (int)(c % NSTREAMS);
		cudaStream_t st = streams[s];
		float *dp = dbuf[s], *dm = dp + CHUNK, *dv = dm + CHUNK, *dg = dv + CHUNK;
		float *dc = dg + CHUNK;
		/* Stream order makes reuse of this stream's buffers safe: chunk
		 * c+2 is copied in only after chunk c's copy out. */
		if ((e = cudaMemcpyAsync(dp, t->param + lo, n * 4, cudaMemcpyHostToDevice, st)) ||
		    (e = cudaMemcpyAsync(dm, t->exp_avg + lo, n * 4, cudaMemcpyHostToDevice, st)) ||
		    (e = cudaMemcpyAsync(dv, t->exp_avg_sq + lo, n * 4, cudaMemcpyHostToDevice,
					 st)) ||
		    (e = cudaMemcpyAsync(dg, (const char *)t->grad + lo * gsz, n * gsz,
					 cudaMemcpyHostToDevice, st))) {
			rc = cuda_err(e, "copy to device");
			break;
		}
		launch(k, dp, dm, dv, dg, t->grad_dtype, t->param_copy ? dc : NULL, t->copy_dtype,
		       n, st);
		if ((e = cudaGetLastError()) != cudaSuccess) {
			rc = cuda_err(e, "kernel launch");
			break;
		}
		if ((e = cudaMemcpyAsync(t->param + lo, dp, n * 4, cudaMemcpyDeviceToHost, st)) ||
		    (e = cudaMemcpyAsync(t->exp_avg + lo, dm, n * 4, cudaMemcpyDeviceToHost, st)) ||
		    (e = cudaMemcpyAsync(t->exp_avg_sq + lo, dv, n * 4, cudaMemcpyDeviceToHost,
					 st)) ||
		    (t->param_copy && (e = cudaMemcpyAsync((char *)t->param_copy + lo * 2, dc,
							   n * 2, cudaMemcpyDeviceToHost, st)))) {
			rc = cuda_err(e, "copy to host");
			break;
		}
	}
	for (int s = 0; ready && s < NSTREAMS; s++)
		if ((e = cudaStreamSynchronize(streams[s])) != cudaSuccess && !rc)
			rc = cuda_err(e, "update");
	pthread_mutex_unlock(&lock);
	return rc;
}

extern "C" void *tu_cuda_host_alloc(size_t bytes)
{
	void *p = NULL;
	if (tu_cuda_probe(NULL) || cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess)
		return NULL;
	return p;
}

extern "C" void tu_cuda_host_free(void *p)
{
	if (p)
		cudaFreeHost(p);
}

extern "C" double tu_cuda_bench_kernel(size_t n, int iters)
{
	if (tu_cuda_probe(NULL))
		return -ENODEV;
	float *d = NULL;
	cudaError_t e = cudaMalloc(&d, 4 * n * sizeof(float));
	if (e != cudaSuccess)
		return cuda_err(e, "cudaMalloc (bench)");
	cudaMemset(d, 0, 4 * n * sizeof(float));
	tu_hparams hp = {TU_ADAMW, 1e-3, 0.9, 0.999, 1e-8, 0.01};
	cudaEvent_t a, b;
	cudaEventCreate(&a);
	cudaEventCreate(&b);
	launch(make_const(&hp, 1), d, d + n, d + 2 * n, d + 3 * n, TU_F32, NULL, 0, n, 0);
	cudaEventRecord(a, 0);
	for (int i = 0; i < iters; i++)
		launch(make_const(&hp, (uint64_t)i + 2), d, d + n, d + 2 * n, d + 3 * n, TU_F32,
		       NULL, 0, n, 0);
	cudaEventRecord(b, 0);
	e = cudaEventSynchronize(b);
	float ms = 0;
	cudaEventElapsedTime(&ms, a, b);
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	cudaFree(d);
	if (e != cudaSuccess)
		return cuda_err(e, "bench kernel");
	return ms / 1000.0;
}
