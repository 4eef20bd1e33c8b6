/*
 * powerfs: a disk that loses power, for t_powercut. A FUSE passthrough
 * (libfuse3 high-level API) onto a backing directory that behaves like a
 * disk with a volatile write cache: a write reaches the backing file at
 * once, so reads see it, but powerfs keeps what it overwrote (the
 * pre-image, per 4 KiB page) until an fsync or fdatasync of that file, or
 * an O_SYNC/O_DSYNC write, makes it durable. At unmount the power goes:
 * every write not made durable so far is undone (its pre-image written
 * back, the file cut to its last durable size), or, with POWERFS_KEEP=P,
 * each page is kept with probability P% and undone otherwise, as a disk
 * may persist any subset of its cache in any order.
 *
 * The model is per file, as POSIX promises: an fsync of one file makes
 * nothing durable in another, even on the same disk. A file or directory
 * made through powerfs is durable only once its parent directory is
 * fsync'd: at the cut, those that are not are removed (a directory with
 * all it holds). A rename carries that state to the new name. Unlinks,
 * rmdirs, renames of durable names and truncates that shrink count as
 * durable at once, as with a journalling file system that commits them
 * before any later fsync returns.
 *
 *   powerfs BACKING MOUNTPOINT [-f] [fuse options]
 *   POWERFS_KEEP  percent of unsynced pages that survive the cut (0)
 *   POWERFS_SEED  seed of the choice (1)
 *   POWERFS_FSYNC_MS  milliseconds each fsync takes before it makes the
 *                 file durable (0), as a flush to remote storage does;
 *                 fsyncs of different files wait side by side
 *   POWERFS_FSYNC_FAIL  a path: while it exists, an fsync of a file returns
 *                 EIO and makes nothing durable
 *
 * At the cut it prints to stderr a line per file with unsynced writes, and
 * a summary:
 *   powerfs: unsynced: PATH: L pages lost, size S of S'
 *   powerfs: not durable: PATH (made, its directory never fsync'd)
 *   powerfs: power cut: F files, U unsynced pages: L lost, K kept
 *   powerfs: fsyncs: N, at most M at once
 *
 * Locking: one mutex (`lock`) guards the file table and is held across
 * each write, so a page's pre-image is read before any write to it lands.
 * Not fast; a test stand-in.
 */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <fuse.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "tests/passthru.h"

#define PG 4096u

static unsigned keep_pct;
static unsigned fsync_ms;
static const char *fsync_fail;
/* fsyncs so far, in flight now and at most at once. Atomic. */
static unsigned long fsyncs;
static unsigned fsyncs_inflight, fsyncs_max;
static unsigned long long seed = 1;

/* Pre-image markers that need no copy. */
static unsigned char zero_pre[1];   /* the page held zeros */
static unsigned char beyond_pre[1]; /* the page lay past the durable size */

struct page {
	uint64_t key; /* page index + 1; 0: empty slot */
	unsigned char *pre;
};

/* One backing file with writes not yet durable. Guarded by `lock`. */
struct vfile {
	dev_t dev;
	ino_t ino;
	int fd;		     /* our own description, to undo writes through at the cut */
	char path[PATH_MAX]; /* where it was when first written, for the log */
	off_t synced;
	struct page *pages; /* open addressing, cap a power of two */
	size_t npages, cap;
	struct vfile *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct vfile *files;

/* A name made since its parent's last fsync, newest first. Under `lock`. */
struct newname {
	char path[PATH_MAX]; /* FUSE path, "/a/b" */
	bool dir;
	struct newname *next;
};
static struct newname *newnames;

/* Whether PATH is BASE or lies below it. */
static bool under(const char *path, const char *base)
{
	size_t n = strlen(base);
	return !strncmp(path, base, n) && (path[n] == 0 || path[n] == '/');
}

static void name_made(const char *path, bool dir)
{
	struct newname *nn = calloc(1, sizeof(*nn));
	if (!nn)
		return; /* out of memory: counts as durable */
	snprintf(nn->path, sizeof(nn->path), "%s", path);
	nn->dir = dir;
	pthread_mutex_lock(&lock);
	nn->next = newnames;
	newnames = nn;
	pthread_mutex_unlock(&lock);
}

/* Forget the names that MATCH(name, ARG) says are durable now, or gone. */
static void names_forget(bool (*match)(const char *name, const char *arg), const char *arg)
{
	pthread_mutex_lock(&lock);
	for (struct newname **pp = &newnames; *pp;) {
		struct newname *nn = *pp;
		if (match(nn->path, arg)) {
			*pp = nn->next;
			free(nn);
		} else {
			pp = &nn->next;
		}
	}
	pthread_mutex_unlock(&lock);
}

/* NAME's parent is the directory ARG. */
static bool in_dir(const char *name, const char *arg)
{
	const char *slash = strrchr(name, '/');
	size_t n = slash ? (size_t)(slash - name) : 0;
	if (n == 0)
		return !strcmp(arg, "/");
	return strlen(arg) == n && !strncmp(name, arg, n);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	if (remove(p))
		fprintf(stderr, "powerfs: remove %s at the cut: %m\n", p);
	return 0;
}

/* The cut, for names: remove every one not durable. Lock held. */
static void names_cut(void)
{
	while (newnames) {
		struct newname *nn = newnames;
		newnames = nn->next;
		char p[PATH_MAX];
		if (!pt_full(p, nn->path)) {
			fprintf(stderr,
				"powerfs: not durable: %s (made, its directory never fsync'd)\n",
				nn->path);
			if (nn->dir)
				nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
			else if (unlink(p) && errno != ENOENT)
				fprintf(stderr, "powerfs: unlink %s at the cut: %m\n", p);
		}
		free(nn);
	}
}

static struct page *page_slot(struct vfile *v, uint64_t idx)
{
	size_t mask = v->cap - 1, h = (size_t)(idx * 0x9E3779B97F4A7C15ull) & mask;
	while (v->pages[h].key && v->pages[h].key != idx + 1)
		h = (h + 1) & mask;
	return &v->pages[h];
}

static void pre_free(unsigned char *pre)
{
	if (pre != zero_pre && pre != beyond_pre)
		free(pre);
}

static int page_grow(struct vfile *v)
{
	size_t ncap = v->cap ? v->cap * 2 : 1024;
	struct page *old = v->pages;
	size_t ocap = v->cap;
	if (!(v->pages = calloc(ncap, sizeof(*v->pages)))) {
		v->pages = old;
		return -ENOMEM;
	}
	v->cap = ncap;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].key)
			*page_slot(v, old[i].key - 1) = old[i];
	free(old);
	return 0;
}

/* Forget every pre-image of pages from FIRST on (all: 0), as a sync or a
 * shrinking truncate makes them moot. Rehashes what stays. */
static void pages_drop(struct vfile *v, uint64_t first)
{
	struct page *old = v->pages;
	size_t ocap = v->cap;
	v->pages = NULL;
	v->cap = v->npages = 0;
	for (size_t i = 0; i < ocap; i++) {
		if (!old[i].key)
			continue;
		if (old[i].key - 1 < first) {
			if ((v->npages + 1) * 2 > v->cap && page_grow(v)) {
				pre_free(old[i].pre); /* out of memory: treat as durable */
				continue;
			}
			*page_slot(v, old[i].key - 1) = old[i];
			v->npages++;
		} else {
			pre_free(old[i].pre);
		}
	}
	free(old);
}

static struct vfile *vfile_find(const struct stat *st)
{
	for (struct vfile *v = files; v; v = v->next)
		if (v->dev == st->st_dev && v->ino == st->st_ino)
			return v;
	return NULL;
}

/* The tracked state of the file open as FD; created on first need. */
static int vfile_get(int fd, bool create, struct vfile **out, struct stat *st)
{
	*out = NULL;
	if (fstat(fd, st))
		return -errno;
	struct vfile *v = vfile_find(st);
	if (v || !create) {
		*out = v;
		return 0;
	}
	if (!(v = calloc(1, sizeof(*v))))
		return -ENOMEM;
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	/* Not a dup: the caller's description may have O_APPEND. */
	if ((v->fd = open(p, O_RDWR | O_CLOEXEC)) < 0) {
		int e = errno;
		free(v);
		return -e;
	}
	ssize_t n = readlink(p, v->path, sizeof(v->path) - 1);
	v->path[n > 0 ? n : 0] = 0;
	v->dev = st->st_dev;
	v->ino = st->st_ino;
	v->synced = st->st_size; /* what was there before we saw it is durable */
	v->next = files;
	files = v;
	*out = v;
	return 0;
}

/* Save the pre-image of every page of [OFF, OFF+LEN) not saved since the
 * file's last sync. Lock held. */
static int track(int fd, off_t off, size_t len)
{
	struct vfile *v;
	struct stat st;
	int rc = vfile_get(fd, true, &v, &st);
	if (rc || !len)
		return rc;
	uint64_t first = (uint64_t)off / PG, last = ((uint64_t)off + len - 1) / PG;
	size_t span = (size_t)(last - first + 1) * PG;
	unsigned char *old = malloc(span);
	if (!old)
		return -ENOMEM;
	ssize_t n = pread(v->fd, old, span, (off_t)(first * PG));
	if (n < 0) {
		rc = -errno;
		free(old);
		return rc;
	}
	memset(old + n, 0, span - (size_t)n);
	for (uint64_t p = first; p <= last; p++) {
		if ((v->npages + 1) * 2 > v->cap && (rc = page_grow(v)))
			break;
		struct page *s = page_slot(v, p);
		if (s->key)
			continue;
		unsigned char *src = old + (p - first) * PG, *pre;
		if ((off_t)(p * PG) >= v->synced) {
			pre = beyond_pre;
		} else if (src[0] == 0 && !memcmp(src, src + 1, PG - 1)) {
			pre = zero_pre;
		} else if ((pre = malloc(PG))) {
			memcpy(pre, src, PG);
		} else {
			rc = -ENOMEM;
			break;
		}
		s->key = p + 1;
		s->pre = pre;
		v->npages++;
	}
	free(old);
	return rc;
}

/* FD's file is durable as it is now. Lock held. */
static int make_durable(int fd)
{
	struct vfile *v;
	struct stat st;
	int rc = vfile_get(fd, false, &v, &st);
	if (rc || !v)
		return rc;
	pages_drop(v, 0);
	v->synced = st.st_size;
	return 0;
}

static unsigned long long rnd(void)
{
	seed ^= seed << 13;
	seed ^= seed >> 7;
	seed ^= seed << 17;
	return seed;
}

/* The power goes: undo what the cache would lose. */
static void power_cut(void)
{
	static const unsigned char zeros[PG];
	size_t nf = 0, total = 0, lost = 0, kept = 0;
	pthread_mutex_lock(&lock);
	names_cut(); /* first: files it removes have nothing left to undo */
	for (struct vfile *v = files; v; v = v->next) {
		struct stat st;
		if (fstat(v->fd, &st)) {
			fprintf(stderr, "powerfs: fstat at the cut: %m\n");
			continue;
		}
		if (st.st_nlink == 0)
			continue; /* removed: nothing left to undo */
		/* A grown size is one more cached write. */
		off_t size = st.st_size;
		if (size > v->synced && rnd() % 100 >= keep_pct)
			size = v->synced;
		if (!v->npages && size == st.st_size)
			continue;
		nf++;
		size_t lost0 = lost;
		for (size_t i = 0; i < v->cap; i++) {
			struct page *s = &v->pages[i];
			if (!s->key)
				continue;
			total++;
			if (rnd() % 100 < keep_pct) {
				kept++;
				continue;
			}
			lost++;
			off_t at = (off_t)((s->key - 1) * PG);
			if (at >= size)
				continue;
			size_t n = size - at < (off_t)PG ? (size_t)(size - at) : PG;
			const unsigned char *src =
			    s->pre == zero_pre || s->pre == beyond_pre ? zeros : s->pre;
			if (pwrite(v->fd, src, n, at) != (ssize_t)n)
				fprintf(stderr, "powerfs: undo at %lld: %m\n", (long long)at);
		}
		if (size != st.st_size && ftruncate(v->fd, size))
			fprintf(stderr, "powerfs: truncate at the cut: %m\n");
		fprintf(stderr, "powerfs: unsynced: %s: %zu pages lost, size %lld of %lld\n",
			v->path, lost - lost0, (long long)size, (long long)st.st_size);
	}
	fprintf(stderr, "powerfs: power cut: %zu files, %zu unsynced pages: %zu lost, %zu kept\n",
		nf, total, lost, kept);
	fprintf(stderr, "powerfs: fsyncs: %lu, at most %u at once\n",
		__atomic_load_n(&fsyncs, __ATOMIC_RELAXED),
		__atomic_load_n(&fsyncs_max, __ATOMIC_RELAXED));
	while (files) {
		struct vfile *v = files;
		files = v->next;
		pages_drop(v, 0);
		close(v->fd);
		free(v);
	}
	pthread_mutex_unlock(&lock);
}

static void *p_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->use_ino = 1;
	cfg->hard_remove = 1;
	cfg->nullpath_ok = 0; /* fsyncdir needs the directory's path */
	/* The kernel must not answer from attributes older than our writes. */
	cfg->attr_timeout = 0;
	cfg->entry_timeout = 0;
	cfg->negative_timeout = 0;
	return NULL;
}

static void p_destroy(void *priv)
{
	(void)priv;
	power_cut();
}

static int p_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	if (fi)
		return fstat((int)fi->fh, st) ? -errno : 0;
	char p[PATH_MAX];
	int r = pt_full(p, path);
	return r ? r : lstat(p, st) ? -errno : 0;
}

static int p_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		     struct fuse_file_info *fi, enum fuse_readdir_flags fl)
{
	(void)off, (void)fi, (void)fl;
	return pt_readdir(path, buf, fill);
}

static int p_rename(const char *from, const char *to, unsigned int flags)
{
	char a[PATH_MAX], b[PATH_MAX];
	int r = pt_full(a, from);
	if (!r)
		r = pt_full(b, to);
	if (r)
		return r;
	if (renameat2(AT_FDCWD, a, AT_FDCWD, b, flags))
		return -errno;
	if (flags & RENAME_EXCHANGE)
		return 0; /* both names stay as they were: durable or not */
	/* What TO held is gone; what FROM named is at TO, as durable as it
	 * was. */
	names_forget(under, to);
	pthread_mutex_lock(&lock);
	size_t n = strlen(from);
	for (struct newname *nn = newnames; nn; nn = nn->next)
		if (under(nn->path, from)) {
			char rest[PATH_MAX];
			snprintf(rest, sizeof(rest), "%s", nn->path + n);
			snprintf(nn->path, sizeof(nn->path), "%s%s", to, rest);
		}
	pthread_mutex_unlock(&lock);
	return 0;
}

static int p_mkdir(const char *path, mode_t mode)
{
	int rc = pt_mkdir(path, mode);
	if (!rc)
		name_made(path, true);
	return rc;
}

static int p_unlink(const char *path)
{
	int rc = pt_unlink(path);
	if (!rc)
		names_forget(under, path);
	return rc;
}

static int p_rmdir(const char *path)
{
	int rc = pt_rmdir(path);
	if (!rc)
		names_forget(under, path);
	return rc;
}

static int p_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	if (fi)
		return fchmod((int)fi->fh, mode) ? -errno : 0;
	char p[PATH_MAX];
	int r = pt_full(p, path);
	return r ? r : chmod(p, mode) ? -errno : 0;
}

static int p_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	if (fi)
		return fchown((int)fi->fh, uid, gid) ? -errno : 0;
	char p[PATH_MAX];
	int r = pt_full(p, path);
	return r ? r : lchown(p, uid, gid) ? -errno : 0;
}

static int p_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	if (fi)
		return futimens((int)fi->fh, tv) ? -errno : 0;
	char p[PATH_MAX];
	int r = pt_full(p, path);
	return r ? r : utimensat(AT_FDCWD, p, tv, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int p_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	int fd = fi ? (int)fi->fh : -1, rc = 0;
	char p[PATH_MAX];
	if (fd < 0) {
		if ((rc = pt_full(p, path)) || (fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
			return rc ? rc : -errno;
	}
	pthread_mutex_lock(&lock);
	struct vfile *v;
	struct stat st;
	rc = vfile_get(fd, false, &v, &st);
	if (!rc && v && size < v->synced) {
		/* Shrinking is durable at once (see the top); what it cut
		 * needs no undoing. */
		pages_drop(v, ((uint64_t)size + PG - 1) / PG);
		v->synced = size;
	}
	if (!rc && ftruncate(fd, size))
		rc = -errno;
	pthread_mutex_unlock(&lock);
	if (!fi)
		close(fd);
	return rc;
}

static int p_open(const char *path, struct fuse_file_info *fi)
{
	return pt_open(path, fi, 0, 0);
}

static int p_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	char p[PATH_MAX];
	struct stat st;
	int rc = pt_full(p, path);
	if (rc)
		return rc;
	bool existed = lstat(p, &st) == 0;
	rc = pt_open(path, fi, O_CREAT, mode);
	if (!rc && !existed)
		name_made(path, false);
	return rc;
}

static int p_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)path;
	ssize_t r = pread((int)fi->fh, buf, size, off);
	return r < 0 ? -errno : (int)r;
}

static int p_write(const char *path, const char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	(void)path;
	int fd = (int)fi->fh;
	pthread_mutex_lock(&lock);
	int rc = track(fd, off, size);
	ssize_t r = rc ? rc : pwrite(fd, buf, size, off);
	if (r < 0 && !rc)
		r = -errno;
	if (r >= 0 && (fi->flags & (O_SYNC | O_DSYNC)) && (rc = make_durable(fd)))
		r = rc;
	pthread_mutex_unlock(&lock);
	return (int)r;
}

static int p_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path, (void)datasync;
	__atomic_add_fetch(&fsyncs, 1, __ATOMIC_RELAXED);
	unsigned now = __atomic_add_fetch(&fsyncs_inflight, 1, __ATOMIC_RELAXED);
	unsigned max = __atomic_load_n(&fsyncs_max, __ATOMIC_RELAXED);
	while (now > max && !__atomic_compare_exchange_n(&fsyncs_max, &max, now, false,
							 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	/* Outside the lock: the flushes of two files overlap. */
	if (fsync_ms)
		usleep(fsync_ms * 1000u);
	int rc = -EIO;
	if (!fsync_fail || access(fsync_fail, F_OK)) {
		pthread_mutex_lock(&lock);
		rc = make_durable((int)fi->fh);
		pthread_mutex_unlock(&lock);
	}
	__atomic_sub_fetch(&fsyncs_inflight, 1, __ATOMIC_RELAXED);
	return rc;
}

static int p_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)datasync, (void)fi;
	if (path)
		names_forget(in_dir, path);
	return 0;
}

static int p_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	(void)path;
	int fd = (int)fi->fh, rc = 0;
	pthread_mutex_lock(&lock);
	/* Allocating changes no data; punching or zeroing does. */
	if (mode & ~FALLOC_FL_KEEP_SIZE)
		rc = track(fd, off, (size_t)len);
	if (!rc && fallocate(fd, mode, off, len))
		rc = -errno;
	pthread_mutex_unlock(&lock);
	return rc;
}

static int p_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	return close((int)fi->fh) ? -errno : 0;
}

static const struct fuse_operations ops = {
    .init = p_init,
    .destroy = p_destroy,
    .getattr = p_getattr,
    .readdir = p_readdir,
    .mkdir = p_mkdir,
    .unlink = p_unlink,
    .rmdir = p_rmdir,
    .rename = p_rename,
    .chmod = p_chmod,
    .chown = p_chown,
    .utimens = p_utimens,
    .truncate = p_truncate,
    .open = p_open,
    .create = p_create,
    .read = p_read,
    .write = p_write,
    .fsync = p_fsync,
    .fsyncdir = p_fsyncdir,
    .fallocate = p_fallocate,
    .release = p_release,
    .statfs = pt_statfs,
};

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: powerfs BACKING MOUNTPOINT [-f] [fuse options]\n");
		return 2;
	}
	if (!realpath(argv[1], pt_backing)) {
		fprintf(stderr, "powerfs: %s: %m\n", argv[1]);
		return 1;
	}
	const char *k = getenv("POWERFS_KEEP"), *s = getenv("POWERFS_SEED");
	if (k) {
		char *end;
		unsigned long v = strtoul(k, &end, 10);
		if (*end || v > 100) {
			fprintf(stderr, "powerfs: POWERFS_KEEP=%s: want a percent, 0-100\n", k);
			return 2;
		}
		keep_pct = (unsigned)v;
	}
	if (s && !(seed = strtoull(s, NULL, 10)))
		seed = 1;
	fsync_fail = getenv("POWERFS_FSYNC_FAIL");
	const char *fm = getenv("POWERFS_FSYNC_MS");
	if (fm) {
		char *end;
		unsigned long v = strtoul(fm, &end, 10);
		if (*end || v > 60000) {
			fprintf(stderr,
				"powerfs: POWERFS_FSYNC_MS=%s: want milliseconds, 0-60000\n", fm);
			return 2;
		}
		fsync_ms = (unsigned)v;
	}
	/* fuse_main wants argv[0] MOUNTPOINT [options]: drop BACKING */
	argv[1] = argv[0];
	return fuse_main(argc - 1, argv + 1, &ops, NULL);
}
