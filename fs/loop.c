/*
 * fs/loop.c — the FUSE request loop: a fixed pool of worker threads, each
 * receiving requests into a RAM tier slot of its own, its landing slot.
 *
 * libfuse's own loop reads each request into a buffer it allocates, and the
 * data of a write is then copied into the block's cache slot. With the
 * update phase bound by CPU on a fast disk, that copy was a visible share
 * of all CPU time. Here a worker reads a request so that its header
 * fills the end of the page before the slot (TIER_RAM_HEADROOM) and a
 * write's data lands exactly in the slot; a whole-block write then hands
 * the slot to the block and takes the block's old slot as its next landing
 * slot (cache_write's donor), so its data is never copied in user space.
 *
 * Shutdown works as in libfuse's loop: the worker that sees the session end
 * (unmount, or a signal handler's fuse_session_exit) posts `done`; the main
 * thread cancels the others, which accept cancellation only while they
 * wait in read(), never while they serve a request.
 */
#include "fs/loop.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where a write's data starts in the request the kernel hands us. */
#define WRITE_DATA_OFF (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))

struct loop {
	struct fs *fs;
	struct fuse_session *se;
	sem_t done;
	int err; /* first read error, -errno; atomic */
};

/* The worker's landing slot; CACHE_NO_SLOT in any other thread. */
static __thread uint64_t t_landing = CACHE_NO_SLOT;

uint64_t *loop_landing(void)
{
	return t_landing == CACHE_NO_SLOT ? NULL : &t_landing;
}

/* Read one request into MEM (SIZE bytes). Returns its length, 0 when the
 * session has ended, -EINTR to try again, or -errno. The errors are
 * libfuse's (fuse_session_receive_buf), which cannot be told the size of
 * the buffer it reads into. */
static ssize_t receive(struct fuse_session *se, void *mem, size_t size)
{
	for (;;) {
		ssize_t res = read(fuse_session_fd(se), mem, size);
		int err = errno;
		if (fuse_session_exited(se))
			return 0;
		if (res >= (ssize_t)sizeof(struct fuse_in_header))
			return res;
		if (res >= 0)
			return -EIO; /* a short read: the kernel never sends one */
		if (err == ENOENT)
			continue; /* the request was interrupted: the next one */
		if (err == ENODEV) {
			/* Unmounted, or aborted through /sys/fs/fuse/connections. */
			fuse_session_exit(se);
			return 0;
		}
		return err == EAGAIN ? -EINTR : -err;
	}
}

static void *worker(void *arg)
{
	struct loop *lp = arg;
	struct fs *fs = lp->fs;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	/* Named here, before the first request, not by its creator after
	 * pthread_create: a worker may answer the mount's first requests
	 * before then, and `top -H` show it unnamed. */
	(void)pthread_setname_np(pthread_self(), "tierfs-fuse");
	/* Blocks smaller than a request cannot hold one: those mounts read
	 * into a buffer of the worker's own and copy, as libfuse does. */
	size_t size = TIER_RAM_HEADROOM + FS_MAX_REQUEST;
	char *own = NULL;
	if (fs->cache.nlanding) {
		t_landing = cache_landing_get(fs);
		size = TIER_RAM_HEADROOM + fs->bs;
	}
	if (t_landing == CACHE_NO_SLOT && !(own = malloc(size))) {
		__atomic_store_n(&lp->err, -ENOMEM, __ATOMIC_RELAXED);
		fuse_session_exit(lp->se);
	}
	pthread_cleanup_push(free, own);
	while (!fuse_session_exited(lp->se)) {
		/* From the header's start to TIER_RAM_HEADROOM past the slot's
		 * end, the memory is the worker's: the page before the slot and
		 * the next slot's page but its last WRITE_DATA_OFF bytes, which
		 * another worker's header may take. */
		char *mem = own ? own : (char *)cache_slot_ptr(fs, t_landing) - WRITE_DATA_OFF;
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		ssize_t res = receive(lp->se, mem, own ? size : size - WRITE_DATA_OFF);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (res == -EINTR)
			continue;
		if (res <= 0) {
			if (res < 0) {
				int none = 0;
				__atomic_compare_exchange_n(&lp->err, &none, (int)res, false,
							    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
				TFS_LOG("reading /dev/fuse: %s", strerror((int)-res));
			}
			break;
		}
		struct fuse_buf fbuf = {.size = (size_t)res, .mem = mem};
		fuse_session_process_buf(lp->se, &fbuf);
	}
	pthread_cleanup_pop(1);
	sem_post(&lp->done);
	return NULL;
}

int loop_run(struct fs *fs, struct fuse_session *se)
{
	unsigned n = fs->conf.threads ? fs->conf.threads : 1;
	struct loop lp = {.fs = fs, .se = se};
	pthread_t *tids = calloc(n, sizeof(*tids));
	if (!tids)
		return -ENOMEM;
	if (sem_init(&lp.done, 0, 0)) {
		free(tids);
		return -errno;
	}
	unsigned started = 0;
	int rc = 0;
	for (; started < n; started++) {
		rc = -pthread_create(&tids[started], NULL, worker, &lp);
		if (rc) {
			TFS_LOG("cannot start FUSE worker %u of %u: %s", started + 1, n,
				strerror(-rc));
			fuse_session_exit(se);
			break;
		}
	}
	if (started) {
		/* A signal that lands here, not in a worker's read(), ends
		 * the session all the same. */
		while (sem_wait(&lp.done) && errno == EINTR && !fuse_session_exited(se))
			;
		for (unsigned i = 0; i < started; i++)
			pthread_cancel(tids[i]);
		for (unsigned i = 0; i < started; i++)
			pthread_join(tids[i], NULL);
	}
	sem_destroy(&lp.done);
	free(tids);
	int err = __atomic_load_n(&lp.err, __ATOMIC_RELAXED);
	return rc ? rc : err;
}
