/*
 * fs/meta.c — the metadata store's environment and transactions, and the
 * record primitives its tables share (see fs/meta.h for the layout, and
 * fs/meta_int.h for the key encoding).
 *
 * Why LMDB: copy-on-write B+trees give crash-safe transactions with readers
 * that never block the (single) writer, which suits a FUSE daemon whose
 * lookups/getattrs vastly outnumber its namespace changes.
 *
 * Threading: MDB_NOTLS so a read transaction is not tied to the thread that
 * began it (FUSE worker threads may hand one around). A write transaction,
 * however, holds LMDB's writer mutex, which must be released by the thread
 * that took it: begin and commit/abort a write txn on the same thread, and
 * never begin a second write txn on a thread that already holds one (it
 * would deadlock on that mutex).
 *
 * The tables live beside it: fs/meta_super.c (super keys, tier ids),
 * fs/meta_ns.c (inodes, directory entries, xattrs, symlinks) and
 * fs/meta_block.c (block maps).
 */
#include "fs/meta_int.h"
#include "tiers/tier.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/*
 * The map is a sparse reservation of address space, not disk: 64 GiB leaves
 * room for ~10^9 block records (about 60 B each with B-tree overhead), i.e.
 * far beyond any realistic optimizer state, while staying well inside the
 * 47-bit user address space. The file only grows as pages are used.
 */
#define META_MAPSIZE	((size_t)64 << 30)
#define META_MAXREADERS 256

static const char *const db_names[META_DB_COUNT] = {
    [META_DB_SUPER] = "super",	   [META_DB_TIERS] = "tiers",	[META_DB_INODES] = "inodes",
    [META_DB_DIRENTS] = "dirents", [META_DB_XATTRS] = "xattrs", [META_DB_LINKS] = "links",
    [META_DB_BLOCKS] = "blocks",
};

int meta_map_rc(int rc)
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

int meta_fail(const struct meta *m, const char *op, int rc)
{
	if (rc != MDB_NOTFOUND)
		fprintf(stderr, "tierfs: meta %s: %s: %s\n", m ? m->dir : "?", op,
			mdb_strerror(rc));
	return meta_map_rc(rc);
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
		rc = meta_fail(m, "mdb_env_create", rc);
		goto err;
	}
	if ((rc = mdb_env_set_maxdbs(m->env, 8)) != 0) {
		rc = meta_fail(m, "mdb_env_set_maxdbs", rc);
		goto err;
	}
	if ((rc = mdb_env_set_mapsize(m->env, META_MAPSIZE)) != 0) {
		rc = meta_fail(m, "mdb_env_set_mapsize", rc);
		goto err;
	}
	if ((rc = mdb_env_set_maxreaders(m->env, META_MAXREADERS)) != 0) {
		rc = meta_fail(m, "mdb_env_set_maxreaders", rc);
		goto err;
	}
	/* NOMETASYNC: consistency after a power loss, durability from
	 * meta_sync() at fsync/unmount (see meta.h). NOTLS: read txns may
	 * cross worker threads. */
	if ((rc = mdb_env_open(m->env, dir, MDB_NOMETASYNC | MDB_NOTLS, 0600)) != 0) {
		rc = meta_fail(m, "mdb_env_open", rc);
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
		rc = meta_fail(m, "mdb_txn_begin (open DBs)", rc);
		goto err;
	}
	for (int i = 0; i < META_DB_COUNT; i++) {
		if ((rc = mdb_dbi_open(txn, db_names[i], MDB_CREATE, &m->dbi[i])) != 0) {
			fprintf(stderr, "tierfs: meta %s: mdb_dbi_open %s: %s\n", dir, db_names[i],
				mdb_strerror(rc));
			mdb_txn_abort(txn);
			rc = meta_map_rc(rc);
			goto err;
		}
	}
	if ((rc = mdb_txn_commit(txn)) != 0) {
		rc = meta_fail(m, "mdb_txn_commit (open DBs)", rc);
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
	return rc ? meta_fail(m, "mdb_env_sync", rc) : 0;
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
		return meta_fail(m, write ? "mdb_txn_begin (write)" : "mdb_txn_begin (read)", rc);
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
	return rc ? meta_fail(m, "mdb_txn_commit", rc) : 0;
}

void meta_txn_abort(struct meta_txn *t)
{
	if (!t)
		return;
	mdb_txn_abort(t->txn);
	free(t);
}

/* ---- record primitives -------------------------------------------------- */

int meta_check_name(const char *name, size_t *len)
{
	if (!name || !name[0])
		return -EINVAL;
	size_t n = strnlen(name, NAME_MAX + 1);
	if (n > NAME_MAX)
		return -ENAMETOOLONG;
	*len = n;
	return 0;
}

int meta_make_name_key(struct meta_name_key *k, uint64_t ino, const char *name)
{
	size_t len;
	int rc = meta_check_name(name, &len);
	if (rc)
		return rc;
	meta_put_be64(k->b, ino);
	memcpy(k->b + 8, name, len);
	k->v.mv_size = 8 + len;
	k->v.mv_data = k->b;
	return 0;
}

int meta_db_get(struct meta_txn *t, enum meta_db d, MDB_val *k, MDB_val *v, const char *op)
{
	int rc = mdb_get(t->txn, meta_dbi(t, d), k, v);
	return rc ? meta_fail(t->m, op, rc) : 0;
}

int meta_db_put(struct meta_txn *t, enum meta_db d, MDB_val *k, MDB_val *v, unsigned flags,
		const char *op)
{
	int rc = mdb_put(t->txn, meta_dbi(t, d), k, v, flags);
	if (rc == MDB_KEYEXIST)
		return -EEXIST;
	return rc ? meta_fail(t->m, op, rc) : 0;
}

int meta_db_del(struct meta_txn *t, enum meta_db d, MDB_val *k, const char *op)
{
	int rc = mdb_del(t->txn, meta_dbi(t, d), k, NULL);
	return rc ? meta_fail(t->m, op, rc) : 0;
}

/* Re-seeks after each delete rather than relying on the cursor's
 * post-delete position: one B-tree descent per record is cheap and
 * obviously correct. */
int meta_del_prefix(struct meta_txn *t, enum meta_db d, const unsigned char prefix[8],
		    const char *op)
{
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, meta_dbi(t, d), &c);
	if (rc)
		return meta_fail(t->m, op, rc);
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
	return rc ? meta_fail(t->m, op, rc) : 0;
}

int meta_seek_prefix(struct meta_txn *t, MDB_cursor *c, const unsigned char *prefix, size_t plen,
		     size_t seek_len, MDB_val *k, MDB_val *v, const char *op)
{
	k->mv_size = seek_len;
	k->mv_data = (void *)prefix;
	int rc = mdb_cursor_get(c, k, v, MDB_SET_RANGE);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return meta_fail(t->m, op, rc);
	return k->mv_size >= plen && memcmp(k->mv_data, prefix, plen) == 0;
}

int meta_next_in_prefix(struct meta_txn *t, MDB_cursor *c, const unsigned char *prefix, size_t plen,
			MDB_val *k, MDB_val *v, const char *op)
{
	int rc = mdb_cursor_get(c, k, v, MDB_NEXT);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return meta_fail(t->m, op, rc);
	return k->mv_size >= plen && memcmp(k->mv_data, prefix, plen) == 0;
}
