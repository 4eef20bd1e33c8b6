/*
 * cuda_update/main.c — the `tierfs-update` command: init (synthetic model),
 * step (the pipelined optimizer step over a directory) and bench (CPU Adam vs
 * memory bandwidth, pipeline overlap). Option parsing and user-facing output
 * only; the work is in libtierfs_update (adam_cpu.c, pipeline*.c, layout.c).
 */
#include "cuda_update/tierfs_update.h"

#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage:\n"
    "  tierfs-update init DIR --params N --subgroup N [--grad-dtype bf16|fp16]\n"
    "                     [--layout native|deepspeed] [--rank R] [--seed S]\n"
    "  tierfs-update step DIR [--layout native|deepspeed] --steps N [options]\n"
    "  tierfs-update bench [--params N] [--threads N] [--dir DIR]\n"
    "\n"
    "init writes a synthetic model: random params, small random moments and\n"
    "random gradients, split into sub-groups of --subgroup params.\n"
    "  --params N          total parameters (suffixes k, M, G accepted)\n"
    "  --subgroup N        parameters per sub-group (the last may be smaller)\n"
    "  --grad-dtype T      bf16 (default) or fp16 gradients (native layout)\n"
    "  --layout L          native (default) or deepspeed (fp32 gradient files)\n"
    "  --rank R            DeepSpeed rank directory (default 0)\n"
    "  --seed S            random seed (default 1)\n"
    "\n"
    "step runs N optimizer steps over every sub-group of DIR, reading sub-group\n"
    "i+1 and writing i-1 (io_uring, O_DIRECT where the filesystem allows it)\n"
    "while updating i.\n"
    "  --layout L          native (default): DIR/sg-NNNNN.state holds a 4 KiB header\n"
    "                      (magic TFSUPDv1, version, numel, steps applied, index,\n"
    "                      count) then param, exp_avg, exp_avg_sq as fp32;\n"
    "                      DIR/sg-NNNNN.grad holds bf16/fp16 gradients, upcast\n"
    "                      inside the update. The step count persists in the header.\n"
    "                      deepspeed: DIR/zero_stage_3/optimizer/rankR/ with\n"
    "                      {id}.tensor.swp, exp_avg-{id}.tensor.swp,\n"
    "                      exp_avg_sq-{id}.tensor.swp and fp32 gradients\n"
    "                      {id}_gradient_{offset}_{numel}.tensor.swp, id = first_last\n"
    "                      param id; sub-groups in ascending first param id.\n"
    "  --steps N           number of steps to run (required)\n"
    "  --first-step N      bias-correction step of the first update (deepspeed:\n"
    "                      required, DeepSpeed keeps the count in its checkpoint,\n"
    "                      not in the swap files; native: default from the header,\n"
    "                      giving it overrides the header)\n"
    "  --optimizer O       adamw (default, torch.optim.AdamW: decoupled decay) or\n"
    "                      adam (torch.optim.Adam: weight decay added to the gradient)\n"
    "  --lr X              learning rate (default 1e-3)\n"
    "  --beta1 X           first-moment decay (default 0.9)\n"
    "  --beta2 X           second-moment decay (default 0.999)\n"
    "  --eps X             denominator epsilon (default 1e-8)\n"
    "  --weight-decay X    weight decay (default 0.01)\n"
    "  --order O           ascending (DeepSpeed's order, every step 0..N-1) or\n"
    "                      alternating (default; MLP-Offload: even steps run N-1..0 so\n"
    "                      the sub-groups still in memory go first; steps counted\n"
    "                      from the first, across runs)\n"
    "  --keep K            keep the last K sub-groups of a step in memory, unwritten,\n"
    "                      for the next step (default 0; costs K sub-group buffers;\n"
    "                      useful with alternating order)\n"
    "  --extra-buffers N   sub-group buffers beyond the keep+3 the pipeline needs\n"
    "                      (default 1: slack so that a slow write-back of i-2 does\n"
    "                      not hold up the read of i+1; 0 for the minimum memory)\n"
    "  --device D          cpu (default) or cuda\n"
    "  --threads N         CPU update threads (default: online CPUs)\n"
    "  --isa I             auto (default), scalar, avx2 or avx512\n"
    "  --rank R            DeepSpeed rank directory (default 0)\n"
    "  --buffered          never use O_DIRECT\n"
    "  --param-copy T      native layout: also write the updated params as bf16 or\n"
    "                      fp16 to DIR/sg-NNNNN.param16 (for the next forward pass)\n"
    "\n"
    "bench measures CPU Adam throughput against a STREAM-triad bandwidth measured\n"
    "in the same run (bound: bandwidth / 28 B per param), and the pipeline's\n"
    "overlap: max(I/O-only time, update time) / step wall time over a directory\n"
    "in a private temporary directory inside /dev/shm (or --dir), removed\n"
    "afterwards; nothing else in that directory is touched.\n"
    "  --params N          parameters (default 32M)\n"
    "  --threads N         threads (default: online CPUs)\n"
    "  --dir DIR           where the pipeline part makes its temporary directory\n"
    "                      DIR/tierfs-update-bench.XXXXXX (default /dev/shm)\n"
    "\n"
    "Exit status: 0 success, 2 bad usage or failure (the message says which file).\n";

static int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("tierfs-update: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t parse_count(const char *opt, const char *s)
{
	char *end;
	errno = 0;
	double d = strtod(s, &end);
	double mul = 1;
	if (*end == 'k' || *end == 'K')
		mul = 1e3, end++;
	else if (*end == 'M')
		mul = 1e6, end++;
	else if (*end == 'G')
		mul = 1e9, end++;
	if (errno || end == s || *end || d < 0 || d * mul > 1e15 || d * mul != floor(d * mul))
		die("%s: '%s' is not a count", opt, s);
	return (uint64_t)(d * mul);
}

/* A count that must fit the int it is stored in: checked before the cast,
 * which would otherwise wrap 4294967297 to 1. */
static int parse_int(const char *opt, const char *s, int lo, int hi)
{
	uint64_t v = parse_count(opt, s);
	if (v < (uint64_t)lo || v > (uint64_t)hi)
		die("%s: '%s': expected %d..%d", opt, s, lo, hi);
	return (int)v;
}

static double parse_real(const char *opt, const char *s, double lo, double hi)
{
	char *end;
	errno = 0;
	double d = strtod(s, &end);
	if (errno || end == s || *end || !(d >= lo && d <= hi))
		die("%s: '%s' is not a number in [%g, %g]", opt, s, lo, hi);
	return d;
}

enum {
	O_PARAMS = 256,
	O_SUBGROUP,
	O_GRAD_DTYPE,
	O_LAYOUT,
	O_RANK,
	O_SEED,
	O_STEPS,
	O_FIRST_STEP,
	O_OPTIMIZER,
	O_LR,
	O_BETA1,
	O_BETA2,
	O_EPS,
	O_WD,
	O_ORDER,
	O_KEEP,
	O_DEVICE,
	O_THREADS,
	O_ISA,
	O_BUFFERED,
	O_DIR,
	O_PARAM_COPY,
	O_EXTRA_BUFFERS,
	O_HELP,
};

static const struct option longopts[] = {
    {"params", required_argument, 0, O_PARAMS},
    {"subgroup", required_argument, 0, O_SUBGROUP},
    {"grad-dtype", required_argument, 0, O_GRAD_DTYPE},
    {"layout", required_argument, 0, O_LAYOUT},
    {"rank", required_argument, 0, O_RANK},
    {"seed", required_argument, 0, O_SEED},
    {"steps", required_argument, 0, O_STEPS},
    {"first-step", required_argument, 0, O_FIRST_STEP},
    {"optimizer", required_argument, 0, O_OPTIMIZER},
    {"lr", required_argument, 0, O_LR},
    {"beta1", required_argument, 0, O_BETA1},
    {"beta2", required_argument, 0, O_BETA2},
    {"eps", required_argument, 0, O_EPS},
    {"weight-decay", required_argument, 0, O_WD},
    {"order", required_argument, 0, O_ORDER},
    {"keep", required_argument, 0, O_KEEP},
    {"device", required_argument, 0, O_DEVICE},
    {"threads", required_argument, 0, O_THREADS},
    {"isa", required_argument, 0, O_ISA},
    {"buffered", no_argument, 0, O_BUFFERED},
    {"dir", required_argument, 0, O_DIR},
    {"param-copy", required_argument, 0, O_PARAM_COPY},
    {"extra-buffers", required_argument, 0, O_EXTRA_BUFFERS},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

struct args {
	const char *dir, *bench_dir;
	uint64_t params, subgroup, seed;
	enum tu_dtype grad_dtype;
	long steps;
	struct tu_options o;
};

static void parse(int argc, char **argv, struct args *a)
{
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		const char *opt = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
		switch (c) {
		case O_PARAMS:
			a->params = parse_count("--params", optarg);
			break;
		case O_SUBGROUP:
			a->subgroup = parse_count("--subgroup", optarg);
			break;
		case O_GRAD_DTYPE:
			if (!strcmp(optarg, "bf16"))
				a->grad_dtype = TU_BF16;
			else if (!strcmp(optarg, "fp16"))
				a->grad_dtype = TU_F16;
			else
				die("--grad-dtype: '%s': expected bf16 or fp16", optarg);
			break;
		case O_LAYOUT:
			if (!strcmp(optarg, "native"))
				a->o.layout = TU_LAYOUT_NATIVE;
			else if (!strcmp(optarg, "deepspeed"))
				a->o.layout = TU_LAYOUT_DEEPSPEED;
			else
				die("--layout: '%s': expected native or deepspeed", optarg);
			break;
		case O_RANK:
			a->o.rank = parse_int("--rank", optarg, 0, 1000000);
			break;
		case O_SEED:
			a->seed = parse_count("--seed", optarg);
			break;
		case O_STEPS:
			a->steps = (long)parse_count("--steps", optarg);
			if (a->steps < 1 || a->steps > 1000000000)
				die("--steps: '%s': expected 1 or more", optarg);
			break;
		case O_FIRST_STEP:
			a->o.first_step = parse_count("--first-step", optarg);
			if (a->o.first_step < 1)
				die("--first-step: '%s': steps count from 1", optarg);
			break;
		case O_OPTIMIZER:
			if (!strcmp(optarg, "adamw"))
				a->o.hp.opt = TU_ADAMW;
			else if (!strcmp(optarg, "adam"))
				a->o.hp.opt = TU_ADAM;
			else
				die("--optimizer: '%s': expected adam or adamw", optarg);
			break;
		case O_LR:
			a->o.hp.lr = parse_real("--lr", optarg, 0, 1e3);
			break;
		case O_BETA1:
			a->o.hp.beta1 = parse_real("--beta1", optarg, 0, 0.999999999);
			break;
		case O_BETA2:
			a->o.hp.beta2 = parse_real("--beta2", optarg, 0, 0.999999999);
			break;
		case O_EPS:
			a->o.hp.eps = parse_real("--eps", optarg, 0, 1);
			break;
		case O_WD:
			a->o.hp.weight_decay = parse_real("--weight-decay", optarg, 0, 1e3);
			break;
		case O_ORDER:
			if (!strcmp(optarg, "ascending"))
				a->o.order = TU_ORDER_ASCENDING;
			else if (!strcmp(optarg, "alternating"))
				a->o.order = TU_ORDER_ALTERNATING;
			else
				die("--order: '%s': expected ascending or alternating", optarg);
			break;
		case O_KEEP:
			a->o.keep = parse_int("--keep", optarg, 0, 100000);
			break;
		case O_DEVICE:
			if (!strcmp(optarg, "cpu"))
				a->o.device = TU_DEVICE_CPU;
			else if (!strcmp(optarg, "cuda"))
				a->o.device = TU_DEVICE_CUDA;
			else
				die("--device: '%s': expected cpu or cuda", optarg);
			break;
		case O_THREADS:
			a->o.threads = parse_int("--threads", optarg, 1, 256);
			break;
		case O_ISA:
			if (!strcmp(optarg, "auto"))
				a->o.isa = TU_ISA_AUTO;
			else if (!strcmp(optarg, "scalar"))
				a->o.isa = TU_ISA_SCALAR;
			else if (!strcmp(optarg, "avx2"))
				a->o.isa = TU_ISA_AVX2;
			else if (!strcmp(optarg, "avx512"))
				a->o.isa = TU_ISA_AVX512;
			else
				die("--isa: '%s': expected auto, scalar, avx2 or avx512", optarg);
			break;
		case O_BUFFERED:
			a->o.buffered = 1;
			break;
		case O_DIR:
			a->bench_dir = optarg;
			break;
		case O_EXTRA_BUFFERS:
			a->o.extra_buffers = parse_int("--extra-buffers", optarg, 0, 64);
			break;
		case O_PARAM_COPY:
			if (!strcmp(optarg, "bf16"))
				a->o.param_copy = TU_BF16;
			else if (!strcmp(optarg, "fp16"))
				a->o.param_copy = TU_F16;
			else
				die("--param-copy: '%s': expected bf16 or fp16", optarg);
			break;
		case 'h':
		case O_HELP:
			fputs(usage, stdout);
			exit(0);
		case ':':
			die("%s: missing value (see --help)", opt);
			break;
		default:
			die("%s: unknown option (see --help)", opt);
		}
	}
}

struct ui {
	int tty;
	double t_step;
	uint64_t params;
};

static void on_progress(void *arg, uint64_t step, int done, int total, uint64_t bytes)
{
	struct ui *u = arg;
	if (!u->tty)
		return;
	int w = 40, fill = total ? done * w / total : w;
	char bar[64];
	for (int i = 0; i < w; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[w] = 0;
	double dt = now() - u->t_step;
	fprintf(stderr, "\rstep %" PRIu64 " [%s] %d/%d sub-groups %.1f s %.2f GB/s ", step, bar,
		done, total, dt, dt > 0 ? (double)bytes / 1e9 / dt : 0.0);
	fflush(stderr);
}

static void on_step(void *arg, const struct tu_step_stats *st)
{
	struct ui *u = arg;
	double gb = (double)(st->bytes_read + st->bytes_written) / 1e9;
	if (u->tty)
		fputc('\n', stderr);
	else
		fprintf(stderr, "tierfs-update: step %" PRIu64 " done in %.3f s\n", st->step,
			st->wall_s);
	printf("step %" PRIu64 ": %d sub-groups, %" PRIu64 " params, %.3f s, read %.3f GB, "
	       "wrote %.3f GB, %.2f GB/s, update %.3f s (%.0f%%), %.1f Mparams/s\n",
	       st->step, st->subgroups, u->params, st->wall_s, (double)st->bytes_read / 1e9,
	       (double)st->bytes_written / 1e9, gb / st->wall_s, st->compute_s,
	       100 * st->compute_s / st->wall_s, (double)u->params / st->wall_s / 1e6);
	fflush(stdout);
	u->t_step = now();
}

static int ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

static int cmd_step(struct args *a)
{
	if (a->steps <= 0)
		die("step: --steps N is required");
	/* The swap files hold no step count: defaulting to 1 would silently
	 * redo the large early-step bias correction on every run. */
	if (a->o.layout == TU_LAYOUT_DEEPSPEED && !a->o.first_step)
		die("step: --layout deepspeed needs --first-step N (the step count is not in "
		    "the swap files; N is 1 + the steps already applied)");
	if (a->o.device == TU_DEVICE_CUDA) {
		const char *why = NULL;
		if (tu_cuda_probe(&why))
			die("%s", why);
	}
	struct tu_ctx *c;
	int rc = tu_open(&c, a->dir, &a->o);
	if (rc) {
		if (!c)
			die("%s: %s", a->dir, strerror(-rc));
		fprintf(stderr, "tierfs-update: %s\n", tu_errmsg(c));
		tu_close(c);
		exit(2);
	}
	struct ui u = {isatty(2), now(), tu_total_params(c)};
	rc = tu_run(c, (int)a->steps, on_progress, on_step, &u);
	if (rc) {
		if (u.tty)
			fputc('\n', stderr);
		fprintf(stderr, "tierfs-update: %s\n", tu_errmsg(c));
		tu_close(c);
		exit(2);
	}
	tu_close(c);
	return 0;
}

/* ---- bench ---- */

struct triad {
	float *a, *b, *c;
	size_t lo, hi;
};

/* Vectorised where the CPU allows, like the Adam kernel it is compared with:
 * a scalar triad would measure the core, not the memory. */
__attribute__((target("avx2,fma"))) static void
triad_avx2(float *restrict a, const float *restrict b, const float *restrict c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		a[i] = b[i] + 3.0f * c[i];
}

static void triad_plain(float *restrict a, const float *restrict b, const float *restrict c,
			size_t n)
{
	for (size_t i = 0; i < n; i++)
		a[i] = b[i] + 3.0f * c[i];
}

static void *triad_main(void *arg)
{
	struct triad *t = arg;
	if (tu_isa_available(TU_ISA_AVX2))
		triad_avx2(t->a + t->lo, t->b + t->lo, t->c + t->lo, t->hi - t->lo);
	else
		triad_plain(t->a + t->lo, t->b + t->lo, t->c + t->lo, t->hi - t->lo);
	return NULL;
}

static double run_triad(float *a, float *b, float *c, size_t n, int th)
{
	pthread_t tid[256];
	struct triad tr[256];
	size_t per = ((n + (size_t)th - 1) / (size_t)th + 15) & ~(size_t)15;
	double t0 = now();
	for (int i = 0; i < th; i++) {
		size_t lo = (size_t)i * per < n ? (size_t)i * per : n;
		tr[i] = (struct triad){a, b, c, lo, lo + per < n ? lo + per : n};
		if (i && pthread_create(&tid[i], NULL, triad_main, &tr[i]))
			die("pthread_create failed");
	}
	triad_main(&tr[0]);
	for (int i = 1; i < th; i++)
		pthread_join(tid[i], NULL);
	return now() - t0;
}

static double cpu_seconds(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
	       (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* Removes the files tu_init_dir() wrote into the bench's private directory,
 * then the directory, by name: a recursive delete would also take whatever
 * else ended up there. Returns 0 or -errno, having said on stderr which path
 * could not be removed. */
static int bench_cleanup(const char *dir, uint64_t nsub)
{
	char path[4200];
	static const char *ext[] = {"state", "grad"};
	int rc = 0;
	for (uint64_t i = 0; i < nsub; i++)
		for (int k = 0; k < 2; k++) {
			snprintf(path, sizeof(path), "%s/sg-%05" PRIu64 ".%s", dir, i, ext[k]);
			if (unlink(path) < 0 && errno != ENOENT) {
				rc = -errno;
				fprintf(stderr, "tierfs-update: bench: %s: %s\n", path,
					strerror(errno));
			}
		}
	if (rmdir(dir) < 0) {
		rc = -errno;
		fprintf(stderr, "tierfs-update: bench: %s: %s\n", dir, strerror(errno));
	}
	return rc;
}

/* Steps 2..BENCH_STEPS-1 are steady state: the next step's first read and the
 * previous step's last write overlap them as in training. Runs alternate
 * between I/O-only and full BENCH_REPS times; medians are reported because a
 * shared machine is noisy. */
#define BENCH_STEPS 5
#define BENCH_REPS  3
struct bench_rec {
	struct tu_step_stats st[BENCH_STEPS * BENCH_REPS];
	int n;
};

static void bench_step(void *arg, const struct tu_step_stats *st)
{
	struct bench_rec *r = arg;
	if (st->step >= 2 && st->step < BENCH_STEPS && r->n < BENCH_STEPS * BENCH_REPS)
		r->st[r->n++] = *st;
}

static int cmp_wall(const void *x, const void *y)
{
	const struct tu_step_stats *a = x, *b = y;
	return (a->wall_s > b->wall_s) - (a->wall_s < b->wall_s);
}

static int cmp_compute(const void *x, const void *y)
{
	const struct tu_step_stats *a = x, *b = y;
	return (a->compute_s > b->compute_s) - (a->compute_s < b->compute_s);
}

static double median(struct bench_rec *r, int compute)
{
	qsort(r->st, (size_t)r->n, sizeof(r->st[0]), compute ? cmp_compute : cmp_wall);
	return compute ? r->st[r->n / 2].compute_s : r->st[r->n / 2].wall_s;
}

static int cmd_bench(struct args *a)
{
	size_t n = a->params ? a->params : 32000000;
	int th = a->o.threads;
	float *x[4];
	for (int i = 0; i < 4; i++) {
		if (posix_memalign((void **)&x[i], 4096, n * sizeof(float)))
			die("bench: out of memory for %zu params", n);
		for (size_t k = 0; k < n; k++)
			x[i][k] = 0.001f * (float)(k % 1000) + (float)i * 0.01f;
	}
	/* Interleaved, best of 5 each: other jobs on a shared machine hit both. */
	struct tu_tensors t = {x[0], x[1], x[2], x[3], TU_F32, NULL, TU_F32, n};
	struct tu_hparams hp = a->o.hp;
	double best = 1e30, ab = 1e30;
	for (int r = 0; r < 5; r++) {
		double tt = run_triad(x[0], x[1], x[2], n, th);
		best = tt < best ? tt : best;
		double t0 = now();
		if (tu_adam_step(&hp, (uint64_t)r + 1, &t, th, TU_ISA_AUTO))
			die("bench: update failed");
		double dt = now() - t0;
		ab = dt < ab ? dt : ab;
	}
	/* STREAM counts 12 B per float element (2 reads, 1 write) */
	double bw = 12.0 * (double)n / best;
	double pps = (double)n / ab, bound = bw / 28.0;
	printf("machine: %d online CPUs, %d threads, kernel %s\n", ncpus(), th,
	       tu_isa_name(tu_isa_best()));
	printf("triad bandwidth: %.2f GB/s STREAM-counted (12 B/elem), %.2f GB/s with the "
	       "write-allocate read (16 B/elem); %zu floats, best of 5\n",
	       bw / 1e9, bw * 16 / 12 / 1e9, n);
	printf("cpu adamw fp32 grads: %.1f Mparams/s = %.2f GB/s at 28 B/param\n", pps / 1e6,
	       pps * 28 / 1e9);
	printf("  bound bw/28: %.1f Mparams/s, ratio %.2f (write-allocate bw: %.1f, ratio %.2f)\n",
	       bound / 1e6, pps / bound, bound * 16 / 12 / 1e6, pps / (bound * 16 / 12));
	for (int i = 0; i < 4; i++)
		free(x[i]);
	if (tu_cuda_probe(NULL) == 0) {
		double kt = tu_cuda_bench_kernel(n, 20);
		if (kt > 0)
			printf("cuda kernel alone: %.1f Mparams/s = %.1f GB/s at 28 B/param "
			       "(compare with the GPU's HBM bandwidth)\n",
			       20.0 * (double)n / kt / 1e6, 20.0 * (double)n * 28 / kt / 1e9);
	} else {
		const char *why = "";
		tu_cuda_probe(&why);
		printf("cuda: skipped (%s)\n", why);
	}

	/* Pipeline: native layout, 8 sub-groups, in a private directory made
	 * inside --dir: the user's directory may hold anything, even a model
	 * whose sg-*.state files the bench must not overwrite. */
	const char *base = a->bench_dir ? a->bench_dir : "/dev/shm";
	char dir[4096];
	if (snprintf(dir, sizeof(dir), "%s/tierfs-update-bench.XXXXXX", base) >= (int)sizeof(dir))
		die("bench: --dir %s: path too long", base);
	if (!mkdtemp(dir))
		die("bench: --dir %s: cannot create a directory in it: %s", base, strerror(errno));
	char msg[512] = "";
	uint64_t sub = (n + 7) / 8, nsub = (n + sub - 1) / sub;
	if (tu_init_dir(dir, TU_LAYOUT_NATIVE, n, sub, TU_BF16, 0, 1, msg, sizeof(msg))) {
		bench_cleanup(dir, nsub);
		die("bench: init %s: %s", dir, msg);
	}
	/* rec[0]: the full runs, rec[1]: the I/O-only ones; each gathers the
	 * steady-state steps of all BENCH_REPS runs of its kind. */
	struct bench_rec rec[2];
	memset(rec, 0, sizeof(rec));
	double io_cores = 0;
	for (int pass = 0; pass < 2 * BENCH_REPS; pass++) {
		/* io_uring's io-wq workers are threads of this process, so
		 * RUSAGE_SELF shows how many cores the I/O alone keeps busy:
		 * on a RAM-backed directory the "I/O" is kernel memcpy. */
		double c0 = cpu_seconds(), w0 = now();
		struct tu_options o = a->o;
		o.layout = TU_LAYOUT_NATIVE;
		o.order = TU_ORDER_ASCENDING;
		o.no_compute = pass % 2;
		o.first_step = 1;
		struct tu_ctx *c;
		if (tu_open(&c, dir, &o) ||
		    tu_run(c, BENCH_STEPS, NULL, bench_step, &rec[o.no_compute])) {
			snprintf(msg, sizeof(msg), "%s", c ? tu_errmsg(c) : "out of memory");
			tu_close(c);
			bench_cleanup(dir, nsub);
			die("bench: pipeline: %s", msg);
		}
		tu_close(c);
		if (pass % 2)
			io_cores += (cpu_seconds() - c0) / (now() - w0) / BENCH_REPS;
	}
	if (bench_cleanup(dir, nsub))
		die("bench: could not remove its directory %s", dir);
	double gb = (double)(rec[0].st[0].bytes_read + rec[0].st[0].bytes_written) / 1e9;
	double io = median(&rec[1], 0), comp = median(&rec[0], 1), wall = median(&rec[0], 0);
	printf("pipeline over %s (removed): %" PRIu64
	       " params in 8 sub-groups, %.2f GB moved per step "
	       "(medians of steps 2..%d of %d runs each: %d I/O-only and %d full steps)\n",
	       dir, (uint64_t)n, gb, BENCH_STEPS - 1, BENCH_REPS, rec[1].n, rec[0].n);
	printf("  I/O only %.3f s (%.2f GB/s), update only %.3f s, pipelined step %.3f s\n", io,
	       gb / io, comp, wall);
	printf("  efficiency max(io, update)/wall = %.2f\n", (io > comp ? io : comp) / wall);
	printf("  the I/O-only run kept %.2f of %d cores busy (RAM-backed I/O is CPU work: "
	       "it and the update share the cores)\n",
	       io_cores, ncpus());
	return 0;
}

int main(int argc, char **argv)
{
	struct args a = {0};
	a.seed = 1;
	a.grad_dtype = TU_BF16;
	a.o.hp = (struct tu_hparams){TU_ADAMW, 1e-3, 0.9, 0.999, 1e-8, 0.01};
	a.o.order = TU_ORDER_ALTERNATING;
	a.o.threads = ncpus();
	a.o.extra_buffers = 1;
	if (argc < 2)
		die("missing command (init, step or bench; see --help)");
	const char *cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(usage, stdout);
		return 0;
	}
	if (strcmp(cmd, "init") && strcmp(cmd, "step") && strcmp(cmd, "bench"))
		die("unknown command '%s' (init, step or bench; see --help)", cmd);
	/* Options may come before or after DIR. */
	optind = 2;
	parse(argc, argv, &a);
	while (optind < argc) {
		if (a.dir)
			die("unexpected argument '%s' (see --help)", argv[optind]);
		a.dir = argv[optind++];
		parse(argc, argv, &a);
	}
	if (!strcmp(cmd, "bench"))
		return cmd_bench(&a);
	if (!a.dir)
		die("%s: missing DIR (see --help)", cmd);
	if (!strcmp(cmd, "init")) {
		if (!a.params || !a.subgroup)
			die("init: --params N and --subgroup N are required");
		char msg[1024] = "";
		int rc = tu_init_dir(a.dir, a.o.layout, a.params, a.subgroup, a.grad_dtype,
				     a.o.rank, a.seed, msg, sizeof(msg));
		if (rc)
			die("init: %s", msg[0] ? msg : strerror(-rc));
		printf("wrote %" PRIu64 " params in %" PRIu64 " sub-groups (%s layout) to %s\n",
		       a.params, (a.params + a.subgroup - 1) / a.subgroup,
		       a.o.layout == TU_LAYOUT_NATIVE ? "native" : "deepspeed", a.dir);
		return 0;
	}
	return cmd_step(&a);
}
