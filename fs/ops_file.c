/*
 * fs/ops_file.c — the requests on open files: open and create, read and
 * write, flush, fsync and release, fallocate and lseek. The data goes to
 * and from the block cache (fs/cache/).
 *
 * An O_DIRECT open (DeepSpeed's) replies with direct_io: its data goes
 * between the caller's buffer and the block cache with no page cache copy
 * (the RAM tier is the cache). Any other open goes through the kernel's
 * page cache, so that mmap works, shared and writable included. The
 * kernel writes through (no writeback cache: a write(2) reaches us before
 * it returns).
 *
 * A write-through write fills its pages and marks them up to date before
 * its WRITE reaches us; a drop of the cache in that window (another
 * process's open, or its read seeing the mtime move) let a reader fetch
 * the old bytes before the WRITE landed and cache them as up to date, and
 * the writer then read them back. So attribute changes never drop the
 * cache (no auto_inval_data, explicit_inval_data; ops.c), and an open
 * keeps it (keep_cache) while another handle of the file may write
 * through it (inode.nbufwrite); otherwise an open drops it, as before, and
 * an O_TRUNC open always does. We are the only way to the bytes, so the
 * page cache stays right when we drop what changes behind it: what goes
 * through it needs nothing, and the rest is dropped here.
 *
 * Mixed opens: an O_DIRECT write passes the page cache, so once it is
 * stored, and before it is answered, the kernel is told to drop its pages
 * of that range (a mapping sees the new bytes at its next fault); an
 * O_DIRECT read first has the kernel drop the range, which writes back
 * what a mapping dirtied there (to another worker), as a local file
 * system flushes before a direct read. A punched or zeroed range is
 * dropped too. Only for inodes some buffered open may have cached
 * (inode.kcached), and never for the kernel's own page-cache requests
 * (readahead, the write-back of dirty pages, fi->writepage): they hold the
 * very pages that dropping would wait for.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/loop.h"
#include "fs/ops.h"

/* fi->fh of an open regular file: how it was opened. */
#define FH_DIRECT   1 /* O_DIRECT: direct_io, bypasses the page cache */
#define FH_BUFWRITE 2 /* writes through the page cache (inode.nbufwrite) */

/* Undo open_mode's count for the handle FI of IN. fs->lock held. */
static void close_mode(struct inode *in, const struct fuse_file_info *fi)
{
	if ((fi->fh & FH_BUFWRITE) && in->nbufwrite)
		in->nbufwrite--;
}

/* Drop an open reference of the handle FI; delete the inode if that was
 * the last hold on an unlinked file. */
static void close_inode(fuse_ino_t ino, const struct fuse_file_info *fi)
{
	struct fs *fs = g_fs;
	tfs_lock(&fs->lock);
	struct inode *in = fs_inode_find(fs, ino);
	if (in && in->nopen)
		in->nopen--;
	if (in)
		close_mode(in, fi);
	tfs_unlock(&fs->lock);
	ops_inode_maybe_delete(fs, ino);
}

/* The page-cache mode of an open (fi->flags) of IN. fs->lock held. */
static void open_mode(struct inode *in, struct fuse_file_info *fi)
{
	bool direct = fi->flags & O_DIRECT;
	fi->direct_io = direct;
	/* Another handle's write may be on its way (see the top of the file);
	 * a truncating open empties the cache all the same. */
	fi->keep_cache = in->nbufwrite && !(fi->flags & O_TRUNC);
	fi->fh = direct ? FH_DIRECT : 0;
	if (!direct && S_ISREG(in->attr.mode)) {
		__atomic_store_n(&in->kcached, true, __ATOMIC_RELAXED);
		if ((fi->flags & O_ACCMODE) != O_RDONLY) {
			fi->fh |= FH_BUFWRITE;
			in->nbufwrite++;
		}
	}
}

static int open_inode(fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = g_fs;
	tfs_lock(&fs->lock);
	struct inode *in;
	int rc = fs_inode_get(fs, ino, &in);
	if (!rc) {
		if (S_ISDIR(in->attr.mode) && (fi->flags & O_ACCMODE) != O_RDONLY) {
			rc = -EISDIR;
		} else {
			in->nopen++;
			open_mode(in, fi);
		}
	}
	/* libfuse asks for atomic O_TRUNC: the truncate comes with the open.
	 * It sets the times even of an empty file, as local file systems do. */
	if (!rc && (fi->flags & O_TRUNC) && S_ISREG(in->attr.mode)) {
		rc = in->attr.size ? cache_resize(fs, in, 0) : 0;
		if (!rc) {
			fs_touch_mc(&in->attr);
			in->attr_dirty = true;
		} else {
			in->nopen--;
			close_mode(in, fi);
		}
	}
	tfs_unlock(&fs->lock);
	return rc;
}

void tfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ctl_ino(ino)) {
		ops_ctl_open(req, ino, fi);
		return;
	}
	int rc = open_inode(ino, fi);
	if (rc)
		fuse_reply_err(req, -rc);
	else if (fuse_reply_open(req, fi) == -ENOENT)
		/* The caller was interrupted: no release will come. */
		close_inode(ino, fi);
}

void tfs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		struct fuse_file_info *fi)
{
	struct fs *fs = g_fs;
	uint64_t ino = 0;
	int rc = ops_make_node(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, &ino);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct fuse_entry_param e;
	tfs_lock(&fs->lock);
	struct inode *in;
	rc = fs_inode_get(fs, ino, &in);
	if (!rc) {
		in->nlookup++;
		in->nopen++;
		open_mode(in, fi);
		ops_fill_entry(fs, in, &e);
	}
	tfs_unlock(&fs->lock);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		/* Interrupted: the kernel holds neither the entry nor the file. */
		ops_forget_one(fs, ino, 1);
		close_inode(ino, fi);
	}
}

static struct inode *get_open_inode(fuse_ino_t ino)
{
	struct fs *fs = g_fs;
	tfs_lock(&fs->lock);
	struct inode *in = fs_inode_find(fs, ino);
	tfs_unlock(&fs->lock);
	/* Stays while the kernel knows the inode (nlookup > 0): it sends
	 * FORGET only once its inode is gone, which no request in flight on
	 * it allows; deletion waits for that too (forget_one). */
	return in;
}

/* Have the kernel drop its cached pages of [OFF, OFF+LEN) of IN, written
 * back first where dirty, when a buffered open may have cached them. No
 * lock held: the write-back comes to another worker. */
static void drop_kernel_pages_of(struct inode *in, off_t off, size_t len)
{
	if (!len || !__atomic_load_n(&in->kcached, __ATOMIC_RELAXED))
		return;
	int err = fuse_lowlevel_notify_inval_inode(g_fs->se, in->ino, off, (off_t)len);
	if (err && err != -ENOENT)
		TFS_LOG("inode %llu: dropping the kernel's cached pages beside an O_DIRECT "
			"open: %s",
			(unsigned long long)in->ino, strerror(-err));
}

/* drop_kernel_pages_of for a request on FI: only a direct_io handle's
 * data passes the page cache. */
static void drop_kernel_pages(struct inode *in, struct fuse_file_info *fi, off_t off, size_t len)
{
	if (fi->fh & FH_DIRECT)
		drop_kernel_pages_of(in, off, len);
}

void tfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	if (ctl_ino(ino)) {
		ops_ctl_read(req, ino, size, off, fi);
		return;
	}
	struct inode *in = get_open_inode(ino);
	if (!in) {
		fuse_reply_err(req, EBADF);
		return;
	}
	drop_kernel_pages(in, fi, off, size);
	struct cache_read r;
	int rc = cache_read_get(g_fs, in, (uint64_t)off, size, &r);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* Straight from the blocks' buffers: the reply copies into the kernel
	 * before it returns, and the references keep them until then. A reply
	 * fails only once the connection is gone; libfuse frees REQ either
	 * way. */
	if (r.n)
		fuse_reply_iov(req, r.iov, (int)r.n);
	else
		fuse_reply_buf(req, NULL, 0);
	cache_read_put(g_fs, &r);
}

void tfs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
	       struct fuse_file_info *fi)
{
	if (ctl_ino(ino)) {
		ops_ctl_write(req, ino, buf, size);
		return;
	}
	struct inode *in = get_open_inode(ino);
	if (!in) {
		fuse_reply_err(req, EBADF);
		return;
	}
	int rc =
	    cache_write(g_fs, in, (uint64_t)off, buf, size, loop_landing(), ops_unprivileged(req));
	if (rc > 0 && !fi->writepage)
		drop_kernel_pages(in, fi, off, (size_t)rc);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, (size_t)rc);
}

void tfs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = g_fs;
	int rc = 0;
	(void)fi; /* libfuse zeroes fi for FLUSH: no open flags to go by */
	if (!ctl_ino(ino) && fs->conf.sync_on_close) {
		struct inode *in = get_open_inode(ino);
		bool unsynced = false;
		if (in) {
			tfs_lock(&fs->lock);
			unsynced = in->unsynced;
			tfs_unlock(&fs->lock);
		}
		if (unsynced)
			rc = cache_flush_inode(fs, in, true);
	}
	fuse_reply_err(req, -rc);
}

void tfs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ctl_ino(ino)) {
		ops_ctl_release(req, ino, fi);
		return;
	}
	fuse_reply_err(req, 0);
	close_inode(ino, fi);
}

void tfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	(void)fi;
	struct inode *in = ctl_ino(ino) ? NULL : get_open_inode(ino);
	int rc = in ? cache_flush_inode(g_fs, in, true) : 0;
	fuse_reply_err(req, -rc);
}

void tfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		   struct fuse_file_info *fi)
{
	(void)fi;
	struct fs *fs = g_fs;
	/* A punch keeps the size (the kernel checks too); collapse, insert
	 * and unshare ranges are not offered. */
	int clear = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE);
	if ((mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) ||
	    clear == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) ||
	    ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (offset < 0 || length <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct inode *in = ctl_ino(ino) ? NULL : get_open_inode(ino);
	if (!in) {
		fuse_reply_err(req, EBADF);
		return;
	}
	tfs_lock(&fs->lock);
	int rc = cache_fallocate(fs, in, mode, (uint64_t)offset, (uint64_t)length);
	tfs_unlock(&fs->lock);
	/* The kernel drops a punched range itself; not every kernel a
	 * zeroed one. */
	if (!rc && clear)
		drop_kernel_pages_of(in, offset, (size_t)length);
	fuse_reply_err(req, -rc);
}

/* SEEK_DATA and SEEK_HOLE, so that cp, tar and rsync skip holes (punched,
 * never written, or set aside and unwritten). The kernel answers SEEK_SET,
 * SEEK_CUR and SEEK_END itself. */
void tfs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	(void)fi;
	struct fs *fs = g_fs;
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	struct inode *in = ctl_ino(ino) ? NULL : get_open_inode(ino);
	if (!in) {
		fuse_reply_err(req, EBADF);
		return;
	}
	uint64_t to = 0;
	tfs_lock(&fs->lock);
	int rc = cache_seek(fs, in, (uint64_t)off, whence, &to);
	tfs_unlock(&fs->lock);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_lseek(req, (off_t)to);
}
