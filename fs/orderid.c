/*
 * fs/orderid.c — the learner's names for files (fs.h, "orderid.c"): a file
 * created here is known to the order learner by a hash of where it was
 * created, and this table leads from such a name id back to the newest
 * file that has it, for the engine's read-ahead and its "is this block on
 * a disk" question.
 *
 * Why a table of its own and not a chain through the inode table: inodes
 * leave that table once the kernel forgets them (inode_sweep,
 * fs/cache/commit.c), and the
 * files DeepSpeed and tierfs-update reopen each step are just those whose
 * blocks the engine must still find. An entry is 16 bytes per name id of a
 * file loaded since mount and not deleted, so it does not grow with files
 * gone. Open addressing, linear probing, deletion by backward shift.
 *
 * Locking: every function runs with fs->lock held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "fs/fs.h"
#include "policy/mix.h"

struct orderid_slot {
	uint64_t id; /* name id without FS_NAME_ID; 0 empty */
	uint64_t ino;
};

void fs_name_id_set(struct meta_inode *a, uint64_t parent, const char *name)
{
	uint64_t h = XXH3_64bits_withSeed(name, strlen(name), parent) & (FS_NAME_ID - 1);
	if (!h)
		h = 1; /* 0 means none */
	a->name_lo = (uint32_t)h;
	a->name_hi = (uint32_t)(h >> 32);
}

static struct orderid_slot *find(struct fs *fs, uint64_t id)
{
	for (size_t i = mix64(id) & fs->eng.oid_mask;; i = (i + 1) & fs->eng.oid_mask)
		if (fs->eng.oid[i].id == id || !fs->eng.oid[i].id)
			return &fs->eng.oid[i];
}

static int grow(struct fs *fs)
{
	size_t osize = fs->eng.oid ? fs->eng.oid_mask + 1 : 0, nsize = osize ? osize * 2 : 256;
	struct orderid_slot *old = fs->eng.oid, *n = calloc(nsize, sizeof(*n));
	if (!n)
		return -ENOMEM;
	fs->eng.oid = n;
	fs->eng.oid_mask = nsize - 1;
	for (size_t i = 0; i < osize; i++)
		if (old[i].id)
			*find(fs, old[i].id) = old[i];
	free(old);
	return 0;
}

int fs_order_id_add(struct fs *fs, const struct meta_inode *a)
{
	uint64_t id = fs_name_id(a);
	if (!id)
		return 0;
	if (!fs->eng.oid || (fs->eng.oid_used + 1) * 2 > fs->eng.oid_mask + 1) {
		int rc = grow(fs);
		if (rc)
			return rc;
	}
	struct orderid_slot *s = find(fs, id);
	if (!s->id) {
		s->id = id;
		fs->eng.oid_used++;
	} else if (s->ino > a->ino) {
		return 0; /* an older file loaded again (ls -l): the newer stays */
	}
	s->ino = a->ino;
	return 0;
}

void fs_order_id_del(struct fs *fs, const struct meta_inode *a)
{
	uint64_t id = fs_name_id(a);
	if (!id || !fs->eng.oid)
		return;
	struct orderid_slot *s = find(fs, id);
	if (s->id != id || s->ino != a->ino)
		return;
	/* Backward shift: move up each later entry of the run that may sit
	 * in the hole, so no lookup stops early at it. */
	size_t hole = (size_t)(s - fs->eng.oid);
	for (size_t j = (hole + 1) & fs->eng.oid_mask; fs->eng.oid[j].id;
	     j = (j + 1) & fs->eng.oid_mask) {
		size_t home = mix64(fs->eng.oid[j].id) & fs->eng.oid_mask;
		/* j's entry may move to the hole if its home is not in (hole, j] */
		if (((j - home) & fs->eng.oid_mask) >= ((j - hole) & fs->eng.oid_mask)) {
			fs->eng.oid[hole] = fs->eng.oid[j];
			hole = j;
		}
	}
	fs->eng.oid[hole].id = 0;
	fs->eng.oid_used--;
}

uint64_t fs_order_id_ino(struct fs *fs, uint64_t id)
{
	if (!(id & FS_NAME_ID))
		return id;
	if (!fs->eng.oid)
		return 0;
	struct orderid_slot *s = find(fs, id & (FS_NAME_ID - 1));
	return s->id ? s->ino : 0;
}

void fs_order_ids_free(struct fs *fs)
{
	free(fs->eng.oid);
	fs->eng.oid = NULL;
	fs->eng.oid_mask = fs->eng.oid_used = 0;
}
