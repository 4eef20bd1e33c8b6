/*
 * fs/ops_attr.c — the attribute requests: getattr, setattr (a size change
 * goes to the cache, which owns a file's blocks), and the extended
 * attributes, which xattr.c keeps and computes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/ops.h"
#include "fs/strbuf.h"

void tfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct fs *fs = g_fs;
	if (ctl_ino(ino)) {
		ops_ctl_getattr(req, ino);
		return;
	}
	struct stat st;
	tfs_lock(&fs->lock);
	struct inode *in;
	int rc = fs_inode_get(fs, ino, &in);
	if (!rc)
		fs_attr_to_stat(fs, in, &st);
	tfs_unlock(&fs->lock);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, 0.0);
}

void tfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		 struct fuse_file_info *fi)
{
	(void)fi;
	struct fs *fs = g_fs;
	if (ctl_ino(ino)) {
		/* "echo reload > .tierfs/reload" truncates it first. */
		if (ino == CTL_RELOAD &&
		    !(to_set & ~(FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MTIME |
				 FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME)))
			ops_ctl_getattr(req, ino);
		else
			fuse_reply_err(req, EROFS);
		return;
	}
	struct inode *in;
	tfs_lock(&fs->lock);
	int rc = fs_inode_get(fs, ino, &in);
	tfs_unlock(&fs->lock);
	if (rc)
		goto out;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (S_ISDIR(in->attr.mode)) {
			rc = -EISDIR;
			goto out;
		}
		uint64_t nsize = (uint64_t)attr->st_size;
		tfs_lock(&fs->lock);
		rc = cache_resize(fs, in, nsize);
		if (!rc) {
			fs_touch_mc(&in->attr);
			if (ops_unprivileged(req))
				fs_kill_setid(&in->attr);
		}
		tfs_unlock(&fs->lock);
		if (rc)
			goto out;
	}
	tfs_lock(&fs->lock);
	struct meta_inode *a = &in->attr;
	if (to_set & FUSE_SET_ATTR_MODE)
		a->mode = (a->mode & S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID)
		a->uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		a->gid = attr->st_gid;
	if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
		fs_kill_setid(a); /* for root too, as chown(2) */
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		fs_now(&a->atime_sec, &a->atime_nsec);
	else if (to_set & FUSE_SET_ATTR_ATIME) {
		a->atime_sec = attr->st_atim.tv_sec;
		a->atime_nsec = (uint32_t)attr->st_atim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		fs_now(&a->mtime_sec, &a->mtime_nsec);
	else if (to_set & FUSE_SET_ATTR_MTIME) {
		a->mtime_sec = attr->st_mtim.tv_sec;
		a->mtime_nsec = (uint32_t)attr->st_mtim.tv_nsec;
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		a->ctime_sec = attr->st_ctim.tv_sec;
		a->ctime_nsec = (uint32_t)attr->st_ctim.tv_nsec;
	} else {
		ops_touch_c(a);
	}
	in->attr_dirty = true;
	tfs_unlock(&fs->lock);
	rc = cache_commit(fs);
out:
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct stat st;
	tfs_lock(&fs->lock);
	fs_attr_to_stat(fs, in, &st);
	tfs_unlock(&fs->lock);
	fuse_reply_attr(req, &st, 0.0);
}

/* Answer a request for an xattr value or the list of names, LEN bytes at
 * VAL, in the caller's SIZE: the length alone for SIZE 0 (how much room
 * the value needs), ERANGE where SIZE is short of it. */
static void reply_value(fuse_req_t req, const char *val, size_t len, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

void tfs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
		  int flags)
{
	fuse_reply_err(req, -xattr_set(g_fs, ino, name, value, size, flags));
}

void tfs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct strbuf s = {0};
	int rc = xattr_get(g_fs, ino, name, &s);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_value(req, s.p ? s.p : "", s.len, size);
	free(s.p);
}

void tfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct strbuf s = {0};
	int rc = xattr_list(g_fs, ino, &s);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_value(req, s.p ? s.p : "", s.len, size);
	free(s.p);
}

void tfs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, -xattr_remove(g_fs, ino, name));
}
