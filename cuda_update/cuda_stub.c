/*
 * cuda_update/cuda_stub.c — the CUDA entry points when the library is built
 * without nvcc (or in the sanitizer build, which stays CPU-only because
 * ASan and the CUDA runtime do not mix well). Every call reports -ENOTSUP so
 * that `--device cuda` can say exactly why it cannot run.
 */
#include "cuda_update/tierfs_update.h"

#include <errno.h>
#include <stdlib.h>

#ifndef TU_STUB_WHY
#define TU_STUB_WHY "built without CUDA support (nvcc was not found at build time)"
#endif

int tu_cuda_probe(const char **why)
{
	if (why)
		*why = TU_STUB_WHY;
	return -ENOTSUP;
}

int tu_cuda_adam_step(const struct tu_hparams *hp, uint64_t step, const struct tu_tensors *t)
{
	(void)hp;
	(void)step;
	(void)t;
	return -ENOTSUP;
}

void *tu_cuda_host_alloc(size_t bytes)
{
	(void)bytes;
	return NULL;
}

void tu_cuda_host_free(void *p)
{
	(void)p;
}

double tu_cuda_bench_kernel(size_t n, int iters)
{
	(void)n;
	(void)iters;
	return -ENOTSUP;
}
