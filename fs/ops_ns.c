/*
 * fs/ops_ns.c — the namespace requests: lookup, readlink, creating names
 * (mknod, mkdir, symlink; create is ops_file.c's), removing them (unlink,
 * rmdir), rename and link.
 *
 * Namespace changes happen in one LMDB write transaction each and update the
 * in-memory inodes under fs->lock inside that transaction (the lock order of
 * fs/lock.h). The .tierfs control view (ctl.c) takes no new names.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/ops.h"

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
 * deleted the file that still had its name. g_ns_lock, taken
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

/* Whether NAME in PARENT is the control view itself, MOUNTPOINT/.tierfs.
 * It stands where a mount point would: it cannot be removed, renamed or
 * replaced (EBUSY), nor made again (EEXIST); inside it nothing is
 * written (EROFS). Never ENOENT for a name that lookup finds. */
static bool is_ctl_name(fuse_ino_t parent, const char *name)
{
	return parent == META_ROOT_INO && !strcmp(name, CTL_NAME);
}

void tfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = g_fs;
	if (ctl_ino(parent) || is_ctl_name(parent, name)) {
		ops_ctl_lookup(req, parent, name);
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
		ops_reply_entry(req, ino);
}

void tfs_readlink(fuse_req_t req, fuse_ino_t ino)
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
int ops_make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		  const char *target, uint64_t *out)
{
	struct fs *fs = g_fs;
	if (ctl_ino(parent))
		return -EROFS;
	if (is_ctl_name(parent, name))
		return -EEXIST;
	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	uint32_t flags = 0;
	/* The rules a reload may swap: read under rules_lock, from the path
	 * (fs_inode_path takes no lock) to the rule's verdict. */
	if (S_ISREG(mode) && FS_LIVE(fs->conf.nrules)) {
		char path[PATH_MAX];
		/* A file deeper than a path can name matches no rule (globs
		 * match paths); it is still created, as mkdir there is. */
		int rc = fs_inode_path(fs, parent, path, sizeof(path) - NAME_MAX - 2);
		if (rc && rc != -ENAMETOOLONG)
			return rc;
		if (!rc) {
			if (strcmp(path, "/"))
				strcat(path, "/");
			strcat(path, name);
			pthread_rwlock_rdlock(&fs->rules_lock);
			int r = placement_rule_for(&fs->conf, path);
			if (r >= 0) {
				const struct conf_rule *rule = &fs->conf.rules[r];
				flags |= (uint32_t)(fs->tier_id[rule->tier] + 1) << 8;
				if (!rule->persistent)
					flags |= META_F_VOLATILE;
				TFS_DEBUG(fs, "create %s: rule %s: tier %s%s", path, rule->name,
					  fs->conf.tiers[rule->tier].name,
					  rule->persistent ? "" : ", persistent = no");
			}
			pthread_rwlock_unlock(&fs->rules_lock);
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
		ops_reply_entry(req, ino);
}

void tfs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	uint64_t ino = 0;
	int rc = S_ISREG(mode) || S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode) || S_ISBLK(mode)
		     ? ops_make_node(req, parent, name, mode, rdev, NULL, &ino)
		     : -EINVAL;
	reply_made(req, rc, ino);
}

void tfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	uint64_t ino = 0;
	int rc = ops_make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, &ino);
	reply_made(req, rc, ino);
}

void tfs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	uint64_t ino = 0;
	int rc = strlen(link) >= PATH_MAX
		     ? -ENAMETOOLONG
		     : ops_make_node(req, parent, name, S_IFLNK | 0777, 0, link, &ino);
	reply_made(req, rc, ino);
}

/* Remove NAME from PARENT; DIR says whether it must be a directory. */
static int remove_name(fuse_ino_t parent, const char *name, bool dir, uint64_t *victim)
{
	struct fs *fs = g_fs;
	if (ctl_ino(parent))
		return -EROFS;
	if (is_ctl_name(parent, name))
		return dir ? -EBUSY : -EISDIR;
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
	ops_touch_c(&a);
	fs_touch_mc(&pa);
	if (!(rc = meta_dirent_del(op.t, parent, name)) && !(rc = ns_put(&op, &a)))
		rc = ns_put(&op, &pa);
end:
	rc = ns_end(fs, &op, rc);
	if (!rc)
		*victim = ino;
	return rc;
}

void tfs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	uint64_t ino = 0;
	int rc = remove_name(parent, name, false, &ino);
	fuse_reply_err(req, -rc);
	if (!rc)
		ops_inode_maybe_delete(g_fs, ino);
}

void tfs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	uint64_t ino = 0;
	int rc = remove_name(parent, name, true, &ino);
	fuse_reply_err(req, -rc);
	if (!rc)
		ops_inode_maybe_delete(g_fs, ino);
}

void tfs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		const char *newname, unsigned int flags)
{
	struct fs *fs = g_fs;
	uint64_t victim = 0;
	if (is_ctl_name(parent, name) || is_ctl_name(newparent, newname)) {
		fuse_reply_err(req, EBUSY);
		return;
	}
	if (ctl_ino(parent) || ctl_ino(newparent)) {
		fuse_reply_err(req, EROFS);
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
		ops_touch_c(&da);
		if ((rc = meta_dirent_del(op.t, newparent, newname)) || (rc = ns_put(&op, &da)))
			goto end;
		victim = dst;
	}
	if ((rc = meta_dirent_del(op.t, parent, name)) ||
	    (rc = meta_dirent_put(op.t, newparent, newname, src)))
		goto end;
	sa.parent = newparent;
	ops_touch_c(&sa);
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
		ops_inode_maybe_delete(fs, victim);
}

void tfs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fs *fs = g_fs;
	if (ctl_ino(ino) || ctl_ino(newparent)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (is_ctl_name(newparent, newname)) {
		fuse_reply_err(req, EEXIST);
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
	ops_touch_c(&a);
	fs_touch_mc(&pa);
	if (!(rc = meta_dirent_put(op.t, newparent, newname, ino)) && !(rc = ns_put(&op, &a)))
		rc = ns_put(&op, &pa);
end:
	rc = ns_end(fs, &op, rc);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		ops_reply_entry(req, ino);
}
