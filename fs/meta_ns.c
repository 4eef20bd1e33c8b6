/*
 * fs/meta_ns.c — the namespace in the store: inode records and the inode
 * number counter, directory entries, extended attributes and symlink
 * targets. Deleting an inode also drops its block map (fs/meta_block.c
 * owns the records; the range delete is a record primitive).
 */
#include "fs/meta_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>

#define META_XATTR_MAX (64 * 1024)

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
	meta_put_be64(kb, ino);
	MDB_val k = {.mv_size = 8, .mv_data = kb}, v;
	int rc = meta_db_get(t, META_DB_INODES, &k, &v, "inode get");
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
	meta_put_be64(kb, in->ino);
	MDB_val k = {.mv_size = 8, .mv_data = kb};
	MDB_val v = {.mv_size = sizeof(*in), .mv_data = (void *)in};
	return meta_db_put(t, META_DB_INODES, &k, &v, 0, "inode put");
}

/* Removes the dependent records even when the inode record itself is
 * missing (cleanup after a partial failure), then reports -ENOENT. */
int meta_inode_del(struct meta_txn *t, uint64_t ino)
{
	unsigned char kb[8];
	meta_put_be64(kb, ino);
	int rc = meta_del_prefix(t, META_DB_XATTRS, kb, "inode del xattrs");
	if (rc)
		return rc;
	if ((rc = meta_del_prefix(t, META_DB_BLOCKS, kb, "inode del blocks")) != 0)
		return rc;
	MDB_val k = {.mv_size = 8, .mv_data = kb};
	rc = meta_db_del(t, META_DB_LINKS, &k, "inode del link");
	if (rc && rc != -ENOENT)
		return rc;
	return meta_db_del(t, META_DB_INODES, &k, "inode del");
}

int meta_inode_count(struct meta_txn *t, uint64_t *n)
{
	MDB_stat st;
	int rc = mdb_stat(t->txn, meta_dbi(t, META_DB_INODES), &st);
	if (rc)
		return meta_fail(t->m, "inode count", rc);
	*n = st.ms_entries;
	return 0;
}

int meta_inode_iter(struct meta_txn *t, int (*fn)(const struct meta_inode *in, void *arg),
		    void *arg)
{
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, meta_dbi(t, META_DB_INODES), &c);
	if (rc)
		return meta_fail(t->m, "inode cursor", rc);
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
	return rc == MDB_NOTFOUND ? 0 : meta_fail(t->m, "inode iter", rc);
}

/* ---- dirents ------------------------------------------------------------ */

int meta_dirent_get(struct meta_txn *t, uint64_t parent, const char *name, uint64_t *ino)
{
	struct meta_name_key nk;
	int rc = meta_make_name_key(&nk, parent, name);
	if (rc)
		return rc;
	MDB_val v;
	if ((rc = meta_db_get(t, META_DB_DIRENTS, &nk.v, &v, "dirent get")) != 0)
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
	struct meta_name_key nk;
	int rc = meta_make_name_key(&nk, parent, name);
	if (rc)
		return rc;
	MDB_val v = {.mv_size = sizeof(ino), .mv_data = &ino};
	return meta_db_put(t, META_DB_DIRENTS, &nk.v, &v, 0, "dirent put");
}

int meta_dirent_del(struct meta_txn *t, uint64_t parent, const char *name)
{
	struct meta_name_key nk;
	int rc = meta_make_name_key(&nk, parent, name);
	if (rc)
		return rc;
	return meta_db_del(t, META_DB_DIRENTS, &nk.v, "dirent del");
}
int meta_dir_is_empty(struct meta_txn *t, uint64_t parent)
{
	unsigned char kb[8];
	meta_put_be64(kb, parent);
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, meta_dbi(t, META_DB_DIRENTS), &c);
	if (rc)
		return meta_fail(t->m, "dirent cursor", rc);
	MDB_val k, v;
	rc = meta_seek_prefix(t, c, kb, 8, 8, &k, &v, "dir is_empty");
	mdb_cursor_close(c);
	if (rc < 0)
		return rc;
	return rc ? 0 : 1;
}

int meta_dir_iter(struct meta_txn *t, uint64_t parent,
		  int (*fn)(const char *name, uint64_t ino, void *arg), void *arg)
{
	unsigned char kb[8];
	meta_put_be64(kb, parent);
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, meta_dbi(t, META_DB_DIRENTS), &c);
	if (rc)
		return meta_fail(t->m, "dirent cursor", rc);
	MDB_val k, v;
	int ret = meta_seek_prefix(t, c, kb, 8, 8, &k, &v, "dir iter");
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
		ret = meta_next_in_prefix(t, c, kb, 8, &k, &v, "dir iter next");
	}
	mdb_cursor_close(c);
	return ret;
}

/* ---- xattrs ------------------------------------------------------------- */

int meta_xattr_get(struct meta_txn *t, uint64_t ino, const char *name, void *buf, size_t size)
{
	struct meta_name_key nk;
	int rc = meta_make_name_key(&nk, ino, name);
	if (rc)
		return rc;
	MDB_val v;
	rc = meta_db_get(t, META_DB_XATTRS, &nk.v, &v, "xattr get");
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
	struct meta_name_key nk;
	int rc = meta_make_name_key(&nk, ino, name);
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
		rc = meta_db_get(t, META_DB_XATTRS, &nk.v, &old, "xattr get");
		if (rc == -ENOENT)
			return -ENODATA;
		if (rc)
			return rc;
	}
	MDB_val v = {.mv_size = len, .mv_data = (void *)val};
	return meta_db_put(t, META_DB_XATTRS, &nk.v, &v,
			   (flags & XATTR_CREATE) ? MDB_NOOVERWRITE : 0, "xattr put");
}

int meta_xattr_list(struct meta_txn *t, uint64_t ino, char *buf, size_t size)
{
	unsigned char kb[8];
	meta_put_be64(kb, ino);
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, meta_dbi(t, META_DB_XATTRS), &c);
	if (rc)
		return meta_fail(t->m, "xattr cursor", rc);
	MDB_val k, v;
	size_t total = 0;
	int ret = meta_seek_prefix(t, c, kb, 8, 8, &k, &v, "xattr list");
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
		ret = meta_next_in_prefix(t, c, kb, 8, &k, &v, "xattr list next");
	}
	mdb_cursor_close(c);
	return ret < 0 ? ret : (int)total;
}

int meta_xattr_del(struct meta_txn *t, uint64_t ino, const char *name)
{
	struct meta_name_key nk;
	int rc = meta_make_name_key(&nk, ino, name);
	if (rc)
		return rc;
	rc = meta_db_del(t, META_DB_XATTRS, &nk.v, "xattr del");
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
	meta_put_be64(kb, ino);
	MDB_val k = {.mv_size = 8, .mv_data = kb};
	MDB_val v = {.mv_size = len, .mv_data = (void *)target};
	return meta_db_put(t, META_DB_LINKS, &k, &v, 0, "link put");
}

int meta_link_get(struct meta_txn *t, uint64_t ino, char *buf, size_t size)
{
	unsigned char kb[8];
	meta_put_be64(kb, ino);
	MDB_val k = {.mv_size = 8, .mv_data = kb}, v;
	int rc = meta_db_get(t, META_DB_LINKS, &k, &v, "link get");
	if (rc)
		return rc;
	if (size < v.mv_size + 1)
		return -ENAMETOOLONG;
	memcpy(buf, v.mv_data, v.mv_size);
	buf[v.mv_size] = '\0';
	return 0;
}
