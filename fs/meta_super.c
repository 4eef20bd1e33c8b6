/*
 * fs/meta_super.c — the store's small global tables: the super keys (block
 * size, the next inode number, each tier's measured bandwidth) and the
 * stable ids of tier names, which keep block records valid when the config
 * reorders its tiers.
 */
#include "fs/meta_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ---- super -------------------------------------------------------------- */

int meta_super_get(struct meta_txn *t, const char *key, uint64_t *val)
{
	size_t len;
	int rc = meta_check_name(key, &len);
	if (rc)
		return rc;
	MDB_val k = {.mv_size = len, .mv_data = (void *)key}, v;
	if ((rc = meta_db_get(t, META_DB_SUPER, &k, &v, "super get")) != 0)
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
	int rc = meta_check_name(key, &len);
	if (rc)
		return rc;
	MDB_val k = {.mv_size = len, .mv_data = (void *)key};
	MDB_val v = {.mv_size = sizeof(val), .mv_data = &val};
	return meta_db_put(t, META_DB_SUPER, &k, &v, 0, "super put");
}

/* ---- tiers -------------------------------------------------------------- */

int meta_tier_id(struct meta_txn *t, const char *name, bool create, uint16_t *id)
{
	size_t len;
	int rc = meta_check_name(name, &len);
	if (rc)
		return rc;
	MDB_val k = {.mv_size = len, .mv_data = (void *)name}, v;
	rc = mdb_get(t->txn, meta_dbi(t, META_DB_TIERS), &k, &v);
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
		return meta_fail(t->m, "tier get", rc);

	/* A handful of tiers at most: a scan for the max is simpler than a
	 * separate counter and never reuses an id still present. */
	MDB_cursor *c;
	if ((rc = mdb_cursor_open(t->txn, meta_dbi(t, META_DB_TIERS), &c)) != 0)
		return meta_fail(t->m, "tier cursor", rc);
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
		return meta_fail(t->m, "tier scan", rc);
	if (max == UINT16_MAX)
		return -ENOSPC;
	uint16_t nid = max + 1; /* 0 is reserved for "no tier" */
	MDB_val nv = {.mv_size = sizeof(nid), .mv_data = &nid};
	if ((rc = meta_db_put(t, META_DB_TIERS, &k, &nv, 0, "tier put")) != 0)
		return rc;
	*id = nid;
	return 0;
}

int meta_tier_iter(struct meta_txn *t, int (*fn)(const char *name, uint16_t id, void *arg),
		   void *arg)
{
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, meta_dbi(t, META_DB_TIERS), &c);
	if (rc)
		return meta_fail(t->m, "tier cursor", rc);
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
	return rc == MDB_NOTFOUND ? 0 : meta_fail(t->m, "tier iter", rc);
}
