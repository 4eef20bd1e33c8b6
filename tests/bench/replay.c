/*
 * tierfs-replay: replays DeepSpeed ZeRO-Infinity's optimizer swap I/O exactly
 * (file names, per-rank directories, O_DIRECT open flags, libaio with 1 MiB
 * requests at queue depth 8, stat() size checks before reads), so that the
 * same program measures a plain directory and a tierfs mount. See
 * /work/shared/DESIGN.md "The files DeepSpeed writes".
 *
 * One step = backward (write every gradient file) then, for sub-group
 * 0..N-1: read param, exp_avg, exp_avg_sq and the gradients, run an fp32 Adam
 * update over the buffers (touches every byte and changes the content), write
 * param, exp_avg, exp_avg_sq back. Step 0 ("init") writes every file from
 * scratch and is reported on its own. With the pipeline (DeepSpeed's
 * pipeline_read/pipeline_write), transfers overlap the updates in the order
 * DeepSpeed 0.19's PipelinedOptimizerSwapper gives them.
 *
 * All content comes from a deterministic generator keyed by (rank, sub-group,
 * kind, step), so --verify can recompute what every file must hold after the
 * last step and compare it byte for byte: a stale block or a lost write-back
 * on the file system under test shows up as a mismatch.
 *
 * Also a bandwidth probe (--probe FILE) with the same I/O engine, used by
 * scripts/bench.sh to measure the disk for the floor.
 *
 * This file parses the options, sets up the layout and forks the ranks.
 * The rest: replay_data.c (file layout, names, content, Adam),
 * replay_aio.c (the I/O engine), replay_rank.c (one rank's steps),
 * replay_probe.c (--probe), replay_report.c (--json and the verdict),
 * replay_mlp.c (--mlp: MLP-Offload's in-application scheme instead of
 * DeepSpeed's, on two plain directories).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "replay.h"

struct opts replay_opts = {
    .state = 256ull << 20,
    .sg_params = 0,
    .ranks = 1,
    .steps = 3,
    .pipeline = true,
    .grad_files = 2,
    .qd = 8,
    .req = 1 << 20,
    .probe_size = 1ull << 30,
    .mlp_keep = -1,
};

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	uint64_t mul = 1;
	switch (*end) {
	case 'k':
	case 'K':
		mul = 1ull << 10;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1ull << 20;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1ull << 30;
		end++;
		break;
	case 't':
	case 'T':
		mul = 1ull << 40;
		end++;
		break;
	case 'e':
	case 'E':
		break;
	default:
		break;
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	*out = (uint64_t)(v * mul);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: tierfs-replay --dir DIR [options]\n"
	    "  --dir DIR             nvme_path (files go to DIR/zero_stage_3/optimizer/rankR/)\n"
	    "  --state-size SIZE     fp32 param+exp_avg+exp_avg_sq bytes over all ranks (12 "
	    "B/param;\n"
	    "                        gradients add 4 B/param) [256M]\n"
	    "  --subgroup-size N     params per sub-group (e.g. 1e8, 8M) [state/12/ranks/8]\n"
	    "  --ranks N             processes, each its own rank dir [1]\n"
	    "  --steps N             steps after the init step [3]\n"
	    "  --pipeline on|lockstep|off\n"
	    "                        on: DeepSpeed's pipelined swapper: start the read of\n"
	    "                        i+1 once i is in, write i once i-1 is written, so\n"
	    "                        the write of i runs beside the read of i+1;\n"
	    "                        lockstep: read i+1 and write i-1 during update i,\n"
	    "                        both joined before i+1; off: one at a time [on]\n"
	    "  --grad-files N        gradient files per sub-group [2]\n"
	    "  --queue-depth N       [8]   --block-size SIZE  aio request size [1M]\n"
	    "  --compute SEC         forward+backward compute per step, spread before\n"
	    "                        each sub-group's gradient writes (no I/O of its own:\n"
	    "                        what a real step leaves the disk between updates) [0]\n"
	    "  --verify              check every file's content after the last step\n"
	    "  --json FILE           per-step times and bytes\n"
	    "  --trace FILE          a line per transfer and Adam pass of the update phase:\n"
	    "                        rank step R|W|A sub-group start end joined (seconds,\n"
	    "                        CLOCK_MONOTONIC; R/W: a sub-group's reads/writes,\n"
	    "                        A: its Adam pass, then the wait for the joins:\n"
	    "                        the write of i-1 (on), both transfers (lockstep))\n"
	    "  --probe FILE [--probe-size SIZE] [--probe-read-only]\n"
	    "                        measure O_DIRECT write then read bandwidth of FILE\n"
	    "  --mlp                 MLP-Offload's scheme instead of DeepSpeed's (replay_mlp.c):\n"
	    "                        whole sub-groups on --dir or --dir2 by a static ratio,\n"
	    "                        alternating order, the last K kept in host buffers,\n"
	    "                        bf16 gradients in host memory, a lock per path\n"
	    "  --dir2 DIR            its second path   --dir2-cap SIZE  its cap per s each way\n"
	    "  --mlp-ratio N|auto    sub-group i on --dir2 when i %% N == 0 [auto: the ratio\n"
	    "                        and path for it with the least I/O time for --path-bps]\n"
	    "  --path-bps R1,R2      the two paths' bandwidths in bytes/s, for auto\n"
	    "  --host-ram SIZE       host RAM of all ranks for kept sub-groups and bf16\n"
	    "                        gradients [0]   --mlp-keep K  K kept, overriding it\n"
	    "  --mlp-selftest        check the scheme's placement, order and ratio (TAP)\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"dir", 1, 0, 'd'},		  {"state-size", 1, 0, 's'},
	    {"subgroup-size", 1, 0, 'g'}, {"ranks", 1, 0, 'r'},
	    {"steps", 1, 0, 'n'},	  {"pipeline", 1, 0, 'p'},
	    {"verify", 0, 0, 'V'},	  {"json", 1, 0, 'j'},
	    {"grad-files", 1, 0, 'G'},	  {"queue-depth", 1, 0, 'q'},
	    {"block-size", 1, 0, 'b'},	  {"probe", 1, 0, 'P'},
	    {"probe-size", 1, 0, 'S'},	  {"probe-read-only", 0, 0, 'R'},
	    {"verify-only", 0, 0, 'O'},	  {"verify-state-only", 0, 0, 'Y'},
	    {"stats", 1, 0, 'T'},	  {"stats-out", 1, 0, 'U'},
	    {"compute", 1, 0, 'C'},	  {"trace", 1, 0, 'X'},
	    {"help", 0, 0, 'h'},	  {"mlp", 0, 0, 'M'},
	    {"dir2", 1, 0, 'D'},	  {"dir2-cap", 1, 0, 'c'},
	    {"mlp-ratio", 1, 0, 'o'},	  {"mlp-keep", 1, 0, 'k'},
	    {"host-ram", 1, 0, 'H'},	  {"path-bps", 1, 0, 'B'},
	    {"mlp-selftest", 0, 0, 'Z'},  {0, 0, 0, 0}};
	int c;
	uint64_t v;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			replay_opts.dir = optarg;
			break;
		case 's':
			if (parse_size(optarg, &replay_opts.state))
				goto bad;
			break;
		case 'g':
			if (parse_size(optarg, &replay_opts.sg_params))
				goto bad;
			break;
		case 'r':
			replay_opts.ranks = atoi(optarg);
			break;
		case 'n':
			replay_opts.steps = atoi(optarg);
			break;
		case 'p':
			replay_opts.lockstep = !strcmp(optarg, "lockstep");
			if (!strcmp(optarg, "on") || replay_opts.lockstep)
				replay_opts.pipeline = true;
			else if (!strcmp(optarg, "off"))
				replay_opts.pipeline = false;
			else
				goto bad;
			break;
		case 'V':
			replay_opts.verify = true;
			break;
		case 'j':
			replay_opts.json = optarg;
			break;
		case 'G':
			replay_opts.grad_files = atoi(optarg);
			break;
		case 'q':
			replay_opts.qd = atoi(optarg);
			break;
		case 'b':
			if (parse_size(optarg, &v))
				goto bad;
			replay_opts.req = v;
			break;
		case 'P':
			replay_opts.probe = optarg;
			break;
		case 'S':
			if (parse_size(optarg, &replay_opts.probe_size))
				goto bad;
			break;
		case 'T':
			replay_opts.stats = optarg;
			break;
		case 'U':
			replay_opts.stats_out = optarg;
			break;
		case 'Y':
			replay_opts.state_only = true;
			/* fall through */
		case 'O':
			replay_opts.verify = replay_opts.verify_only = true;
			break;
		case 'R':
			replay_opts.probe_read_only = true;
			break;
		case 'C': {
			char *end;
			errno = 0;
			replay_opts.compute = strtod(optarg, &end);
			if (errno || end == optarg || *end ||
			    !(replay_opts.compute >= 0 && replay_opts.compute <= 3600))
				goto bad;
			break;
		}
		case 'X':
			replay_opts.trace = optarg;
			break;
		case 'M':
			replay_opts.mlp = true;
			break;
		case 'D':
			replay_opts.dir2 = optarg;
			break;
		case 'c':
			if (parse_size(optarg, &replay_opts.dir2_cap))
				goto bad;
			break;
		case 'o':
			if (strcmp(optarg, "auto")) {
				replay_opts.mlp_ratio = atoi(optarg);
				if (replay_opts.mlp_ratio < 1)
					goto bad;
			}
			break;
		case 'k':
			replay_opts.mlp_keep = atoi(optarg);
			if (replay_opts.mlp_keep < 0)
				goto bad;
			break;
		case 'H':
			if (parse_size(optarg, &replay_opts.host_ram))
				goto bad;
			break;
		case 'B': {
			char *end;
			replay_opts.path_bps[0] = strtod(optarg, &end);
			if (*end != ',')
				goto bad;
			replay_opts.path_bps[1] = strtod(end + 1, &end);
			if (*end || !(replay_opts.path_bps[0] >= 0 && replay_opts.path_bps[1] >= 0))
				goto bad;
			break;
		}
		case 'Z':
			return replay_mlp_selftest();
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (replay_opts.qd < 1 || replay_opts.qd > 64 || replay_opts.req < 1024 ||
	    replay_opts.req % 1024) {
		fprintf(stderr,
			"replay: --queue-depth must be 1..64, --block-size a multiple of 1024\n");
		return 2;
	}
	if (replay_opts.probe)
		return replay_probe();
	if (!replay_opts.mlp && (replay_opts.dir2 || replay_opts.dir2_cap || replay_opts.host_ram ||
				 replay_opts.mlp_ratio || replay_opts.mlp_keep >= 0)) {
		fprintf(stderr,
			"replay: --dir2, --dir2-cap, --host-ram, --mlp-ratio and --mlp-keep "
			"go with --mlp\n");
		return 2;
	}
	/* names are dir + at most ~150 bytes: checked once here, not at every open */
	if (replay_opts.dir && strlen(replay_opts.dir) > 3840) {
		fprintf(stderr, "replay: --dir path too long\n");
		return 2;
	}
	if (!replay_opts.dir || replay_opts.ranks < 1 || replay_opts.ranks > 64 ||
	    replay_opts.steps < 0 || replay_opts.grad_files < 1 ||
	    replay_opts.grad_files > MAX_FILES_PER_BATCH - 3)
		goto bad;

	replay_rank_params =
	    replay_opts.state / 12 / (uint64_t)replay_opts.ranks / PARAM_ALIGN * PARAM_ALIGN;
	if (replay_rank_params < PARAM_ALIGN * (uint64_t)replay_opts.grad_files) {
		fprintf(stderr, "replay: --state-size too small for %d ranks\n", replay_opts.ranks);
		return 2;
	}
	if (replay_opts.trace) {
		replay_trace_fd = open(replay_opts.trace,
				       O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
		if (replay_trace_fd < 0) {
			fprintf(stderr, "replay: --trace %s: %s\n", replay_opts.trace,
				strerror(errno));
			return 2;
		}
	}
	if (replay_layout())
		return 1;
	if (replay_opts.mlp && replay_mlp_setup())
		return 1;
	fprintf(stderr,
		"[replay] %s: %d rank(s) x %d sub-groups of %" PRIu64
		" params; state %.2f GiB + gradients %.2f GiB; %d steps; pipeline %s\n",
		replay_opts.dir, replay_opts.ranks, replay_nsg, replay_opts.sg_params,
		replay_rank_params * 12.0 * replay_opts.ranks / (1 << 30),
		replay_rank_params * 4.0 * replay_opts.ranks / (1 << 30), replay_opts.steps,
		replay_opts.mlp		? "MLP-Offload's (--mlp)"
		: !replay_opts.pipeline ? "off"
		: replay_opts.lockstep	? "lockstep"
					: "on (DeepSpeed's order)");

	size_t shsz = sizeof(struct shared) + sizeof(struct stepstat) * (size_t)replay_opts.ranks *
						  (size_t)(replay_opts.steps + 1);
	replay_shm = mmap(NULL, shsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (replay_shm == MAP_FAILED) {
		perror("replay: mmap shared stats");
		return 1;
	}
	pthread_barrierattr_t ba;
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	if (pthread_barrier_init(&replay_shm->bar, &ba, (unsigned)replay_opts.ranks)) {
		fprintf(stderr, "replay: pthread_barrier_init failed\n");
		return 1;
	}
	fflush(NULL);
	pid_t pids[64];
	for (int r = 0; r < replay_opts.ranks; r++) {
		pids[r] = fork();
		if (pids[r] < 0) {
			perror("replay: fork");
			for (int k = 0; k < r; k++)
				kill(pids[k], SIGKILL);
			return 1;
		}
		if (pids[r] == 0) {
			/* a killed replay must not leave ranks writing behind it */
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
				_exit(1);
			if (replay_opts.mlp)
				replay_mlp_rank(r);
			replay_rank_main(r);
		}
	}
	int failed = 0;
	for (int done = 0; done < replay_opts.ranks; done++) {
		int status;
		pid_t p = wait(&status);
		if (p < 0) {
			perror("replay: wait");
			return 1;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr,
				"replay: rank process %d failed; stopping the other ranks\n",
				(int)p);
			/* the others would wait forever at the barrier */
			for (int r = 0; r < replay_opts.ranks; r++)
				if (pids[r] != p)
					kill(pids[r], SIGKILL);
			failed = 1;
		}
	}
	if (failed)
		return 1;
	return replay_report();
bad:
	usage(stderr);
	return 2;
}
