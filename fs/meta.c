/*
 * fs/meta.c — the namespace and per-file block maps in LMDB (see fs/meta.h).
 *
 * Why LMDB: copy-on-write B+trees give crash-safe transactions with readers
 * that never block the (single) writer, which suits a FUSE daemon whose
 * lookups/getattrs vastly outnumber its namespace changes.
 *
 * Key encoding: every integer part of a key is big-endian so that LMDB's
 * default memcmp ordering walks one inode's dirents/xattrs/blocks as one
 * contiguous range (prefix = the 8-byte BE ino). Names are stored without
 * a NUL. Values are host-endian raw structs (meta_inode, meta_block) or
 * host-endian u64 (super, dirents) / u16 (tiers); the metadata directory is
 * node-local, so it never moves between hosts of different endianness.
 *
 * Threading: MDB_NOTLS so a read transaction is not tied to the thread that
 * began it (FUSE worker threads may hand one around). A write transaction,
 * however, holds LMDB's writer mutex, which must be released by the thread
 * that took it: begin and commit/abort a write txn on the same thread, and
 * never begin a second write txn on a thread that already holds one (it
 * would deadlock on that mutex).
 */
#include "fs/meta.h"
#include "tiers/tier.h"

#include <errno.h>
#include <limits.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

/*
 * The map is a sparse reservation of address space, not disk: 64 GiB leaves
 * room for ~10^9 block records (about 60 B each with B-tree overhead), i.e.
 * far beyond any realistic optimizer state, while staying well inside the
 * 47-bit user address space. The file only grows as pages are used.
 */
#define META_MAPSIZE	((size_t)64 << 30)
#define META_MAXREADERS 256
#define META_XATTR_MAX	(64 * 1024)

enum meta_db {
	DB_SUPER,
	DB_TIERS,
	DB_INODES,
	DB_DIRENTS,
	DB_XATTRS,
	DB_LINKS,
	DB_BLOCKS,
	DB_COUNT,
};

static const char *const db_names[DB_COUNT] = {
    [DB_SUPER] = "super",   [DB_TIERS] = "tiers", [DB_INODES] = "inodes", [DB_DIRENTS] = "dirents",
    [DB_XATTRS] = "xattrs", [DB_LINKS] = "links", [DB_BLOCKS] = "blocks",
};

struct meta {
	MDB_env *env;
	MDB_dbi dbi[DB_COUNT]; /* immutable after meta_open: shared by all txns */
	char *dir;	       /* for error messages */
};

struct meta_txn {
	struct meta *m;
	MDB_txn *txn;
	bool write;
};

/* Map an LMDB result to 0 / -errno. */
static int map_rc(int rc)
{
	switch (rc) {
	case MDB_SUCCESS:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_MAP_FULL:
		return -ENOSPC;
	case MDB_READERS_FULL:
		return -EAGAIN;
	case MDB_KEYEXIST:
		return -EEXIST;
	default:
		return rc > 0 ? -rc : -EIO;
	}
}

/* Report an unexpected failure (anything but a plain miss) with context. */
static int fail(const struct meta *m, const char *op, int rc)
{
	if (rc != MDB_NOTFOUND)
		fprintf(stderr, "tierfs: meta %s: %s: %s\n", m ? m->dir : "?", op,
			mdb_strerror(rc));
	return map_rc(rc);
}

static void put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (unsigned char)v;
		v >>= 8;
	}
}

static uint64_t get_be64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/* 0, or -EINVAL (NULL/empty) / -ENAMETOOLONG (> NAME_MAX bytes). */
static int check_name(const char *name, size_t *len)
{
	if (!name || !name[0])
		return -EINVAL;
	size_t n = strnlen(name, NAME_MAX + 1);
	if (n > NAME_MAX)
		return -ENAMETOOLONG;
	*len = n;
	return 0;
}

/* Key buffer for "8-byte BE ino + name"; name is at most NAME_MAX. */
struct name_key {
	unsigned char b[8 + NAME_MAX];
	MDB_val v;
};

static int make_name_key(struct name_key *k, uint64_t ino, const char *name)
{
	size_t len;
	int rc = check_name(name, &len);
	if (rc)
		return rc;
	put_be64(k->b, ino);
	memcpy(k->b + 8, name, len);
	k->v.mv_size = 8 + len;
	k->v.mv_data = k->b;
	return 0;
}

static MDB_dbi dbi(const struct meta_txn *t, enum meta_db d)
{
	return t->m->dbi[d];
}

int meta_open(const char *dir, struct meta **out)
{
	*out = NULL;
	if (!dir || !dir[0])
		return -EINVAL;
	/* mkdir -p: each component, tolerating ones that already exist. */
	char *path = strdup(dir);
	if (!path)
		return -ENOMEM;
	for (char *p = path + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(path, 0700) != 0 && errno != EEXIST) {
				int e = errno;
				fprintf(stderr, "tierfs: meta %s: mkdir %s: %s\n", dir, path,
					strerror(e));
				free(path);
				return -e;
			}
			*p = c;
			if (c == '\0')
				break;
		}
	}
	free(path);

	struct meta *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->dir = strdup(dir);
	if (!m->dir) {
		free(m);
		return -ENOMEM;
	}
	int rc = mdb_env_create(&m->env);
	if (rc) {
		m->env = NULL;
		rc = fail(m, "mdb_env_create", rc);
		goto err;
	}
	if ((rc = mdb_env_set_maxdbs(m->env, 8)) != 0) {
		rc = fail(m, "mdb_env_set_maxdbs", rc);
		goto err;
	}
	if ((rc = mdb_env_set_mapsize(m->env, META_MAPSIZE)) != 0) {
		rc = fail(m, "mdb_env_set_mapsize", rc);
		goto err;
	}
	if ((rc = mdb_env_set_maxreaders(m->env, META_MAXREADERS)) != 0) {
		rc = fail(m, "mdb_env_set_maxreaders", rc);
		goto err;
	}
	/* NOMETASYNC: consistency after a power loss, durability from
	 * meta_sync() at fsync/unmount (see meta.h). NOTLS: read txns may
	 * cross worker threads. */
	if ((rc = mdb_env_open(m->env, dir, MDB_NOMETASYNC | MDB_NOTLS, 0600)) != 0) {
		rc = fail(m, "mdb_env_open", rc);
		goto err;
	}
	/* LMDB makes its files without syncing their directory, and the
	 * daemon may have made the directory: after a power loss both must
	 * be there, or every fsync since the first mount is gone. Once per
	 * mount. */
	if ((rc = tier_sync_dir(dir)) != 0) {
		fprintf(stderr, "tierfs: meta %s: cannot sync the directory: %s\n", dir,
			strerror(-rc));
		goto err;
	}
	/* Open every DB once in one write txn: after the commit the handles are
	 * valid in every later txn of this env, so no txn ever opens a DB. */
	MDB_txn *txn;
	if ((rc = mdb_txn_begin(m->env, NULL, 0, &txn)) != 0) {
		rc = fail(m, "mdb_txn_begin (open DBs)", rc);
		goto err;
	}
	for (int i = 0; i < DB_COUNT; i++) {
		if ((rc = mdb_dbi_open(txn, db_names[i], MDB_CREATE, &m->dbi[i])) != 0) {
			fprintf(stderr, "tierfs: meta %s: mdb_dbi_open %s: %s\n", dir, db_names[i],
				mdb_strerror(rc));
			mdb_txn_abort(txn);
			rc = map_rc(rc);
			goto err;
		}
	}
	if ((rc = mdb_txn_commit(txn)) != 0) {
		rc = fail(m, "mdb_txn_commit (open DBs)", rc);
		goto err;
	}
	*out = m;
	return 0;
err:
	if (m->env)
		mdb_env_close(m->env);
	free(m->dir);
	free(m);
	return rc;
}

void meta_close(struct meta *m)
{
	if (!m)
		return;
	mdb_env_close(m->env);
	free(m->dir);
	free(m);
}

int meta_sync(struct meta *m)
{
	int rc = mdb_env_sync(m->env, 1);
	return rc ? fail(m, "mdb_env_sync", rc) : 0;
}

int meta_txn_begin(struct meta *m, bool write, struct meta_txn **out)
{
	*out = NULL;
	struct meta_txn *t = malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	int rc = mdb_txn_begin(m->env, NULL, write ? 0 : MDB_RDONLY, &t->txn);
	if (rc) {
		free(t);
		return fail(m, write ? "mdb_txn_begin (write)" : "mdb_txn_begin (read)", rc);
	}
	t->m = m;
	t->write = write;
	*out = t;
	return 0;
}

int meta_txn_commit(struct meta_txn *t)
{
	struct meta *m = t->m;
	int rc = mdb_txn_commit(t->txn); /* frees the txn even on failure */
	free(t);
	return rc ? fail(m, "mdb_txn_commit", rc) : 0;
}

void meta_txn_abort(struct meta_txn *t)
{
	if (!t)
		return;
	mdb_txn_abort(t->txn);
	free(t);
}

/* ---- generic helpers ---------------------------------------------------- */

static int db_get(struct meta_txn *t, enum meta_db d, MDB_val *k, MDB_val *v, const char *op)
{
	int rc = mdb_get(t->txn, dbi(t, d), k, v);
	return rc ? fail(t->m, op, rc) : 0;
}

static int db_put(struct meta_txn *t, enum meta_db d, MDB_val *k, MDB_val *v, unsigned flags,
		  const char *op)
{
	int rc = mdb_put(t->txn, dbi(t, d), k, v, flags);
	if (rc == MDB_KEYEXIST)
		return -EEXIST;
	return rc ? fail(t->m, op, rc) : 0;
}

static int db_del(struct meta_txn *t, enum meta_db d, MDB_val *k, const char *op)
{
	int rc = mdb_del(t->txn, dbi(t, d), k, NULL);
	return rc ? fail(t->m, op, rc) : 0;
}

/* Delete every key of DB D starting with the 8-byte PREFIX. Re-seeks after
 * each delete rather than relying on the cursor's post-delete position: one
 * B-tree descent per record is cheap and obviously correct. */
static int del_prefix(struct meta_txn *t, enum meta_db d, const unsigned char prefix[8],
		      const char *op)
{
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, dbi(t, d), &c);
	if (rc)
		return fail(t->m, op, rc);
	for (;;) {
		MDB_val k = {.mv_size = 8, .mv_data = (void *)prefix}, v;
		rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (rc == MDB_NOTFOUND || k.mv_size < 8 || memcmp(k.mv_data, prefix, 8) != 0) {
			rc = 0;
			break;
		}
		if (rc)
			break;
		if ((rc = mdb_cursor_del(c, 0)) != 0)
			break;
	}
	mdb_cursor_close(c);
	return rc ? fail(t->m, op, rc) : 0;
}

/* ---- super -------------------------------------------------------------- */

int meta_super_get(struct meta_txn *t, const char *key, uint64_t *val)
{
	size_t len;
	int rc = check_name(key, &len);
	if (rc)
		return rc;
	MDB_val k = {.mv_size = len, .mv_data = (void *)key}, v;
	if ((rc = db_get(t, DB_SUPER, &k, &v, "super get")) != 0)
		return rc;
	if (v.mv_size != sizeof(*val)) {
		fprintf(stderr, "tierfs: meta %s: super %s: value of %zu bytes, want 8\n",
			t->m->dir, key, v.mv_size);
		return -EIO;
	}
	memcpy(val, v.mv_data, sizeof(*val));
	return 0;
}

int meta_super_put(struct meta_txn *t, const char *key, uint64_t val)
{
	size_t len;
	int rc = check_name(key, &len);
	if (rc)
		return rc;
	MDB_val k = {.mv_size = len, .mv_data = (void *)key};
	MDB_val v = {.mv_size = sizeof(val), .mv_data = &val};
	return db_put(t, DB_SUPER, &k, &v, 0, "super put");
}

/* ---- tiers -------------------------------------------------------------- */

int meta_tier_id(struct meta_txn *t, const char *name, bool create, uint16_t *id)
{
	size_t len;
	int rc = check_name(name, &len);
	if (rc)
		return rc;
	MDB_val k = {.mv_size = len, .mv_data = (void *)name}, v;
	rc = mdb_get(t->txn, dbi(t, DB_TIERS), &k, &v);
	if (rc == 0) {
		if (v.mv_size != sizeof(*id)) {
			fprintf(stderr, "tierfs: meta %s: tier %s: id of %zu bytes, want 2\n",
				t->m->dir, name, v.mv_size);
			return -EIO;
		}
		memcpy(id, v.mv_data, sizeof(*id));
		return 0;
	}
	if (rc != MDB_NOTFOUND || !create)
		return fail(t->m, "tier get", rc);

	/* A handful of tiers at most: a scan for the max is simpler than a
	 * separate counter and never reuses an id still present. */
	MDB_cursor *c;
	if ((rc = mdb_cursor_open(t->txn, dbi(t, DB_TIERS), &c)) != 0)
		return fail(t->m, "tier cursor", rc);
	uint16_t max = 0;
	MDB_val ck, cv;
	while ((rc = mdb_cursor_get(c, &ck, &cv, MDB_NEXT)) == 0) {
		uint16_t x;
		if (cv.mv_size == sizeof(x)) {
			memcpy(&x, cv.mv_data, sizeof(x));
			if (x > max)
				max = x;
		}
	}
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND)
		return fail(t->m, "tier scan", rc);
	if (max == UINT16_MAX)
		return -ENOSPC;
	uint16_t nid = max + 1; /* 0 is reserved for "no tier" */
	MDB_val nv = {.mv_size = sizeof(nid), .mv_data = &nid};
	if ((rc = db_put(t, DB_TIERS, &k, &nv, 0, "tier put")) != 0)
		return rc;
	*id = nid;
	return 0;
}

int meta_tier_iter(struct meta_txn *t, int (*fn)(const char *name, uint16_t id, void *arg),
		   void *arg)
{
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, dbi(t, DB_TIERS), &c);
	if (rc)
		return fail(t->m, "tier cursor", rc);
	MDB_val k, v;
	int ret = 0;
	while ((rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) == 0) {
		char name[NAME_MAX + 1];
		uint16_t id;
		if (k.mv_size > NAME_MAX || v.mv_size != sizeof(id)) {
			fprintf(stderr, "tierfs: meta %s: tiers: bad record (%zu/%zu bytes)\n",
				t->m->dir, k.mv_size, v.mv_size);
			ret = -EIO;
			break;
		}
		memcpy(name, k.mv_data, k.mv_size);
		name[k.mv_size] = '\0';
		memcpy(&id, v.mv_data, sizeof(id));
		if ((ret = fn(name, id, arg)) != 0)
			break;
	}
	mdb_cursor_close(c);
	if (ret)
		return ret;
	return rc == MDB_NOTFOUND ? 0 : fail(t->m, "tier iter", rc);
}

/* ---- inodes ------------------------------------------------------------- */

int meta_ino_alloc(struct meta_txn *t, uint64_t *ino)
{
	uint64_t next;
	int rc = meta_super_get(t, "next_ino", &next);
	if (rc == -ENOENT)
		next = META_ROOT_INO + 1;
	else if (rc)
		return rc;
	if (next == 0) /* wrapped: never hand out 0 or reuse numbers */
		return -ENOSPC;
	if ((rc = meta_super_put(t, "next_ino", next + 1)) != 0)
		return rc;
	*ino = next;
	return 0;
}

int meta_inode_get(struct meta_txn *t, uint64_t ino, struct meta_inode *out)
{
	unsigned char kb[8];
	put_be64(kb, ino);
	MDB_val k = {.mv_size = 8, .mv_data = kb}, v;
	int rc = db_get(t, DB_INODES, &k, &v, "inode get");
	if (rc)
		return rc;
	if (v.mv_size != sizeof(*out)) {
		fprintf(stderr, "tierfs: meta %s: inode %llu: record of %zu bytes, want %zu\n",
			t->m->dir, (unsigned long long)ino, v.mv_size, sizeof(*out));
		return -EIO;
	}
	memcpy(out, v.mv_data, sizeof(*out));
	return 0;
}

int meta_inode_put(struct meta_txn *t, const struct meta_inode *in)
{
	if (in->ino == 0)
		return -EINVAL;
	unsigned char kb[8];
	put_be64(kb, in->ino);
	MDB_val k = {.mv_size = 8, .mv_data = kb};
	MDB_val v = {.mv_size = sizeof(*in), .mv_data = (void *)in};
	return db_put(t, DB_INODES, &k, &v, 0, "inode put");
}

/* Removes the dependent records even when the inode record itself is
 * missing (cleanup after a partial failure), then reports -ENOENT. */
int meta_inode_del(struct meta_txn *t, uint64_t ino)
{
	unsigned char kb[8];
	put_be64(kb, ino);
	int rc = del_prefix(t, DB_XATTRS, kb, "inode del xattrs");
	if (rc)
		return rc;
	if ((rc = del_prefix(t, DB_BLOCKS, kb, "inode del blocks")) != 0)
		return rc;
	MDB_val k = {.mv_size = 8, .mv_data = kb};
	rc = db_del(t, DB_LINKS, &k, "inode del link");
	if (rc && rc != -ENOENT)
		return rc;
	return db_del(t, DB_INODES, &k, "inode del");
}

int meta_inode_count(struct meta_txn *t, uint64_t *n)
{
	MDB_stat st;
	int rc = mdb_stat(t->txn, dbi(t, DB_INODES), &st);
	if (rc)
		return fail(t->m, "inode count", rc);
	*n = st.ms_entries;
	return 0;
}

int meta_inode_iter(struct meta_txn *t, int (*fn)(const struct meta_inode *in, void *arg),
		    void *arg)
{
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, dbi(t, DB_INODES), &c);
	if (rc)
		return fail(t->m, "inode cursor", rc);
	MDB_val k, v;
	int ret = 0;
	while ((rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) == 0) {
		struct meta_inode in;
		if (v.mv_size != sizeof(in)) {
			fprintf(stderr, "tierfs: meta %s: inodes: record of %zu bytes, want %zu\n",
				t->m->dir, v.mv_size, sizeof(in));
			ret = -EIO;
			break;
		}
		memcpy(&in, v.mv_data, sizeof(in)); /* LMDB data need not be aligned */
		if ((ret = fn(&in, arg)) != 0)
			break;
	}
	mdb_cursor_close(c);
	if (ret)
		return ret;
	return rc == MDB_NOTFOUND ? 0 : fail(t->m, "inode iter", rc);
}

/* ---- dirents ------------------------------------------------------------ */

int meta_dirent_get(struct meta_txn *t, uint64_t parent, const char *name, uint64_t *ino)
{
	struct name_key nk;
	int rc = make_name_key(&nk, parent, name);
	if (rc)
		return rc;
	MDB_val v;
	if ((rc = db_get(t, DB_DIRENTS, &nk.v, &v, "dirent get")) != 0)
		return rc;
	if (v.mv_size != sizeof(*ino)) {
		fprintf(stderr, "tierfs: meta %s: dirent %llu/%s: value of %zu bytes, want 8\n",
			t->m->dir, (unsigned long long)parent, name, v.mv_size);
		return -EIO;
	}
	memcpy(ino, v.mv_data, sizeof(*ino));
	return 0;
}

int meta_dirent_put(struct meta_txn *t, uint64_t parent, const char *name, uint64_t ino)
{
	struct name_key nk;
	int rc = make_name_key(&nk, parent, name);
	if (rc)
		return rc;
	MDB_val v = {.mv_size = sizeof(ino), .mv_data = &ino};
	return db_put(t, DB_DIRENTS, &nk.v, &v, 0, "dirent put");
}

int meta_dirent_del(struct meta_txn *t, uint64_t parent, const char *name)
{
	struct name_key nk;
	int rc = make_name_key(&nk, parent, name);
	if (rc)
		return rc;
	return db_del(t, DB_DIRENTS, &nk.v, "dirent del");
}

/* Position C on the first key of PREFIX's range; 1 found, 0 none, -errno. */
static int seek_prefix(struct meta_txn *t, MDB_cursor *c, const unsigned char *prefix, size_t plen,
		       size_t seek_len, MDB_val *k, MDB_val *v, const char *op)
{
	k->mv_size = seek_len;
	k->mv_data = (void *)prefix;
	int rc = mdb_cursor_get(c, k, v, MDB_SET_RANGE);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return fail(t->m, op, rc);
	return k->mv_size >= plen && memcmp(k->mv_data, prefix, plen) == 0;
}

/* Step C to the next key; 1 still inside PREFIX's range (plen 0: any key),
 * 0 past it or at the end, -errno. The twin of seek_prefix for the walks. */
static int next_in_prefix(struct meta_txn *t, MDB_cursor *c, const unsigned char *prefix,
			  size_t plen, MDB_val *k, MDB_val *v, const char *op)
{
	int rc = mdb_cursor_get(c, k, v, MDB_NEXT);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return fail(t->m, op, rc);
	return k->mv_size >= plen && memcmp(k->mv_data, prefix, plen) == 0;
}

int meta_dir_is_empty(struct meta_txn *t, uint64_t parent)
{
	unsigned char kb[8];
	put_be64(kb, parent);
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, dbi(t, DB_DIRENTS), &c);
	if (rc)
		return fail(t->m, "dirent cursor", rc);
	MDB_val k, v;
	rc = seek_prefix(t, c, kb, 8, 8, &k, &v, "dir is_empty");
	mdb_cursor_close(c);
	if (rc < 0)
		return rc;
	return rc ? 0 : 1;
}

int meta_dir_iter(struct meta_txn *t, uint64_t parent,
		  int (*fn)(const char *name, uint64_t ino, void *arg), void *arg)
{
	unsigned char kb[8];
	put_be64(kb, parent);
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, dbi(t, DB_DIRENTS), &c);
	if (rc)
		return fail(t->m, "dirent cursor", rc);
	MDB_val k, v;
	int ret = seek_prefix(t, c, kb, 8, 8, &k, &v, "dir iter");
	while (ret == 1) {
		char name[NAME_MAX + 1];
		uint64_t ino;
		size_t nlen = k.mv_size - 8;
		if (nlen == 0 || nlen > NAME_MAX || v.mv_size != sizeof(ino)) {
			fprintf(stderr,
				"tierfs: meta %s: dirent of %llu: bad record (%zu/%zu bytes)\n",
				t->m->dir, (unsigned long long)parent, k.mv_size, v.mv_size);
			ret = -EIO;
			break;
		}
		memcpy(name, (const char *)k.mv_data + 8, nlen);
		name[nlen] = '\0';
		memcpy(&ino, v.mv_data, sizeof(ino));
		if ((ret = fn(name, ino, arg)) != 0)
			break;
		ret = next_in_prefix(t, c, kb, 8, &k, &v, "dir iter next");
	}
	mdb_cursor_close(c);
	return ret;
}

/* ---- xattrs ------------------------------------------------------------- */

int meta_xattr_get(struct meta_txn *t, uint64_t ino, const char *name, void *buf, size_t size)
{
	struct name_key nk;
	int rc = make_name_key(&nk, ino, name);
	if (rc)
		return rc;
	MDB_val v;
	rc = db_get(t, DB_XATTRS, &nk.v, &v, "xattr get");
	if (rc == -ENOENT)
		return -ENODATA;
	if (rc)
		return rc;
	if (v.mv_size > META_XATTR_MAX) {
		fprintf(stderr, "tierfs: meta %s: xattr %llu/%s: %zu bytes, over the limit\n",
			t->m->dir, (unsigned long long)ino, name, v.mv_size);
		return -EIO;
	}
	if (size == 0)
		return (int)v.mv_size;
	if (size < v.mv_size)
		return -ERANGE;
	if (v.mv_size)
		memcpy(buf, v.mv_data, v.mv_size);
	return (int)v.mv_size;
}

int meta_xattr_set(struct meta_txn *t, uint64_t ino, const char *name, const void *val, size_t len,
		   int flags)
{
	struct name_key nk;
	int rc = make_name_key(&nk, ino, name);
	if (rc)
		return rc;
	if (len > META_XATTR_MAX)
		return -E2BIG;
	if (len && !val)
		return -EINVAL;
	if ((flags & ~(XATTR_CREATE | XATTR_REPLACE)) ||
	    (flags & (XATTR_CREATE | XATTR_REPLACE)) == (XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	if (flags & XATTR_REPLACE) {
		MDB_val old;
		rc = db_get(t, DB_XATTRS, &nk.v, &old, "xattr get");
		if (rc == -ENOENT)
			return -ENODATA;
		if (rc)
			return rc;
	}
	MDB_val v = {.mv_size = len, .mv_data = (void *)val};
	return db_put(t, DB_XATTRS, &nk.v, &v, (flags & XATTR_CREATE) ? MDB_NOOVERWRITE : 0,
		      "xattr put");
}

int meta_xattr_list(struct meta_txn *t, uint64_t ino, char *buf, size_t size)
{
	unsigned char kb[8];
	put_be64(kb, ino);
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, dbi(t, DB_XATTRS), &c);
	if (rc)
		return fail(t->m, "xattr cursor", rc);
	MDB_val k, v;
	size_t total = 0;
	int ret = seek_prefix(t, c, kb, 8, 8, &k, &v, "xattr list");
	while (ret == 1) {
		size_t nlen = k.mv_size - 8;
		if (size) {
			if (total + nlen + 1 > size) {
				ret = -ERANGE;
				break;
			}
			memcpy(buf + total, (const char *)k.mv_data + 8, nlen);
			buf[total + nlen] = '\0';
		}
		total += nlen + 1;
		if (total > INT_MAX) {
			ret = -E2BIG;
			break;
		}
		ret = next_in_prefix(t, c, kb, 8, &k, &v, "xattr list next");
	}
	mdb_cursor_close(c);
	return ret < 0 ? ret : (int)total;
}

int meta_xattr_del(struct meta_txn *t, uint64_t ino, const char *name)
{
	struct name_key nk;
	int rc = make_name_key(&nk, ino, name);
	if (rc)
		return rc;
	rc = db_del(t, DB_XATTRS, &nk.v, "xattr del");
	return rc == -ENOENT ? -ENODATA : rc;
}

/* ---- symlinks ----------------------------------------------------------- */

int meta_link_put(struct meta_txn *t, uint64_t ino, const char *target)
{
	if (!target || !target[0])
		return -EINVAL;
	size_t len = strnlen(target, PATH_MAX);
	if (len >= PATH_MAX) /* a path, not a name: PATH_MAX incl. the NUL */
		return -ENAMETOOLONG;
	unsigned char kb[8];
	put_be64(kb, ino);
	MDB_val k = {.mv_size = 8, .mv_data = kb};
	MDB_val v = {.mv_size = len, .mv_data = (void *)target};
	return db_put(t, DB_LINKS, &k, &v, 0, "link put");
}

int meta_link_get(struct meta_txn *t, uint64_t ino, char *buf, size_t size)
{
	unsigned char kb[8];
	put_be64(kb, ino);
	MDB_val k = {.mv_size = 8, .mv_data = kb}, v;
	int rc = db_get(t, DB_LINKS, &k, &v, "link get");
	if (rc)
		return rc;
	if (size < v.mv_size + 1)
		return -ENAMETOOLONG;
	memcpy(buf, v.mv_data, v.mv_size);
	buf[v.mv_size] = '\0';
	return 0;
}

/* ---- blocks ------------------------------------------------------------- */

static void block_key(unsigned char kb[16], uint64_t ino, uint64_t idx)
{
	put_be64(kb, ino);
	put_be64(kb + 8, idx);
}

int meta_block_get(struct meta_txn *t, uint64_t ino, uint64_t idx, struct meta_block *out)
{
	unsigned char kb[16];
	block_key(kb, ino, idx);
	MDB_val k = {.mv_size = 16, .mv_data = kb}, v;
	int rc = db_get(t, DB_BLOCKS, &k, &v, "block get");
	if (rc)
		return rc;
	if (v.mv_size != sizeof(*out)) {
		fprintf(stderr, "tierfs: meta %s: block %llu/%llu: record of %zu bytes, want %zu\n",
			t->m->dir, (unsigned long long)ino, (unsigned long long)idx, v.mv_size,
			sizeof(*out));
		return -EIO;
	}
	memcpy(out, v.mv_data, sizeof(*out));
	return 0;
}

int meta_block_put(struct meta_txn *t, uint64_t ino, uint64_t idx, const struct meta_block *b)
{
	unsigned char kb[16];
	block_key(kb, ino, idx);
	MDB_val k = {.mv_size = 16, .mv_data = kb};
	MDB_val v = {.mv_size = sizeof(*b), .mv_data = (void *)b};
	return db_put(t, DB_BLOCKS, &k, &v, 0, "block put");
}

int meta_block_del(struct meta_txn *t, uint64_t ino, uint64_t idx)
{
	unsigned char kb[16];
	block_key(kb, ino, idx);
	MDB_val k = {.mv_size = 16, .mv_data = kb};
	return db_del(t, DB_BLOCKS, &k, "block del");
}

/* Walk DB_BLOCKS from KB (16-byte seek key); ONE_INO limits the walk to the
 * inode in KB's first 8 bytes. Calls fn(ino, idx, b, arg) via the adapter. */
static int block_walk(struct meta_txn *t, const unsigned char kb[16], bool one_ino,
		      int (*fn)(uint64_t ino, uint64_t idx, const struct meta_block *b, void *),
		      void *arg)
{
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, dbi(t, DB_BLOCKS), &c);
	if (rc)
		return fail(t->m, "block cursor", rc);
	MDB_val k, v;
	int ret = seek_prefix(t, c, kb, one_ino ? 8 : 0, 16, &k, &v, "block iter");
	while (ret == 1) {
		struct meta_block b;
		if (k.mv_size != 16 || v.mv_size != sizeof(b)) {
			fprintf(stderr, "tierfs: meta %s: blocks: bad record (%zu/%zu bytes)\n",
				t->m->dir, k.mv_size, v.mv_size);
			ret = -EIO;
			break;
		}
		memcpy(&b, v.mv_data, sizeof(b));
		const unsigned char *p = k.mv_data;
		if ((ret = fn(get_be64(p), get_be64(p + 8), &b, arg)) != 0)
			break;
		ret = next_in_prefix(t, c, kb, one_ino ? 8 : 0, &k, &v, "block iter next");
	}
	mdb_cursor_close(c);
	return ret;
}

struct one_ino_adapter {
	int (*fn)(uint64_t idx, const struct meta_block *b, void *arg);
	void *arg;
};

static int one_ino_cb(uint64_t ino, uint64_t idx, const struct meta_block *b, void *arg)
{
	(void)ino;
	struct one_ino_adapter *a = arg;
	return a->fn(idx, b, a->arg);
}

int meta_block_iter(struct meta_txn *t, uint64_t ino, uint64_t from,
		    int (*fn)(uint64_t idx, const struct meta_block *b, void *arg), void *arg)
{
	unsigned char kb[16];
	block_key(kb, ino, from);
	struct one_ino_adapter a = {.fn = fn, .arg = arg};
	return block_walk(t, kb, true, one_ino_cb, &a);
}

int meta_block_iter_all(struct meta_txn *t,
			int (*fn)(uint64_t ino, uint64_t idx, const struct meta_block *b,
				  void *arg),
			void *arg)
{
	unsigned char kb[16] = {0};
	return block_walk(t, kb, false, fn, arg);
}
