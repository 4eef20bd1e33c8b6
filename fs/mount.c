/*
 * fs/mount.c — bringing a mount up from its config and metadata, and down.
 *
 * Up: open LMDB, check the block size it was formatted with, give each
 * configured tier its stable id, open the tiers, remove what must not
 * survive a remount (unlinked-but-open files, files of rules with
 * persistent = no), mark every slot the block maps use, start the cache,
 * the engine and the prefetcher. Down: stop the prefetcher, the planner
 * and the flusher, write back every dirty block, sync every tier and the
 * metadata, close.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"
#include "tiers/probe.h"

static int init_super(struct fs *fs)
{
	struct meta_txn *t;
	int rc = meta_txn_begin(fs->meta, true, &t);
	if (rc)
		return rc;
	uint64_t bs;
	rc = meta_super_get(t, "block_size", &bs);
	if (rc == -ENOENT) {
		rc = meta_super_put(t, "block_size", fs->bs);
	} else if (!rc && bs != fs->bs) {
		TFS_LOG("%s: metadata %s was formatted with block_size %llu, the config says %u",
			fs->conf.path, fs->conf.metadata, (unsigned long long)bs, fs->bs);
		rc = -EINVAL;
	}
	struct meta_inode root;
	if (!rc && (rc = meta_inode_get(t, META_ROOT_INO, &root)) == -ENOENT) {
		memset(&root, 0, sizeof(root));
		root.ino = META_ROOT_INO;
		root.mode = S_IFDIR | 0755;
		root.nlink = 2;
		root.uid = getuid();
		root.gid = getgid();
		root.pin_tier = -1;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		root.atime_sec = root.mtime_sec = root.ctime_sec = ts.tv_sec;
		root.atime_nsec = root.mtime_nsec = root.ctime_nsec = (uint32_t)ts.tv_nsec;
		rc = meta_inode_put(t, &root);
	}
	for (int i = 0; !rc && i < fs->conf.ntiers; i++)
		rc = meta_tier_id(t, fs->conf.tiers[i].name, true, &fs->tier_id[i]);
	if (rc) {
		meta_txn_abort(t);
		return rc;
	}
	return meta_txn_commit(t);
}

static int open_tiers(struct fs *fs)
{
	for (int i = 0; i < fs->conf.ntiers; i++) {
		const struct conf_tier *ct = &fs->conf.tiers[i];
		struct tier_params p = {
		    .codec = {.compress = ct->compress,
			      .cipher = ct->encrypt,
			      .key_file = ct->key_file[0] ? ct->key_file : NULL},
		    .name = ct->name,
		    .kind = ct->kind,
		    .path = ct->kind == TIER_POSIX ? ct->path : NULL,
		    .capacity = ct->capacity,
		    .block_size = fs->bs,
		    /* Room for the FUSE workers' request buffers (fs/loop.c):
		     * libfuse would allocate as much per worker itself. */
		    .extra_slots = ct->kind == TIER_RAM ? fs_landing_slots(fs) : 0,
		    .persistent = ct->persistent,
		    .direct = ct->direct,
		    .queue_depth = ct->queue_depth,
		    .slab_size = ct->slab_size,
		    .max_bandwidth = {ct->max_bandwidth_read, ct->max_bandwidth_write},
		    .s3 = ct->kind == TIER_S3 ? &ct->s3 : NULL,
		};
		int rc = tier_open(&p, &fs->tiers[i]);
		if (rc) {
			fs->tier_open_failed = ct->kind == TIER_S3;
			return rc;
		}
	}
	return 0;
}

struct ino_list {
	uint64_t *ino;
	size_t n, cap;
	int err;
};

/* Append INO; 1 (stop the iteration) when out of memory. */
static int inos_add(struct ino_list *d, uint64_t ino)
{
	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 64;
		uint64_t *ni = realloc(d->ino, nc * sizeof(*ni));
		if (!ni) {
			d->err = -ENOMEM;
			return 1;
		}
		d->ino = ni;
		d->cap = nc;
	}
	d->ino[d->n++] = ino;
	return 0;
}

static int collect_doomed(const struct meta_inode *in, void *arg)
{
	bool orphan = in->nlink == 0;
	bool vol = S_ISREG(in->mode) && (in->flags & META_F_VOLATILE);
	if (in->ino == META_ROOT_INO || (!orphan && !vol))
		return 0;
	return inos_add(arg, in->ino);
}

static int collect_dir(const struct meta_inode *in, void *arg)
{
	return S_ISDIR(in->mode) ? inos_add(arg, in->ino) : 0;
}

/* Remove A's names in directory DIR, counting them off A->nlink. */
static int remove_names_in(struct meta_txn *t, uint64_t dir, struct meta_inode *a)
{
	char name[NAME_MAX + 1];
	int rc = 0;
	while (a->nlink && !(rc = fs_name_in_dir(t, dir, a->ino, name))) {
		if ((rc = meta_dirent_del(t, dir, name)))
			return rc;
		a->nlink--;
	}
	return rc == -ENOENT ? 0 : rc; /* ENOENT: no (more) name of it here */
}

/* Remove the names of A that are not in A->parent (hard links made in
 * other directories), searching every directory: only a doomed file with
 * such links costs that. DIRS lists the directories, collected on first
 * use. */
static int remove_other_names(struct meta_txn *t, struct meta_inode *a, struct ino_list *dirs)
{
	int rc = 0;
	if (!dirs->n) {
		rc = meta_inode_iter(t, collect_dir, dirs);
		if (dirs->err)
			rc = dirs->err;
	}
	for (size_t i = 0; rc >= 0 && a->nlink && i < dirs->n; i++)
		rc = remove_names_in(t, dirs->ino[i], a);
	return rc < 0 ? rc : 0;
}

/* Files that must not outlive a mount: unlinked ones still open when the
 * daemon stopped, and volatile ones (persistent = no), whose blocks were
 * never made durable. */
static int remove_doomed(struct fs *fs)
{
	struct meta_txn *t;
	int rc = meta_txn_begin(fs->meta, true, &t);
	if (rc)
		return rc;
	struct ino_list d = {0}, dirs = {0};
	rc = meta_inode_iter(t, collect_doomed, &d);
	if (d.err)
		rc = d.err;
	size_t nvol = 0;
	for (size_t i = 0; rc >= 0 && i < d.n; i++) {
		struct meta_inode a;
		if (meta_inode_get(t, d.ino[i], &a))
			continue;
		/* Every name of it goes; its parent link leads to one. */
		if (a.parent)
			rc = remove_names_in(t, a.parent, &a);
		/* Hard links elsewhere: left, they would name nothing. */
		if (rc >= 0 && a.nlink)
			rc = remove_other_names(t, &a, &dirs);
		if (rc < 0)
			break;
		rc = meta_inode_del(t, d.ino[i]);
		if (rc == -ENOENT)
			rc = 0;
		nvol += a.flags & META_F_VOLATILE ? 1 : 0;
	}
	free(d.ino);
	free(dirs.ino);
	if (rc < 0) {
		meta_txn_abort(t);
		return rc;
	}
	if (d.n)
		TFS_LOG("removed %zu files left from the last mount (%zu with persistent = no, "
			"%zu unlinked while open)",
			d.n, nvol, d.n - nvol);
	return meta_txn_commit(t);
}

struct reserve_ctx {
	struct fs *fs;
	int err;
	uint64_t n;
};

static int reserve_cb(uint64_t ino, uint64_t idx, const struct meta_block *b, void *arg)
{
	struct reserve_ctx *c = arg;
	int t = fs_tier_of_id(c->fs, b->tier_id);
	if (t < 0) {
		TFS_LOG("%s: inode %llu block %llu is on a tier (id %u) that the config no longer "
			"names; add the tier back to mount",
			c->fs->conf.path, (unsigned long long)ino, (unsigned long long)idx,
			b->tier_id);
		c->err = -EINVAL;
		return 1;
	}
	int rc = tier_reserve(c->fs->tiers[t], b->slot);
	if (rc) {
		TFS_LOG("tier %s: slot %llu of inode %llu block %llu: %s",
			c->fs->conf.tiers[t].name, (unsigned long long)b->slot,
			(unsigned long long)ino, (unsigned long long)idx,
			rc == -ERANGE ? "beyond the tier's capacity (was it shrunk?)"
				      : "used twice in the block map");
		c->err = rc == -ERANGE ? -EINVAL : -EIO;
		return 1;
	}
	c->n++;
	return 0;
}

static int reserve_slots(struct fs *fs)
{
	struct meta_txn *t;
	int rc = meta_txn_begin(fs->meta, false, &t);
	if (rc)
		return rc;
	struct reserve_ctx c = {fs, 0, 0};
	rc = meta_block_iter_all(t, reserve_cb, &c);
	meta_txn_abort(t);
	return c.err ? c.err : (rc < 0 ? rc : 0);
}

/* Bytes of each tier's probe: enough to get past caches, short enough
 * that a first mount stays quick. */
#define PROBE_BYTES (64ull << 20)

/* Read and write bandwidth of every stripe tier: from the config, else
 * measured once and kept in the metadata (a re-format, i.e. new metadata,
 * measures again). Only needed when there is something to balance. */
static int calibrate(struct fs *fs)
{
	for (int k = 0; k < fs->conf.nstripe; k++) {
		int i = fs->conf.stripe[k];
		const struct conf_tier *ct = &fs->conf.tiers[i];
		fs->bw_read[i] = ct->bandwidth_read;
		fs->bw_write[i] = ct->bandwidth_write;
		if ((fs->bw_read[i] && fs->bw_write[i]) || fs->conf.nstripe < 2)
			continue;
		char kr[64], kw[64];
		snprintf(kr, sizeof(kr), "bw_read.%u", fs->tier_id[i]);
		snprintf(kw, sizeof(kw), "bw_write.%u", fs->tier_id[i]);
		struct meta_txn *t;
		uint64_t r = 0, w = 0;
		int rc = meta_txn_begin(fs->meta, false, &t);
		if (rc)
			return rc;
		if (meta_super_get(t, kr, &r) || meta_super_get(t, kw, &w))
			r = w = 0;
		meta_txn_abort(t);
		if (!r || !w) {
			rc = tier_probe_bandwidth(fs->tiers[i], PROBE_BYTES, &r, &w);
			if (rc) {
				TFS_LOG("tier %s: bandwidth probe failed (%s); striping by weight",
					ct->name, strerror(-rc));
				continue;
			}
			TFS_LOG("tier %s: measured %.0f MB/s read, %.0f MB/s write", ct->name,
				r / 1e6, w / 1e6);
			if ((rc = meta_txn_begin(fs->meta, true, &t)))
				return rc;
			if ((rc = meta_super_put(t, kr, r)) || (rc = meta_super_put(t, kw, w))) {
				meta_txn_abort(t);
				return rc;
			}
			if ((rc = meta_txn_commit(t)))
				return rc;
		}
		if (!fs->bw_read[i])
			fs->bw_read[i] = r;
		if (!fs->bw_write[i])
			fs->bw_write[i] = w;
	}
	return 0;
}

/* Stripe weights: the configured ones if any stripe tier sets `weight`,
 * else each tier's read bandwidth (capped by its read cap), so a read of
 * a striped file ends on every tier at once. */
static int build_stripe(struct fs *fs)
{
	int n = fs->conf.nstripe;
	uint64_t w[CONF_MAX_TIERS];
	bool explicit = false, measured = true;
	for (int k = 0; k < n; k++) {
		int i = fs->conf.stripe[k];
		explicit = explicit || fs->conf.tiers[i].weight_set;
		measured = measured && fs->bw_read[i];
	}
	for (int k = 0; k < n; k++) {
		int i = fs->conf.stripe[k];
		uint64_t bw = fs->bw_read[i];
		uint64_t cap = fs->conf.tiers[i].max_bandwidth_read;
		if (cap && bw > cap)
			bw = cap;
		w[k] = explicit || !measured ? fs->conf.tiers[i].weight : bw / 1000000 + 1;
	}
	return stripe_init(&fs->stripe, n, fs->conf.stripe, w);
}

int fs_mount_prepare(struct fs *fs)
{
	int rc;
	fs->bs = fs->conf.block_size;
	fs->ram = fs->conf.ram_tier;
	tfs_mutex_init(&fs->lock, "fs->lock", LOCK_FS);
	pthread_cond_init(&fs->cond, NULL);
	pthread_cond_init(&fs->cache.flusher_cond, NULL);
	tfs_mutex_init(&fs->commit.lock, "fs->commit.lock", LOCK_COMMIT);
	tfs_mutex_init(&fs->commit.sync_lock, "fs->commit.sync_lock", LOCK_SYNC);
	/* Epoch 0 means "no write-back": every tier starts at 1. */
	for (int i = 0; i < CONF_MAX_TIERS; i++)
		atomic_store(&fs->commit.wb_epoch[i], 1);
	pthread_condattr_t ca;
	if ((rc = pthread_condattr_init(&ca)))
		return -rc;
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!rc)
		rc = pthread_cond_init(&fs->cache.reclaim_cond, &ca);
	if (!rc)
		rc = pthread_cond_init(&fs->commit.cond, &ca);
	pthread_condattr_destroy(&ca);
	if (rc)
		return -rc;
	if ((rc = meta_open(fs->conf.metadata, &fs->meta)))
		return rc;
	if ((rc = init_super(fs)) || (rc = open_tiers(fs)) || (rc = remove_doomed(fs)) ||
	    (rc = reserve_slots(fs)))
		return rc;
	/* Every slot the block maps use is marked: what no map names may go. */
	for (int i = 0; i < fs->conf.ntiers; i++)
		tier_mounted(fs->tiers[i]);
	if (fs->conf.nstripe && ((rc = calibrate(fs)) || (rc = build_stripe(fs))))
		return rc;
	if ((rc = cache_init(fs)))
		return rc;
	fs->cache_up = true;
	if ((rc = flusher_start(fs)))
		return rc;
	tfs_lock(&fs->lock);
	uint64_t blocks = cache_learn_blocks(fs);
	tfs_unlock(&fs->lock);
	if ((rc = engine_init(fs, &cache_engine_hooks, blocks)))
		return rc;
	return cache_prefetcher_start(fs);
}

void fs_unmount_finish(struct fs *fs)
{
	cache_prefetcher_stop(fs);
	engine_stop(fs);
	flusher_stop(fs);
	/* A mount that failed before its cache was up has nothing to write
	 * back, and maybe tiers never opened. */
	if (fs->meta && fs->cache_up) {
		int rc = cache_flush_all(fs);
		if (rc)
			TFS_LOG("unmount: write-back failed: %s; data written since the last "
				"successful fsync may be lost",
				strerror(-rc));
	}
	for (int i = 0; i < fs->conf.ntiers; i++)
		if (fs->tiers[i])
			tier_close(fs->tiers[i]);
	if (fs->meta)
		meta_close(fs->meta);
	cache_destroy(fs);
	for (size_t h = 0; h < fs->itab_size; h++) {
		struct inode *in = fs->itab[h];
		while (in) {
			struct inode *next = in->hnext;
			fs_map_free(in);
			free(in);
			in = next;
		}
	}
	free(fs->itab);
	fs_order_ids_free(fs);
}
