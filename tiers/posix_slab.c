/*
 * tiers/posix_slab.c — the slab files of a posix tier: their names, opening
 * or creating them, preallocating them (whole, or as far as a full disk
 * allows), and the thread that makes the next one ahead of need.
 *
 * Slots are handed out in order (bitmap_alloc's hint), so slabs fill one
 * after the other. Once the allocations reach half of a slab, a thread of
 * the tier's own makes the next one: the caller of tier_alloc holds the
 * file system's lock, and preallocating a slab (1 GiB by default) there
 * would stall every request for as long as fallocate takes: long where the
 * file system zeroes the pages (tmpfs), or on a parallel file system.
 */
#include "tiers/posix_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* How long a slab that could not grow for lack of space is not tried
 * again. */
#define FULL_RETRY_NS (1000ULL * 1000 * 1000)
/* A slab the disk has no room for grows this much at a time, so that the
 * last free space short of a slab is used too: the tier's capacity counts
 * it, and statfs shows it free. */
#define PARTIAL_GROW_BYTES (16ULL << 20)

void posix_slab_path(const struct posix_tier *pt, uint64_t idx, char *buf, size_t len)
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
	return n * pt->t->slot_size;
}

static int open_flags(const struct posix_tier *pt)
{
	return O_RDWR | O_CLOEXEC | (pt->direct ? O_DIRECT : 0);
}

bool posix_no_space(int err)
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
		if (!posix_no_space(-e))
			tier_log(pt->t, "%s: cannot preallocate %" PRIu64 " bytes: %s", path, len,
				 strerror(e));
		return -e;
	}
	if (ftruncate(fd, (off_t)len)) {
		e = errno;
		if (!posix_no_space(-e))
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
	uint64_t n = (uint64_t)st.st_size / pt->t->slot_size * pt->t->slot_size;
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
int posix_ensure_slab(struct posix_tier *pt, uint64_t idx, uint64_t slot, bool need_space)
{
	uint64_t need = (slot - idx * pt->slots_per_slab + 1) * pt->t->slot_size;
	if (__atomic_load_n(&pt->fds[idx], __ATOMIC_ACQUIRE) >= 0 &&
	    (!need_space || __atomic_load_n(&pt->grown[idx], __ATOMIC_ACQUIRE) >= need))
		return 0;
	int rc = 0;
	char path[PATH_MAX + 32];
	posix_slab_path(pt, idx, path, sizeof(path));
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
	} else if (posix_no_space(rc)) {
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
	} else if (posix_no_space(rc)) {
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
	posix_slab_path(pt, idx, path, sizeof(path));
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

void *posix_ahead_thread(void *arg)
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

int posix_prepare_slot(struct tier *t, uint64_t slot, bool need_space)
{
	struct posix_tier *pt = t->be_priv;
	int rc = posix_ensure_slab(pt, slot / pt->slots_per_slab, slot, need_space);
	if (rc == 0 && need_space)
		ask_ahead(pt, slot);
	return rc;
}

int posix_open_existing_slabs(struct posix_tier *pt)
{
	for (uint64_t i = 0; i < pt->nslabs; i++) {
		char path[PATH_MAX + 32];
		posix_slab_path(pt, i, path, sizeof(path));
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
		if (posix_no_space(rc)) {
			pt->grown[i] = grown_bytes(pt, fd, i);
			tier_log(pt->t,
				 "%s: no space to grow the slab to %" PRIu64
				 " bytes (%s); its %" PRIu64 " slots beyond the first %" PRIu64
				 " wait for space",
				 path, slab_bytes(pt, i), strerror(-rc),
				 (slab_bytes(pt, i) - pt->grown[i]) / pt->t->slot_size,
				 pt->grown[i] / pt->t->slot_size);
			continue;
		}
		if (rc)
			return rc;
		pt->grown[i] = slab_bytes(pt, i);
	}
	return 0;
}
