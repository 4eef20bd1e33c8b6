/*
 * fs/meta.h — the namespace and the per-file block maps, persisted in LMDB.
 *
 * One LMDB environment in the [mount] metadata directory, named databases:
 *   super   string key -> u64       (block_size, the next inode number,
 *                                    each tier's measured bandwidth)
 *   tiers   tier name -> u16 id     (ids are stable when the config reorders)
 *   inodes  ino -> struct meta_inode
 *   dirents (parent ino, name) -> child ino
 *   xattrs  (ino, name) -> value
 *   links   ino -> symlink target
 *   blocks  (ino, block index) -> struct meta_block
 * Integer key parts are big-endian so cursors walk them in order.
 *
 * Every change happens inside a write transaction. A commit syncs its data
 * pages but not the meta page (MDB_NOMETASYNC): a daemon crash loses
 * nothing committed, and a power loss may undo the last commit but never
 * leaves a tree whose pages were not written (MDB_NOSYNC could: LMDB then
 * reuses pages of the last synced tree before the next sync, and the disk
 * may get a meta page before the pages it names). meta_sync() makes
 * everything durable (fsync, unmount). All functions return 0 or -errno
 * (-ENOENT for a missing key). A struct meta_txn is used by one thread at
 * a time; LMDB allows one write transaction at a time (others block in
 * meta_txn_begin) and many readers.
 *
 * The environment and transactions are in fs/meta.c, the tables in
 * fs/meta_super.c (super, tiers), fs/meta_ns.c (inodes, dirents, xattrs,
 * links) and fs/meta_block.c (blocks).
 */
#ifndef TIERFS_META_H
#define TIERFS_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define META_ROOT_INO 1

struct meta;
struct meta_txn;

/* Stored as-is (fixed layout, host byte order). A field added later takes
 * bytes that were padding, which older daemons wrote as 0: 0 must mean
 * "none" in it. */
struct meta_inode {
	uint64_t ino;
	uint64_t parent; /* directory holding its (first) name; 0 once unlinked */
	uint64_t size;
	uint32_t mode, uid, gid, nlink;
	uint32_t rdev;
	int32_t pin_tier; /* tier id pinned by user.tierfs.pin, -1 none */
	uint32_t flags;	  /* META_F_* */
	/* The low 32 bits of the file's name id (fs.h fs_order_id): a hash of
	 * the directory and name it was created under, kept across renames;
	 * the high bits are in name_hi. 0 in both: none (every inode a daemon
	 * before it made, where this was padding written as 0). */
	uint32_t name_lo;
	int64_t atime_sec, mtime_sec, ctime_sec;
	uint32_t atime_nsec, mtime_nsec, ctime_nsec;
	uint32_t name_hi; /* the name id's bits 32-38 (was padding, 0) */
};

#define META_F_VOLATILE 0x1 /* persistent = no: data gone after a remount */

/* The slot is set aside (fallocate) and nothing was written to it: the
 * block reads as zeros, csum is 0. Daemons from before the flag never
 * stored a record with csum 0, and read one as zeros too. */
#define META_B_UNWRITTEN 0x1

struct meta_block {
	uint16_t tier_id;
	uint16_t flags; /* META_B_* (was padding, always 0, before fallocate set it) */
	/* TIER_IO_ALIGN units written from the block's start, the rest zeros
	 * (a file's last block, up to EOF); 0, the whole block. Padding, so
	 * 0, before partial writes: a daemon from then reads such a block
	 * whole and fails its checksum (-EIO), never returns bad bytes. */
	uint32_t pages;
	uint64_t slot;
	uint64_t csum;
	/* The bytes the block takes on its tier, in TIER_IO_ALIGN units, where
	 * the tier's codec stored it as a frame (tier_io.stored_len); 0, as
	 * it is. Records without it (META_BLOCK_V1_SIZE bytes: every daemon
	 * before the codec, and any record whose stored is 0) read as 0. */
	uint32_t stored;
	uint32_t reserved; /* 0 */
};
#define META_BLOCK_V1_SIZE 24u

/* Open or create the environment in DIR (created if missing). */
int meta_open(const char *dir, struct meta **out);
void meta_close(struct meta *m);
/* Flush all committed transactions to stable storage. */
int meta_sync(struct meta *m);

int meta_txn_begin(struct meta *m, bool write, struct meta_txn **out);
int meta_txn_commit(struct meta_txn *t); /* frees t whatever the result */
void meta_txn_abort(struct meta_txn *t); /* frees t */

/* super */
int meta_super_get(struct meta_txn *t, const char *key, uint64_t *val);
int meta_super_put(struct meta_txn *t, const char *key, uint64_t val);

/* Stable id of a tier name; creates one (next free id) when CREATE. */
int meta_tier_id(struct meta_txn *t, const char *name, bool create, uint16_t *id);
/* Call fn for each (name, id) known; stops and returns fn's value if nonzero. */
int meta_tier_iter(struct meta_txn *t, int (*fn)(const char *name, uint16_t id, void *arg),
		   void *arg);

/* Next inode number (persisted counter, never reused). */
int meta_ino_alloc(struct meta_txn *t, uint64_t *ino);

int meta_inode_get(struct meta_txn *t, uint64_t ino, struct meta_inode *out);
int meta_inode_put(struct meta_txn *t, const struct meta_inode *in);
/* Remove the inode and its xattrs, symlink target and every block record. */
int meta_inode_del(struct meta_txn *t, uint64_t ino);
int meta_inode_count(struct meta_txn *t, uint64_t *n); /* every inode, root included */
int meta_inode_iter(struct meta_txn *t, int (*fn)(const struct meta_inode *in, void *arg),
		    void *arg);

int meta_dirent_get(struct meta_txn *t, uint64_t parent, const char *name, uint64_t *ino);
int meta_dirent_put(struct meta_txn *t, uint64_t parent, const char *name, uint64_t ino);
int meta_dirent_del(struct meta_txn *t, uint64_t parent, const char *name);
/* 1 if PARENT has no entries, 0 if it has, -errno on error. */
int meta_dir_is_empty(struct meta_txn *t, uint64_t parent);
/* Entries in name order; stops and returns fn's value if nonzero. */
int meta_dir_iter(struct meta_txn *t, uint64_t parent,
		  int (*fn)(const char *name, uint64_t ino, void *arg), void *arg);

/* Returns the value length (copied when SIZE >= length; SIZE 0 = just ask),
 * -ENODATA if absent, -ERANGE if SIZE is too small. */
int meta_xattr_get(struct meta_txn *t, uint64_t ino, const char *name, void *buf, size_t size);
/* FLAGS: 0, XATTR_CREATE (-EEXIST if present), XATTR_REPLACE (-ENODATA if absent). */
int meta_xattr_set(struct meta_txn *t, uint64_t ino, const char *name, const void *val, size_t len,
		   int flags);
/* Names as "a\0b\0"; returns total length, -ERANGE if SIZE (nonzero) is too small. */
int meta_xattr_list(struct meta_txn *t, uint64_t ino, char *buf, size_t size);
int meta_xattr_del(struct meta_txn *t, uint64_t ino, const char *name); /* -ENODATA */

int meta_link_put(struct meta_txn *t, uint64_t ino, const char *target);
/* Copies the NUL-terminated target; -ENAMETOOLONG if SIZE is too small. */
int meta_link_get(struct meta_txn *t, uint64_t ino, char *buf, size_t size);

int meta_block_get(struct meta_txn *t, uint64_t ino, uint64_t idx, struct meta_block *out);
int meta_block_put(struct meta_txn *t, uint64_t ino, uint64_t idx, const struct meta_block *b);
int meta_block_del(struct meta_txn *t, uint64_t ino, uint64_t idx);
/* Blocks of INO with index >= FROM, in index order; stops on nonzero fn. */
int meta_block_iter(struct meta_txn *t, uint64_t ino, uint64_t from,
		    int (*fn)(uint64_t idx, const struct meta_block *b, void *arg), void *arg);
/* Every block record of every inode (mount-time slot accounting). */
int meta_block_iter_all(struct meta_txn *t,
			int (*fn)(uint64_t ino, uint64_t idx, const struct meta_block *b,
				  void *arg),
			void *arg);

#endif
