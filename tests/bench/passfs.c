/*
 * passfs: a stand-in for the tierfs daemon, for testing scripts/bench.sh's
 * mounted phases before (or without) the real daemon: a plain FUSE
 * passthrough (libfuse3 high-level API) onto the directory of the config's
 * first `path =` key, with the same command line (`passfs CONFIG MNT -f`)
 * and a read-only `MNT/.tierfs/stats` exposing byte counters in the
 * "[section] / key: value" form bench_report.py parses. It has no cache and
 * no policy: its numbers mean nothing about tierfs. Not for production.
 *
 *   TIERFS_BIN=build/tests/bench/passfs scripts/bench.sh
 */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/passthru.h"

static _Atomic unsigned long long bytes_read, bytes_written;

#define STATS_PATH "/.tierfs/stats"

static int stats_text(char *buf, size_t len)
{
	return snprintf(buf, len,
			"# passfs (bench stand-in, not tierfs)\n[tier nvme0]\nbytes_read: %llu\n"
			"bytes_written: %llu\n",
			(unsigned long long)bytes_read, (unsigned long long)bytes_written);
}

static int p_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	char p[PATH_MAX];
	if (!strcmp(path, "/.tierfs")) {
		memset(st, 0, sizeof(*st));
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	}
	if (!strcmp(path, STATS_PATH)) {
		char b[512];
		memset(st, 0, sizeof(*st));
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = stats_text(b, sizeof(b));
		return 0;
	}
	int r = pt_full(p, path);
	if (r)
		return r;
	return lstat(p, st) ? -errno : 0;
}

static int p_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		     struct fuse_file_info *fi, enum fuse_readdir_flags fl)
{
	(void)off, (void)fi, (void)fl;
	if (!strcmp(path, "/.tierfs")) {
		fill(buf, ".", NULL, 0, 0);
		fill(buf, "..", NULL, 0, 0);
		fill(buf, "stats", NULL, 0, 0);
		return 0;
	}
	int r = pt_readdir(path, buf, fill);
	if (r)
		return r;
	if (!strcmp(path, "/"))
		fill(buf, ".tierfs", NULL, 0, 0);
	return 0;
}

static int p_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	if (fi)
		return ftruncate((int)fi->fh, size) ? -errno : 0;
	char p[PATH_MAX];
	int r = pt_full(p, path);
	return r ? r : truncate(p, size) ? -errno : 0;
}

static int open_common(const char *path, struct fuse_file_info *fi, int extra, mode_t mode)
{
	if (!strcmp(path, STATS_PATH)) {
		if ((fi->flags & O_ACCMODE) != O_RDONLY)
			return -EACCES;
		fi->fh = (uint64_t)-1;
		fi->direct_io = 1;
		return 0;
	}
	return pt_open(path, fi, extra, mode);
}

static int p_open(const char *path, struct fuse_file_info *fi)
{
	return open_common(path, fi, 0, 0);
}

static int p_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	return open_common(path, fi, O_CREAT, mode);
}

static int p_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)path;
	if (fi->fh == (uint64_t)-1) {
		char b[512];
		int n = stats_text(b, sizeof(b));
		if (off >= n)
			return 0;
		size_t k = (size_t)(n - off) < size ? (size_t)(n - off) : size;
		memcpy(buf, b + off, k);
		return (int)k;
	}
	ssize_t r = pread((int)fi->fh, buf, size, off);
	if (r < 0)
		return -errno;
	bytes_read += (unsigned long long)r;
	return (int)r;
}

static int p_write(const char *path, const char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	(void)path;
	ssize_t r = pwrite((int)fi->fh, buf, size, off);
	if (r < 0)
		return -errno;
	bytes_written += (unsigned long long)r;
	return (int)r;
}

static int p_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	if (fi->fh != (uint64_t)-1 && close((int)fi->fh))
		return -errno;
	return 0;
}

static const struct fuse_operations ops = {
    .getattr = p_getattr,
    .readdir = p_readdir,
    .mkdir = pt_mkdir,
    .unlink = pt_unlink,
    .rmdir = pt_rmdir,
    .truncate = p_truncate,
    .open = p_open,
    .create = p_create,
    .read = p_read,
    .write = p_write,
    .release = p_release,
    .statfs = pt_statfs,
};

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: passfs CONFIG MOUNTPOINT [-f] [fuse options]\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "r");
	if (!f) {
		fprintf(stderr, "passfs: open %s: %m\n", argv[1]);
		return 1;
	}
	char line[PATH_MAX + 64];
	int lineno = 0;
	while (!pt_backing[0] && fgets(line, sizeof(line), f)) {
		lineno++;
		char *v;
		if (strncmp(line, "path", 4) || !(v = strchr(line, '=')))
			continue;
		v++;
		while (*v == ' ' || *v == '\t')
			v++;
		v[strcspn(v, "\r\n")] = 0;
		if (!realpath(v, pt_backing)) {
			fprintf(stderr, "passfs: %s:%d: key 'path': %s: %m\n", argv[1], lineno, v);
			fclose(f);
			return 1;
		}
	}
	fclose(f);
	if (!pt_backing[0]) {
		fprintf(stderr, "passfs: %s: no 'path =' key\n", argv[1]);
		return 1;
	}
	/* fuse_main wants argv[0] MOUNTPOINT [options]: drop CONFIG */
	argv[1] = argv[0];
	return fuse_main(argc - 1, argv + 1, &ops, NULL);
}
