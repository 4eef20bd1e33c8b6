/*
 * tiers/posix.c — the tier on a local directory (NVMe, or a parallel file
 * system mount). Blocks live in a few large preallocated slab files
 * (slab-00000.dat, ...) rather than one file per block: PFS metadata servers
 * and directory lookups suffer from millions of small files, and a
 * preallocated slab never allocates extents on the write path.
 *
 * I/O goes through one io_uring per tier with O_DIRECT when the file system
 * allows it. Every request goes through the tier's scheduler (sched.h):
 * in-flight I/O is bounded by queue_depth, waiting requests are served by
 * priority (demand > reclaim > prefetch > write-back, with aging), and an
 * optional max_bandwidth cap paces dispatch. tier_submit never blocks on the
 * device or the cap: a request that cannot start waits in the scheduler and
 * is issued by a later completion, or by a ring timer when only the cap
 * holds it back. One completion thread reaps the ring and reports results
 * through tier_io_complete().
 *
 * A tier.info file records the layout (block and slab size) so a remount
 * with a different block size is refused instead of reading garbage.
 *
 * Slots are handed out in order (bitmap_alloc's hint), so slabs fill one
 * after the other. Once the allocations reach half of a slab, a thread of
 * the tier's own makes the next one: the caller of tier_alloc holds the
 * file system's lock, and preallocating a 1 GiB slab there stalled every
 * request for as long as fallocate took (0.4 s on tmpfs, which zeroes the
 * pages; a parallel file system may take longer).
 */
#include "tiers/backend.h"
#include "tiers/sched.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_SLAB_SIZE (1ULL << 30)
#define INFO_NAME	  "tier.info"
#define PROBE_NAME	  ".odirect-probe"
/* How long a slab that could not grow for lack of space is not tried
 * again. */
#define FULL_RETRY_NS (1000ULL * 1000 * 1000)
/* A slab the disk has no room for grows this much at a time, so that the
 * last free space short of a slab is used too: the tier's capacity counts
 * it, and statfs shows it free. */
#define PARTIAL_GROW_BYTES (16ULL << 20)
/* user_data of the NOP that tells the completion thread to exit. */
#define STOP_TOKEN UINT64_MAX
/* user_data of the ring timeout that resumes a queue held by the cap. */
#define TIMER_TOKEN (UINT64_MAX - 1)
/* user_data of the update that moves that timeout earlier. */
#define TIMER_MOVE_TOKEN (UINT64_MAX - 2)

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
	/* Per slab: the bytes preallocated, from its start: a slot below it
	 * may be allocated. A slab that a full disk kept from growing to its
	 * size is still open: the blocks it holds stay readable, and the
	 * slots it has room for are used. Same locking as fds. */
	uint64_t *grown;
	/* After a failure to grow a slab for lack of space, allocations on
	 * this tier fail at once until this time (tier_now_ns) instead of
	 * trying a doomed fallocate under slab_lock for every block, and
	 * only the first failure is logged. Under slab_lock. */
	uint64_t full_until_ns;
	bool full_logged;
	/* files_gone has logged (atomic). */
	bool gone_logged;
	/* Per slab: a write to it completed since its last fdatasync; and a
	 * slab was created or removed since the directory's last fsync.
	 * Atomic: set by the completion and slab paths, taken by
	 * posix_sync, which a commit runs every few seconds: a sync of
	 * every slab each time cost a flush per slab on a tier of hundreds. */
	bool *written;
	bool dir_changed;
	/* posix_sync's own ring, made at its first sync of several slabs:
	 * their fdatasyncs go out together. One after the other, a commit
	 * waited for each in turn, and on a parallel file system each is a
	 * round trip to its storage servers. sync_lock serializes posix_sync
	 * and guards the three; a ring that could not be made leaves the
	 * syncs one after the other (sync_ring_failed). */
	pthread_mutex_t sync_lock;
	struct io_uring sync_ring;
	bool sync_ring_ok, sync_ring_failed;
	pthread_mutex_t slab_lock;
	/* The slab the ahead thread is asked to make (-1: none), the one it is
	 * making now outside slab_lock (ensure_slab waits for that one rather
	 * than race it), and the last one it could not make (not asked for
	 * again: allocation makes it, or reports the lack of space). Under
	 * slab_lock; read without it (atomic loads) to skip taking it.
	 * slab_cond wakes the thread, and the waiters for ahead_busy. */
	int64_t ahead_want, ahead_busy, ahead_failed;
	bool ahead_stop, ahead_running;
	pthread_cond_t slab_cond;
	pthread_t ahead_thread;

	/* sq_lock guards the submission side of ring, sched, timer_armed and
	 * timer_ts. The completion side is touched only by cq_thread. */
	struct io_uring ring;
	pthread_mutex_t sq_lock;
	struct sched sched;
	/* A TIMER_TOKEN timeout is pending in the ring: at most one, so a
	 * throttled queue does not pile up timers. It fires at timer_due_ns
	 * (tier_now_ns); a shorter wait (the other direction's cap) moves it
	 * earlier through timer_move_ts. */
	bool timer_armed;
	uint64_t timer_due_ns;
	struct __kernel_timespec timer_ts, timer_move_ts;
	pthread_t cq_thread;
};

static void slab_path(const struct posix_tier *pt, uint64_t idx, char *buf, size_t len)
{
	snprintf(buf, len, "%s/slab-%05" PRIu64 ".dat", pt->dir, idx);
}

/* Whether NAME is one of the files a tier keeps in its directory: a slab
 * (slab-NNNNN.dat, as slab_path writes it, five digits or more) or the
 * info file. */
static bool tier_file_name(const char *name)
{
	if (!strcmp(name, INFO_NAME))
		return true;
	if (strncmp(name, "slab-", 5))
		return false;
	size_t n = strspn(name + 5, "0123456789");
	return n >= 5 && !strcmp(name + 5 + n, ".dat");
}

int tier_posix_held(const char *dir, uint64_t *bytes)
{
	*bytes = 0;
	DIR *d = opendir(dir);
	if (!d) {
		/* Not made yet: the tier's open creates it, holding nothing. */
		if (errno == ENOENT)
			return 0;
		int e = errno;
		fprintf(stderr, "tierfs: %s: cannot list: %s\n", dir, strerror(e));
		return -e;
	}
	int rc = 0;
	for (;;) {
		errno = 0;
		struct dirent *e = readdir(d);
		if (!e) {
			if (errno) {
				rc = -errno;
				fprintf(stderr, "tierfs: %s: cannot list: %s\n", dir,
					strerror(-rc));
			}
			break;
		}
		if (!tier_file_name(e->d_name))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno == ENOENT)
				continue;
			rc = -errno;
			fprintf(stderr, "tierfs: %s/%s: cannot stat: %s\n", dir, e->d_name,
				strerror(-rc));
			break;
		}
		if (S_ISREG(st.st_mode))
			*bytes += (uint64_t)st.st_blocks * 512;
	}
	closedir(d);
	return rc;
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

static bool no_space(int err)
{
	return err == -ENOSPC || err == -EDQUOT;
}

/* Grow fd to len bytes with real blocks allocated, so later writes never
 * allocate (or hit ENOSPC) on the I/O path. Lack of space (-ENOSPC,
 * -EDQUOT) is left to the caller to report: it is routine on a full
 * tier. */
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
		if (!no_space(-e))
			tier_log(pt->t, "%s: cannot preallocate %" PRIu64 " bytes: %s", path, len,
				 strerror(e));
		return -e;
	}
	if (ftruncate(fd, (off_t)len)) {
		e = errno;
		if (!no_space(-e))
			tier_log(pt->t, "%s: cannot extend to %" PRIu64 " bytes: %s", path, len,
				 strerror(e));
		return -e;
	}
	return 0;
}

/* The bytes of slab FD that hold whole blocks, after a failed grow: some
 * file systems (ext4) keep what a failed fallocate got, so the size on
 * disk, not the size asked for, says which slots are usable. 0 on error. */
static uint64_t grown_bytes(struct posix_tier *pt, int fd, uint64_t idx)
{
	struct stat st;
	if (fstat(fd, &st))
		return 0;
	uint64_t n = (uint64_t)st.st_size / pt->t->block_size * pt->t->block_size;
	return n < slab_bytes(pt, idx) ? n : slab_bytes(pt, idx);
}

/* Open the slab file PATH, creating it if it is missing (*CREATED says
 * which): the fd, or -errno. */
static int slab_open(struct posix_tier *pt, const char *path, bool *created)
{
	*created = false;
	int fd = open(path, open_flags(pt) | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		*created = true;
		__atomic_store_n(&pt->dir_changed, true, __ATOMIC_RELEASE);
	} else if (errno == EEXIST)
		fd = open(path, open_flags(pt));
	return fd >= 0 ? fd : -errno;
}

/* Remove the slab file PATH that this tier created and could not grow:
 * left behind, empty or with part of its allocation, it would eat the
 * free space and be grown again at every mount. */
static void slab_remove(struct posix_tier *pt, const char *path)
{
	__atomic_store_n(&pt->dir_changed, true, __ATOMIC_RELEASE);
	if (unlink(path))
		tier_log(pt->t, "%s: cannot remove the slab that could not grow: %s", path,
			 strerror(errno));
}

/* Make slab idx usable for slot: open it (creating it if need be) and,
 * with NEED_SPACE (the slot is being allocated), preallocate it: whole if
 * the disk has room, else up to the slot, in PARTIAL_GROW_BYTES steps
 * while they fit. A slot that already holds a block needs only the fd. A
 * slab this call created and could not grow to the slot is removed again
 * (slab_remove). */
static int ensure_slab(struct posix_tier *pt, uint64_t idx, uint64_t slot, bool need_space)
{
	uint64_t need = (slot - idx * pt->slots_per_slab + 1) * pt->t->block_size;
	if (__atomic_load_n(&pt->fds[idx], __ATOMIC_ACQUIRE) >= 0 &&
	    (!need_space || __atomic_load_n(&pt->grown[idx], __ATOMIC_ACQUIRE) >= need))
		return 0;
	int rc = 0;
	char path[PATH_MAX + 32];
	slab_path(pt, idx, path, sizeof(path));
	pthread_mutex_lock(&pt->slab_lock);
	while (pt->ahead_busy == (int64_t)idx)
		pthread_cond_wait(&pt->slab_cond, &pt->slab_lock);
	int fd = pt->fds[idx];
	if (fd >= 0 && (!need_space || pt->grown[idx] >= need))
		goto out;
	if (need_space && pt->full_until_ns && tier_now_ns() < pt->full_until_ns) {
		rc = -ENOSPC;
		goto out;
	}
	bool created = false;
	if (fd < 0) {
		fd = slab_open(pt, path, &created);
		if (fd < 0) {
			rc = fd;
			tier_log(pt->t, "slot %" PRIu64 ": cannot create slab %s: %s", slot, path,
				 strerror(-rc));
			goto out;
		}
	}
	uint64_t full = slab_bytes(pt, idx), grown = 0;
	rc = preallocate(pt, fd, full, path);
	if (rc == 0) {
		grown = full;
	} else if (no_space(rc)) {
		/* A step, else just the slot: the disk's last few blocks. */
		uint64_t step =
		    (need + PARTIAL_GROW_BYTES - 1) / PARTIAL_GROW_BYTES * PARTIAL_GROW_BYTES;
		if (step >= full)
			step = need;
		if (need_space && step < full && preallocate(pt, fd, step, path) && need < step)
			(void)preallocate(pt, fd, need, path);
		grown = grown_bytes(pt, fd, idx);
		if (need_space && grown >= need)
			rc = 0;
	}
	if (rc == 0) {
		pt->full_until_ns = 0;
		pt->full_logged = false;
	} else if (no_space(rc)) {
		pt->full_until_ns = tier_now_ns() + FULL_RETRY_NS;
		if (!pt->full_logged)
			tier_log(pt->t, "%s: no space to grow the slab to %" PRIu64 " bytes: %s",
				 path, need, strerror(-rc));
		pt->full_logged = true;
	}
	/* Not for a slab about to be removed: a later one made in its place
	 * would inherit a size it does not have. */
	if (grown > pt->grown[idx] && !(rc && created))
		__atomic_store_n(&pt->grown[idx], grown, __ATOMIC_RELEASE);
	if (rc && created)
		slab_remove(pt, path);
	if (rc && (created || need_space)) {
		if (pt->fds[idx] < 0)
			close(fd);
		goto out;
	}
	/* Open, and grown as far as the disk allowed: the slots it holds
	 * are readable. */
	rc = 0;
	__atomic_store_n(&pt->fds[idx], fd, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&pt->slab_lock);
	return rc;
}

/* Make slab IDX whole, ahead of need, outside slab_lock: a slab of the
 * length slab_bytes(), or none at all. Lack of space is left for the
 * allocation that needs the slab to grow it as far as the disk allows and
 * report. slab_lock held on entry and exit. */
static void make_ahead(struct posix_tier *pt, uint64_t idx)
{
	if (pt->fds[idx] >= 0 || (pt->full_until_ns && tier_now_ns() < pt->full_until_ns))
		return;
	__atomic_store_n(&pt->ahead_busy, (int64_t)idx, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&pt->slab_lock);
	char path[PATH_MAX + 32];
	slab_path(pt, idx, path, sizeof(path));
	bool created;
	int fd = slab_open(pt, path, &created), rc = 0;
	if (fd < 0) {
		rc = fd;
		tier_log(pt->t, "cannot create slab %s ahead of need: %s", path, strerror(-rc));
	} else {
		rc = preallocate(pt, fd, slab_bytes(pt, idx), path);
	}
	if (rc && fd >= 0) {
		close(fd);
		if (created)
			slab_remove(pt, path);
	}
	pthread_mutex_lock(&pt->slab_lock);
	if (rc == 0) {
		__atomic_store_n(&pt->grown[idx], slab_bytes(pt, idx), __ATOMIC_RELEASE);
		__atomic_store_n(&pt->fds[idx], fd, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&pt->ahead_failed, (int64_t)idx, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&pt->ahead_busy, -1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&pt->slab_cond);
}

static void *ahead_thread(void *arg)
{
	struct posix_tier *pt = arg;
	pthread_mutex_lock(&pt->slab_lock);
	while (!pt->ahead_stop) {
		if (pt->ahead_want < 0) {
			pthread_cond_wait(&pt->slab_cond, &pt->slab_lock);
			continue;
		}
		uint64_t idx = (uint64_t)pt->ahead_want;
		__atomic_store_n(&pt->ahead_want, -1, __ATOMIC_RELAXED);
		make_ahead(pt, idx);
	}
	pthread_mutex_unlock(&pt->slab_lock);
	return NULL;
}

/* SLOT was just allocated: past the middle of its slab, have the next slab
 * made before an allocation needs it. Cheap until then: atomic loads. */
static void ask_ahead(struct posix_tier *pt, uint64_t slot)
{
	int64_t next = (int64_t)(slot / pt->slots_per_slab + 1);
	if (!pt->ahead_running || slot % pt->slots_per_slab < pt->slots_per_slab / 2 ||
	    (uint64_t)next >= pt->nslabs ||
	    __atomic_load_n(&pt->fds[next], __ATOMIC_ACQUIRE) >= 0 ||
	    __atomic_load_n(&pt->ahead_want, __ATOMIC_RELAXED) == next ||
	    __atomic_load_n(&pt->ahead_busy, __ATOMIC_ACQUIRE) == next ||
	    __atomic_load_n(&pt->ahead_failed, __ATOMIC_RELAXED) == next)
		return;
	pthread_mutex_lock(&pt->slab_lock);
	if (pt->fds[next] < 0 && pt->ahead_busy != next && pt->ahead_failed != next) {
		pt->ahead_want = next;
		pthread_cond_broadcast(&pt->slab_cond);
	}
	pthread_mutex_unlock(&pt->slab_lock);
}

static int posix_prepare_slot(struct tier *t, uint64_t slot, bool need_space)
{
	struct posix_tier *pt = t->be_priv;
	int rc = ensure_slab(pt, slot / pt->slots_per_slab, slot, need_space);
	if (rc == 0 && need_space)
		ask_ahead(pt, slot);
	return rc;
}

/* An aligned O_DIRECT read from fd: 1 if the file system takes it, 0 if it
 * refuses (EINVAL), -errno for any other failure. Needs no space. */
static int probe_read(struct posix_tier *pt, int fd, void *buf, const char *path)
{
	if (pread(fd, buf, 4096, 0) >= 0)
		return 1;
	int e = errno;
	if (e == EINVAL)
		return 0;
	tier_log(pt->t, "%s: probe read failed: %s", path, strerror(e));
	return -e;
}

/* Whether the directory accepts O_DIRECT: some file systems refuse the
 * open, others the first aligned write, both with EINVAL. 1 yes, 0 no,
 * -errno for any other failure. On a full disk (the probe file cannot be
 * made or written) an aligned read decides: a full disk must not stop a
 * mount whose slabs are all in place. */
static int probe_direct(struct posix_tier *pt)
{
	char path[PATH_MAX + 32];
	void *buf = NULL;
	if (posix_memalign(&buf, 4096, 4096))
		return -ENOMEM;
	memset(buf, 0, 4096);
	int rc = 1;
	snprintf(path, sizeof(path), "%s/%s", pt->dir, PROBE_NAME);
	int fd = open(path, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;
		if (e == EINVAL) {
			rc = 0;
		} else if (no_space(-e)) {
			/* check_info has made tier.info by now. */
			snprintf(path, sizeof(path), "%s/%s", pt->dir, INFO_NAME);
			fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
			if (fd >= 0) {
				rc = probe_read(pt, fd, buf, path);
				close(fd);
			} else if (errno == EINVAL) {
				rc = 0;
			} else {
				rc = -errno;
				tier_log(pt->t, "%s: cannot open: %s", path, strerror(-rc));
			}
		} else {
			tier_log(pt->t, "%s: cannot create: %s", path, strerror(e));
			rc = -e;
		}
		free(buf);
		return rc;
	}
	ssize_t n = pwrite(fd, buf, 4096, 0);
	if (n < 0 && no_space(-errno)) {
		rc = probe_read(pt, fd, buf, path);
	} else if (n < 0 && errno == EINVAL) {
		rc = 0;
	} else if (n != 4096) {
		rc = n < 0 ? -errno : -EIO;
		tier_log(pt->t, "%s: probe write failed: %s", path,
			 n < 0 ? strerror(-rc) : "short write");
	}
	free(buf);
	close(fd);
	if (unlink(path))
		tier_log(pt->t, "%s: cannot remove: %s", path, strerror(errno));
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
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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

/* Hand the SQEs queued in the ring to the kernel; false if some are left
 * there. liburing publishes them in the ring before io_uring_enter, and
 * there is no taking one back: if the kernel refuses now (-EAGAIN,
 * -EBUSY) or takes fewer, the rest go with the next submit and complete
 * through their CQEs. Completing such an I/O here as failed would
 * complete it twice, the second time on freed memory. So: retry a
 * little, then leave them queued. sq_lock held. */
static bool submit_ring(struct posix_tier *pt, const char *what)
{
	for (int tries = 1;; tries++) {
		int rc = io_uring_submit(&pt->ring);
		if (rc >= 0 && io_uring_sq_ready(&pt->ring) == 0)
			return true;
		if (tries >= 100) {
			tier_log(pt->t, "%s: io_uring_submit: %s; left queued for the next submit",
				 what, rc < 0 ? strerror(-rc) : "not all taken");
			return false;
		}
		if (rc != -EINTR)
			usleep(100);
	}
}

/* Queue the rest of io (io->result bytes already moved). sq_lock held. */
static int issue(struct posix_tier *pt, struct tier_io *io)
{
	uint64_t bs = pt->t->block_size;
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
		io_uring_prep_read(sqe, fd, buf, (unsigned)(io->len - done), off);
	else
		io_uring_prep_write(sqe, fd, buf, (unsigned)(io->len - done), off);
	io_uring_sqe_set_data(sqe, io);
	submit_ring(pt, io->op == TIER_OP_READ ? "read" : "write");
	return 0;
}

/* Ask the ring to wake the completion thread after wait_ns, when a cap
 * allows the next dispatch; if the timer is armed for later (the other
 * direction's cap), move it. sq_lock held. */
static void arm_timer(struct posix_tier *pt, uint64_t wait_ns)
{
	uint64_t due = tier_now_ns() + wait_ns;
	if (pt->timer_armed && due >= pt->timer_due_ns)
		return;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&pt->ring);
	if (!sqe) {
		/* Cannot happen: in-flight + timer + its update + stop < ring
		 * entries. The next submission or completion dispatches
		 * again. */
		tier_log(pt->t, "cannot arm the bandwidth timer: submission ring full");
		return;
	}
	struct __kernel_timespec *ts = pt->timer_armed ? &pt->timer_move_ts : &pt->timer_ts;
	ts->tv_sec = (long long)(wait_ns / 1000000000ULL);
	ts->tv_nsec = (long long)(wait_ns % 1000000000ULL);
	if (pt->timer_armed) {
		/* If it has just fired, the update fails (-ENOENT, ignored)
		 * and timer_fired dispatches anyway. */
		io_uring_prep_timeout_update(sqe, ts, TIMER_TOKEN, 0);
		io_uring_sqe_set_data64(sqe, TIMER_MOVE_TOKEN);
		if (submit_ring(pt, "bandwidth timer update"))
			pt->timer_due_ns = due;
		return;
	}
	io_uring_prep_timeout(sqe, ts, 0, 0);
	io_uring_sqe_set_data64(sqe, TIMER_TOKEN);
	/* Armed only once the kernel has it: a timer left in the ring would
	 * keep the next dispatch from arming one, and nothing would submit
	 * it while the cap holds every I/O back. */
	pt->timer_armed = submit_ring(pt, "bandwidth timer");
	pt->timer_due_ns = due;
}

/* Issue what the scheduler allows now. sq_lock held. Returns the I/Os that
 * could not be issued (linked through next, io->result = -errno): the
 * caller completes them once sq_lock is released, since completion
 * callbacks may submit again. */
static struct tier_io *dispatch(struct posix_tier *pt)
{
	struct tier_io *failed = NULL;
	for (;;) {
		uint64_t wait_ns = 0;
		struct tier_io *io = sched_pop(&pt->sched, tier_now_ns(), &wait_ns);
		if (!io) {
			if (wait_ns)
				arm_timer(pt, wait_ns);
			break;
		}
		int rc = issue(pt, io);
		if (rc) {
			sched_done(&pt->sched);
			io->result = rc;
			io->next = failed;
			failed = io;
		}
	}
	return failed;
}

static void complete_failed(struct tier_io *failed)
{
	while (failed) {
		struct tier_io *q = failed;
		failed = q->next;
		tier_io_complete(q, q->result);
	}
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
	int rc = ensure_slab(pt, io->slot / pt->slots_per_slab, io->slot, false);
	if (rc)
		return rc;
	io->result = 0; /* bytes moved so far, until completion */
	pthread_mutex_lock(&pt->sq_lock);
	sched_push(&pt->sched, io);
	struct tier_io *failed = dispatch(pt);
	pthread_mutex_unlock(&pt->sq_lock);
	/* Accepted: even a failure to issue (io or another one) is reported
	 * through done(). */
	complete_failed(failed);
	return 0;
}

/* io is done (err 0 or -errno): free its in-flight place, start queued
 * requests, then report. Completion callbacks run without sq_lock, so they
 * may submit again. */
static void finish(struct posix_tier *pt, struct tier_io *io, int err)
{
	pthread_mutex_lock(&pt->sq_lock);
	sched_done(&pt->sched);
	struct tier_io *failed = dispatch(pt);
	pthread_mutex_unlock(&pt->sq_lock);
	tier_io_complete(io, err);
	complete_failed(failed);
}

/* The cap's wait is over: dispatch what it held back. */
static void timer_fired(struct posix_tier *pt)
{
	pthread_mutex_lock(&pt->sq_lock);
	pt->timer_armed = false;
	struct tier_io *failed = dispatch(pt);
	pthread_mutex_unlock(&pt->sq_lock);
	complete_failed(failed);
}

static void handle_cqe(struct posix_tier *pt, struct tier_io *io, int res)
{
	struct tier *t = pt->t;
	const char *what = io->op == TIER_OP_READ ? "read" : "write";
	char path[PATH_MAX + 32];
	if (io->op == TIER_OP_WRITE)
		__atomic_store_n(&pt->written[io->slot / pt->slots_per_slab], true,
				 __ATOMIC_RELEASE);
	if (res == -EAGAIN || res == -EINTR || res > 0) {
		if (res > 0)
			io->result += res;
		if ((uint32_t)io->result == io->len) {
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
	tier_log_io_error(t, "%s: slot %" PRIu64 ": %s failed: %s", path, io->slot, what,
			  strerror(-res));
	finish(pt, io, res);
}

static void *completion_thread(void *arg)
{
	struct posix_tier *pt = arg;
	for (;;) {
		struct io_uring_cqe *cqe;
		/* Wake now and then to submit SQEs that submit_ring left in
		 * the ring: with nothing else in flight no other call would,
		 * and their waiters would wait for ever. Only where the kernel
		 * takes the timeout as an argument: otherwise liburing would
		 * take an SQE here, outside sq_lock. */
		struct __kernel_timespec idle = {.tv_nsec = 50 * 1000 * 1000};
		int rc = pt->ring.features & IORING_FEAT_EXT_ARG
			     ? io_uring_wait_cqe_timeout(&pt->ring, &cqe, &idle)
			     : io_uring_wait_cqe(&pt->ring, &cqe);
		if (rc == -ETIME) {
			pthread_mutex_lock(&pt->sq_lock);
			if (io_uring_sq_ready(&pt->ring))
				submit_ring(pt, "retry");
			pthread_mutex_unlock(&pt->sq_lock);
			continue;
		}
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
		if (ud == TIMER_TOKEN) {
			/* res is -ETIME: the timeout expired, as asked. */
			timer_fired(pt);
			continue;
		}
		if (ud == TIMER_MOVE_TOKEN)
			continue; /* the update's own result: moved, or too late */
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
	free(pt->grown);
	free(pt->written);
	if (pt->dirfd >= 0)
		close(pt->dirfd);
	if (pt->sync_ring_ok)
		io_uring_queue_exit(&pt->sync_ring);
	pthread_mutex_destroy(&pt->sync_lock);
	pthread_cond_destroy(&pt->slab_cond);
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
		/* The capacity may have grown since the slab was made. A disk
		 * too full to grow it is no reason to refuse the mount: the
		 * blocks it holds stay readable, and its free slots are tried
		 * again when allocated. */
		int rc = preallocate(pt, fd, slab_bytes(pt, i), path);
		if (no_space(rc)) {
			pt->grown[i] = grown_bytes(pt, fd, i);
			tier_log(pt->t,
				 "%s: no space to grow the slab to %" PRIu64
				 " bytes (%s); its %" PRIu64 " slots beyond the first %" PRIu64
				 " wait for space",
				 path, slab_bytes(pt, i), strerror(-rc),
				 (slab_bytes(pt, i) - pt->grown[i]) / pt->t->block_size,
				 pt->grown[i] / pt->t->block_size);
			continue;
		}
		if (rc)
			return rc;
		pt->grown[i] = slab_bytes(pt, i);
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
	pt->ahead_want = pt->ahead_busy = pt->ahead_failed = -1;
	pthread_mutex_init(&pt->slab_lock, NULL);
	pthread_cond_init(&pt->slab_cond, NULL);
	pthread_mutex_init(&pt->sq_lock, NULL);
	pthread_mutex_init(&pt->sync_lock, NULL);
	int rc;
	if (strlen(p->path) >= sizeof(pt->dir)) {
		tier_log(t, "path too long: %s", p->path);
		rc = -ENAMETOOLONG;
		goto fail;
	}
	snprintf(pt->dir, sizeof(pt->dir), "%s", p->path);
	if (mkdir(pt->dir, 0700) == 0) {
		/* Made here: its entry in its parent must survive a power
		 * loss as the slabs in it do (t_powercut). */
		if ((rc = tier_sync_dir(pt->dir))) {
			tier_log(t, "cannot sync the new directory %s: %s", pt->dir, strerror(-rc));
			goto fail;
		}
	} else if (errno != EEXIST) {
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
	/* Two daemons (with different metadata) on one tier would hand out the
	 * same slots and overwrite each other's blocks. Held until dirfd is
	 * closed, at tier_close or exit. */
	if (flock(pt->dirfd, LOCK_EX | LOCK_NB)) {
		rc = -errno;
		if (rc == -EWOULDBLOCK) {
			tier_log(t, "%s is in use by another tierfs", pt->dir);
			rc = -EBUSY;
			goto fail;
		}
		/* Some parallel file systems are mounted without flock. */
		if (rc != -ENOLCK && rc != -EOPNOTSUPP && rc != -ENOSYS) {
			tier_log(t, "%s: cannot lock: %s", pt->dir, strerror(-rc));
			goto fail;
		}
		tier_log(t, "%s: cannot lock (%s): nothing keeps another tierfs from using it",
			 pt->dir, strerror(-rc));
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
	pt->grown = calloc(pt->nslabs, sizeof(uint64_t));
	pt->written = calloc(pt->nslabs, sizeof(bool));
	if (!pt->fds || !pt->grown || !pt->written) {
		rc = -ENOMEM;
		goto fail;
	}
	for (uint64_t i = 0; i < pt->nslabs; i++)
		pt->fds[i] = -1;
	rc = open_existing_slabs(pt);
	if (rc)
		goto fail;

	struct sched_params sp = {
	    .limit = t->queue_depth,
	    .max_bandwidth = {t->max_bandwidth[TIER_OP_READ], t->max_bandwidth[TIER_OP_WRITE]},
	    .io_bytes = t->block_size,
	};
	rc = sched_init(&pt->sched, &sp);
	if (rc) {
		tier_log(t, "invalid scheduler parameters (queue depth %u)", t->queue_depth);
		goto fail;
	}
	/* Room for queue_depth I/Os, the cap's timer, its update and the stop NOP. */
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
	/* For `top -H` and perf, which cut names at 15 characters; a thread
	 * without one works the same. */
	char tname[16];
	snprintf(tname, sizeof(tname), "tierfs-io-%s", tier_name(t));
	(void)pthread_setname_np(pt->cq_thread, tname);
	/* Without it a new slab is made when first allocated, as before. */
	int e = pthread_create(&pt->ahead_thread, NULL, ahead_thread, pt);
	if (e) {
		tier_log(t, "cannot start the thread that makes slabs ahead: %s", strerror(e));
	} else {
		pt->ahead_running = true;
		snprintf(tname, sizeof(tname), "tierfs-sl-%s", tier_name(t));
		(void)pthread_setname_np(pt->ahead_thread, tname);
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
	if (pt->ahead_running) {
		pthread_mutex_lock(&pt->slab_lock);
		pt->ahead_stop = true;
		pthread_cond_broadcast(&pt->slab_cond);
		pthread_mutex_unlock(&pt->slab_lock);
		pthread_join(pt->ahead_thread, NULL);
	}
	pthread_mutex_lock(&pt->sq_lock);
	struct io_uring_sqe *sqe = io_uring_get_sqe(&pt->ring);
	if (sqe) {
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, STOP_TOKEN);
		submit_ring(pt, "stop");
	}
	pthread_mutex_unlock(&pt->sq_lock);
	if (sqe)
		pthread_join(pt->cq_thread, NULL);
	else
		tier_log(t, "cannot stop the completion thread: ring full");
	io_uring_queue_exit(&pt->ring);
	free_pt(pt);
}

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
		slab_path(pt, i, path, sizeof(path));
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
	slab_path(pt, idx, path, sizeof(path));
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

static int posix_sync(struct tier *t)
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

const struct tier_backend tier_posix_backend = {
    .kind_name = "posix",
    .open = posix_open,
    .close = posix_close,
    .submit = posix_submit,
    .sync = posix_sync,
    .prepare_slot = posix_prepare_slot,
};
