/*
 * fs/meta_int.h — what the files of the metadata store share and no one
 * else sees: the environment and transaction structs, the named databases,
 * the key encoding and the record primitives every table is built from.
 *
 * Key encoding: every integer part of a key is big-endian so that LMDB's
 * default memcmp ordering walks one inode's dirents/xattrs/blocks as one
 * contiguous range (prefix = the 8-byte BE ino). Names are stored without
 * a NUL. Values are host-endian raw structs (meta_inode, meta_block) or
 * host-endian u64 (super, dirents) / u16 (tiers); the metadata directory is
 * node-local, so it never moves between hosts of different endianness.
 */
#ifndef TIERFS_META_INT_H
#define TIERFS_META_INT_H

#include "fs/meta.h"

#include <limits.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum meta_db {
	META_DB_SUPER,
	META_DB_TIERS,
	META_DB_INODES,
	META_DB_DIRENTS,
	META_DB_XATTRS,
	META_DB_LINKS,
	META_DB_BLOCKS,
	META_DB_COUNT,
};

struct meta {
	MDB_env *env;
	MDB_dbi dbi[META_DB_COUNT]; /* immutable after meta_open: shared by all txns */
	char *dir;		    /* for error messages */
};

struct meta_txn {
	struct meta *m;
	MDB_txn *txn;
	bool write;
};

/* Map an LMDB result to 0 / -errno. */
int meta_map_rc(int rc);
/* Report an unexpected failure (anything but a plain miss) with context. */
int meta_fail(const struct meta *m, const char *op, int rc);

static inline void meta_put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (unsigned char)v;
		v >>= 8;
	}
}

static inline uint64_t meta_get_be64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/* 0, or -EINVAL (NULL/empty) / -ENAMETOOLONG (> NAME_MAX bytes). */
int meta_check_name(const char *name, size_t *len);

/* Key buffer for "8-byte BE ino + name"; name is at most NAME_MAX. */
struct meta_name_key {
	unsigned char b[8 + NAME_MAX];
	MDB_val v;
};

int meta_make_name_key(struct meta_name_key *k, uint64_t ino, const char *name);

static inline MDB_dbi meta_dbi(const struct meta_txn *t, enum meta_db d)
{
	return t->m->dbi[d];
}

int meta_db_get(struct meta_txn *t, enum meta_db d, MDB_val *k, MDB_val *v, const char *op);
int meta_db_put(struct meta_txn *t, enum meta_db d, MDB_val *k, MDB_val *v, unsigned flags,
		const char *op);
int meta_db_del(struct meta_txn *t, enum meta_db d, MDB_val *k, const char *op);
/* Delete every key of DB D starting with the 8-byte PREFIX. */
int meta_del_prefix(struct meta_txn *t, enum meta_db d, const unsigned char prefix[8],
		    const char *op);
/* Position C on the first key of PREFIX's range; 1 found, 0 none, -errno. */
int meta_seek_prefix(struct meta_txn *t, MDB_cursor *c, const unsigned char *prefix, size_t plen,
		     size_t seek_len, MDB_val *k, MDB_val *v, const char *op);
/* Step C to the next key; 1 still inside PREFIX's range (plen 0: any key),
 * 0 past it or at the end, -errno. The twin of meta_seek_prefix for the walks. */
int meta_next_in_prefix(struct meta_txn *t, MDB_cursor *c, const unsigned char *prefix, size_t plen,
			MDB_val *k, MDB_val *v, const char *op);

#endif
