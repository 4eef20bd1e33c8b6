/*
 * tiers/posix.c — the tier on a local directory (NVMe, or a parallel file
 * system mount): open and close, the layout record, the O_DIRECT probe and
 * the backend's table. Blocks live in a few large preallocated slab files
 * (slab-00000.dat, ...) rather than one file per block: PFS metadata servers
 * and directory lookups suffer from millions of small files, and a
 * preallocated slab never allocates extents on the write path.
 *
 * A tier.info file records the layout (block and slab size, and the slot
 * size: a page more than a block where the tier encrypts) so a remount
 * with a different one is refused instead of reading garbage. Turning
 * encryption on or off changes the slot size, so a tier keeps the setting
 * it was made with; compression may change at any remount, as each
 * block's frame says how it was stored.
 *
 * The slab files are posix_slab.c's, the I/O path posix_io.c's, and the
 * syncs posix_sync.c's; posix_int.h holds the state they share.
 */
#include "tiers/posix_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_SLAB_SIZE (1ULL << 30)
#define INFO_NAME	  "tier.info"
#define PROBE_NAME	  ".odirect-probe"

/* Whether NAME is one of the files a tier keeps in its directory: a slab
 * (slab-NNNNN.dat, as posix_slab_path writes it, five digits or more) or the
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
		} else if (posix_no_space(-e)) {
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
	if (n < 0 && posix_no_space(-errno)) {
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
		uint64_t bs = 0, ss = 0, slot = 0;
		char line[128];
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, "block_size=%" SCNu64, &bs) == 1)
				continue;
			if (sscanf(line, "slot_size=%" SCNu64, &slot) == 1)
				continue;
			(void)sscanf(line, "slab_size=%" SCNu64, &ss);
		}
		if (!slot)
			slot = bs; /* made before slot sizes were recorded */
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
		if (slot != t->slot_size) {
			tier_log(t,
				 "%s was formatted with encrypt = %s (slots of %" PRIu64
				 " bytes), the config says encrypt = %s: keep the setting the "
				 "tier was made with, or use a new directory",
				 pt->dir, slot > bs ? "aes-256-gcm" : "none", slot,
				 t->slot_size > t->block_size ? "aes-256-gcm" : "none");
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
	char text[160];
	int n = snprintf(text, sizeof(text),
			 "block_size=%" PRIu32 "\nslab_size=%" PRIu64 "\nslot_size=%" PRIu32 "\n",
			 t->block_size, ss, t->slot_size);
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
		 * loss as the slabs in it do. */
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
	rc = posix_open_existing_slabs(pt);
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
	rc = -pthread_create(&pt->cq_thread, NULL, posix_completion_thread, pt);
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
	/* Without it a new slab is made when first allocated. */
	int e = pthread_create(&pt->ahead_thread, NULL, posix_ahead_thread, pt);
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
		posix_submit_ring(pt, "stop");
	}
	pthread_mutex_unlock(&pt->sq_lock);
	if (sqe)
		pthread_join(pt->cq_thread, NULL);
	else
		tier_log(t, "cannot stop the completion thread: ring full");
	io_uring_queue_exit(&pt->ring);
	free_pt(pt);
}

const struct tier_backend tier_posix_backend = {
    .kind_name = "posix",
    .open = posix_open,
    .close = posix_close,
    .submit = posix_submit,
    .sync = posix_sync,
    .prepare_slot = posix_prepare_slot,
};
