/*
 * fs/inode.c — the in-memory inode table and per-file block maps.
 *
 * Inodes are loaded from LMDB on first use and stay in memory while the
 * kernel references them or the cache holds their blocks (a resident block
 * map is what makes every data request a table lookup); once forgotten and
 * idle, the sweep after a commit (fs/cache/commit.c) frees their maps and, when nothing about them
 * is owed, the inodes themselves. Everything here runs with fs->lock held unless a comment says
 * otherwise; LMDB is only read here (read transactions never block a writer).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fs/fs.h"

static size_t ihash(const struct fs *fs, uint64_t ino)
{
	return (ino * 0x9e3779b97f4a7c15ULL) >> 20 & (fs->itab_size - 1);
}

struct inode *fs_inode_find(struct fs *fs, uint64_t ino)
{
	if (!fs->itab)
		return NULL;
	for (struct inode *in = fs->itab[ihash(fs, ino)]; in; in = in->hnext)
		if (in->ino == ino)
			return in;
	return NULL;
}

static int itab_grow(struct fs *fs)
{
	size_t nsize = fs->itab_size ? fs->itab_size * 2 : 1024;
	struct inode **n = calloc(nsize, sizeof(*n));
	if (!n)
		return -ENOMEM;
	struct inode **old = fs->itab;
	size_t osize = fs->itab_size;
	fs->itab = n;
	fs->itab_size = nsize;
	for (size_t i = 0; i < osize; i++) {
		struct inode *in = old[i];
		while (in) {
			struct inode *next = in->hnext;
			size_t h = ihash(fs, in->ino);
			in->hnext = n[h];
			n[h] = in;
			in = next;
		}
	}
	free(old);
	return 0;
}

void fs_now(int64_t *sec, uint32_t *nsec)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	*sec = ts.tv_sec;
	*nsec = (uint32_t)ts.tv_nsec;
}

void fs_touch_mc(struct meta_inode *a)
{
	fs_now(&a->mtime_sec, &a->mtime_nsec);
	a->ctime_sec = a->mtime_sec;
	a->ctime_nsec = a->mtime_nsec;
}

void fs_kill_setid(struct meta_inode *attr)
{
	if (S_ISREG(attr->mode))
		attr->mode &= ~(uint32_t)(S_ISUID | (attr->mode & S_IXGRP ? S_ISGID : 0));
}

/* Whether time A (seconds, nanoseconds) is not after time B. */
static bool not_after(int64_t a_sec, uint32_t a_nsec, int64_t b_sec, uint32_t b_nsec)
{
	return a_sec < b_sec || (a_sec == b_sec && a_nsec <= b_nsec);
}

void fs_read_atime(struct fs *fs, struct inode *in)
{
	if (fs->noatime)
		return;
	struct meta_inode *a = &in->attr;
	int64_t now;
	uint32_t nsec;
	fs_now(&now, &nsec);
	if (!not_after(a->atime_sec, a->atime_nsec, a->mtime_sec, a->mtime_nsec) &&
	    !not_after(a->atime_sec, a->atime_nsec, a->ctime_sec, a->ctime_nsec) &&
	    now - a->atime_sec < 24 * 3600)
		return;
	a->atime_sec = now;
	a->atime_nsec = nsec;
	in->attr_dirty = true;
}

int fs_tier_of_id(struct fs *fs, uint16_t id)
{
	for (int i = 0; i < fs->conf.ntiers; i++)
		if (fs->tier_id[i] == id)
			return i;
	return -1;
}

/* The tier a file's blocks are kept on by pin or rule, -1 for the stripe. */
int fs_home_for(struct fs *fs, const struct meta_inode *attr, const char *path)
{
	(void)path;
	if (attr->pin_tier >= 0)
		return fs_tier_of_id(fs, (uint16_t)attr->pin_tier);
	uint32_t rule_id = (attr->flags >> 8) & 0xffff;
	if (rule_id)
		return fs_tier_of_id(fs, (uint16_t)(rule_id - 1));
	/* No persistent tier configured: RAM is every file's home. */
	return fs->stripe.n ? -1 : fs->ram;
}

int fs_inode_get(struct fs *fs, uint64_t ino, struct inode **out)
{
	struct inode *in = fs_inode_find(fs, ino);
	if (in) {
		*out = in;
		return 0;
	}
	struct meta_txn *t;
	int rc = meta_txn_begin(fs->meta, false, &t);
	if (rc)
		return rc;
	struct meta_inode attr;
	rc = meta_inode_get(t, ino, &attr);
	meta_txn_abort(t);
	if (rc)
		return rc;
	if (fs->ninodes + 1 > fs->itab_size / 2 && (rc = itab_grow(fs)))
		return rc;
	if ((rc = fs_order_id_add(fs, &attr)))
		return rc;
	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	in->ino = ino;
	in->attr = attr;
	in->committed_size = attr.size;
	in->nused = -1;
	in->home = fs_home_for(fs, &attr, NULL);
	size_t h = ihash(fs, ino);
	in->hnext = fs->itab[h];
	fs->itab[h] = in;
	fs->ninodes++;
	*out = in;
	return 0;
}

void fs_inode_drop(struct fs *fs, struct inode *in)
{
	fs_order_id_del(fs, &in->attr);
	struct inode **pp = &fs->itab[ihash(fs, in->ino)];
	while (*pp && *pp != in)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = in->hnext;
	fs->ninodes--;
	fs_map_free(in);
	free(in);
}

void fs_map_free(struct inode *in)
{
	for (uint64_t c = 0; c < in->nchunks; c++)
		free(in->chunks[c]);
	free(in->chunks);
	in->chunks = NULL;
	in->nchunks = in->nblocks = 0;
}

/* Blocks with data in IN's loaded map. */
static uint64_t map_used(const struct inode *in)
{
	uint64_t used = 0;
	fs_for_each_blk (in, i, 0) {
		if (fs_blk_used(fs_blk(in, i)))
			used++;
	}
	return used;
}

void fs_map_unload(struct fs *fs, struct inode *in)
{
	(void)fs;
	in->nused = (int64_t)map_used(in);
	fs_map_free(in);
	in->map_loaded = false;
}

int fs_map_reserve(struct fs *fs, struct inode *in, uint64_t idx)
{
	(void)fs;
	if (idx >= FS_MAX_BLOCKS)
		return -EFBIG;
	uint64_t c = idx >> FS_MAP_CHUNK_SHIFT;
	if (c >= in->nchunks) {
		uint64_t cap = in->nchunks ? in->nchunks : 8;
		while (cap <= c)
			cap *= 2;
		if (cap > FS_MAX_BLOCKS >> FS_MAP_CHUNK_SHIFT)
			cap = FS_MAX_BLOCKS >> FS_MAP_CHUNK_SHIFT;
		struct blk **nc = realloc(in->chunks, cap * sizeof(*nc));
		if (!nc)
			return -ENOMEM;
		memset(nc + in->nchunks, 0, (cap - in->nchunks) * sizeof(*nc));
		in->chunks = nc;
		in->nchunks = cap;
		in->nblocks = cap << FS_MAP_CHUNK_SHIFT;
	}
	if (!in->chunks[c]) {
		struct blk *b = malloc(FS_MAP_CHUNK * sizeof(*b));
		if (!b)
			return -ENOMEM;
		for (uint64_t i = 0; i < FS_MAP_CHUNK; i++)
			b[i] = (struct blk){.tier = TIER_NONE};
		in->chunks[c] = b;
	}
	return 0;
}

struct load_ctx {
	struct fs *fs;
	struct inode *in;
	int err;
};

static int load_block(uint64_t idx, const struct meta_block *b, void *arg)
{
	struct load_ctx *c = arg;
	int t = fs_tier_of_id(c->fs, b->tier_id);
	if (t < 0) {
		TFS_LOG("inode %llu block %llu: on tier id %u, which is not configured",
			(unsigned long long)c->in->ino, (unsigned long long)idx, b->tier_id);
		/* Left as a hole would return zeros, i.e. bad bytes: refuse. */
		c->err = -EIO;
		return 1;
	}
	int rc = fs_map_reserve(c->fs, c->in, idx);
	if (rc) {
		c->err = rc;
		return 1;
	}
	struct blk *r = fs_blk(c->in, idx);
	r->tier = (uint16_t)t;
	r->slot = b->slot;
	r->unwritten = b->flags & META_B_UNWRITTEN;
	r->csum = r->unwritten ? 0 : b->csum;
	r->pages = (uint16_t)b->pages;
	r->stored = (uint16_t)b->stored;
	return 0;
}

int fs_inode_load_map(struct fs *fs, struct inode *in)
{
	if (in->map_loaded)
		return 0;
	struct meta_txn *t;
	int rc = meta_txn_begin(fs->meta, false, &t);
	if (rc)
		return rc;
	struct load_ctx c = {fs, in, 0};
	rc = meta_block_iter(t, in->ino, 0, load_block, &c);
	meta_txn_abort(t);
	if (c.err)
		return c.err;
	if (rc < 0)
		return rc;
	in->map_loaded = true;
	return 0;
}

static int count_block(uint64_t idx, const struct meta_block *b, void *arg)
{
	(void)idx;
	(void)b;
	(*(int64_t *)arg)++;
	return 0;
}

/* Blocks with data of IN, whose map is not loaded: its block records. */
static int unloaded_used(struct fs *fs, struct inode *in, uint64_t *used)
{
	if (in->nused < 0) {
		struct meta_txn *t;
		int rc = meta_txn_begin(fs->meta, false, &t);
		if (rc)
			return rc;
		int64_t n = 0;
		rc = meta_block_iter(t, in->ino, 0, count_block, &n);
		meta_txn_abort(t);
		if (rc < 0)
			return rc;
		in->nused = n;
	}
	*used = (uint64_t)in->nused;
	return 0;
}

int fs_attr_to_stat(struct fs *fs, struct inode *in, struct stat *st)
{
	const struct meta_inode *a = &in->attr;
	memset(st, 0, sizeof(*st));
	st->st_ino = in->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)a->size;
	st->st_blksize = (blksize_t)fs->bs;
	/* st_blocks comes from the block map, which a remount loads only at
	 * first use: 0 for a file with data made du say 0, and tar --sparse
	 * archive it as all holes. A map not loaded is counted in LMDB, not
	 * loaded: `ls -l` of many files loaded and kept a map chunk
	 * of each. Should the count fail, say "all allocated",
	 * which is never worse than a copy of every byte. */
	uint64_t used = 0;
	if (S_ISREG(a->mode) && !in->map_loaded && unloaded_used(fs, in, &used))
		st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	else
		st->st_blocks = (blkcnt_t)((in->map_loaded ? map_used(in) : used) * (fs->bs / 512));
	st->st_atim.tv_sec = a->atime_sec;
	st->st_atim.tv_nsec = a->atime_nsec;
	st->st_mtim.tv_sec = a->mtime_sec;
	st->st_mtim.tv_nsec = a->mtime_nsec;
	st->st_ctim.tv_sec = a->ctime_sec;
	st->st_ctim.tv_nsec = a->ctime_nsec;
	return 0;
}

struct find_name {
	uint64_t ino;
	char *name;
};

static int find_name_cb(const char *name, uint64_t ino, void *arg)
{
	struct find_name *f = arg;
	if (ino != f->ino)
		return 0;
	snprintf(f->name, NAME_MAX + 1, "%s", name);
	return 1;
}

/* A name of INO in directory PARENT (NAME holds NAME_MAX + 1): 0, -ENOENT. */
int fs_name_in_dir(struct meta_txn *t, uint64_t parent, uint64_t ino, char *name)
{
	struct find_name f = {ino, name};
	int rc = meta_dir_iter(t, parent, find_name_cb, &f);
	return rc < 0 ? rc : rc ? 0 : -ENOENT;
}

/* The path of INO from the mount root ("/a/b"), by walking parent links.
 * Used for rules and log lines, never on the data path. */
int fs_inode_path(struct fs *fs, uint64_t ino, char *buf, size_t size)
{
	struct meta_txn *t;
	int rc = meta_txn_begin(fs->meta, false, &t);
	if (rc)
		return rc;
	char tmp[PATH_MAX];
	size_t pos = sizeof(tmp) - 1;
	tmp[pos] = '\0';
	uint64_t cur = ino;
	for (int depth = 0; cur != META_ROOT_INO; depth++) {
		struct meta_inode a;
		if (depth > 512) {
			rc = -ENAMETOOLONG; /* deeper than any path can name */
			goto out;
		}
		if ((rc = meta_inode_get(t, cur, &a)) || !a.parent) {
			rc = rc ? rc : -ENOENT;
			goto out;
		}
		char name[NAME_MAX + 1];
		if ((rc = fs_name_in_dir(t, a.parent, cur, name)))
			goto out;
		size_t l = strlen(name);
		if (l + 1 > pos) {
			rc = -ENAMETOOLONG;
			goto out;
		}
		pos -= l;
		memcpy(tmp + pos, name, l);
		tmp[--pos] = '/';
		cur = a.parent;
	}
	rc = 0;
	if (pos == sizeof(tmp) - 1)
		tmp[--pos] = '/';
	if (strlen(tmp + pos) + 1 > size)
		rc = -ENAMETOOLONG;
	else
		strcpy(buf, tmp + pos);
out:
	meta_txn_abort(t);
	return rc;
}
