/*
 * fs/cache/commit.c — commits: the block maps and sizes of finished write-backs
 * written to LMDB, the slots they free released once the commit is
 * durable, and the inode sweep that gives back the memory of forgotten
 * inodes after a commit.
 *
 * Only what is durable is committed: a block map names a slot only once
 * its write-back completed, and a file's size only once every block below
 * it is on a tier, so that after a crash a file reads back as one state it
 * really had.
 *
 * Locking: fs/lock.h.
 */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "fs/cache/internal.h"

/* Whether slots wait for a commit_sync; a hint, read without the lock. */
bool commit_held(struct fs *fs)
{
	return __atomic_load_n(&fs->commit.nheld, __ATOMIC_ACQUIRE) != 0;
}

int commit_pend_add(struct fs *fs, uint64_t ino, uint64_t idx)
{
	if (fs->commit.npend == fs->commit.pend_cap) {
		size_t n = fs->commit.pend_cap ? fs->commit.pend_cap * 2 : 1024;
		struct pend *p = realloc(fs->commit.pend, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		fs->commit.pend = p;
		fs->commit.pend_cap = n;
	}
	fs->commit.pend[fs->commit.npend++] = (struct pend){ino, idx};
	return 0;
}

/* Whether nothing but LMDB needs IN's block map: the kernel has forgotten
 * the inode (no lookup, no open), it still has a name (deletion is
 * inode_maybe_delete's), nothing of it is cached, dirty, being written or
 * resized, and no block record of it waits for a commit. Lock held. */
static bool inode_idle(const struct inode *in)
{
	return in->ino != META_ROOT_INO && !in->nlookup && !in->nopen && in->attr.nlink &&
	       !in->dropping && !in->resizing && !in->nwriting && !in->nce && !in->ndirty &&
	       !in->nflushing && !in->sweep_keep;
}

/* Whether an idle IN may leave the table: LMDB holds all of it, and no
 * fsync is owed a write-back error or a sync of it (fs.h: wb_first). */
static bool inode_forgettable(const struct fs *fs, const struct inode *in)
{
	if (in->attr_dirty || in->wb_err || (in->unsynced && fs->conf.sync_on_close))
		return false;
	for (int t = 0; t < CONF_MAX_TIERS; t++)
		if (in->wb_first[t])
			return false;
	return true;
}

/* Heap bytes of IN's block map. */
static uint64_t map_bytes(const struct inode *in)
{
	uint64_t n = in->nchunks * sizeof(*in->chunks);
	for (uint64_t c = 0; c < in->nchunks; c++)
		if (in->chunks[c])
			n += FS_MAP_CHUNK * sizeof(struct blk);
	return n;
}

/* Give back the memory of inodes the kernel has forgotten: their block
 * maps, and the inodes themselves where nothing about them is owed. Every
 * inode once looked up stayed in the table with its map for the life of
 * the mount: a map chunk and more for each small file ever touched. The
 * next use loads them again from LMDB. After a good commit, lock held: a
 * map is dropped only when LMDB has all of it. Returns the heap bytes
 * freed. */
static uint64_t inode_sweep(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	uint64_t freed = 0;
	for (size_t i = 0; i < fs->commit.npend; i++) {
		struct inode *in = fs_inode_find(fs, fs->commit.pend[i].ino);
		if (in)
			in->sweep_keep = true;
	}
	for (size_t h = 0; h < fs->itab_size; h++) {
		struct inode **pp = &fs->itab[h];
		while (*pp) {
			struct inode *in = *pp;
			bool idle = inode_idle(in);
			in->sweep_keep = false;
			if (idle && inode_forgettable(fs, in)) {
				*pp = in->hnext;
				fs->ninodes--;
				freed += map_bytes(in) + sizeof(*in);
				fs_map_free(in);
				free(in);
				continue;
			}
			if (idle && in->map_loaded) {
				freed += map_bytes(in);
				fs_map_unload(fs, in);
			}
			pp = &in->hnext;
		}
	}
	return freed;
}

/* The maps are small heap blocks: freed, they stay in the daemon's RSS,
 * and a burst of new files (whose maps live until their first commit) left
 * the RSS at its peak, several times what an inode that stays costs per
 * file. Past this many freed bytes (commit.swept_bytes), the heap's free
 * pages go back to the system. */
#define TRIM_BYTES (8ull << 20)

/* The size of IN that a commit may record now. A file that only grew
 * since its last commit keeps the committed size while a block below the
 * new one has its data only in RAM (written, not written back, no older
 * durable copy): recorded, the new size would after a crash cover a hole
 * where the data was, and a file written and never fsync'd read back as
 * zeros (a kill between a commit and the next
 * write-back). A file that shrank takes its new size with the deletions of
 * the blocks it cut, whatever else; either way the size is
 * one the file really had. Volatile files (a rule's
 * persistent = no) never reach a tier, and keep their size. Lock held. */
static uint64_t durable_size(const struct fs *fs, const struct inode *in)
{
	tfs_assert_held(&fs->lock);
	uint64_t size = in->attr.size;
	if (inode_is_volatile(in) || in->shrunk || size <= in->committed_size ||
	    (!in->ndirty && !in->nflushing))
		return size;
	uint64_t n = (size + fs->bs - 1) / fs->bs;
	for (uint64_t i = fs_blk_next(in, 0); i < n && i < in->nblocks;
	     i = fs_blk_next(in, i + 1)) {
		const struct blk *b = fs_blk(in, i);
		if (b && b->ce && (b->ce->dirty || b->ce->flushing) &&
		    (b->tier == TIER_NONE || b->csum == 0))
			return in->committed_size;
	}
	return size;
}

/* Add the N slots a commit freed to fs->commit.held. fs->commit.lock and
 * fs->lock held. */
static int hold(struct fs *fs, const struct freed_slot *freed, size_t n)
{
	tfs_assert_held(&fs->lock);
	size_t have = fs->commit.nheld;
	struct freed_slot *h = realloc(fs->commit.held, (have + n) * sizeof(*h));
	if (!h)
		return -ENOMEM;
	memcpy(h + have, freed, n * sizeof(*h));
	fs->commit.held = h;
	fs->commit.held_from = atomic_fetch_add(&fs->commit.commits, 1) + 1;
	__atomic_store_n(&fs->commit.nheld, have + n, __ATOMIC_RELEASE);
	return 0;
}

/* Free the slots fs->commit.held holds: the commits that freed them are on disk.
 * fs->commit.lock and fs->lock held. */
static void release_held(struct fs *fs)
{
	tfs_assert_held(&fs->lock);
	for (size_t i = 0; i < fs->commit.nheld; i++)
		tier_free(fs->tiers[fs->commit.held[i].tier], fs->commit.held[i].slot);
	free(fs->commit.held);
	fs->commit.held = NULL;
	__atomic_store_n(&fs->commit.nheld, 0, __ATOMIC_RELEASE);
}

/* meta_sync, and then the slots that the commits it made durable freed:
 * those ended before it began. Outside fs->commit.lock, as fsyncs flush
 * while other commits run. */
static int commit_sync(struct fs *fs)
{
	uint64_t done = atomic_load(&fs->commit.commits);
	int rc = meta_sync(fs->meta);
	if (rc)
		return rc;
	tfs_lock(&fs->commit.lock);
	if (fs->commit.nheld && fs->commit.held_from <= done) {
		tfs_lock(&fs->lock);
		release_held(fs);
		tfs_unlock(&fs->lock);
	}
	tfs_unlock(&fs->commit.lock);
	return 0;
}

/* Under fs->commit.lock. *WROTE: whether there was anything to commit (a
 * metadata transaction ran). */
static int commit_locked(struct fs *fs, bool *wrote)
{
	*wrote = false;
	tfs_lock(&fs->lock);
	size_t np = fs->commit.npend;
	struct pend *pend = fs->commit.pend;
	fs->commit.pend = NULL;
	fs->commit.npend = fs->commit.pend_cap = 0;
	struct meta_block *recs = np ? calloc(np, sizeof(*recs)) : NULL;
	bool *del = np ? calloc(np, sizeof(*del)) : NULL;
	bool *skip = np ? calloc(np, sizeof(*skip)) : NULL;
	size_t na = 0;
	bool need_sync = false;
	struct meta_inode *attrs = NULL;
	bool *shrunk = NULL; /* per attrs[]: in->shrunk when taken */
	int rc = 0;
	if (np && (!recs || !del || !skip)) {
		rc = -ENOMEM;
		goto unlock_fail;
	}
	for (size_t i = 0; i < np; i++) {
		struct inode *in = fs_inode_find(fs, pend[i].ino);
		if (!in) {
			skip[i] = true;
			continue;
		}
		struct blk *b = fs_blk(in, pend[i].idx);
		if (!b || b->tier == TIER_NONE || (b->csum == 0 && !b->unwritten)) {
			/* No block, or a slot given but not written yet: either
			 * way the committed record (whose slot may be freed in
			 * this very commit) must go. The write-back will add
			 * the new one. */
			del[i] = true;
		} else {
			recs[i].tier_id = fs->tier_id[b->tier];
			recs[i].flags = b->csum == 0 ? META_B_UNWRITTEN : 0;
			recs[i].slot = b->slot;
			recs[i].csum = b->csum;
			recs[i].pages = b->pages;
			recs[i].stored = b->stored;
			/* Written back since the last good sync of its tier. */
			need_sync |= in->wb_first[b->tier] != 0;
		}
	}
	for (size_t h = 0; h < fs->itab_size; h++)
		for (struct inode *in = fs->itab[h]; in; in = in->hnext)
			if (in->attr_dirty)
				na++;
	if (na &&
	    (!(attrs = calloc(na, sizeof(*attrs))) || !(shrunk = calloc(na, sizeof(*shrunk))))) {
		free(attrs);
		free(shrunk);
		rc = -ENOMEM;
		goto unlock_fail;
	}
	na = 0;
	for (size_t h = 0; h < fs->itab_size; h++)
		for (struct inode *in = fs->itab[h]; in; in = in->hnext)
			if (in->attr_dirty) {
				attrs[na] = in->attr;
				uint64_t safe = durable_size(fs, in);
				shrunk[na] = in->shrunk;
				if (safe < attrs[na].size) {
					attrs[na].size = safe; /* the rest later */
				} else {
					in->attr_dirty = false;
					in->shrunk = false;
				}
				na++;
			}
	size_t nfreed = fs->cache.nfreed;
	struct freed_slot *freed = fs->cache.freed;
	fs->cache.freed = NULL;
	fs->cache.nfreed = fs->cache.freed_cap = 0;
	tfs_unlock(&fs->lock);

	*wrote = np || na || nfreed;
	/* The records name slots written since the last commit. Their bytes
	 * must be durable before the map names them: after a power failure
	 * the map would hold the new checksum over a slot the disk never
	 * got, and the block, whose old copy was intact, would read as an
	 * I/O error. A sync that fails here keeps the records
	 * for the next try; the old copies stay in the map meanwhile. An
	 * fsync has synced them already, as a rule: its own sync round,
	 * outside fs->commit.lock, is shared with the other fsyncs of the
	 * moment; if that round failed, the fsync got the error, as every
	 * later one of the file does (wb_err), and the records go in. */
	if (need_sync && (rc = sync_tiers(fs)))
		*wrote = false;
	else if (*wrote) {
		struct meta_txn *t;
		rc = meta_txn_begin(fs->meta, true, &t);
		for (size_t i = 0; !rc && i < np; i++) {
			if (skip[i])
				continue;
			struct meta_inode tmp;
			if (meta_inode_get(t, pend[i].ino, &tmp))
				continue; /* deleted meanwhile */
			if (del[i]) {
				rc = meta_block_del(t, pend[i].ino, pend[i].idx);
				if (rc == -ENOENT)
					rc = 0;
			} else {
				rc = meta_block_put(t, pend[i].ino, pend[i].idx, &recs[i]);
			}
		}
		for (size_t i = 0; !rc && i < na; i++) {
			struct meta_inode tmp;
			if (meta_inode_get(t, attrs[i].ino, &tmp))
				continue;
			/* nlink and parent belong to namespace operations, which
			 * commit them themselves. */
			attrs[i].nlink = tmp.nlink;
			attrs[i].parent = tmp.parent;
			rc = meta_inode_put(t, &attrs[i]);
		}
		if (rc)
			meta_txn_abort(t);
		else
			rc = meta_txn_commit(t);
	}
	tfs_lock(&fs->lock);
	if (rc) {
		TFS_LOG("metadata commit failed: %s", strerror(-rc));
		/* Keep the work for the next try. */
		for (size_t i = 0; i < np; i++)
			commit_pend_add(fs, pend[i].ino, pend[i].idx);
		for (size_t i = 0; i < na; i++) {
			struct inode *in = fs_inode_find(fs, attrs[i].ino);
			if (in) {
				in->attr_dirty = true;
				in->shrunk |= shrunk[i];
			}
		}
		for (size_t i = 0; i < nfreed; i++)
			slot_defer_free(fs, freed[i].tier, freed[i].slot);
	} else {
		for (size_t i = 0; i < na; i++) {
			struct inode *in = fs_inode_find(fs, attrs[i].ino);
			if (in)
				in->committed_size = attrs[i].size;
		}
		if (nfreed && hold(fs, freed, nfreed))
			/* Out of memory: the next commit tries again. */
			for (size_t i = 0; i < nfreed; i++)
				slot_defer_free(fs, freed[i].tier, freed[i].slot);
		fs->commit.swept_bytes += inode_sweep(fs);
	}
	tfs_unlock(&fs->lock);
	if (fs->commit.swept_bytes >= TRIM_BYTES) {
		/* Outside fs->lock: it walks every arena. */
		fs->commit.swept_bytes = 0;
		malloc_trim(0);
	}
	free(freed);
	free(attrs);
	free(shrunk);
	free(pend);
	free(recs);
	free(del);
	free(skip);
	return rc;

unlock_fail:
	/* Put the pending list back untouched. */
	for (size_t i = 0; i < np; i++)
		commit_pend_add(fs, pend[i].ino, pend[i].idx);
	tfs_unlock(&fs->lock);
	free(pend);
	free(recs);
	free(del);
	free(skip);
	return rc;
}

/* cache_commit; *WROTE as commit_locked's. */
static int commit_run(struct fs *fs, bool *wrote)
{
	tfs_lock(&fs->commit.lock);
	uint64_t t0 = tier_now_ns();
	atomic_store(&fs->commit.began_ns, t0);
	int rc = commit_locked(fs, wrote);
	uint64_t t1 = tier_now_ns();
	atomic_store(&fs->commit.ended_ns, t1);
	if (*wrote) {
		atomic_fetch_add(&fs->stats.commits, 1);
		atomic_fetch_add(&fs->stats.commit_ns, t1 - t0);
	}
	tfs_unlock(&fs->commit.lock);
	return rc;
}

/* commit_run, and then the slots it freed are free once it is on disk:
 * at once, as users see a removal free space in df, and the writes to a
 * full tier wait for it. Flushing the commit's meta page costs a flush
 * of 4 KiB. DURABLE: flush it in any case (fsync). */
int commit_and_free(struct fs *fs, bool durable, bool *wrote)
{
	int rc = commit_run(fs, wrote);
	if (durable || commit_held(fs)) {
		int r = commit_sync(fs);
		if (!rc)
			rc = r;
	}
	return rc;
}

int cache_commit(struct fs *fs)
{
	bool wrote;
	return commit_and_free(fs, false, &wrote);
}

int cache_commit_durable(struct fs *fs)
{
	bool wrote;
	return commit_and_free(fs, true, &wrote);
}
