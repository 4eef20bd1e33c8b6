/*
 * tiers/posix_sync.c — making a posix tier's completed writes durable:
 * fdatasync of the slabs written since their last sync (together, through
 * a ring of its own, when there are several), fsync of the directory when
 * a slab came or went, and the check that the files are still there.
 */
#include "tiers/posix_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether the tier directory or an open slab was removed while mounted
 * (rm -rf of the tier): fdatasync of an unlinked file succeeds, yet no
 * later mount finds what it holds. -EIO then (logged the first time),
 * else 0 or the -errno of a failed fstat. */
static int files_gone(struct posix_tier *pt)
{
	struct stat st;
	const char *what = NULL;
	char path[PATH_MAX + 32];
	if (fstat(pt->dirfd, &st)) {
		int e = errno;
		tier_log(pt->t, "%s: fstat failed: %s", pt->dir, strerror(e));
		return -e;
	}
	if (st.st_nlink == 0)
		what = pt->dir;
	for (uint64_t i = 0; i < pt->nslabs && !what; i++) {
		int fd = __atomic_load_n(&pt->fds[i], __ATOMIC_ACQUIRE);
		if (fd < 0)
			continue;
		posix_slab_path(pt, i, path, sizeof(path));
		if (fstat(fd, &st)) {
			int e = errno;
			tier_log(pt->t, "%s: fstat failed: %s", path, strerror(e));
			return -e;
		}
		if (st.st_nlink == 0)
			what = path;
	}
	if (!what)
		return 0;
	if (!__atomic_exchange_n(&pt->gone_logged, true, __ATOMIC_RELAXED))
		tier_log(pt->t, "%s was removed while mounted: the blocks written there are lost",
			 what);
	return -EIO;
}

/* Room in the sync ring: fdatasyncs in flight at once. */
#define SYNC_RING_ENTRIES 64

/* The result of slab IDX's fdatasync: logged if it failed. Not marked
 * written again: the kernel reports a failed flush once, and the caller
 * has this one. */
static int sync_result(struct posix_tier *pt, uint64_t idx, int res)
{
	if (res >= 0)
		return 0;
	char path[PATH_MAX + 32];
	posix_slab_path(pt, idx, path, sizeof(path));
	tier_log(pt->t, "%s: fdatasync failed: %s", path, strerror(-res));
	return res;
}

/* fdatasync of slabs IDX[0..N) one after the other; the first error. */
static int sync_serial(struct posix_tier *pt, const uint64_t *idx, size_t n)
{
	int rc = 0;
	for (size_t k = 0; k < n; k++) {
		int fd = __atomic_load_n(&pt->fds[idx[k]], __ATOMIC_ACQUIRE);
		int r = sync_result(pt, idx[k], fdatasync(fd) ? -errno : 0);
		if (!rc)
			rc = r;
	}
	return rc;
}

/* fdatasync of slabs IDX[0..N) at once, through the sync ring; the first
 * error. A ring that fails part way leaves the rest to sync_serial: a slab
 * synced twice costs a flush, one not synced would lose its writes.
 * sync_lock held. */
static int sync_parallel(struct posix_tier *pt, const uint64_t *idx, size_t n)
{
	if (!pt->sync_ring_ok && !pt->sync_ring_failed) {
		int e = io_uring_queue_init(SYNC_RING_ENTRIES, &pt->sync_ring, 0);
		if (e) {
			tier_log(pt->t,
				 "io_uring_queue_init(%u) for syncs failed: %s; syncing "
				 "slabs one at a time",
				 SYNC_RING_ENTRIES, strerror(-e));
			pt->sync_ring_failed = true;
		} else {
			pt->sync_ring_ok = true;
			/* io_uring runs an fsync on its bounded workers, by
			 * default 4 per CPU: room for a whole ring of them,
			 * where the kernel allows it (5.15 on). */
			unsigned max[2] = {SYNC_RING_ENTRIES, 0};
			(void)io_uring_register_iowq_max_workers(&pt->sync_ring, max);
		}
	}
	if (!pt->sync_ring_ok)
		return sync_serial(pt, idx, n);
	bool *done = calloc(n, sizeof(*done));
	if (!done)
		return sync_serial(pt, idx, n);
	int rc = 0;
	size_t next = 0, inflight = 0, ndone = 0;
	const char *failed = NULL;
	int ferr = 0;
	while (ndone < n && !failed) {
		while (next < n && inflight < SYNC_RING_ENTRIES) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&pt->sync_ring);
			if (!sqe)
				break;
			io_uring_prep_fsync(sqe,
					    __atomic_load_n(&pt->fds[idx[next]], __ATOMIC_ACQUIRE),
					    IORING_FSYNC_DATASYNC);
			io_uring_sqe_set_data64(sqe, next);
			next++;
			inflight++;
		}
		int e = io_uring_submit_and_wait(&pt->sync_ring, 1);
		if (e < 0 && e != -EINTR) {
			failed = "io_uring_submit_and_wait";
			ferr = e;
			break;
		}
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&pt->sync_ring, head, cqe)
		{
			uint64_t k = io_uring_cqe_get_data64(cqe);
			seen++;
			if (k >= n || done[k])
				continue;
			done[k] = true;
			ndone++;
			inflight--;
			int r = sync_result(pt, idx[k], cqe->res);
			if (!rc)
				rc = r;
		}
		io_uring_cq_advance(&pt->sync_ring, seen);
	}
	if (failed) {
		/* SQEs may sit in the ring unsubmitted, or in flight: this ring
		 * is not used again, and what it did not report is synced
		 * here. */
		tier_log(pt->t, "%s on the sync ring failed: %s; syncing slabs one at a time",
			 failed, strerror(-ferr));
		io_uring_queue_exit(&pt->sync_ring);
		pt->sync_ring_ok = false;
		pt->sync_ring_failed = true;
		for (size_t k = 0; k < n; k++)
			if (!done[k]) {
				int r = sync_serial(pt, &idx[k], 1);
				if (!rc)
					rc = r;
			}
	}
	free(done);
	return rc;
}

int posix_sync(struct tier *t)
{
	struct posix_tier *pt = t->be_priv;
	int rc = 0;
	pthread_mutex_lock(&pt->sync_lock);
	uint64_t *idx = malloc(pt->nslabs * sizeof(*idx));
	size_t n = 0;
	for (uint64_t i = 0; i < pt->nslabs; i++) {
		int fd = __atomic_load_n(&pt->fds[i], __ATOMIC_ACQUIRE);
		if (fd < 0 || !__atomic_exchange_n(&pt->written[i], false, __ATOMIC_ACQ_REL))
			continue;
		if (idx) {
			idx[n++] = i;
		} else {
			/* No memory for the list: one at a time, as it is. */
			int r = sync_serial(pt, &i, 1);
			if (!rc)
				rc = r;
		}
	}
	if (n) {
		int r = n > 1 ? sync_parallel(pt, idx, n) : sync_serial(pt, idx, n);
		if (!rc)
			rc = r;
	}
	free(idx);
	pthread_mutex_unlock(&pt->sync_lock);
	/* New slab files must survive too: their directory entries. */
	if (__atomic_exchange_n(&pt->dir_changed, false, __ATOMIC_ACQ_REL) && fsync(pt->dirfd)) {
		rc = -errno;
		__atomic_store_n(&pt->dir_changed, true, __ATOMIC_RELEASE);
		tier_log(t, "%s: fsync of the directory failed: %s", pt->dir, strerror(-rc));
	}
	int gone = files_gone(pt);
	return gone ? gone : rc;
}
