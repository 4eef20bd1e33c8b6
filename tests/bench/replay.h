/*
 * tierfs-replay's internals, shared by its files: the options, the
 * sub-group layout, the stats the ranks leave in shared memory for the
 * parent, and each file's face. replay.c says what the program does.
 */
#ifndef TIERFS_REPLAY_H
#define TIERFS_REPLAY_H

#include <libaio.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_FILES_PER_BATCH 64
#define PARAM_ALIGN	    256 /* params: keeps every size a multiple of 1024 bytes, as DeepSpeed's */

enum kind { K_PARAM, K_EXP_AVG, K_EXP_AVG_SQ, K_GRAD };

struct opts {
	const char *dir;
	uint64_t state;	    /* total fp32 param+m+v bytes over all ranks */
	uint64_t sg_params; /* params per sub-group */
	int ranks;
	int steps;
	bool pipeline;
	/* With the pipeline: DeepSpeed's own order (default), or read i+1 and
	 * write i-1 both joined before update i+1 (lockstep). */
	bool lockstep;
	bool verify;
	const char *stats, *stats_out; /* copy FILE into DIR after each phase (rank 0) */
	bool verify_only;	       /* files already hold the content after --steps steps */
	bool state_only;	       /* verify param/exp_avg/exp_avg_sq, not gradients */
	const char *json;
	int grad_files; /* gradient files per sub-group */
	int qd;
	size_t req;
	const char *probe;
	uint64_t probe_size;
	bool probe_read_only;
	double compute;	   /* seconds of forward+backward compute per step (--compute) */
	const char *trace; /* --trace FILE: one line per transfer and Adam pass */
	/* --mlp: MLP-Offload's in-application scheme (replay_mlp.c) */
	bool mlp;
	const char *dir2;   /* its second path */
	uint64_t dir2_cap;  /* bytes/s each way on dir2, paced by the replay; 0: none */
	int mlp_ratio;	    /* sub-group i on the minor path when i % ratio == 0; 0: auto */
	int mlp_minor;	    /* the minor path: 0 --dir, 1 --dir2 */
	int mlp_keep;	    /* sub-groups kept in host buffers across steps; -1: from host_ram */
	uint64_t host_ram;  /* host RAM budget of all ranks (kept buffers + bf16 gradients) */
	double path_bps[2]; /* the two paths' bandwidths, for the auto ratio */
};

struct subgroup {
	uint64_t numel;
	char id[64]; /* ds_id: {first_param_id}_{last_param_id} */
	uint64_t goff[MAX_FILES_PER_BATCH], gnum[MAX_FILES_PER_BATCH];
};

/* replay_data.c: the layout, set up once before the ranks fork. */
extern struct subgroup *replay_sgs;
extern int replay_nsg;
extern uint64_t replay_rank_params;

/* --trace: opened before the ranks fork; O_APPEND and one write() per line,
 * so that the ranks' lines never mix. */
extern int replay_trace_fd;

/* Per rank and step, written by the ranks into shared memory, read by the parent. */
struct stepstat {
	double bwd_t0, bwd_t1; /* wall clock of the phase on this rank */
	double bwd_io;	       /* seconds spent in gradient writes (generation excluded) */
	double upd_t0, upd_t1;
	double upd_cpu; /* seconds in the Adam pass */
	uint64_t rd, wr;
};

struct shared {
	pthread_barrier_t bar;
	int failed;
	int verify_bad[64];
	struct stepstat st[]; /* [rank * (steps + 1) + step] */
};

extern struct shared *replay_shm;

struct iojob {
	char path[4096];
	void *buf;
	uint64_t bytes;
};

struct bufset {
	float *p, *m, *v, *g;
};

struct xfer {
	io_context_t ctx;
	int rank, sg, step;
	struct bufset *b;
	bool write;
	int rc;
	pthread_t th;
	bool running;
};

/* replay.c: the options, parsed before the ranks fork */
extern struct opts replay_opts;

/* replay_data.c */
int replay_layout(void);
uint32_t replay_seed_of(int rank, int sg, int kind, int step);
void replay_gen(float *buf, uint64_t n, uint32_t seed, bool positive);
void replay_adam(float *restrict p, float *restrict m, float *restrict v, const float *restrict g,
		 uint64_t n);
void replay_rank_dir(char *out, size_t len, int rank);
int replay_file_path(char *out, size_t len, int rank, int sg, int kind, int gi);
int replay_mkdir_p(const char *path);
int replay_nstate_jobs(struct iojob *j, int rank, int sg, struct bufset *b, bool with_grads);
uint64_t replay_sg_bytes(int sg, bool with_grads);

/* replay_aio.c */
double replay_now(void);
void replay_trace(int rank, int step, char what, int sg, double t0, double t1, double t2);
int replay_run_batch(io_context_t ctx, struct iojob *jobs, int n, bool write);
void *replay_xalloc(uint64_t bytes);
void *replay_xfer_main(void *arg);
int replay_xfer_start(struct xfer *x);
int replay_xfer_join(struct xfer *x);

/* Set by --mlp: requests to files for which replay_pace_of() is non-zero
 * wait in replay_pace() before dispatch (the second path's cap). */
extern int (*replay_pace_of)(const char *path);
extern void (*replay_pace)(const char *path, bool write, uint64_t len);

/* replay_mlp.c: --mlp; the setup runs before the ranks fork, the rank
 * main in each rank's process and ends it (_exit) */
int replay_mlp_setup(void);
void replay_mlp_rank(int rank);
int replay_mlp_selftest(void);
int mlp_path_of(int sg, int ratio, int minor);
void mlp_order(int step, int nsg, int *order);
double mlp_step_io_s(int nsg, const uint64_t *sg_bytes, int keep, int ratio, int minor,
		     const double bps[2]);
int mlp_best_ratio(int nsg, const uint64_t *sg_bytes, int keep, const double bps[2], int *minor);
uint16_t mlp_to_bf16(float f);

/* replay_rank.c: runs in the rank's child process and ends it (_exit) */
void replay_rank_main(int rank);

/* replay_probe.c: returns the exit status */
int replay_probe(void);

/* replay_report.c: returns the exit status */
int replay_report(void);

#endif
