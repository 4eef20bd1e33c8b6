/*
 * --probe FILE: the disk's bandwidth measured with the replay's own I/O
 * settings (O_DIRECT, libaio, --block-size requests, --queue-depth in
 * flight), which scripts/bench.sh uses for the floor. Prints one JSON line.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libaio.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "replay.h"

/* For the probe: huge-page backed, as the tierfs RAM tier is. With 4 KiB
 * pages a 1 MiB O_DIRECT request is split into many segments, and a virtio
 * disk then reads markedly slower than into huge pages: the probe must
 * measure the disk, not the buffer. The replay's own
 * buffers stay plain, as DeepSpeed's pinned buffers are. */
static void *xalloc_huge(uint64_t bytes)
{
	const uint64_t huge = 2ull << 20;
	void *m =
	    mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		fprintf(stderr, "replay: mmap %" PRIu64 " bytes: %s\n", bytes, strerror(errno));
		exit(1);
	}
	char *p = (char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
	/* Trim the slack, so that munmap(p, bytes) releases it all. */
	uint64_t head = (uint64_t)(p - (char *)m);
	if ((head && munmap(m, head)) || munmap(p + bytes, huge - head)) {
		fprintf(stderr, "replay: munmap: %s\n", strerror(errno));
		exit(1);
	}
	(void)madvise(p, bytes, MADV_HUGEPAGE); /* advice: plain pages still work */
	memset(p, 0, bytes);
	return p;
}

/*
 * One sequential pass of `size` bytes: reads from rfd and/or writes to wfd
 * (either may be -1), at most replay_opts.qd requests of each kind in
 * flight, as the pipelined update keeps a read handle and a write handle
 * busy at once.
 * Returns seconds, or a negative value on error.
 */
static double probe_pass(io_context_t ctx, int rfd, int wfd, uint64_t size, uint64_t wbase,
			 char *buf, uint64_t chunk)
{
	struct iocb cbs[128], *cbp[1];
	int freel[128], nfree = 0, inflight[2] = {0, 0};
	uint64_t off[2] = {0, 0};
	int fds[2] = {rfd, wfd};
	for (int k = 0; k < 2 * replay_opts.qd; k++)
		freel[nfree++] = k;
	double t0 = replay_now();
	for (;;) {
		for (int w = 0; w < 2; w++) {
			while (fds[w] >= 0 && off[w] < size && inflight[w] < replay_opts.qd) {
				uint64_t len = size - off[w] < replay_opts.req ? size - off[w]
									       : replay_opts.req;
				int slot = freel[--nfree];
				struct iocb *cb = &cbs[slot];
				/* reads land in the second half of the buffer, writes come from the
				 * first */
				char *b = buf + (off[w] % (chunk / 2)) + (w ? 0 : chunk / 2);
				if (w)
					io_prep_pwrite(cb, fds[w], b, len,
						       (long long)(wbase + off[w]));
				else
					io_prep_pread(cb, fds[w], b, len, (long long)off[w]);
				cb->data = (void *)(uintptr_t)w;
				cbp[0] = cb;
				int r = io_submit(ctx, 1, cbp);
				if (r != 1) {
					fprintf(stderr, "replay: probe io_submit %s: %s\n",
						replay_opts.probe, strerror(r < 0 ? -r : EIO));
					return -1;
				}
				off[w] += len;
				inflight[w]++;
			}
		}
		if (!inflight[0] && !inflight[1])
			break;
		struct io_event ev[128];
		int g = io_getevents(ctx, 1, 128, ev, NULL);
		if (g < 0) {
			if (g == -EINTR)
				continue;
			fprintf(stderr, "replay: probe io_getevents: %s\n", strerror(-g));
			return -1;
		}
		for (int k = 0; k < g; k++) {
			int w = (int)(uintptr_t)ev[k].obj->data;
			if ((long long)ev[k].res != (long long)ev[k].obj->u.c.nbytes) {
				fprintf(stderr, "replay: probe %s %s at %lld: res %lld\n",
					w ? "write" : "read", replay_opts.probe,
					ev[k].obj->u.c.offset, (long long)ev[k].res);
				return -1;
			}
			inflight[w]--;
			freel[nfree++] = (int)(ev[k].obj - cbs);
		}
	}
	return replay_now() - t0;
}

/*
 * --probe FILE: write FILE (--probe-size; new blocks: the file system
 * allocates), overwrite it (what steady-state swap writes do: DeepSpeed
 * rewrites its files in place), read it, then read its first half while
 * overwriting its second half (mixed: what a pipelined update does to one
 * device). --probe-read-only: only read the existing FILE.
 */
int replay_probe(void)
{
	io_context_t ctx = 0;
	int rc = io_setup(2 * replay_opts.qd, &ctx);
	if (rc) {
		fprintf(stderr, "replay: io_setup: %s\n", strerror(-rc));
		return 1;
	}
	uint64_t chunk = 256ull << 20; /* one buffer reused: the probe measures the disk */
	uint64_t size = replay_opts.probe_size;
	if (replay_opts.probe_read_only) {
		struct stat st;
		if (stat(replay_opts.probe, &st)) {
			fprintf(stderr, "replay: stat %s: %s\n", replay_opts.probe,
				strerror(errno));
			return 1;
		}
		size = (uint64_t)st.st_size & ~1023ull;
	}
	size &= ~((2ull << 20) - 1); /* halves of whole MiB for the mixed pass */
	if (!size) {
		fprintf(stderr, "replay: probe size must be at least 2 MiB\n");
		return 1;
	}
	char *buf = xalloc_huge(chunk);
	replay_gen((float *)buf, chunk / 4, 12345, false);
	double at = 0, wt = 0, rt = 0, mt = 0;
	int fd = -1;
	errno = 0;
	if (!replay_opts.probe_read_only) {
		fd = open(replay_opts.probe, O_WRONLY | O_CREAT | O_DIRECT, 0600);
		if (fd < 0)
			goto err;
		at = probe_pass(ctx, -1, fd, size, 0, buf, chunk);
		wt = at < 0 ? -1 : probe_pass(ctx, -1, fd, size, 0, buf, chunk);
		if (wt < 0 || close(fd))
			goto err;
	}
	fd = open(replay_opts.probe,
		  replay_opts.probe_read_only ? O_RDONLY | O_DIRECT : O_RDWR | O_DIRECT);
	if (fd < 0)
		goto err;
	rt = probe_pass(ctx, fd, -1, size, 0, buf, chunk);
	if (rt < 0)
		goto err;
	if (!replay_opts.probe_read_only) {
		mt = probe_pass(ctx, fd, fd, size / 2, size / 2, buf, chunk);
		if (mt < 0)
			goto err;
	}
	if (close(fd))
		goto err;
	io_destroy(ctx);
	if (munmap(buf, chunk))
		goto err;
	printf("{\"file\": \"%s\", \"bytes\": %" PRIu64 ", \"write_alloc_Bps\": %.0f, "
	       "\"write_Bps\": %.0f, \"read_Bps\": %.0f, \"mixed_Bps\": %.0f}\n",
	       replay_opts.probe, size, at > 0 ? size / at : 0, wt > 0 ? size / wt : 0, size / rt,
	       mt > 0 ? size / mt : 0);
	return 0;
err:
	fprintf(stderr, "replay: probe of %s failed%s%s\n", replay_opts.probe, errno ? ": " : "",
		errno ? strerror(errno) : "");
	return 1;
}
