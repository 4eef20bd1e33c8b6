/*
 * The plain passthrough operations that tests/bench/passfs.c (the bench's
 * stand-in daemon) and tests/integration/powerfs.c (t_powercut's disk)
 * share: each maps a FUSE path onto pt_backing, the directory it serves,
 * and answers with 0 or -errno as libfuse's high-level API wants. Header
 * only, static inline, so each program takes what it uses.
 */
#ifndef TIERFS_TESTS_PASSTHRU_H
#define TIERFS_TESTS_PASSTHRU_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* The backing directory; the program sets it (realpath) before fuse_main. */
static char pt_backing[PATH_MAX];

static inline int pt_full(char *out, const char *path)
{
	int r = snprintf(out, PATH_MAX, "%s%s", pt_backing, path);
	return r < 0 || r >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* Fill BUF with the entries of the backing directory of PATH. */
static inline int pt_readdir(const char *path, void *buf, fuse_fill_dir_t fill)
{
	char p[PATH_MAX];
	int r = pt_full(p, path);
	if (r)
		return r;
	DIR *d = opendir(p);
	if (!d)
		return -errno;
	struct dirent *e;
	while ((e = readdir(d)))
		fill(buf, e->d_name, NULL, 0, 0);
	closedir(d);
	return 0;
}

static inline int pt_mkdir(const char *path, mode_t mode)
{
	char p[PATH_MAX];
	int r = pt_full(p, path);
	return r ? r : mkdir(p, mode) ? -errno : 0;
}

static inline int pt_unlink(const char *path)
{
	char p[PATH_MAX];
	int r = pt_full(p, path);
	return r ? r : unlink(p) ? -errno : 0;
}

static inline int pt_rmdir(const char *path)
{
	char p[PATH_MAX];
	int r = pt_full(p, path);
	return r ? r : rmdir(p) ? -errno : 0;
}

/* Open (with EXTRA flags, e.g. O_CREAT) the backing file of PATH into
 * fi->fh. The backing fd is buffered: FUSE hands us unaligned buffers, so
 * O_DIRECT becomes direct_io towards the kernel instead. */
static inline int pt_open(const char *path, struct fuse_file_info *fi, int extra, mode_t mode)
{
	char p[PATH_MAX];
	int r = pt_full(p, path);
	if (r)
		return r;
	int fd = open(p, (fi->flags & ~O_DIRECT) | extra, mode);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	if (fi->flags & O_DIRECT)
		fi->direct_io = 1;
	return 0;
}

static inline int pt_statfs(const char *path, struct statvfs *st)
{
	(void)path;
	return statvfs(pt_backing, st) ? -errno : 0;
}

#endif
