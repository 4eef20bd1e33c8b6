/*
 * fs/meta_block.c — the per-file block maps in the store: for each (inode,
 * block index), the tier, slot, checksum and written extent of the block
 * (struct meta_block), walked in index order per file or across all files.
 *
 * A record is stored in its short form (META_BLOCK_V1_SIZE bytes, without
 * the stored length) whenever the stored length is 0, so a mount that uses
 * no codec keeps records that daemons from before the codec can read.
 */
#include "fs/meta_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ---- blocks ------------------------------------------------------------- */

static void block_key(unsigned char kb[16], uint64_t ino, uint64_t idx)
{
	meta_put_be64(kb, ino);
	meta_put_be64(kb + 8, idx);
}

/* A stored record into *OUT: false if its size is neither form's. */
static bool block_decode(const MDB_val *v, struct meta_block *out)
{
	if (v->mv_size != sizeof(*out) && v->mv_size != META_BLOCK_V1_SIZE)
		return false;
	memset(out, 0, sizeof(*out));
	memcpy(out, v->mv_data, v->mv_size);
	return true;
}

int meta_block_get(struct meta_txn *t, uint64_t ino, uint64_t idx, struct meta_block *out)
{
	unsigned char kb[16];
	block_key(kb, ino, idx);
	MDB_val k = {.mv_size = 16, .mv_data = kb}, v;
	int rc = meta_db_get(t, META_DB_BLOCKS, &k, &v, "block get");
	if (rc)
		return rc;
	if (!block_decode(&v, out)) {
		fprintf(stderr,
			"tierfs: meta %s: block %llu/%llu: record of %zu bytes, want %u or %zu\n",
			t->m->dir, (unsigned long long)ino, (unsigned long long)idx, v.mv_size,
			META_BLOCK_V1_SIZE, sizeof(*out));
		return -EIO;
	}
	return 0;
}

int meta_block_put(struct meta_txn *t, uint64_t ino, uint64_t idx, const struct meta_block *b)
{
	unsigned char kb[16];
	block_key(kb, ino, idx);
	MDB_val k = {.mv_size = 16, .mv_data = kb};
	MDB_val v = {.mv_size = b->stored || b->reserved ? sizeof(*b) : META_BLOCK_V1_SIZE,
		     .mv_data = (void *)b};
	return meta_db_put(t, META_DB_BLOCKS, &k, &v, 0, "block put");
}

int meta_block_del(struct meta_txn *t, uint64_t ino, uint64_t idx)
{
	unsigned char kb[16];
	block_key(kb, ino, idx);
	MDB_val k = {.mv_size = 16, .mv_data = kb};
	return meta_db_del(t, META_DB_BLOCKS, &k, "block del");
}

/* Walk META_DB_BLOCKS from KB (16-byte seek key); ONE_INO limits the walk to the
 * inode in KB's first 8 bytes. Calls fn(ino, idx, b, arg) via the adapter. */
static int block_walk(struct meta_txn *t, const unsigned char kb[16], bool one_ino,
		      int (*fn)(uint64_t ino, uint64_t idx, const struct meta_block *b, void *),
		      void *arg)
{
	MDB_cursor *c;
	int rc = mdb_cursor_open(t->txn, meta_dbi(t, META_DB_BLOCKS), &c);
	if (rc)
		return meta_fail(t->m, "block cursor", rc);
	MDB_val k, v;
	int ret = meta_seek_prefix(t, c, kb, one_ino ? 8 : 0, 16, &k, &v, "block iter");
	while (ret == 1) {
		struct meta_block b;
		if (k.mv_size != 16 || !block_decode(&v, &b)) {
			fprintf(stderr, "tierfs: meta %s: blocks: bad record (%zu/%zu bytes)\n",
				t->m->dir, k.mv_size, v.mv_size);
			ret = -EIO;
			break;
		}
		const unsigned char *p = k.mv_data;
		if ((ret = fn(meta_get_be64(p), meta_get_be64(p + 8), &b, arg)) != 0)
			break;
		ret = meta_next_in_prefix(t, c, kb, one_ino ? 8 : 0, &k, &v, "block iter next");
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
