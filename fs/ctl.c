/*
 * fs/ctl.c — MOUNTPOINT/.tierfs/, the read-only control view.
 *
 *   .tierfs/stats              per-tier and cache counters, as text
 *   .tierfs/tiers/NAME/...     the mount's tree, showing only the files with
 *                              blocks on tier NAME; st_size = bytes held there
 *
 * Inode numbers: CTL_DIR, CTL_STATS, CTL_TIERS are fixed; a node under
 * tiers/NAME/ is CTL_BASE | (tier + 1) << 48 | real inode, so the tree is
 * the real tree seen through a filter and needs no state of its own.
 *
 * This file says what the nodes are and hold; the ops layer (ops_ctl.c)
 * answers FUSE with it and keeps what an open needs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "fs/strbuf.h"

#define CTL_TIER_SHIFT 48
#define CTL_REAL_MASK  ((1ULL << CTL_TIER_SHIFT) - 1)

static uint64_t tnode(int tier, uint64_t real)
{
	return CTL_BASE | ((uint64_t)(tier + 1) << CTL_TIER_SHIFT) | real;
}

static int tnode_tier(uint64_t ino)
{
	return (int)((ino & ~CTL_BASE) >> CTL_TIER_SHIFT) - 1;
}

static uint64_t tnode_real(uint64_t ino)
{
	return ino & CTL_REAL_MASK;
}

int ctl_getattr(struct fs *fs, uint64_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_nlink = 1;
	st->st_blksize = 4096;
	if (ino == CTL_DIR || ino == CTL_TIERS) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	}
	if (ino == CTL_STATS) {
		st->st_mode = S_IFREG | 0444;
		return 0;
	}
	int t = tnode_tier(ino);
	if (t < 0 || t >= fs->conf.ntiers)
		return -ENOENT;
	tfs_lock(&fs->lock);
	struct inode *in;
	int rc = fs_inode_get(fs, tnode_real(ino), &in);
	if (!rc) {
		fs_attr_to_stat(fs, in, st);
		st->st_ino = ino;
		st->st_mode = (st->st_mode & S_IFMT) | (S_ISDIR(st->st_mode) ? 0555 : 0444);
		if (S_ISREG(st->st_mode)) {
			uint64_t bytes[CONF_MAX_TIERS];
			fs_placement(fs, in, bytes);
			st->st_size = (off_t)bytes[t];
			st->st_blocks = (blkcnt_t)((bytes[t] + 511) / 512);
		}
	}
	tfs_unlock(&fs->lock);
	return rc;
}

/* The entry of control node INO into E. */
static int ctl_entry(struct fs *fs, uint64_t ino, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	int rc = ctl_getattr(fs, ino, &e->attr);
	if (rc)
		return rc;
	e->ino = ino;
	e->generation = 1;
	e->attr_timeout = 0;
	e->entry_timeout = 0;
	return 0;
}

/* Whether the view of tier T lists inode INO: every directory, and the
 * files with blocks on T. MODE: its mode. */
static bool tier_shows(struct fs *fs, int t, uint64_t ino, mode_t *mode)
{
	tfs_lock(&fs->lock);
	struct inode *in;
	bool show = false;
	*mode = 0;
	if (!fs_inode_get(fs, ino, &in)) {
		*mode = in->attr.mode;
		if (S_ISDIR(*mode)) {
			show = true;
		} else if (S_ISREG(*mode)) {
			uint64_t bytes[CONF_MAX_TIERS];
			fs_placement(fs, in, bytes);
			show = bytes[t] > 0;
		}
	}
	tfs_unlock(&fs->lock);
	return show;
}

int ctl_lookup(struct fs *fs, uint64_t parent, const char *name, struct fuse_entry_param *e)
{
	if (parent == META_ROOT_INO)
		return ctl_entry(fs, CTL_DIR, e);
	if (parent == CTL_DIR) {
		if (!strcmp(name, "stats"))
			return ctl_entry(fs, CTL_STATS, e);
		if (!strcmp(name, "tiers"))
			return ctl_entry(fs, CTL_TIERS, e);
		return -ENOENT;
	}
	if (parent == CTL_TIERS) {
		int t = config_tier_index(&fs->conf, name);
		return t < 0 ? -ENOENT : ctl_entry(fs, tnode(t, META_ROOT_INO), e);
	}
	if (tnode_tier(parent) < 0)
		return -ENOENT;
	struct meta_txn *txn;
	uint64_t ino;
	int rc = meta_txn_begin(fs->meta, false, &txn);
	if (!rc) {
		rc = meta_dirent_get(txn, tnode_real(parent), name, &ino);
		meta_txn_abort(txn);
	}
	mode_t mode;
	if (!rc && !tier_shows(fs, tnode_tier(parent), ino, &mode))
		rc = -ENOENT; /* as readdir: not on this tier */
	return rc ? rc : ctl_entry(fs, tnode(tnode_tier(parent), ino), e);
}

/* A tier view's listing under way: meta_dir_iter's argument. */
struct tier_list {
	struct fs *fs;
	int (*add)(void *arg, const char *name, uint64_t ino, mode_t mode);
	void *arg;
	int tier;
	int err;
};

static int tier_list_cb(const char *name, uint64_t ino, void *arg)
{
	struct tier_list *l = arg;
	mode_t mode;
	int rc;
	if (tier_shows(l->fs, l->tier, ino, &mode) &&
	    (rc = l->add(l->arg, name, tnode(l->tier, ino), mode))) {
		l->err = rc;
		return 1;
	}
	return 0;
}

int ctl_list(struct fs *fs, uint64_t ino,
	     int (*add)(void *arg, const char *name, uint64_t ino, mode_t mode), void *arg)
{
	int rc = add(arg, ".", ino, S_IFDIR);
	if (!rc)
		rc = add(arg, "..", ino, S_IFDIR);
	if (!rc && ino == CTL_DIR) {
		if (!(rc = add(arg, "stats", CTL_STATS, S_IFREG)))
			rc = add(arg, "tiers", CTL_TIERS, S_IFDIR);
	} else if (!rc && ino == CTL_TIERS) {
		for (int i = 0; !rc && i < fs->conf.ntiers; i++)
			rc = add(arg, fs->conf.tiers[i].name, tnode(i, META_ROOT_INO), S_IFDIR);
	} else if (!rc && tnode_tier(ino) >= 0 && tnode_tier(ino) < fs->conf.ntiers) {
		struct tier_list l = {fs, add, arg, tnode_tier(ino), 0};
		struct meta_txn *t;
		rc = meta_txn_begin(fs->meta, false, &t);
		if (!rc) {
			rc = meta_dir_iter(t, tnode_real(ino), tier_list_cb, &l);
			meta_txn_abort(t);
			rc = l.err ? l.err : (rc < 0 ? rc : 0);
		}
	} else if (!rc) {
		rc = -ENOTDIR;
	}
	return rc;
}

static const char *kind_name(enum tier_kind k)
{
	return k == TIER_RAM ? "ram" : k == TIER_S3 ? "s3" : "posix";
}

int ctl_stats_text(struct fs *fs, char **out, size_t *outlen)
{
	struct strbuf sb = {0};
	for (int i = 0; i < fs->conf.ntiers; i++) {
		struct tier_stats s;
		uint64_t used, total;
		char extra[512];
		tier_get_stats(fs->tiers[i], &s);
		tier_stats_extra(fs->tiers[i], extra, sizeof(extra));
		fs_tier_slots(fs, i, &used, &total);
		strbuf_printf(
		    &sb,
		    "tier %s type=%s persistent=%s blocks=%llu capacity_blocks=%llu "
		    "reads=%llu bytes_read=%llu writes=%llu bytes_written=%llu "
		    "errors=%llu checksum_errors=%llu bw_read=%llu bw_write=%llu "
		    "busy_read_ms=%llu busy_write_ms=%llu io_read_ms=%llu io_write_ms=%llu%s\n",
		    fs->conf.tiers[i].name, kind_name(tier_kind(fs->tiers[i])),
		    tier_persistent(fs->tiers[i]) ? "yes" : "no", (unsigned long long)used,
		    (unsigned long long)total, (unsigned long long)s.reads,
		    (unsigned long long)s.bytes_read, (unsigned long long)s.writes,
		    (unsigned long long)s.bytes_written, (unsigned long long)s.errors,
		    (unsigned long long)s.csum_errors, (unsigned long long)fs->bw_read[i],
		    (unsigned long long)fs->bw_write[i],
		    (unsigned long long)(s.busy_ns[TIER_OP_READ] / 1000000),
		    (unsigned long long)(s.busy_ns[TIER_OP_WRITE] / 1000000),
		    (unsigned long long)(s.read_ns / 1000000),
		    (unsigned long long)(s.write_ns / 1000000), extra);
	}
	tfs_lock(&fs->lock);
	uint64_t cached = fs->cache.ncached, dirty = fs->cache.ndirty, pinned = fs->cache.npinned;
	uint64_t reserve = fs->cache.wbr.reserve, runs = fs->eng.write_runs;
	uint64_t quiet_ns = fs->commit.quiet_ns, gap_ns = cache_commit_gap(fs);
	tfs_unlock(&fs->lock);
	uint64_t hits = atomic_load(&fs->stats.hits), misses = atomic_load(&fs->stats.misses);
	strbuf_printf(
	    &sb,
	    "cache blocks=%llu dirty=%llu pinned=%llu hits=%llu misses=%llu "
	    "hit_ratio=%.4f evictions=%llu flushes=%llu flush_bytes=%llu "
	    "flushes_reclaim=%llu flushes_kept=%llu evictions_kept=%llu flushes_rewritten=%llu "
	    "writes_adopted=%llu "
	    "victim_scans=%llu victim_visits=%llu reclaim_waits=%llu "
	    "reclaim_wait_ms=%llu idle_stalls=%llu write_runs=%llu wb_reserve=%llu commits=%llu "
	    "commit_ms=%llu commits_forced=%llu commit_quiet_ms=%llu commit_gap_ms=%llu\n",
	    (unsigned long long)cached, (unsigned long long)dirty, (unsigned long long)pinned,
	    (unsigned long long)hits, (unsigned long long)misses,
	    hits + misses ? (double)hits / (double)(hits + misses) : 0.0,
	    (unsigned long long)atomic_load(&fs->stats.evictions),
	    (unsigned long long)atomic_load(&fs->stats.flushes),
	    (unsigned long long)atomic_load(&fs->stats.flush_bytes),
	    (unsigned long long)atomic_load(&fs->stats.flushes_reclaim),
	    (unsigned long long)atomic_load(&fs->stats.flushes_kept),
	    (unsigned long long)atomic_load(&fs->stats.evictions_kept),
	    (unsigned long long)atomic_load(&fs->stats.flushes_rewritten),
	    (unsigned long long)atomic_load(&fs->stats.writes_adopted),
	    (unsigned long long)atomic_load(&fs->stats.victim_scans),
	    (unsigned long long)atomic_load(&fs->stats.victim_visits),
	    (unsigned long long)atomic_load(&fs->stats.reclaim_waits),
	    (unsigned long long)(atomic_load(&fs->stats.reclaim_wait_ns) / 1000000),
	    (unsigned long long)atomic_load(&fs->stats.idle_stalls), (unsigned long long)runs,
	    (unsigned long long)reserve, (unsigned long long)atomic_load(&fs->stats.commits),
	    (unsigned long long)(atomic_load(&fs->stats.commit_ns) / 1000000),
	    (unsigned long long)atomic_load(&fs->stats.commits_forced),
	    (unsigned long long)(quiet_ns / 1000000), (unsigned long long)(gap_ns / 1000000));
	/* The in-memory inode table and the block maps loaded in it: what
	 * the kernel has looked up and the cache holds, not every file ever
	 * touched. */
	tfs_lock(&fs->lock);
	uint64_t ninodes = fs->ninodes, nmaps = 0;
	for (size_t h = 0; h < fs->itab_size; h++)
		for (const struct inode *in = fs->itab[h]; in; in = in->hnext)
			nmaps += in->map_loaded;
	tfs_unlock(&fs->lock);
	strbuf_printf(&sb, "inodes table=%llu maps=%llu\n", (unsigned long long)ninodes,
		      (unsigned long long)nmaps);
	char line[512];
	if (cache_order_stats_text(fs, line, sizeof(line)) > 0)
		strbuf_printf(&sb, "%s", line);
	if (sb.err) {
		free(sb.p);
		return sb.err;
	}
	*out = sb.p;
	*outlen = sb.len;
	return 0;
}

int ctl_open(struct fs *fs, uint64_t ino, int flags, char **text, size_t *len)
{
	if ((flags & O_ACCMODE) != O_RDONLY)
		return -EROFS;
	*text = NULL;
	*len = 0;
	if (ino == CTL_STATS)
		return ctl_stats_text(fs, text, len);
	/* Files under tiers/NAME/ open as empty: they stand for placement. */
	return 0;
}
