/*
 * fs/ops.c — the FUSE low-level operations: namespace and data requests.
 *
 * Namespace changes happen in one LMDB write transaction each and update the
 * in-memory inodes under fs->lock inside that transaction (the lock order of
 * fs/fs.h). Data requests go to the block cache (cache.c). The .tierfs
 * control view (ctl.c) and the tierfs xattrs (xattr.c) hook in here.
 *
 * Every open replies with direct_io: the kernel page cache would copy each
 * byte once more (the RAM tier is the cache), and DeepSpeed opens O_DIRECT
 * anyway. The price is that shared writable mmap is refused (ENODEV).
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"
#include "fs/handle.h"
#include "fs/loop.h"

struct fs *g_fs;

static void touch_c(struct meta_inode *a)
{
	fs_now(&a->ctime_sec, &a->ctime_nsec);
}

/* The namespace's own fields of A: link count, parent, ctime, and a
 * directory's mtime. */
static void ns_fields(struct meta_inode *to, const struct meta_inode *a)
{
	to->nlink = a->nlink;
	to->parent = a->parent;
	to->ctime_sec = a->ctime_sec;
	to->ctime_nsec = a->ctime_nsec;
	if (S_ISDIR(a->mode)) {
		to->mtime_sec = a->mtime_sec;
		to->mtime_nsec = a->mtime_nsec;
	}
}

/* A namespace operation: one LMDB write transaction, and the namespace
 * fields it changes, which reach the in-memory inodes only once it has
 * committed. Applied at once, a failed commit left them behind: an unlink
 * whose commit failed left the link count 0 in memory, and the next close
 * deleted the file that still had its name (t_nsfail). g_ns_lock, taken
 * before LMDB's writer lock and fs->lock, keeps the next operation from
 * reading memory between this one's commit and its update. */
#define NS_MAX_PUTS 8
struct ns_op {
	struct meta_txn *t;
	unsigned n;
	struct meta_inode put[NS_MAX_PUTS]; /* in order; the last put of an ino wins */
};
static struct tfs_mutex g_ns_lock = TFS_MUTEX_INIT("ns_lock", LOCK_NS);

static int ns_begin(struct fs *fs, struct ns_op *op)
{
	tfs_lock(&g_ns_lock);
	op->n = 0;
	int rc = meta_txn_begin(fs->meta, true, &op->t);
	if (rc)
		tfs_unlock(&g_ns_lock);
	return rc;
}

/* The newest attributes of INO: the in-memory copy when loaded, with what
 * OP has put of it. */
static int ns_get(struct fs *fs, struct ns_op *op, uint64_t ino, struct meta_inode *a)
{
	tfs_lock(&fs->lock);
	struct inode *in = fs_inode_find(fs, ino);
	if (in)
		*a = in->attr;
	tfs_unlock(&fs->lock);
	int rc = in ? 0 : meta_inode_get(op->t, ino, a);
	for (unsigned i = 0; !rc && i < op->n; i++)
		if (op->put[i].ino == ino)
			ns_fields(a, &op->put[i]);
	return rc;
}

/* Store A's namespace fields in OP's transaction over the record as it
 * is there. The rest (size, times of data, mode) is cache_commit's, which
 * commits a size together with the block records it goes with: putting
 * the in-memory size here made an O_TRUNC durable without the deletion of
 * the blocks it cut, and after a kill -9 the file grew back into them. */
static int ns_put(struct ns_op *op, const struct meta_inode *a)
{
	if (op->n == NS_MAX_PUTS)
		return -EOVERFLOW; /* a bug: no operation changes that many */
	struct meta_inode m;
	int rc = meta_inode_get(op->t, a->ino, &m);
	if (rc == -ENOENT)
		m = *a;
	else if (rc)
		return rc;
	ns_fields(&m, a);
	rc = meta_inode_put(op->t, &m);
	if (!rc)
		op->put[op->n++] = *a;
	return rc;
}

/* Commit OP if RC is 0, else abort it; end it. The in-memory inodes take
 * its changes only on a good commit, and are marked for cache_commit: one
 * that snapshotted them before could commit its older times after ours. */
static int ns_end(struct fs *fs, struct ns_op *op, int rc)
{
	if (rc)
		meta_txn_abort(op->t);
	else
		rc = meta_txn_commit(op->t);
	if (!rc) {
		tfs_lock(&fs->lock);
		for (unsigned i = 0; i < op->n; i++) {
			struct inode *in = fs_inode_find(fs, op->put[i].ino);
			if (in) {
				ns_fields(&in->attr, &op->put[i]);
				in->attr_dirty = true;
			}
		}
		tfs_unlock(&fs->lock);
	}
	tfs_unlock(&g_ns_lock);
	return rc;
}

static void fill_entry(struct fs *fs, struct inode *in, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = in->ino;
	e->generation = 1;
	fs_attr_to_stat(fs, in, &e->attr);
	/* Names only change through this daemon, which tells the kernel. */
	e->entry_timeout = 1.0;
	/* Sizes must be exact at every moment: never cache attributes. */
	e->attr_timeout = 0.0;
}

static void forget_one(struct fs *fs, fuse_ino_t ino, uint64_t n);

/* Reference INO for the kernel (lookup count) and reply with its entry. */
static void reply_entry_ino(fuse_req_t req, uint64_t ino)
{
	struct fs *fs = g_fs;
	struct fuse_entry_param e;
	tfs_lock(&fs->lock);
	struct inode *in;
	int rc = fs_inode_get(fs, ino, &in);
	if (!rc) {
		in->nlookup++;
		fill_entry(fs, in, &e);
	}
	tfs_unlock(&fs->lock);
	if (rc)
		fuse_reply_err(req, -rc);
	else if (fuse_reply_entry(req, &e) == -ENOENT)
		forget_one(fs, ino, 1); /* interrupted: the kernel never took it */
}

/* Delete INO for good once nothing names or holds it. No lock held. */
static void inode_maybe_delete(struct fs *fs, uint64_t ino)
{
	tfs_lock(&fs->lock);
	struct inode *in = fs_inode_find(fs, ino);
	bool gone = in && in->attr.nlink == 0 && in->nlookup == 0 && in->nopen == 0;
	/* The block map must be in memory before its records go: it is what
	 * cache_forget_inode frees the slots by. A file never read or
	 * written since mount has none loaded yet. */
	int rc = gone ? fs_inode_load_map(fs, in) : 0;
	tfs_unlock(&fs->lock);
	if (rc) {
		/* It stays an orphan; the next mount removes it. */
		TFS_LOG("inode %llu: cannot load its block map to delete it: %s",
			(unsigned long long)ino, strerror(-rc));
		return;
	}
	if (!gone)
		return;
	struct meta_txn *t;
	rc = meta_txn_begin(fs->meta, true, &t);
	if (!rc) {
		rc = meta_inode_del(t, ino);
		if (rc == -ENOENT)
			rc = 0;
		if (rc)
			meta_txn_abort(t);
		else
			rc = meta_txn_commit(t);
	}
	if (rc) {
		/* It stays an orphan; the next mount removes it. */
		TFS_LOG("inode %llu: delete failed: %s", (unsigned long long)ino, strerror(-rc));
		return;
	}
	tfs_lock(&fs->lock);
	in = fs_inode_find(fs, ino);
	/* A rename that replaced the file and the kernel's FORGET can both get
	 * here; cache_forget_inode may wait (lock dropped) for a write-back,
	 * and the other caller must not free the inode under it. */
	if (in && !in->dropping && in->attr.nlink == 0 && in->nlookup == 0 && in->nopen == 0) {
		in->dropping = true;
		cache_forget_inode(fs, in);
		fs_inode_drop(fs, in);
	}
	tfs_unlock(&fs->lock);
}

static void tfs_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_write = FS_MAX_REQUEST;
	/* Must equal the max_read mount option main() passes. */
	conn->max_read = FS_MAX_REQUEST;
	conn->max_readahead = 1u << 20;
	/* Page-cache tricks only add copies here (DESIGN.md's measurements). */
	conn->want &= ~(unsigned)(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
				  FUSE_CAP_SPLICE_MOVE | FUSE_CAP_WRITEBACK_CACHE);
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static void tfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = g_fs;
	if (ctl_ino(parent) || (parent == META_ROOT_INO && !strcmp(name, CTL_NAME))) {
		ctl_lookup(req, parent, name);
		return;
	}
	struct meta_txn *t;
	uint64_t ino = 0;
	int rc = meta_txn_begin(fs->meta, false, &t);
	if (!rc) {
		rc = meta_dirent_get(t, parent, name, &ino);
		meta_txn_abort(t);
	}
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_entry_ino(req, ino);
}

static void forget_one(struct fs *fs, fuse_ino_t ino, uint64_t n)
{
	if (ctl_ino(ino))
		return;
	tfs_lock(&fs->lock);
	struct inode *in = fs_inode_find(fs, ino);
	if (in)
		in->nlookup = in->nlookup > n ? in->nlookup - n : 0;
	tfs_unlock(&fs->lock);
	inode_maybe_delete(fs, ino);
}

static void tfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(g_fs, ino, nlookup);
	fuse_reply_none(req);
}

static void tfs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		forget_one(g_fs, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void tfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct fs *fs = g_fs;
	if (ctl_ino(ino)) {
		ctl_getattr(req, ino);
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

/* Whether the caller of REQ lacks CAP_FSETID, for the set-ID bits that a
 * write or truncate clears (FUSE_CAP_HANDLE_KILLPRIV, which libfuse turns
 * on, leaves that to us; the kernel's per-write flag for it is not passed
 * on by libfuse 3.14). Root stands for the capability, as most file
 * systems in user space take it: asking /proc for the caller's capability
 * set on every write would cost more than the write. */
static bool unprivileged(fuse_req_t req)
{
	return fuse_req_ctx(req)->uid != 0;
}

static void tfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			struct fuse_file_info *fi)
{
	(void)fi;
	struct fs *fs = g_fs;
	if (ctl_ino(ino)) {
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
			if (unprivileged(req))
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
		touch_c(a);
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

static void tfs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = g_fs;
	char buf[PATH_MAX];
	struct meta_txn *t;
	int rc = meta_txn_begin(fs->meta, false, &t);
	if (!rc) {
		rc = meta_link_get(t, ino, buf, sizeof(buf));
		meta_txn_abort(t);
	}
	if (rc)
		fuse_reply_err(req, rc == -ENOENT ? EINVAL : -rc);
	else
		fuse_reply_readlink(req, buf);
}

/* Create NAME in PARENT: a file, directory, node or symlink (TARGET). */
static int make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		     const char *target, uint64_t *out)
{
	struct fs *fs = g_fs;
	if (ctl_ino(parent) || (parent == META_ROOT_INO && !strcmp(name, CTL_NAME)))
		return -EACCES;
	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	uint32_t flags = 0;
	if (S_ISREG(mode) && fs->conf.nrules) {
		char path[PATH_MAX];
		/* A file deeper than a path can name matches no rule (globs
		 * match paths); it is still created, as mkdir there is. */
		int rc = fs_inode_path(fs, parent, path, sizeof(path) - NAME_MAX - 2);
		if (rc && rc != -ENAMETOOLONG)
			return rc;
		int r = -1;
		if (!rc) {
			if (strcmp(path, "/"))
				strcat(path, "/");
			strcat(path, name);
			r = placement_rule_for(&fs->conf, path);
		}
		if (r >= 0) {
			const struct conf_rule *rule = &fs->conf.rules[r];
			flags |= (uint32_t)(fs->tier_id[rule->tier] + 1) << 8;
			if (!rule->persistent)
				flags |= META_F_VOLATILE;
		}
	}
	/* Without a persistent tier nothing outlives the mount: say so, so the
	 * next mount removes the file instead of showing its holes as data. */
	if (S_ISREG(mode) && !fs->stripe.n)
		flags |= META_F_VOLATILE;
	struct ns_op op;
	int rc = ns_begin(fs, &op);
	if (rc)
		return rc;
	struct meta_inode pa, a;
	uint64_t ino, existing;
	rc = ns_get(fs, &op, parent, &pa);
	if (rc)
		goto end;
	if (!S_ISDIR(pa.mode) || pa.nlink == 0) {
		rc = pa.nlink ? -ENOTDIR : -ENOENT;
		goto end;
	}
	rc = meta_dirent_get(op.t, parent, name, &existing);
	if (rc == 0) {
		rc = -EEXIST;
		goto end;
	}
	if (rc != -ENOENT || (rc = meta_ino_alloc(op.t, &ino)))
		goto end;
	memset(&a, 0, sizeof(a));
	a.ino = ino;
	a.parent = parent;
	a.mode = mode;
	a.uid = ctx->uid;
	a.gid = (pa.mode & S_ISGID) ? pa.gid : ctx->gid;
	if (S_ISDIR(mode) && (pa.mode & S_ISGID))
		a.mode |= S_ISGID;
	a.nlink = S_ISDIR(mode) ? 2 : 1;
	a.rdev = (uint32_t)rdev;
	a.pin_tier = -1;
	a.flags = flags;
	if (S_ISREG(mode))
		fs_name_id_set(&a, parent, name);
	fs_touch_mc(&a);
	a.atime_sec = a.mtime_sec;
	a.atime_nsec = a.mtime_nsec;
	if (target)
		a.size = strlen(target);
	if ((rc = meta_inode_put(op.t, &a)) || (rc = meta_dirent_put(op.t, parent, name, ino)))
		goto end;
	if (target && (rc = meta_link_put(op.t, ino, target)))
		goto end;
	if (S_ISDIR(mode))
		pa.nlink++;
	fs_touch_mc(&pa);
	rc = ns_put(&op, &pa);
end:
	rc = ns_end(fs, &op, rc);
	if (!rc)
		*out = ino;
	return rc;
}

static void reply_made(fuse_req_t req, int rc, uint64_t ino)
{
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_entry_ino(req, ino);
}

static void tfs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	uint64_t ino = 0;
	int rc = S_ISREG(mode) || S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode) || S_ISBLK(mode)
		     ? make_node(req, parent, name, mode, rdev, NULL, &ino)
		     : -EINVAL;
	reply_made(req, rc, ino);
}

static void tfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	uint64_t ino = 0;
	int rc = make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, &ino);
	reply_made(req, rc, ino);
}

static void tfs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	uint64_t ino = 0;
	int rc = strlen(link) >= PATH_MAX
		     ? -ENAMETOOLONG
		     : make_node(req, parent, name, S_IFLNK | 0777, 0, link, &ino);
	reply_made(req, rc, ino);
}

/* Remove NAME from PARENT; DIR says whether it must be a directory. */
static int remove_name(fuse_ino_t parent, const char *name, bool dir, uint64_t *victim)
{
	struct fs *fs = g_fs;
	if (ctl_ino(parent) || (parent == META_ROOT_INO && !strcmp(name, CTL_NAME)))
		return -EACCES;
	struct ns_op op;
	int rc = ns_begin(fs, &op);
	if (rc)
		return rc;
	uint64_t ino;
	struct meta_inode a, pa;
	if ((rc = meta_dirent_get(op.t, parent, name, &ino)) || (rc = ns_get(fs, &op, ino, &a)) ||
	    (rc = ns_get(fs, &op, parent, &pa)))
		goto end;
	if (dir && !S_ISDIR(a.mode)) {
		rc = -ENOTDIR;
		goto end;
	}
	if (!dir && S_ISDIR(a.mode)) {
		rc = -EISDIR;
		goto end;
	}
	if (dir) {
		rc = meta_dir_is_empty(op.t, ino);
		if (rc <= 0) {
			rc = rc ? rc : -ENOTEMPTY;
			goto end;
		}
		a.nlink = 0;
		pa.nlink--;
	} else {
		a.nlink--;
	}
	if (a.nlink == 0)
		a.parent = 0;
	touch_c(&a);
	fs_touch_mc(&pa);
	if (!(rc = meta_dirent_del(op.t, parent, name)) && !(rc = ns_put(&op, &a)))
		rc = ns_put(&op, &pa);
end:
	rc = ns_end(fs, &op, rc);
	if (!rc)
		*victim = ino;
	return rc;
}

static void tfs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	uint64_t ino = 0;
	int rc = remove_name(parent, name, false, &ino);
	fuse_reply_err(req, -rc);
	if (!rc)
		inode_maybe_delete(g_fs, ino);
}

static void tfs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	uint64_t ino = 0;
	int rc = remove_name(parent, name, true, &ino);
	fuse_reply_err(req, -rc);
	if (!rc)
		inode_maybe_delete(g_fs, ino);
}

static void tfs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		       const char *newname, unsigned int flags)
{
	struct fs *fs = g_fs;
	uint64_t victim = 0;
	if (ctl_ino(parent) || ctl_ino(newparent) ||
	    (newparent == META_ROOT_INO && !strcmp(newname, CTL_NAME))) {
		fuse_reply_err(req, EACCES);
		return;
	}
	if (flags & ~(unsigned)RENAME_NOREPLACE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (strlen(newname) > NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	struct ns_op op;
	int rc = ns_begin(fs, &op);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	uint64_t src, dst = 0;
	struct meta_inode sa, da, pa, npa;
	if ((rc = meta_dirent_get(op.t, parent, name, &src)) || (rc = ns_get(fs, &op, src, &sa)))
		goto end;
	rc = meta_dirent_get(op.t, newparent, newname, &dst);
	if (rc && rc != -ENOENT)
		goto end;
	rc = 0;
	if (dst == src)
		goto end; /* same inode: POSIX says do nothing */
	if (dst) {
		if (flags & RENAME_NOREPLACE) {
			rc = -EEXIST;
			goto end;
		}
		if ((rc = ns_get(fs, &op, dst, &da)))
			goto end;
		if (S_ISDIR(da.mode) && !S_ISDIR(sa.mode)) {
			rc = -EISDIR;
			goto end;
		}
		if (!S_ISDIR(da.mode) && S_ISDIR(sa.mode)) {
			rc = -ENOTDIR;
			goto end;
		}
		if (S_ISDIR(da.mode)) {
			rc = meta_dir_is_empty(op.t, dst);
			if (rc <= 0) {
				rc = rc ? rc : -ENOTEMPTY;
				goto end;
			}
			da.nlink = 0;
			/* newparent loses the replaced dir's ".." link */
			if ((rc = ns_get(fs, &op, newparent, &npa)))
				goto end;
			npa.nlink--;
			if ((rc = ns_put(&op, &npa)))
				goto end;
		} else {
			da.nlink--;
		}
		if (da.nlink == 0)
			da.parent = 0;
		touch_c(&da);
		if ((rc = meta_dirent_del(op.t, newparent, newname)) || (rc = ns_put(&op, &da)))
			goto end;
		victim = dst;
	}
	if ((rc = meta_dirent_del(op.t, parent, name)) ||
	    (rc = meta_dirent_put(op.t, newparent, newname, src)))
		goto end;
	sa.parent = newparent;
	touch_c(&sa);
	if ((rc = ns_put(&op, &sa)))
		goto end;
	if ((rc = ns_get(fs, &op, parent, &pa)))
		goto end;
	if (S_ISDIR(sa.mode) && parent != newparent)
		pa.nlink--;
	fs_touch_mc(&pa);
	if ((rc = ns_put(&op, &pa)))
		goto end;
	if (parent != newparent) {
		if ((rc = ns_get(fs, &op, newparent, &npa)))
			goto end;
		if (S_ISDIR(sa.mode))
			npa.nlink++;
		fs_touch_mc(&npa);
		if ((rc = ns_put(&op, &npa)))
			goto end;
	}
end:
	rc = ns_end(fs, &op, rc);
	fuse_reply_err(req, -rc);
	if (!rc && victim)
		inode_maybe_delete(fs, victim);
}

static void tfs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fs *fs = g_fs;
	if (ctl_ino(ino) || ctl_ino(newparent) ||
	    (newparent == META_ROOT_INO && !strcmp(newname, CTL_NAME))) {
		fuse_reply_err(req, EACCES);
		return;
	}
	struct ns_op op;
	int rc = ns_begin(fs, &op);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct meta_inode a, pa;
	uint64_t existing;
	if ((rc = ns_get(fs, &op, ino, &a)) || (rc = ns_get(fs, &op, newparent, &pa)))
		goto end;
	if (S_ISDIR(a.mode)) {
		rc = -EPERM;
		goto end;
	}
	rc = meta_dirent_get(op.t, newparent, newname, &existing);
	if (rc == 0)
		rc = -EEXIST;
	if (rc != -ENOENT)
		goto end;
	a.nlink++;
	touch_c(&a);
	fs_touch_mc(&pa);
	if (!(rc = meta_dirent_put(op.t, newparent, newname, ino)) && !(rc = ns_put(&op, &a)))
		rc = ns_put(&op, &pa);
end:
	rc = ns_end(fs, &op, rc);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_entry_ino(req, ino);
}

/* Drop an open reference; delete the inode if that was the last hold on
 * an unlinked file. */
static void close_inode(fuse_ino_t ino)
{
	struct fs *fs = g_fs;
	tfs_lock(&fs->lock);
	struct inode *in = fs_inode_find(fs, ino);
	if (in && in->nopen)
		in->nopen--;
	tfs_unlock(&fs->lock);
	inode_maybe_delete(fs, ino);
}

static int open_inode(fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = g_fs;
	tfs_lock(&fs->lock);
	struct inode *in;
	int rc = fs_inode_get(fs, ino, &in);
	if (!rc) {
		if (S_ISDIR(in->attr.mode) && (fi->flags & O_ACCMODE) != O_RDONLY)
			rc = -EISDIR;
		else
			in->nopen++;
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
		}
	}
	tfs_unlock(&fs->lock);
	fi->direct_io = 1;
	fi->keep_cache = 0;
	return rc;
}

static void tfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ctl_ino(ino)) {
		ctl_open(req, ino, fi);
		return;
	}
	int rc = open_inode(ino, fi);
	if (rc)
		fuse_reply_err(req, -rc);
	else if (fuse_reply_open(req, fi) == -ENOENT)
		/* The caller was interrupted: no release will come. */
		close_inode(ino);
}

static void tfs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       struct fuse_file_info *fi)
{
	struct fs *fs = g_fs;
	uint64_t ino = 0;
	int rc = make_node(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, &ino);
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
		fill_entry(fs, in, &e);
	}
	tfs_unlock(&fs->lock);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->direct_io = 1;
	fi->keep_cache = 0;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		/* Interrupted: the kernel holds neither the entry nor the file. */
		forget_one(fs, ino, 1);
		close_inode(ino);
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

static void tfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	if (ctl_ino(ino)) {
		ctl_read(req, ino, size, off, fi);
		return;
	}
	struct inode *in = get_open_inode(ino);
	if (!in) {
		fuse_reply_err(req, EBADF);
		return;
	}
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

static void tfs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	(void)fi;
	struct inode *in = ctl_ino(ino) ? NULL : get_open_inode(ino);
	if (!in) {
		fuse_reply_err(req, ctl_ino(ino) ? EROFS : EBADF);
		return;
	}
	int rc = cache_write(g_fs, in, (uint64_t)off, buf, size, loop_landing(), unprivileged(req));
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, (size_t)rc);
}

static void tfs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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

static void tfs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ctl_ino(ino)) {
		ctl_release(req, ino, fi);
		return;
	}
	fuse_reply_err(req, 0);
	close_inode(ino);
}

static void tfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	(void)fi;
	struct inode *in = ctl_ino(ino) ? NULL : get_open_inode(ino);
	int rc = in ? cache_flush_inode(g_fs, in, true) : 0;
	fuse_reply_err(req, -rc);
}

/* A directory handle holds a snapshot of the entries, so readdir offsets
 * stay valid whatever happens to the directory meanwhile; a read from
 * offset 0 after the first (rewinddir, lseek to 0) takes a new one, as
 * POSIX asks. fi->fh is its handle id (fs/handle.h: a RELEASEDIR may
 * arrive during a READDIR). */
struct dirsnap {
	struct fh_node node;
	pthread_mutex_t lock; /* guards all below */
	bool read;	      /* a READDIR has used this snapshot */
	size_t n, cap;
	struct dent {
		uint64_t ino;
		uint32_t mode;
		char *name;
	} * ents;
};

static int snap_add(struct dirsnap *d, const char *name, uint64_t ino, uint32_t mode)
{
	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 64;
		struct dent *ne = realloc(d->ents, nc * sizeof(*ne));
		if (!ne)
			return -ENOMEM;
		d->ents = ne;
		d->cap = nc;
	}
	char *copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	d->ents[d->n++] = (struct dent){ino, mode, copy};
	return 0;
}

static int snap_cb(const char *name, uint64_t ino, void *arg)
{
	int rc = snap_add(arg, name, ino, 0);
	return rc ? rc : 0;
}

static void snap_clear(struct dirsnap *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->ents[i].name);
	d->n = 0;
}

static void snap_free(struct dirsnap *d)
{
	snap_clear(d);
	free(d->ents);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static void snap_destroy(struct fh_node *n)
{
	snap_free(fh_entry(n, struct dirsnap, node));
}

/* Fill D with directory INO's entries as they are now. */
static int snap_fill(struct fs *fs, fuse_ino_t ino, struct dirsnap *d)
{
	snap_clear(d);
	struct meta_txn *t;
	struct meta_inode a;
	int rc = meta_txn_begin(fs->meta, false, &t);
	if (rc)
		return rc;
	rc = meta_inode_get(t, ino, &a);
	if (!rc && !S_ISDIR(a.mode))
		rc = -ENOTDIR;
	if (!rc && !(rc = snap_add(d, ".", ino, S_IFDIR)))
		rc = snap_add(d, "..", a.parent ? a.parent : ino, S_IFDIR);
	if (!rc)
		rc = meta_dir_iter(t, ino, snap_cb, d);
	for (size_t i = 2; !rc && i < d->n; i++) {
		struct meta_inode c;
		if (!meta_inode_get(t, d->ents[i].ino, &c))
			d->ents[i].mode = c.mode;
	}
	meta_txn_abort(t);
	return rc;
}

static void tfs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = g_fs;
	if (ctl_ino(ino)) {
		ctl_opendir(req, ino, fi);
		return;
	}
	struct dirsnap *d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&d->lock, NULL);
	int rc = snap_fill(fs, ino, d);
	if (rc) {
		snap_free(d);
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = fh_publish(&d->node, snap_destroy);
	if (fuse_reply_open(req, fi))
		fh_release(fi->fh);
}

static void tfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	if (ctl_ino(ino)) {
		ctl_readdir(req, ino, size, off, fi);
		return;
	}
	struct fh_node *n = fh_get(fi->fh);
	if (!n) {
		fuse_reply_err(req, EBADF);
		return;
	}
	struct dirsnap *d = fh_entry(n, struct dirsnap, node);
	char *buf = malloc(size);
	if (!buf) {
		fh_put(n);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&d->lock);
	int rc = off == 0 && d->read ? snap_fill(g_fs, ino, d) : 0;
	d->read = true;
	size_t pos = 0;
	for (size_t i = (size_t)off; !rc && i < d->n; i++) {
		struct stat st = {.st_ino = d->ents[i].ino, .st_mode = d->ents[i].mode};
		size_t l = fuse_add_direntry(req, buf + pos, size - pos, d->ents[i].name, &st,
					     (off_t)(i + 1));
		if (l > size - pos)
			break;
		pos += l;
	}
	pthread_mutex_unlock(&d->lock);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, buf, pos);
	free(buf);
	fh_put(n);
}

static void tfs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ctl_ino(ino)) {
		ctl_releasedir(req, ino, fi);
		return;
	}
	fh_release(fi->fh);
	fuse_reply_err(req, 0);
}

static void tfs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, -cache_commit_durable(g_fs));
}

/* The blocks file data can take, and how many are taken: the persistent
 * tiers', or the RAM tier's on a mount that has no other. Beside
 * persistent tiers the RAM tier is a cache: a file spills from a full tier
 * to the next persistent one, never to RAM, so counting it showed space
 * that no write could have. */
static void data_space(struct fs *fs, uint64_t *used, uint64_t *total)
{
	uint64_t u, t;
	fs_durable_slots(fs, &u, &t);
	if (!t) {
		fs_tier_slots(fs, fs->ram, &u, &t);
		/* The cache's own slots are not space users lose. */
		uint64_t cache = fs->cache.ncached - fs->cache.npinned;
		u -= cache < u ? cache : 0;
	}
	*used = u;
	*total = t;
}

static void tfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct fs *fs = g_fs;
	struct statvfs sv = {0};
	uint64_t total, used;
	data_space(fs, &used, &total);
	sv.f_bsize = fs->bs;
	sv.f_frsize = fs->bs;
	sv.f_blocks = total;
	sv.f_bfree = total - used;
	sv.f_bavail = total - used;
	/* Inodes in use are those in the metadata, not the ones in memory. */
	uint64_t ninodes = 0;
	struct meta_txn *txn;
	if (!meta_txn_begin(fs->meta, false, &txn)) {
		meta_inode_count(txn, &ninodes);
		meta_txn_abort(txn);
	}
	sv.f_files = 1ULL << 32;
	sv.f_ffree = (1ULL << 32) - ninodes;
	sv.f_favail = sv.f_ffree;
	sv.f_namemax = NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

static void tfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
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
	fuse_reply_err(req, -rc);
}

/* SEEK_DATA and SEEK_HOLE, so that cp, tar and rsync skip holes (punched,
 * never written, or set aside and unwritten). The kernel answers SEEK_SET,
 * SEEK_CUR and SEEK_END itself. */
static void tfs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		      struct fuse_file_info *fi)
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

static void tfs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			 size_t size, int flags)
{
	xattr_set(req, ino, name, value, size, flags);
}

static void tfs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	xattr_get(req, ino, name, size);
}

static void tfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	xattr_list(req, ino, size);
}

static void tfs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	xattr_remove(req, ino, name);
}

const struct fuse_lowlevel_ops tierfs_ops = {
    .init = tfs_init,
    .lookup = tfs_lookup,
    .forget = tfs_forget,
    .forget_multi = tfs_forget_multi,
    .getattr = tfs_getattr,
    .setattr = tfs_setattr,
    .readlink = tfs_readlink,
    .mknod = tfs_mknod,
    .mkdir = tfs_mkdir,
    .symlink = tfs_symlink,
    .unlink = tfs_unlink,
    .rmdir = tfs_rmdir,
    .rename = tfs_rename,
    .link = tfs_link,
    .open = tfs_open,
    .create = tfs_create,
    .read = tfs_read,
    .write = tfs_write,
    .flush = tfs_flush,
    .release = tfs_release,
    .fsync = tfs_fsync,
    .opendir = tfs_opendir,
    .readdir = tfs_readdir,
    .releasedir = tfs_releasedir,
    .fsyncdir = tfs_fsyncdir,
    .statfs = tfs_statfs,
    .fallocate = tfs_fallocate,
    .lseek = tfs_lseek,
    .setxattr = tfs_setxattr,
    .getxattr = tfs_getxattr,
    .listxattr = tfs_listxattr,
    .removexattr = tfs_removexattr,
};
