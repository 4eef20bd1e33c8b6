/*
 * tiers/posix.c — the tier on a local directory (NVMe, or a parallel file
 * system mount). Blocks live in a few large preallocated slab files
 * (slab-00000.dat, ...) rather than one file per block: PFS metadata servers
 * and directory lookups suffer from millions of small files, and a
 * preallocated slab never allocates extents on the write path.
 *
 * I/O goes through one io_uring per tier with O_DIRECT when the file system
 * allows it. In-flight I/O is bounded by queue_depth; extra requests wait in
 * a FIFO and are issued as completions free room. One completion thread
 * reaps the ring and reports results through tier_io_complete().
 *
 * A tier.info file records the layout (block and slab size) so a remount
 * with a different block size is refused instead of reading garbage.
 */
#include "tiers/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_SLAB_SIZE (1ULL << 30)
#define INFO_NAME	  "tier.info"
#define PROBE_NAME	  ".odirect-probe"
/* user_data of the NOP that tells the completion thread to exit. */
#define STOP_TOKEN UINT64_MAX

struct posix_tier {
	/* Immutable after open. */
	struct tier *t;
	char dir[PATH_MAX];
	int dirfd;
	bool direct;
	uint64_t slab_size; /* bytes, a multiple of block_size */
	uint64_t slots_per_slab;
	uint64_t nslabs;

	/* One fd per slab, -1 until the slab exists. Written under slab_lock,
	 * read without it (atomic loads) on the I/O path. */
	int *fds;
	pthread_mutex_t slab_lock;

	/* sq_lock guards the submission side of ring, inflight and the FIFO.
	 * The completion side is touched only by cq_thread. */
	struct io_uring ring;
	pthread_mutex_t sq_lock;
	unsigned inflight;
	struct tier_io *fifo_head, *fifo_tail;
	pthread_t cq_thread;
};

static void slab_path(const struct posix_tier *pt, uint64_t idx, char *buf, size_t len)
{
	snprintf(buf, len, "%s/slab-%05" PRIu64 ".dat", pt->dir, idx);
}

/* Bytes the slab must hold: the last slab only covers the slots left. */
static uint64_t slab_bytes(const struct posix_tier *pt, uint64_t idx)
{
	uint64_t first = idx * pt->slots_per_slab;
	uint64_t n = pt->t->slots_total - first;
	if (n > pt->slots_per_slab)
		n = pt->slots_per_slab;
	return n * pt->t->block_size;
}

static int open_flags(const struct posix_tier *pt)
{
	return O_RDWR | O_CLOEXEC | (pt->direct ? O_DIRECT : 0);
}

/* Grow fd to len bytes with real blocks allocated, so later writes never
 * allocate (or hit ENOSPC) on the I/O path. */
static int preallocate(struct posix_tier *pt, int fd, uint64_t len, const char *path)
{
	struct stat st;
	if (fstat(fd, &st)) {
		int e = errno;
		tier_log(pt->t, "%s: fstat failed: %s", path, strerror(e));
		return -e;
	}
	if ((uint64_t)st.st_size >= len)
		return 0;
	if (fallocate(fd, 0, 0, (off_t)len) == 0)
		return 0;
	int e = errno;
	if (e != EOPNOTSUPP) {
		tier_log(pt->t, "%s: cannot preallocate %" PRIu64 " bytes: %s", path, len,
			 strerror(e));
		return -e;
	}
	if (ftruncate(fd, (off_t)len)) {
		e = errno;
		tier_log(pt->t, "%s: cannot extend to %" PRIu64 " bytes: %s", path, len,
			 strerror(e));
		return -e;
	}
	return 0;
}

/* Open (create) and preallocate slab idx if it is not open yet. */
static int ensure_slab(struct posix_tier *pt, uint64_t idx, uint64_t slot)
{
	if (__atomic_load_n(&pt->fds[idx], __ATOMIC_ACQUIRE) >= 0)
		return 0;
	int rc = 0;
	char path[PATH_MAX + 32];
	slab_path(pt, idx, path, sizeof(path));
	pthread_mutex_lock(&pt->slab_lock);
	if (pt->fds[idx] >= 0)
		goto out;
	int fd = open(path, open_flags(pt) | O_CREAT, 0644);
	if (fd < 0) {
		rc = -errno;
		tier_log(pt->t, "slot %" PRIu64 ": cannot create slab %s: %s", slot, path,
			 strerror(-rc));
		goto out;
	}
	rc = preallocate(pt, fd, slab_bytes(pt, idx), path);
	if (rc) {
		close(fd);
		goto out;
	}
	__atomic_store_n(&pt->fds[idx], fd, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&pt->slab_lock);
	return rc;
}

static int posix_prepare_slot(struct tier *t, uint64_t slot)
{
	struct posix_tier *pt = t->be_priv;
	return ensure_slab(pt, slot / pt->slots_per_slab, slot);
}

/* Whether the directory accepts O_DIRECT: some file systems refuse the
 * open, others the first aligned write, both with EINVAL. 1 yes, 0 no,
 * -errno for any other failure. */
static int probe_direct(struct posix_tier *pt)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", pt->dir, PROBE_NAME);
	int fd = open(path, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		if (e == EINVAL)
			return 0;
		tier_log(pt->t, "%s: cannot create: %s", path, strerror(e));
		return -e;
	}
	int rc = 1;
	void *buf = NULL;
	if (posix_memalign(&buf, 4096, 4096)) {
		rc = -ENOMEM;
		goto out;
	}
	memset(buf, 0, 4096);
	if (pwrite(fd, buf, 4096, 0) != 4096) {
		int e = errno;
		if (e == EINVAL) {
			rc = 0;
		} else {
			tier_log(pt->t, "%s: probe write failed: %s", path, strerror(e));
			rc = -e;
		}
	}
out:
	free(buf);
	close(fd);
	unlink(path);
	return rc;
}

/* Check or write tier.info. A config slab_size of 0 adopts the stored one. */
static int check_info(struct posix_tier *pt, const struct tier_params *p)
{
	struct tier *t = pt->t;
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", pt->dir, INFO_NAME);
	FILE *f = fopen(path, "re");
	if (f) {
		uint64_t bs = 0, ss = 0;
		char line[128];
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, "block_size=%" SCNu64, &bs) == 1)
				continue;
			(void)sscanf(line, "slab_size=%" SCNu64, &ss);
		}
		fclose(f);
		if (bs == 0 || ss == 0 || ss % bs) {
			tier_log(t,
				 "%s: unreadable or corrupt (block_size=%" PRIu64
				 ", slab_size=%" PRIu64 ")",
				 path, bs, ss);
			return -EINVAL;
		}
		if (bs != t->block_size) {
			tier_log(
			    t, "%s was formatted with block size %" PRIu64 ", config says %" PRIu32,
			    pt->dir, bs, t->block_size);
			return -EINVAL;
		}
		if (p->slab_size && p->slab_size != ss) {
			tier_log(
			    t, "%s was formatted with slab size %" PRIu64 ", config says %" PRIu64,
			    pt->dir, ss, p->slab_size);
			return -EINVAL;
		}
		pt->slab_size = ss;
		return 0;
	}
	if (errno != ENOENT) {
		int e = errno;
		tier_log(t, "%s: cannot open: %s", path, strerror(e));
		return -e;
	}
	uint64_t ss = p->slab_size ? p->slab_size : DEFAULT_SLAB_SIZE;
	if (ss < t->block_size || ss % t->block_size) {
		tier_log(t, "slab size %" PRIu64 " is not a multiple of the block size %" PRIu32,
			 ss, t->block_size);
		return -EINVAL;
	}
	pt->slab_size = ss;
	/* Write-then-rename so a crash never leaves a half-written info. */
	char tmp[PATH_MAX + 40];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		tier_log(t, "%s: cannot create: %s", tmp, strerror(e));
		return -e;
	}
	char text[128];
	int n = snprintf(text, sizeof(text), "block_size=%" PRIu32 "\nslab_size=%" PRIu64 "\n",
			 t->block_size, ss);
	if (write(fd, text, (size_t)n) != n || fsync(fd)) {
		int e = errno ? errno : EIO;
		tier_log(t, "%s: cannot write: %s", tmp, strerror(e));
		close(fd);
		unlink(tmp);
		return -e;
	}
	close(fd);
	if (rename(tmp, path) || fsync(pt->dirfd)) {
		int e = errno;
		tier_log(t, "%s: cannot install: %s", path, strerror(e));
		return -e;
	}
	return 0;
}

/* Queue the rest of io (io->result bytes already moved). sq_lock held. */
static int issue(struct posix_tier *pt, struct tier_io *io)
{
	uint32_t bs = pt->t->block_size;
	uint64_t idx = io->slot / pt->slots_per_slab;
	int fd = __atomic_load_n(&pt->fds[idx], __ATOMIC_ACQUIRE);
	uint64_t done = (uint64_t)io->result;
	uint64_t off = (io->slot % pt->slots_per_slab) * bs + done;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&pt->ring);
	if (!sqe) {
		/* Cannot happen: in-flight <= queue_depth < ring entries. */
		tier_log(pt->t, "slot %" PRIu64 ": submission ring full", io->slot);
		return -EBUSY;
	}
	char *buf = (char *)io->buf + done;
	if (io->op == TIER_OP_READ)
		io_uring_prep_read(sqe, fd, buf, (unsigned)(bs - done), off);
	else
		io_uring_prep_write(sqe, fd, buf, (unsigned)(bs - done), off);
	io_uring_sqe_set_data(sqe, io);
	int rc;
	do
		rc = io_uring_submit(&pt->ring);
	while (rc == -EINTR);
	if (rc < 0) {
		tier_log(pt->t, "slot %" PRIu64 ": io_uring_submit failed: %s", io->slot,
			 strerror(-rc));
		return rc;
	}
	return 0;
}

static int posix_submit(struct tier *t, struct tier_io *io)
{
	struct posix_tier *pt = t->be_priv;
	if (pt->direct && ((uintptr_t)io->buf & 4095)) {
		tier_log(t, "slot %" PRIu64 ": buffer %p is not page-aligned (O_DIRECT)", io->slot,
			 io->buf);
		return -EINVAL;
	}
	/* Normally done by tier_alloc/tier_reserve; this covers callers that
	 * write a slot they track themselves. */
	int rc = ensure_slab(pt, io->slot / pt->slots_per_slab, io->slot);
	if (rc)
		return rc;
	io->result = 0; /* bytes moved so far, until completion */
	pthread_mutex_lock(&pt->sq_lock);
	if (pt->inflight < t->queue_depth) {
		rc = issue(pt, io);
		if (rc == 0)
			pt->inflight++;
	} else {
		io->next = NULL;
		if (pt->fifo_tail)
			pt->fifo_tail->next = io;
		else
			pt->fifo_head = io;
		pt->fifo_tail = io;
	}
	pthread_mutex_unlock(&pt->sq_lock);
	return rc;
}

/* io is done (err 0 or -errno): free its in-flight place, start queued
 * requests, then report. Completion callbacks run without sq_lock, so they
 * may submit again. */
static void finish(struct posix_tier *pt, struct tier_io *io, int err)
{
	struct tier_io *failed = NULL;
	pthread_mutex_lock(&pt->sq_lock);
	pt->inflight--;
	while (pt->inflight < pt->t->queue_depth && pt->fifo_head) {
		struct tier_io *q = pt->fifo_head;
		pt->fifo_head = q->next;
		if (!pt->fifo_head)
			pt->fifo_tail = NULL;
		int rc = issue(pt, q);
		if (rc == 0) {
			pt->inflight++;
		} else {
			q->result = rc;
			q->next = failed;
			failed = q;
		}
	}
	pthread_mutex_unlock(&pt->sq_lock);
	tier_io_complete(io, err);
	while (failed) {
		struct tier_io *q = failed;
		failed = q->next;
		tier_io_complete(q, q->result);
	}
}

static void handle_cqe(struct posix_tier *pt, struct tier_io *io, int res)
{
	struct tier *t = pt->t;
	const char *what = io->op == TIER_OP_READ ? "read" : "write";
	char path[PATH_MAX + 32];
	if (res == -EAGAIN || res == -EINTR || res > 0) {
		if (res > 0)
			io->result += res;
		if ((uint32_t)io->result == t->block_size) {
			finish(pt, io, 0);
			return;
		}
		/* Short transfer or transient error: issue the rest. Keeps
		 * its in-flight place. */
		pthread_mutex_lock(&pt->sq_lock);
		int rc = issue(pt, io);
		pthread_mutex_unlock(&pt->sq_lock);
		if (rc)
			finish(pt, io, rc);
		return;
	}
	slab_path(pt, io->slot / pt->slots_per_slab, path, sizeof(path));
	if (res == 0) {
		tier_log(t, "%s: slot %" PRIu64 ": %s hit end of file after %d bytes", path,
			 io->slot, what, io->result);
		finish(pt, io, -EIO);
		return;
	}
	tier_log(t, "%s: slot %" PRIu64 ": %s failed: %s", path, io->slot, what, strerror(-res));
	finish(pt, io, res);
}

static void *completion_thread(void *arg)
{
	struct posix_tier *pt = arg;
	for (;;) {
		struct io_uring_cqe *cqe;
		int rc = io_uring_wait_cqe(&pt->ring, &cqe);
		if (rc == -EINTR || rc == -EAGAIN)
			continue;
		if (rc < 0) {
			/* Nothing sane to do but report: the ring is broken. */
			tier_log(pt->t, "io_uring_wait_cqe failed: %s", strerror(-rc));
			usleep(10000);
			continue;
		}
		uint64_t ud = cqe->user_data;
		int res = cqe->res;
		io_uring_cqe_seen(&pt->ring, cqe);
		if (ud == STOP_TOKEN)
			break;
		handle_cqe(pt, (struct tier_io *)(uintptr_t)ud, res);
	}
	return NULL;
}

static void free_pt(struct posix_tier *pt)
{
	if (pt->fds) {
		for (uint64_t i = 0; i < pt->nslabs; i++)
			if (pt->fds[i] >= 0)
				close(pt->fds[i]);
		free(pt->fds);
	}
	if (pt->dirfd >= 0)
		close(pt->dirfd);
	pthread_mutex_destroy(&pt->slab_lock);
	pthread_mutex_destroy(&pt->sq_lock);
	free(pt);
}

static int open_existing_slabs(struct posix_tier *pt)
{
	for (uint64_t i = 0; i < pt->nslabs; i++) {
		char path[PATH_MAX + 32];
		slab_path(pt, i, path, sizeof(path));
		int fd = open(path, open_flags(pt));
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			int e = errno;
			tier_log(pt->t, "cannot open slab %s: %s", path, strerror(e));
			return -e;
		}
		pt->fds[i] = fd;
		/* The capacity may have grown since the slab was made. */
		int rc = preallocate(pt, fd, slab_bytes(pt, i), path);
		if (rc)
			return rc;
	}
	return 0;
}

static int posix_open(struct tier *t, const struct tier_params *p)
{
	if (!p->path || !p->path[0]) {
		tier_log(t, "no path given for a posix tier");
		return -EINVAL;
	}
	struct posix_tier *pt = calloc(1, sizeof(*pt));
	if (!pt)
		return -ENOMEM;
	pt->t = t;
	pt->dirfd = -1;
	pthread_mutex_init(&pt->slab_lock, NULL);
	pthread_mutex_init(&pt->sq_lock, NULL);
	int rc;
	if (strlen(p->path) >= sizeof(pt->dir)) {
		tier_log(t, "path too long: %s", p->path);
		rc = -ENAMETOOLONG;
		goto fail;
	}
	snprintf(pt->dir, sizeof(pt->dir), "%s", p->path);
	if (mkdir(pt->dir, 0755) && errno != EEXIST) {
		rc = -errno;
		tier_log(t, "cannot create directory %s: %s", pt->dir, strerror(-rc));
		goto fail;
	}
	pt->dirfd = open(pt->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pt->dirfd < 0) {
		rc = -errno;
		tier_log(t, "cannot open directory %s: %s", pt->dir, strerror(-rc));
		goto fail;
	}
	rc = check_info(pt, p);
	if (rc)
		goto fail;
	pt->slots_per_slab = pt->slab_size / t->block_size;
	pt->nslabs = (t->slots_total + pt->slots_per_slab - 1) / pt->slots_per_slab;

	if (p->direct != 0) {
		rc = probe_direct(pt);
		if (rc < 0)
			goto fail;
		pt->direct = rc == 1;
		if (!pt->direct && p->direct == 1) {
			tier_log(t, "%s does not support O_DIRECT, and the config requires it",
				 pt->dir);
			rc = -EINVAL;
			goto fail;
		}
		if (!pt->direct)
			tier_log(t, "%s does not support O_DIRECT, using buffered I/O", pt->dir);
	}
	t->direct = pt->direct;

	pt->fds = malloc(pt->nslabs * sizeof(int));
	if (!pt->fds) {
		rc = -ENOMEM;
		goto fail;
	}
	for (uint64_t i = 0; i < pt->nslabs; i++)
		pt->fds[i] = -1;
	rc = open_existing_slabs(pt);
	if (rc)
		goto fail;

	unsigned entries = 2 * t->queue_depth;
	if (entries < 8)
		entries = 8;
	rc = io_uring_queue_init(entries, &pt->ring, 0);
	if (rc) {
		tier_log(t, "io_uring_queue_init(%u) failed: %s", entries, strerror(-rc));
		goto fail;
	}
	rc = -pthread_create(&pt->cq_thread, NULL, completion_thread, pt);
	if (rc) {
		tier_log(t, "cannot start the completion thread: %s", strerror(-rc));
		io_uring_queue_exit(&pt->ring);
		goto fail;
	}
	t->be_priv = pt;
	return 0;
fail:
	free_pt(pt);
	return rc;
}

static void posix_close(struct tier *t)
{
	struct posix_tier *pt = t->be_priv;
	pthread_mutex_lock(&pt->sq_lock);
	struct io_uring_sqe *sqe = io_uring_get_sqe(&pt->ring);
	if (sqe) {
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, STOP_TOKEN);
		io_uring_submit(&pt->ring);
	}
	pthread_mutex_unlock(&pt->sq_lock);
	if (sqe)
		pthread_join(pt->cq_thread, NULL);
	else
		tier_log(t, "cannot stop the completion thread: ring full");
	io_uring_queue_exit(&pt->ring);
	free_pt(pt);
}

static int posix_sync(struct tier *t)
{
	struct posix_tier *pt = t->be_priv;
	int rc = 0;
	for (uint64_t i = 0; i < pt->nslabs; i++) {
		int fd = __atomic_load_n(&pt->fds[i], __ATOMIC_ACQUIRE);
		if (fd >= 0 && fdatasync(fd)) {
			char path[PATH_MAX + 32];
			rc = -errno;
			slab_path(pt, i, path, sizeof(path));
			tier_log(t, "%s: fdatasync failed: %s", path, strerror(-rc));
		}
	}
	/* New slab files must survive too: their directory entries. */
	if (fsync(pt->dirfd)) {
		rc = -errno;
		tier_log(t, "%s: fsync of the directory failed: %s", pt->dir, strerror(-rc));
	}
	return rc;
}

const struct tier_backend tier_posix_backend = {
    .kind_name = "posix",
    .open = posix_open,
    .close = posix_close,
    .submit = posix_submit,
    .sync = posix_sync,
    .prepare_slot = posix_prepare_slot,
};
