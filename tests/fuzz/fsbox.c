/*
 * tests/fuzz/fsbox.c — the filesystem the stateful harnesses run against
 * (fsbox.h). It goes through config_load and fs_mount_prepare as the
 * daemon does, so the handlers see a mount like a real one, threads and
 * all; only the kernel is missing.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/config/config_load.h"
#include "fs/fs.h"
#include "fs/meta.h"
#include "tests/fuzz/fsbox.h"

static struct fs box_fs;
static struct fsbox box;
static char box_dir[] = "/tmp/tierfs-fuzz.XXXXXX";

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) ? -errno : 0;
}

static void box_close(void)
{
	if (!box.fs)
		return;
	fs_unmount_finish(&box_fs);
	box.fs = NULL;
	nftw(box_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "fsbox: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	exit(1);
}

/* A node under the root, made as the create path makes one. */
static uint64_t make_node(const char *name, mode_t mode)
{
	struct meta_txn *t;
	int rc = meta_txn_begin(box_fs.meta, true, &t);
	if (rc)
		die("meta_txn_begin", rc);
	uint64_t ino;
	struct meta_inode a;
	memset(&a, 0, sizeof(a));
	if ((rc = meta_ino_alloc(t, &ino)))
		die("meta_ino_alloc", rc);
	a.ino = ino;
	a.parent = META_ROOT_INO;
	a.mode = mode;
	a.nlink = S_ISDIR(mode) ? 2 : 1;
	a.pin_tier = -1;
	if (S_ISREG(mode))
		fs_name_id_set(&a, META_ROOT_INO, name);
	if ((rc = meta_inode_put(t, &a)) || (rc = meta_dirent_put(t, META_ROOT_INO, name, ino)))
		die("meta_inode_put", rc);
	if ((rc = meta_txn_commit(t)))
		die("meta_txn_commit", rc);
	return ino;
}

struct fsbox *fsbox_get(void)
{
	if (box.fs)
		return &box;
	if (!mkdtemp(box_dir))
		die("mkdtemp", errno);
	char conf[sizeof(box_dir) + 16], disk[sizeof(box_dir) + 16];
	snprintf(conf, sizeof(conf), "%s/fuzz.conf", box_dir);
	snprintf(disk, sizeof(disk), "%s/disk", box_dir);
	if (mkdir(disk, 0700))
		die("mkdir", errno);
	FILE *f = fopen(conf, "w");
	if (!f)
		die("fopen", errno);
	fprintf(f,
		"[mount]\nblock_size = 64K\nmetadata = %s/meta\nthreads = 1\n"
		"[tier ram]\ntype = ram\ncapacity = 4M\n"
		"[tier disk]\ntype = posix\npath = %s\ncapacity = 16M\ndirect = no\n"
		"bandwidth = 1G/s\n"
		"[rule ckpt]\nmatch = /ckpt*/*.pt\ntier = disk\npersistent = no\n",
		box_dir, disk);
	if (fclose(f))
		die("fclose", errno);
	char err[PATH_MAX + 512];
	int rc = config_load(conf, &box_fs.conf, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "fsbox: %s\n", err);
		exit(1);
	}
	g_fs = &box_fs;
	box.fs = &box_fs;
	atexit(box_close);
	if ((rc = fs_mount_prepare(&box_fs)))
		die("fs_mount_prepare", rc);
	box.file = make_node("file", S_IFREG | 0644);
	box.dir = make_node("dir", S_IFDIR | 0755);
	/* The kernel holds a lookup reference on every inode it sends a
	 * request about; so does the box, on both. */
	uint64_t inos[] = {box.file, box.dir};
	for (int i = 0; i < 2; i++) {
		struct inode *in;
		tfs_lock(&box_fs.lock);
		rc = fs_inode_get(&box_fs, inos[i], &in);
		if (!rc)
			in->nlookup++;
		tfs_unlock(&box_fs.lock);
		if (rc)
			die("fs_inode_get", rc);
	}
	return &box;
}
