/*
 * After the ranks: each step's phase times over all ranks (first rank's
 * start to last rank's end) and bytes, to --json, and the verify verdict.
 * Returns the exit status the program ends with.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "replay.h"

static double maxd(double a, double b)
{
	return a > b ? a : b;
}

int replay_report(void)
{
	/* Phase time = first rank's start to last rank's end (CLOCK_MONOTONIC is system-wide). */
	FILE *j = NULL;
	if (replay_opts.json) {
		j = fopen(replay_opts.json, "w");
		if (!j) {
			fprintf(stderr, "replay: open %s: %s\n", replay_opts.json, strerror(errno));
			return 1;
		}
		fprintf(j,
			"{\"dir\": \"%s\", \"state_bytes\": %" PRIu64 ", \"grad_bytes\": %" PRIu64
			", \"ranks\": %d, \"subgroups_per_rank\": %d, \"subgroup_params\": %" PRIu64
			", \"grad_files\": %d, \"pipeline\": %s, \"schedule\": \"%s\", "
			"\"queue_depth\": %d, \"request_bytes\": %zu, \"compute_s\": %.3f, ",
			replay_opts.dir, replay_rank_params * 12 * replay_opts.ranks,
			replay_rank_params * 4 * replay_opts.ranks, replay_opts.ranks, replay_nsg,
			replay_opts.sg_params, replay_opts.grad_files,
			replay_opts.pipeline ? "true" : "false",
			replay_opts.mlp		? "mlp"
			: !replay_opts.pipeline ? "serial"
			: replay_opts.lockstep	? "lockstep"
						: "deepspeed",
			replay_opts.qd, replay_opts.req, replay_opts.compute);
		if (replay_opts.mlp)
			fprintf(j,
				"\"mlp\": {\"ratio\": %d, \"minor_path\": \"%s\", \"keep\": %d, "
				"\"dir2\": \"%s\", \"dir2_cap_Bps\": %" PRIu64
				", \"host_ram_bytes\": %" PRIu64
				", \"path_Bps\": [%.0f, %.0f], \"gradients\": \"bf16 in host "
				"memory\"}, ",
				replay_opts.mlp_ratio, replay_opts.mlp_minor ? "dir2" : "dir",
				replay_opts.mlp_keep, replay_opts.dir2 ? replay_opts.dir2 : "",
				replay_opts.dir2_cap, replay_opts.host_ram, replay_opts.path_bps[0],
				replay_opts.path_bps[1]);
		fprintf(j, "\"steps\": [");
	}
	for (int s = 0; s <= replay_opts.steps; s++) {
		double b0 = 1e300, b1 = 0, u0 = 1e300, u1 = 0, bio = 0, cpu = 0;
		uint64_t rd = 0, wr = 0;
		for (int r = 0; r < replay_opts.ranks; r++) {
			struct stepstat *t = &replay_shm->st[r * (replay_opts.steps + 1) + s];
			b0 = t->bwd_t0 < b0 ? t->bwd_t0 : b0;
			b1 = maxd(b1, t->bwd_t1);
			u0 = t->upd_t0 < u0 ? t->upd_t0 : u0;
			u1 = maxd(u1, t->upd_t1);
			bio = maxd(bio, t->bwd_io);
			cpu = maxd(cpu, t->upd_cpu);
			rd += t->rd;
			wr += t->wr;
		}
		if (j)
			fprintf(j,
				"%s\n  {\"step\": %d, \"init\": %s, \"backward_s\": %.6f, "
				"\"backward_wall_s\": %.6f, \"update_s\": %.6f, \"update_cpu_s\": "
				"%.6f, "
				"\"bytes_read\": %" PRIu64 ", \"bytes_written\": %" PRIu64
				", \"update_rank_end_s\": [",
				s ? "," : "", s, s ? "false" : "true", s ? bio : 0.0,
				s ? b1 - b0 : 0.0, s ? u1 - u0 : b1 - b0, cpu, rd, wr);
		/* When each rank finished, from the first one's start: the
		 * step lasts as long as the slowest rank's update. */
		for (int r = 0; j && r < replay_opts.ranks; r++)
			fprintf(j, "%s%.6f", r ? ", " : "",
				replay_shm->st[r * (replay_opts.steps + 1) + s].upd_t1 - u0);
		if (j)
			fprintf(j, "]}");
		if (s == 0 && !replay_opts.verify_only)
			fprintf(stderr, "[replay] init: %.3f s, %.2f GB written\n", b1 - b0,
				wr / 1e9);
	}
	int verify_bad = 0;
	for (int r = 0; r < replay_opts.ranks && r < 64; r++)
		verify_bad += replay_shm->verify_bad[r];
	if (j) {
		fprintf(j, "\n], \"verify\": \"%s\"}\n",
			!replay_opts.verify ? "skipped"
			: verify_bad	    ? "failed"
					    : "ok");
		if (fclose(j)) {
			fprintf(stderr, "replay: write %s: %s\n", replay_opts.json,
				strerror(errno));
			return 1;
		}
	}
	if (replay_opts.verify) {
		if (verify_bad) {
			fprintf(stderr, "[replay] verify: %d file(s) differ\n", verify_bad);
			return 3;
		}
		fprintf(stderr, "[replay] verify: every file matches\n");
	}
	return 0;
}
