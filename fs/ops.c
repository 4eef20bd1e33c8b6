/*
 * fs/ops.c — the FUSE low-level operations table, and what every kind of
 * request shares: the kernel's references to inodes (lookup counts and
 * FORGET), the deletion of an inode that nothing names or holds any more,
 * and the connection's settings. The handlers live in one file a kind of
 * request (fs/ops.h); with this one they are the only code that replies to
 * FUSE.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "fs/ops.h"

struct fs *g_fs;

void ops_fill_entry(struct fs *fs, struct inode *in, struct fuse_entry_param *e)
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

/* Reference INO for the kernel (lookup count) and reply with its entry. */
void ops_reply_entry(fuse_req_t req, uint64_t ino)
{
	struct fs *fs = g_fs;
	struct fuse_entry_param e;
	tfs_lock(&fs->lock);
	struct inode *in;
	int rc = fs_inode_get(fs, ino, &in);
	if (!rc) {
		in->nlookup++;
		ops_fill_entry(fs, in, &e);
	}
	tfs_unlock(&fs->lock);
	if (rc)
		fuse_reply_err(req, -rc);
	else if (fuse_reply_entry(req, &e) == -ENOENT)
		ops_forget_one(fs, ino, 1); /* interrupted: the kernel never took it */
}

/* Delete INO for good once nothing names or holds it. No lock held. */
void ops_inode_maybe_delete(struct fs *fs, uint64_t ino)
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
	/* Page-cache tricks only add copies here (DESIGN.md's measurements).
	 * Opens without O_DIRECT do use the page cache (ops_file.c), but
	 * write through it: a writeback cache would hold writes the daemon
	 * has not seen, leave sizes to the kernel, and make an O_DIRECT
	 * writer and a buffered reader of one file disagree. */
	conn->want &=
	    ~(unsigned)(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
			FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_AUTO_INVAL_DATA);
	/* The kernel must not drop pages by itself when it sees the mtime
	 * or size move: a drop while a buffered write is on its way lets a
	 * reader cache the old bytes for good. The daemon drops what
	 * changes behind the page cache instead (ops_file.c). */
	if (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA)
		conn->want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

void ops_forget_one(struct fs *fs, fuse_ino_t ino, uint64_t n)
{
	if (ctl_ino(ino))
		return;
	tfs_lock(&fs->lock);
	struct inode *in = fs_inode_find(fs, ino);
	if (in)
		in->nlookup = in->nlookup > n ? in->nlookup - n : 0;
	tfs_unlock(&fs->lock);
	ops_inode_maybe_delete(fs, ino);
}

static void tfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	ops_forget_one(g_fs, ino, nlookup);
	fuse_reply_none(req);
}

static void tfs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		ops_forget_one(g_fs, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/* Whether the caller of REQ lacks CAP_FSETID, for the set-ID bits that a
 * write or truncate clears (FUSE_CAP_HANDLE_KILLPRIV, which libfuse turns
 * on, leaves that to us; the kernel's per-write flag for it is not passed
 * on by libfuse 3.14). Root stands for the capability, as most file
 * systems in user space take it: asking /proc for the caller's capability
 * set on every write would cost more than the write. */
bool ops_unprivileged(fuse_req_t req)
{
	return fuse_req_ctx(req)->uid != 0;
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
