/*
 * fs/ops.h — what the files of the FUSE ops layer share. The layer is
 * fs/ops.c (the operations table, inode references, statfs) and one file a
 * kind of request: ops_ns.c (names), ops_attr.c (attributes and xattrs),
 * ops_file.c (open files and their data), ops_dir.c (directory listings)
 * and ops_ctl.c (the .tierfs control view). They alone reply to FUSE: the
 * modules they call return results. tfs_NAME is the handler of the FUSE
 * operation NAME; nothing outside fs/ops*.c includes this header.
 */
#ifndef TIERFS_OPS_H
#define TIERFS_OPS_H

#include "fs/fs.h"

/* A's change time moves to now. */
static inline void ops_touch_c(struct meta_inode *a)
{
	fs_now(&a->ctime_sec, &a->ctime_nsec);
}

/* ops.c */
/* The entry of IN as the kernel is to cache it. fs->lock held. */
void ops_fill_entry(struct fs *fs, struct inode *in, struct fuse_entry_param *e);
/* Reference INO for the kernel (lookup count) and reply with its entry. */
void ops_reply_entry(fuse_req_t req, uint64_t ino);
/* The kernel drops N references to INO; the inode goes if that was the
 * last hold on it. No lock held. */
void ops_forget_one(struct fs *fs, fuse_ino_t ino, uint64_t n);
/* Delete INO for good once nothing names or holds it. No lock held. */
void ops_inode_maybe_delete(struct fs *fs, uint64_t ino);
/* Whether the caller of REQ lacks CAP_FSETID, for the set-ID bits that a
 * write or truncate clears. */
bool ops_unprivileged(fuse_req_t req);

/* ops_ns.c */
/* Create NAME in PARENT: a file, directory, node or symlink (TARGET). */
int ops_make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		  const char *target, uint64_t *out);
void tfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void tfs_readlink(fuse_req_t req, fuse_ino_t ino);
void tfs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void tfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void tfs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void tfs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void tfs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void tfs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		const char *newname, unsigned int flags);
void tfs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);

/* ops_attr.c */
void tfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void tfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		 struct fuse_file_info *fi);
void tfs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
		  int flags);
void tfs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void tfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void tfs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* ops_file.c */
void tfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void tfs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		struct fuse_file_info *fi);
void tfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void tfs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
	       struct fuse_file_info *fi);
void tfs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void tfs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void tfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void tfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		   struct fuse_file_info *fi);
void tfs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);

/* ops_dir.c */
void tfs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void tfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void tfs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void tfs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);

/* ops_ctl.c: the same requests on nodes of the control view (ctl_ino) */
void ops_ctl_lookup(fuse_req_t req, uint64_t parent, const char *name);
void ops_ctl_getattr(fuse_req_t req, uint64_t ino);
void ops_ctl_opendir(fuse_req_t req, uint64_t ino, struct fuse_file_info *fi);
void ops_ctl_readdir(fuse_req_t req, uint64_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi);
void ops_ctl_open(fuse_req_t req, uint64_t ino, struct fuse_file_info *fi);
void ops_ctl_read(fuse_req_t req, uint64_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void ops_ctl_release(fuse_req_t req, uint64_t ino, struct fuse_file_info *fi);
void ops_ctl_write(fuse_req_t req, uint64_t ino, const char *buf, size_t size);

#endif
