/*
 * tests/unit/test_views.c — the views tierfs computes, read without FUSE:
 * the .tierfs control view (fs/ctl.c) and the extended attributes
 * (fs/xattr.c), on a mount prepared in process (a RAM tier and a posix
 * tier). The size rules of getxattr (a length query, ERANGE) are the ops
 * layer's and are not tested here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "fs/fs.h"
#include "fs/meta.h"
#include "fs/strbuf.h"
#include "fs/config/config_load.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#define BS (64 * 1024)

struct views {
	char dir[64];
	struct fs fs;
};

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static int views_up(void **state)
{
	struct views *v = calloc(1, sizeof(*v));
	if (!v)
		return -1;
	strcpy(v->dir, "/tmp/tierfs-test-views.XXXXXX");
	char path[128], err[256] = "";
	FILE *c = NULL;
	int rc = mkdtemp(v->dir) ? 0 : -1;
	if (!rc) {
		snprintf(path, sizeof(path), "%s/nvme0", v->dir);
		rc = mkdir(path, 0755);
	}
	if (!rc) {
		snprintf(path, sizeof(path), "%s/views.conf", v->dir);
		c = fopen(path, "w");
		rc = c ? 0 : -1;
	}
	if (!rc) {
		fprintf(c,
			"[mount]\nmetadata = %s/meta\nblock_size = 64K\nthreads = 2\n"
			"[tier ram]\ntype = ram\ncapacity = 4M\n"
			"[tier nvme0]\ntype = posix\npath = %s/nvme0\ncapacity = 64M\n"
			"[policy]\nstripe = nvme0\n",
			v->dir, v->dir);
		rc = fclose(c);
	}
	if (!rc && (rc = config_load(path, &v->fs.conf, err, sizeof(err))))
		fprintf(stderr, "config: %s\n", err);
	if (!rc && (rc = fs_mount_prepare(&v->fs)))
		fprintf(stderr, "fs_mount_prepare: %s\n", strerror(-rc));
	if (rc) {
		nftw(v->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
		free(v);
		return -1;
	}
	*state = v;
	return 0;
}

static int views_down(void **state)
{
	struct views *v = *state;
	fs_unmount_finish(&v->fs);
	nftw(v->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
	free(v);
	return 0;
}

/* NAME in the root with MODE, looked up as the kernel would hold it. */
static struct inode *make(struct fs *fs, const char *name, mode_t mode)
{
	struct meta_txn *t;
	uint64_t ino;
	assert_int_equal(meta_txn_begin(fs->meta, true, &t), 0);
	assert_int_equal(meta_ino_alloc(t, &ino), 0);
	struct meta_inode a = {
	    .ino = ino, .parent = META_ROOT_INO, .mode = mode, .nlink = 1, .pin_tier = -1};
	assert_int_equal(meta_inode_put(t, &a), 0);
	assert_int_equal(meta_dirent_put(t, META_ROOT_INO, name, ino), 0);
	assert_int_equal(meta_txn_commit(t), 0);
	struct inode *in = NULL;
	tfs_lock(&fs->lock);
	int rc = fs_inode_get(fs, ino, &in);
	if (!rc)
		in->nlookup++;
	tfs_unlock(&fs->lock);
	assert_int_equal(rc, 0);
	return in;
}

/* Attribute NAME of INO as a string; "" for an error, which goes to *RC. */
static char *get(struct fs *fs, uint64_t ino, const char *name, int *rc)
{
	static char val[4096];
	struct strbuf s = {0};
	*rc = xattr_get(fs, ino, name, &s);
	size_t n = *rc || s.len >= sizeof(val) ? 0 : s.len;
	memcpy(val, s.p ? s.p : "", n);
	val[n] = '\0';
	free(s.p);
	return val;
}

/* The NUL-separated list of INO's names, with the NULs as spaces. */
static char *list(struct fs *fs, uint64_t ino)
{
	static char names[4096];
	struct strbuf s = {0};
	assert_int_equal(xattr_list(fs, ino, &s), 0);
	assert_true(s.len < sizeof(names));
	for (size_t i = 0; i < s.len; i++)
		names[i] = s.p[i] ? s.p[i] : ' ';
	names[s.len] = '\0';
	free(s.p);
	return names;
}

static void test_user_xattrs(void **state)
{
	struct fs *fs = &((struct views *)*state)->fs;
	uint64_t ino = make(fs, "f", S_IFREG | 0644)->ino;
	int rc;
	assert_int_equal(xattr_set(fs, ino, "user.a", "hello", 5, 0), 0);
	assert_int_equal(xattr_set(fs, ino, "user.empty", "", 0, 0), 0);
	assert_string_equal(get(fs, ino, "user.a", &rc), "hello");
	assert_int_equal(rc, 0);
	assert_string_equal(get(fs, ino, "user.empty", &rc), "");
	assert_int_equal(rc, 0);
	get(fs, ino, "user.none", &rc);
	assert_int_equal(rc, -ENODATA);
	assert_int_equal(xattr_set(fs, ino, "user.a", "x", 1, XATTR_CREATE), -EEXIST);
	assert_int_equal(xattr_set(fs, ino, "user.b", "x", 1, XATTR_REPLACE), -ENODATA);
	/* A regular file lists the computed names too; the pin once set. */
	assert_string_equal(list(fs, ino), "user.a user.empty user.tierfs.placement "
					   "user.tierfs.blocks user.tierfs.cached ");
	assert_int_equal(xattr_remove(fs, ino, "user.a"), 0);
	assert_int_equal(xattr_remove(fs, ino, "user.a"), -ENODATA);
	get(fs, ino, "user.a", &rc);
	assert_int_equal(rc, -ENODATA);
}

static void test_tierfs_xattrs(void **state)
{
	struct fs *fs = &((struct views *)*state)->fs;
	struct inode *in = make(fs, "f", S_IFREG | 0644);
	uint64_t ino = in->ino;
	int rc;
	assert_int_equal(xattr_set(fs, ino, "user.tierfs.placement", "x", 1, 0), -EPERM);
	assert_int_equal(xattr_remove(fs, ino, "user.tierfs.cached"), -EPERM);
	assert_string_equal(get(fs, ino, "user.tierfs.placement", &rc), "");
	assert_int_equal(rc, 0);
	assert_string_equal(get(fs, ino, "user.tierfs.cached", &rc), "ram=0 dirty=0");
	get(fs, ino, "user.tierfs.pin", &rc);
	assert_int_equal(rc, -ENODATA);
	get(fs, ino, "user.tierfs.tiers", &rc);
	assert_int_equal(rc, -ENODATA); /* the root's alone */
	get(fs, ino, "user.tierfs.other", &rc);
	assert_int_equal(rc, -ENODATA);

	/* A block written and made durable: on the stripe tier, and still
	 * in RAM, clean. */
	char *buf = calloc(1, BS);
	assert_non_null(buf);
	assert_int_equal(cache_write(fs, in, 0, buf, BS, NULL, false), BS);
	free(buf);
	assert_int_equal(cache_flush_inode(fs, in, true), 0);
	assert_string_equal(get(fs, ino, "user.tierfs.blocks", &rc), "nvme0:0");
	assert_string_equal(get(fs, ino, "user.tierfs.placement", &rc), "nvme0=65536");
	assert_string_equal(get(fs, ino, "user.tierfs.cached", &rc), "ram=65536 dirty=0");

	assert_int_equal(xattr_set(fs, ino, "user.tierfs.pin", "nvme1", 5, 0), -EINVAL);
	assert_int_equal(xattr_set(fs, ino, "user.tierfs.pin", "ram", 3, 0), 0);
	assert_string_equal(get(fs, ino, "user.tierfs.pin", &rc), "ram");
	assert_string_equal(list(fs, ino), "user.tierfs.placement user.tierfs.blocks "
					   "user.tierfs.cached user.tierfs.pin ");
	assert_int_equal(xattr_remove(fs, ino, "user.tierfs.pin"), 0);
	get(fs, ino, "user.tierfs.pin", &rc);
	assert_int_equal(rc, -ENODATA);

	/* Only files are pinned; the root lists and shows the tiers. */
	assert_int_equal(xattr_set(fs, META_ROOT_INO, "user.tierfs.pin", "ram", 3, 0), -EPERM);
	assert_string_equal(list(fs, META_ROOT_INO), "user.tierfs.tiers ");
	char *tiers = get(fs, META_ROOT_INO, "user.tierfs.tiers", &rc);
	assert_int_equal(rc, 0);
	assert_true(!strncmp(tiers, "ram ram ", 8));
	assert_non_null(strstr(tiers, "\nnvme0 posix "));

	/* The control view has none and takes none. */
	get(fs, CTL_STATS, "user.a", &rc);
	assert_int_equal(rc, -ENODATA);
	assert_string_equal(list(fs, CTL_DIR), "");
	assert_int_equal(xattr_set(fs, CTL_STATS, "user.a", "x", 1, 0), -EROFS);
	assert_int_equal(xattr_remove(fs, CTL_STATS, "user.a"), -EROFS);
}

/* A control directory's listing, "NAME:TYPE " an entry (d or f). */
struct listing {
	char text[256];
	int n, fail_at; /* ADD fails with -ENOMEM at entry FAIL_AT (from 1) */
};

static int add(void *arg, const char *name, uint64_t ino, mode_t mode)
{
	(void)ino;
	struct listing *l = arg;
	if (++l->n == l->fail_at)
		return -ENOMEM;
	size_t len = strlen(l->text);
	snprintf(l->text + len, sizeof(l->text) - len, "%s:%c ", name, S_ISDIR(mode) ? 'd' : 'f');
	return 0;
}

/* The listing of control directory INO, or its error in *RC. */
static char *ls(struct fs *fs, uint64_t ino, int *rc)
{
	static struct listing l;
	memset(&l, 0, sizeof(l));
	*rc = ctl_list(fs, ino, add, &l);
	return l.text;
}

static void test_ctl(void **state)
{
	struct fs *fs = &((struct views *)*state)->fs;
	struct fuse_entry_param e;
	assert_int_equal(ctl_lookup(fs, META_ROOT_INO, CTL_NAME, &e), 0);
	assert_int_equal(e.ino, CTL_DIR);
	assert_int_equal(e.attr.st_mode, S_IFDIR | 0555);
	assert_int_equal(ctl_lookup(fs, CTL_DIR, "stats", &e), 0);
	assert_int_equal(e.ino, CTL_STATS);
	assert_int_equal(e.attr.st_mode, S_IFREG | 0444);
	assert_int_equal(ctl_lookup(fs, CTL_DIR, "nope", &e), -ENOENT);
	assert_int_equal(ctl_lookup(fs, CTL_TIERS, "nvme1", &e), -ENOENT);
	assert_int_equal(ctl_lookup(fs, CTL_TIERS, "nvme0", &e), 0);
	uint64_t nvme0 = e.ino;
	assert_true(ctl_ino(nvme0));

	int rc;
	assert_string_equal(ls(fs, CTL_DIR, &rc), ".:d ..:d stats:f metrics:f tiers:d reload:f ");
	assert_int_equal(rc, 0);
	assert_string_equal(ls(fs, CTL_TIERS, &rc), ".:d ..:d ram:d nvme0:d ");
	ls(fs, CTL_STATS, &rc);
	assert_int_equal(rc, -ENOTDIR);

	/* A tier's view shows every directory, and the files with blocks
	 * there: an empty file has none anywhere. */
	make(fs, "d", S_IFDIR | 0755);
	struct inode *f = make(fs, "f", S_IFREG | 0644);
	assert_string_equal(ls(fs, nvme0, &rc), ".:d ..:d d:d ");
	assert_int_equal(ctl_lookup(fs, nvme0, "f", &e), -ENOENT);
	assert_int_equal(ctl_lookup(fs, nvme0, "d", &e), 0);
	assert_int_equal(e.attr.st_mode, S_IFDIR | 0555);
	/* The real owner and mode, less the write bits: the kernel's
	 * permission checks refuse in the view what they refuse in the tree. */
	struct inode *p = make(fs, "p", S_IFDIR | 0700);
	tfs_lock(&fs->lock);
	p->attr.uid = 1234;
	p->attr.gid = 567;
	tfs_unlock(&fs->lock);
	assert_int_equal(ctl_lookup(fs, nvme0, "p", &e), 0);
	assert_int_equal(e.attr.st_mode, S_IFDIR | 0500);
	assert_int_equal(e.attr.st_uid, 1234);
	assert_int_equal(e.attr.st_gid, 567);
	char *buf = calloc(1, BS);
	assert_non_null(buf);
	assert_int_equal(cache_write(fs, f, 0, buf, BS, NULL, false), BS);
	free(buf);
	assert_int_equal(cache_flush_inode(fs, f, true), 0);
	assert_string_equal(ls(fs, nvme0, &rc), ".:d ..:d d:d f:f p:d ");
	assert_int_equal(ctl_lookup(fs, nvme0, "f", &e), 0);
	assert_int_equal(e.attr.st_mode, S_IFREG | 0444);
	assert_int_equal(e.attr.st_size, BS); /* the bytes on that tier */
	struct stat st;
	assert_int_equal(ctl_getattr(fs, e.ino, &st), 0);
	assert_int_equal(st.st_size, BS);

	/* ADD's error ends the listing. */
	struct listing l = {.fail_at = 3};
	assert_int_equal(ctl_list(fs, CTL_DIR, add, &l), -ENOMEM);
	assert_string_equal(l.text, ".:d ..:d ");
}

static void test_ctl_open(void **state)
{
	struct fs *fs = &((struct views *)*state)->fs;
	char *text = NULL;
	size_t len = 0;
	assert_int_equal(ctl_open(fs, CTL_STATS, O_WRONLY, &text, &len), -EROFS);
	assert_int_equal(ctl_open(fs, CTL_STATS, O_RDWR, &text, &len), -EROFS);
	assert_int_equal(ctl_open(fs, CTL_STATS, O_RDONLY, &text, &len), 0);
	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	assert_true(!strncmp(text, "tier ram type=ram persistent=no ", 32));
	assert_non_null(strstr(text, "\ntier nvme0 type=posix persistent=yes "));
	assert_non_null(strstr(text, "\ncache blocks=0 dirty=0 pinned=0 "));
	assert_non_null(strstr(text, "\ninodes table="));
	free(text);
	/* A file under tiers/NAME/ stands for placement: it holds nothing. */
	struct fuse_entry_param e;
	assert_int_equal(ctl_lookup(fs, CTL_TIERS, "ram", &e), 0);
	text = (char *)1;
	assert_int_equal(ctl_open(fs, e.ino, O_RDONLY, &text, &len), 0);
	assert_null(text);
	assert_int_equal(len, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_user_xattrs, views_up, views_down),
	    cmocka_unit_test_setup_teardown(test_tierfs_xattrs, views_up, views_down),
	    cmocka_unit_test_setup_teardown(test_ctl, views_up, views_down),
	    cmocka_unit_test_setup_teardown(test_ctl_open, views_up, views_down),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
