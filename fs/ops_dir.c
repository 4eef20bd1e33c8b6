/*
 * fs/ops_dir.c — the directory listing requests: opendir, readdir,
 * releasedir, and fsyncdir.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/handle.h"
#include "fs/ops.h"

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

void tfs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = g_fs;
	if (ctl_ino(ino)) {
		ops_ctl_opendir(req, ino, fi);
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

void tfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	if (ctl_ino(ino)) {
		ops_ctl_readdir(req, ino, size, off, fi);
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

void tfs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ctl_ino(ino)) {
		ops_ctl_release(req, ino, fi);
		return;
	}
	fh_release(fi->fh);
	fuse_reply_err(req, 0);
}

void tfs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, -cache_commit_durable(g_fs));
}
