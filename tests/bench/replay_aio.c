/*
 * The I/O engine, as DeepSpeed's aio handle drives it: libaio, O_DIRECT,
 * one batch of files with at most --queue-depth requests of --block-size
 * in flight, a stat() size check before every read. A transfer runs one
 * sub-group's batch on a thread of its own, so that the pipelined
 * schedules overlap reads, writes and the Adam pass; --trace records each
 * transfer's span.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libaio.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "replay.h"

int replay_trace_fd = -1;
int (*replay_pace_of)(const char *path);
void (*replay_pace)(const char *path, bool write, uint64_t len);

double replay_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One --trace line: rank, step, what (R read, W write, A Adam pass of the
 * sub-group, then the wait for the joins), sub-group and CLOCK_MONOTONIC
 * seconds, which other tools' samples of the same clock line up with. */
void replay_trace(int rank, int step, char what, int sg, double t0, double t1, double t2)
{
	if (replay_trace_fd < 0)
		return;
	char line[128];
	int n = snprintf(line, sizeof(line), "%d %d %c %d %.6f %.6f %.6f\n", rank, step, what, sg,
			 t0, t1, t2);
	if (write(replay_trace_fd, line, (size_t)n) != n) {
		fprintf(stderr, "replay: --trace %s: write failed: %s; tracing stops\n",
			replay_opts.trace, strerror(errno));
		replay_trace_fd = -1;
	}
}

/*
 * Submits every request of every file in jobs[] through ctx with at most
 * replay_opts.qd in flight, as DeepSpeed's swap_in_tensors/swap_out_tensors
 * + wait() do.
 */
int replay_run_batch(io_context_t ctx, struct iojob *jobs, int n, bool write)
{
	int fds[MAX_FILES_PER_BATCH];
	bool paced[MAX_FILES_PER_BATCH];
	int rc = 0;
	for (int i = 0; i < n; i++) {
		fds[i] = -1;
		paced[i] = replay_pace_of && replay_pace_of(jobs[i].path);
	}
	for (int i = 0; i < n; i++) {
		if (!write) {
			/* DeepSpeed checks the size with stat() before every read. */
			struct stat st;
			if (stat(jobs[i].path, &st)) {
				rc = -errno;
				fprintf(stderr, "replay: stat %s: %s\n", jobs[i].path,
					strerror(errno));
				goto out;
			}
			if ((uint64_t)st.st_size < jobs[i].bytes) {
				rc = -EIO;
				fprintf(stderr,
					"replay: %s: size %lld < %" PRIu64 " bytes to read\n",
					jobs[i].path, (long long)st.st_size, jobs[i].bytes);
				goto out;
			}
		}
		fds[i] = write ? open(jobs[i].path, O_WRONLY | O_CREAT | O_DIRECT, 0600)
			       : open(jobs[i].path, O_RDONLY | O_DIRECT);
		if (fds[i] < 0) {
			rc = -errno;
			fprintf(stderr, "replay: open %s (%s, O_DIRECT): %s\n", jobs[i].path,
				write ? "write" : "read", strerror(errno));
			goto out;
		}
	}
	struct iocb cbs[64], *cbp[64];
	int freelist[64], nfree = 0;
	for (int i = 0; i < replay_opts.qd; i++)
		freelist[nfree++] = i;
	int cur = 0, inflight = 0;
	uint64_t off = 0;
	while (cur < n || inflight) {
		int nsub = 0;
		while (cur < n && nfree > 0) {
			if (off >= jobs[cur].bytes) {
				cur++;
				off = 0;
				continue;
			}
			uint64_t len = jobs[cur].bytes - off < replay_opts.req
					   ? jobs[cur].bytes - off
					   : replay_opts.req;
			if (paced[cur])
				replay_pace(jobs[cur].path, write, len);
			int slot = freelist[--nfree];
			struct iocb *cb = &cbs[slot];
			if (write)
				io_prep_pwrite(cb, fds[cur], (char *)jobs[cur].buf + off, len,
					       (long long)off);
			else
				io_prep_pread(cb, fds[cur], (char *)jobs[cur].buf + off, len,
					      (long long)off);
			cb->data = (void *)(uintptr_t)(slot | ((uint64_t)cur << 8));
			cbp[nsub++] = cb;
			off += len;
		}
		if (nsub) {
			int r = io_submit(ctx, nsub, cbp);
			if (r != nsub) {
				rc = r < 0 ? r : -EIO;
				fprintf(stderr, "replay: io_submit %d requests (%s): %s\n", nsub,
					jobs[cur < n ? cur : n - 1].path, strerror(-rc));
				/* requests before r were submitted: reap them below */
				inflight += r > 0 ? r : 0;
				while (inflight) {
					struct io_event ev[64];
					int g = io_getevents(ctx, 1, 64, ev, NULL);
					if (g <= 0)
						break;
					inflight -= g;
				}
				goto out;
			}
			inflight += nsub;
		}
		if (!inflight)
			continue;
		struct io_event ev[64];
		int g = io_getevents(ctx, 1, 64, ev, NULL);
		if (g < 0) {
			if (g == -EINTR)
				continue;
			rc = g;
			fprintf(stderr, "replay: io_getevents: %s\n", strerror(-g));
			goto out;
		}
		for (int k = 0; k < g; k++) {
			struct iocb *cb = ev[k].obj;
			uint64_t tag = (uint64_t)(uintptr_t)cb->data;
			int slot = (int)(tag & 0xff), file = (int)(tag >> 8);
			long long res = (long long)ev[k].res;
			if (res != (long long)cb->u.c.nbytes && !rc) {
				rc = res < 0 ? (int)res : -EIO;
				fprintf(stderr,
					"replay: %s %s at offset %lld: %s (got %lld of %lu)\n",
					write ? "write" : "read", jobs[file].path, cb->u.c.offset,
					res < 0 ? strerror((int)-res) : "short transfer", res,
					cb->u.c.nbytes);
			}
			freelist[nfree++] = slot;
		}
		inflight -= g;
		if (rc && !inflight)
			goto out;
		if (rc)
			cur = n; /* stop submitting, drain */
	}
out:
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0 && close(fds[i]) && !rc) {
			rc = -errno;
			fprintf(stderr, "replay: close %s: %s\n", jobs[i].path, strerror(errno));
		}
	return rc;
}

void *replay_xalloc(uint64_t bytes)
{
	void *p = NULL;
	int r = posix_memalign(&p, 4096, bytes ? bytes : 4096);
	if (r) {
		fprintf(stderr, "replay: posix_memalign %" PRIu64 " bytes: %s\n", bytes,
			strerror(r));
		exit(1);
	}
	memset(p, 0, bytes); /* first touch here, not inside a timed phase */
	return p;
}

void *replay_xfer_main(void *arg)
{
	struct xfer *x = arg;
	struct iojob jobs[MAX_FILES_PER_BATCH];
	int n = replay_nstate_jobs(jobs, x->rank, x->sg, x->b, !x->write);
	double t0 = replay_now();
	x->rc = replay_run_batch(x->ctx, jobs, n, x->write);
	double t1 = replay_now();
	replay_trace(x->rank, x->step, x->write ? 'W' : 'R', x->sg, t0, t1, t1);
	return NULL;
}

int replay_xfer_start(struct xfer *x)
{
	int r = pthread_create(&x->th, NULL, replay_xfer_main, x);
	if (r) {
		fprintf(stderr, "replay: pthread_create: %s\n", strerror(r));
		return -r;
	}
	x->running = true;
	return 0;
}

int replay_xfer_join(struct xfer *x)
{
	if (!x->running)
		return 0;
	pthread_join(x->th, NULL);
	x->running = false;
	return x->rc;
}
