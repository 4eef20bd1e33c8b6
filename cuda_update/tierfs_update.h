/*
 * cuda_update/tierfs_update.h — public C API of libtierfs_update: the Adam/AdamW
 * update of optimizer shards on CPU (SIMD, threads) or CUDA, and the sub-group
 * pipeline that streams shards from a directory (DeepSpeed's swap layout or
 * the native one) with read/update/write overlapped.
 *
 * A training loop either calls tu_adam_step() on tensors it holds in memory,
 * or opens a directory with tu_open() and runs whole steps with tu_run().
 * Every function returns 0 or a negative errno; the pipeline functions also
 * leave a human-readable message (which file, which size) in the context,
 * see tu_errmsg().
 */
#ifndef TIERFS_UPDATE_H
#define TIERFS_UPDATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tu_dtype { TU_F32 = 0, TU_BF16 = 1, TU_F16 = 2 };
enum tu_optimizer { TU_ADAMW = 0, TU_ADAM = 1 };
/* Instruction sets for the CPU kernel; TU_ISA_AUTO picks the best the CPU has. */
enum tu_isa { TU_ISA_AUTO = 0, TU_ISA_SCALAR = 1, TU_ISA_AVX2 = 2, TU_ISA_AVX512 = 3 };

struct tu_hparams {
	enum tu_optimizer opt;
	double lr, beta1, beta2, eps, weight_decay;
};

/* One contiguous shard. grad may be fp32, bf16 or fp16 (upcast inside the
 * update). param_copy, when not NULL, receives the updated params converted
 * to copy_dtype (bf16 or fp16), e.g. for the next forward pass. */
struct tu_tensors {
	float *param, *exp_avg, *exp_avg_sq;
	const void *grad;
	enum tu_dtype grad_dtype;
	void *param_copy;
	enum tu_dtype copy_dtype;
	size_t numel;
};

/* torch.optim.AdamW / torch.optim.Adam semantics for step number `step`
 * (1-based, the value bias correction uses). nthreads <= 1: caller's thread. */
int tu_adam_step(const struct tu_hparams *hp, uint64_t step, const struct tu_tensors *t,
		 int nthreads, enum tu_isa isa);
/* 1 when the CPU can run isa, else 0. */
int tu_isa_available(enum tu_isa isa);
enum tu_isa tu_isa_best(void);
const char *tu_isa_name(enum tu_isa isa);

/* Half-precision conversions (round to nearest even), exposed for tests. */
float tu_bf16_to_f32(uint16_t h);
float tu_f16_to_f32(uint16_t h);
uint16_t tu_f32_to_bf16(float f);
uint16_t tu_f32_to_f16(float f);

/* ---- CUDA (stubs returning -ENOTSUP when built without nvcc) ---- */
/* 0 when a device is usable; otherwise -ENODEV / -ENOTSUP and *why (static
 * string) says why. */
int tu_cuda_probe(const char **why);
/* Same contract as tu_adam_step() on host memory (ideally from
 * tu_cuda_host_alloc): chunks cycle over two streams so that the copy in,
 * the kernel and the copy out of different chunks overlap. */
int tu_cuda_adam_step(const struct tu_hparams *hp, uint64_t step, const struct tu_tensors *t);
/* Pinned host memory (page aligned, usable with O_DIRECT); NULL on failure. */
void *tu_cuda_host_alloc(size_t bytes);
void tu_cuda_host_free(void *p);
/* Kernel-only timing for the bench: seconds for `iters` updates of n params
 * resident on the device; negative errno on failure. */
double tu_cuda_bench_kernel(size_t n, int iters);

/* ---- sub-group pipeline over a directory ---- */
enum tu_layout { TU_LAYOUT_NATIVE = 0, TU_LAYOUT_DEEPSPEED = 1 };
enum tu_order { TU_ORDER_ASCENDING = 0, TU_ORDER_ALTERNATING = 1 };
enum tu_device { TU_DEVICE_CPU = 0, TU_DEVICE_CUDA = 1 };

struct tu_options {
	enum tu_layout layout;
	enum tu_order order;
	enum tu_device device;
	enum tu_isa isa;
	struct tu_hparams hp;
	int rank;	     /* DeepSpeed rankR directory */
	int keep;	     /* sub-groups kept in memory between steps */
	int extra_buffers;   /* beyond keep+3: slack for a slow write-back */
	int threads;	     /* CPU update threads */
	uint64_t first_step; /* 0: from the native header; DeepSpeed default 1 */
	int no_compute;	     /* I/O only (bench: the pipeline's I/O time) */
	int buffered;	     /* never O_DIRECT */
	/* TU_BF16 or TU_F16: also write the updated params in that precision
	 * (native layout: DIR/sg-NNNNN.param16, 2*numel bytes); TU_F32: no copy. */
	enum tu_dtype param_copy;
};

struct tu_step_stats {
	uint64_t step;		/* bias-correction step just applied */
	int subgroups;		/* updated in this step */
	double wall_s;		/* whole step */
	double compute_s;	/* sum of update times */
	uint64_t bytes_read;	/* in this step */
	uint64_t bytes_written; /* in this step (kept groups write later) */
};

struct tu_ctx;
/* progress: called after each sub-group update (done of total in the step,
 * bytes read and written so far in the step). */
typedef void (*tu_progress_fn)(void *arg, uint64_t step, int done, int total, uint64_t bytes);
/* step_done: called once per step with its statistics. */
typedef void (*tu_step_fn)(void *arg, const struct tu_step_stats *st);

int tu_open(struct tu_ctx **out, const char *dir, const struct tu_options *o);
/* Runs nsteps steps. When it returns 0 every sub-group is on disk and
 * synced (fdatasync of each file, fsync of the directory), and the native
 * layout's state files were each replaced whole (written beside, renamed
 * over), so an interruption leaves every sub-group at its old or its new
 * step; the next run (without first_step) then finishes that step on the
 * sub-groups still behind before going on. step_done of the last step is
 * called once that holds; for the steps
 * before it, step_done reports the update, the writes may still be in
 * flight. */
int tu_run(struct tu_ctx *c, int nsteps, tu_progress_fn progress, tu_step_fn step_done, void *arg);
const char *tu_errmsg(const struct tu_ctx *c);
int tu_num_subgroups(const struct tu_ctx *c);
uint64_t tu_total_params(const struct tu_ctx *c);
void tu_close(struct tu_ctx *c);

/* Writes a synthetic model: random params, zero moments (native: step 0),
 * random gradients of grad_dtype (native) or fp32 (DeepSpeed). seed makes it
 * reproducible. msg (may be NULL) receives an error message. */
int tu_init_dir(const char *dir, enum tu_layout layout, uint64_t params, uint64_t subgroup,
		enum tu_dtype grad_dtype, int rank, uint64_t seed, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
