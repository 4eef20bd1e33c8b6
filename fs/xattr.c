/*
 * fs/xattr.c — extended attributes: the user's own, stored in LMDB like any
 * filesystem's, and tierfs's view of placement:
 *
 *   user.tierfs.placement  (files)  "ram=8388608 nvme0=33554432"
 *   user.tierfs.blocks     (files)  "nvme0:0-3,8 pfs:4-7"
 *   user.tierfs.cached     (files)  "ram=4194304 dirty=1048576": bytes in RAM
 *                                   now (cached, or at home there), and of
 *                                   those not on a disk tier yet
 *   user.tierfs.pin        (files)  get: the pinned tier; set TIER: move every
 *                                   block there and keep new ones there;
 *                                   set "": unpin
 *   user.tierfs.tiers      (root)   "NAME TYPE USED CAPACITY\n" per tier
 *
 * The tierfs names are computed, never stored, and are not listed by
 * listxattr except on the inodes they apply to (the pin: where one is set).
 *
 * Values and lists are returned whole; the ops layer (ops_attr.c) answers
 * the caller's size (a length query, or ERANGE).
 */
#include <errno.h>
#include <linux/limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "fs/fs.h"
#include "fs/strbuf.h"

#define X_PLACEMENT "user.tierfs.placement"
#define X_BLOCKS    "user.tierfs.blocks"
#define X_CACHED    "user.tierfs.cached"
#define X_PIN	    "user.tierfs.pin"
#define X_TIERS	    "user.tierfs.tiers"

/* The next run of blocks of IN on tier T from *I on (NB blocks): false
 * when there is none; *I moves past it. */
static bool next_run(struct fs *fs, struct inode *in, uint64_t nb, int t, uint64_t *i,
		     uint64_t *first, uint64_t *last)
{
	for (; *i < nb; (*i)++) {
		const struct blk *b = fs_blk(in, *i);
		if (!b)
			*i = fs_blk_next(in, *i) - 1; /* over a chunk of holes */
		else if (fs_block_tier(fs, b) == t)
			break;
	}
	if (*i >= nb)
		return false;
	*first = *i;
	for (const struct blk *b; *i < nb && (b = fs_blk(in, *i)) && fs_block_tier(fs, b) == t;)
		(*i)++;
	*last = *i - 1;
	return true;
}

/* "TIER:RUN,RUN TIER:RUN", RUN = "N" or "FIRST-LAST". The kernel takes no
 * xattr value over XATTR_SIZE_MAX: a file striped block by block over
 * several tiers passes that at about 16 GiB (1 MiB blocks), and getfattr
 * would only say E2BIG. So each tier gets an equal share of the limit, and
 * a list cut short ends in "...(+N)", N its runs left out. */
static void fmt_blocks(struct fs *fs, struct inode *in, struct strbuf *s)
{
	uint64_t nb = (in->attr.size + fs->bs - 1) / fs->bs;
	if (nb > in->nblocks)
		nb = in->nblocks;
	uint64_t runs[CONF_MAX_TIERS] = {0}, first, last;
	int present = 0;
	for (int t = 0; t < fs->conf.ntiers; t++) {
		for (uint64_t i = 0; next_run(fs, in, nb, t, &i, &first, &last);)
			runs[t]++;
		present += runs[t] > 0;
	}
	if (!present)
		return;
	/* Room for each tier's name, a separator and the "...(+N)" tail. */
	size_t share = XATTR_SIZE_MAX / (size_t)present - CONF_NAME_MAX - 32;
	for (int t = 0; t < fs->conf.ntiers; t++) {
		if (!runs[t])
			continue;
		strbuf_printf(s, "%s%s:", s->len ? " " : "", fs->conf.tiers[t].name);
		size_t start = s->len;
		uint64_t shown = 0;
		for (uint64_t i = 0; next_run(fs, in, nb, t, &i, &first, &last); shown++) {
			char run[48];
			int n = first == last
				    ? snprintf(run, sizeof(run), "%llu", (unsigned long long)first)
				    : snprintf(run, sizeof(run), "%llu-%llu",
					       (unsigned long long)first, (unsigned long long)last);
			if (s->len - start + (size_t)n + 1 > share) {
				strbuf_printf(s, "%s...(+%llu)", shown ? "," : "",
					      (unsigned long long)(runs[t] - shown));
				break;
			}
			strbuf_printf(s, "%s%s", shown ? "," : "", run);
		}
	}
}

/* Compute a tierfs attribute into S. -ENODATA if it does not apply. */
static int tierfs_attr(struct fs *fs, uint64_t ino, const char *name, struct strbuf *s)
{
	if (!strcmp(name, X_TIERS)) {
		if (ino != META_ROOT_INO)
			return -ENODATA;
		for (int i = 0; i < fs->conf.ntiers; i++) {
			uint64_t used, total;
			fs_tier_slots(fs, i, &used, &total);
			strbuf_printf(s, "%s %s %llu %llu\n", fs->conf.tiers[i].name,
				      tier_kind(fs->tiers[i]) == TIER_RAM  ? "ram"
				      : tier_kind(fs->tiers[i]) == TIER_S3 ? "s3"
									   : "posix",
				      (unsigned long long)used * fs->bs,
				      (unsigned long long)total * fs->bs);
		}
		return s->err;
	}
	tfs_lock(&fs->lock);
	struct inode *in;
	int rc = fs_inode_get(fs, ino, &in);
	if (!rc && !S_ISREG(in->attr.mode))
		rc = -ENODATA;
	if (!rc)
		rc = fs_inode_load_map(fs, in);
	if (!rc && !strcmp(name, X_PLACEMENT)) {
		uint64_t bytes[CONF_MAX_TIERS];
		fs_placement(fs, in, bytes);
		bool first = true;
		for (int t = 0; t < fs->conf.ntiers; t++)
			if (bytes[t]) {
				strbuf_printf(s, "%s%s=%llu", first ? "" : " ",
					      fs->conf.tiers[t].name, (unsigned long long)bytes[t]);
				first = false;
			}
	} else if (!rc && !strcmp(name, X_BLOCKS)) {
		fmt_blocks(fs, in, s);
	} else if (!rc && !strcmp(name, X_CACHED)) {
		uint64_t dirty, cached = fs_cached(fs, in, &dirty);
		strbuf_printf(s, "ram=%llu dirty=%llu", (unsigned long long)cached,
			      (unsigned long long)dirty);
	} else if (!rc && !strcmp(name, X_PIN)) {
		int t =
		    in->attr.pin_tier >= 0 ? fs_tier_of_id(fs, (uint16_t)in->attr.pin_tier) : -1;
		if (t < 0)
			rc = -ENODATA;
		else
			strbuf_printf(s, "%s", fs->conf.tiers[t].name);
	} else if (!rc) {
		rc = -ENODATA;
	}
	tfs_unlock(&fs->lock);
	return rc ? rc : s->err;
}

static bool is_tierfs_name(const char *name)
{
	return !strncmp(name, "user.tierfs.", 12);
}

int xattr_get(struct fs *fs, uint64_t ino, const char *name, struct strbuf *out)
{
	if (ctl_ino(ino))
		return -ENODATA;
	if (is_tierfs_name(name))
		return tierfs_attr(fs, ino, name, out);
	struct meta_txn *t;
	int rc = meta_txn_begin(fs->meta, false, &t);
	if (rc)
		return rc;
	int n = meta_xattr_get(t, ino, name, NULL, 0);
	if (n > 0 && !(rc = strbuf_reserve(out, (size_t)n)))
		n = meta_xattr_get(t, ino, name, out->p + out->len, (size_t)n);
	meta_txn_abort(t);
	if (rc || n < 0)
		return rc ? rc : n;
	out->len += (size_t)n;
	return 0;
}

static int set_pin(struct fs *fs, uint64_t ino, const char *value, size_t size)
{
	char name[TIER_NAME_MAX];
	if (size >= sizeof(name))
		return -EINVAL;
	memcpy(name, value, size);
	name[size] = '\0';
	int t = -1;
	if (size) {
		t = config_tier_index(&fs->conf, name);
		if (t < 0) {
			TFS_LOG("setfattr %s: no tier named '%s'", X_PIN, name);
			return -EINVAL;
		}
	}
	tfs_lock(&fs->lock);
	struct inode *in;
	int rc = fs_inode_get(fs, ino, &in);
	if (!rc && !S_ISREG(in->attr.mode))
		rc = -EPERM;
	if (!rc) {
		in->attr.pin_tier = t < 0 ? -1 : fs->tier_id[t];
		in->attr_dirty = true;
	}
	tfs_unlock(&fs->lock);
	if (!rc)
		rc = t >= 0 ? cache_pin(fs, in, t) : cache_commit(fs);
	if (!rc && t < 0) {
		tfs_lock(&fs->lock);
		in->home = fs_home_for(fs, &in->attr, NULL);
		cache_rehome(fs, in);
		tfs_unlock(&fs->lock);
	}
	return rc;
}

/* A changed extended attribute changes the inode: ctime moves, as on
 * ext4, so that backups (find -cnewer, rsync, tar --xattrs) see it. */
static int touch_ctime(struct fs *fs, uint64_t ino)
{
	tfs_lock(&fs->lock);
	struct inode *in;
	int rc = fs_inode_get(fs, ino, &in);
	if (!rc) {
		fs_now(&in->attr.ctime_sec, &in->attr.ctime_nsec);
		in->attr_dirty = true;
	}
	tfs_unlock(&fs->lock);
	return rc ? rc : cache_commit(fs);
}

int xattr_set(struct fs *fs, uint64_t ino, const char *name, const char *value, size_t size,
	      int flags)
{
	if (ctl_ino(ino))
		return -EROFS;
	if (!strcmp(name, X_PIN))
		return set_pin(fs, ino, value, size);
	if (is_tierfs_name(name))
		return -EPERM; /* computed, read-only */
	struct meta_txn *t;
	int rc = meta_txn_begin(fs->meta, true, &t);
	if (!rc) {
		rc = meta_xattr_set(t, ino, name, value, size, flags);
		if (rc)
			meta_txn_abort(t);
		else
			rc = meta_txn_commit(t);
	}
	if (!rc)
		rc = touch_ctime(fs, ino);
	return rc;
}

int xattr_list(struct fs *fs, uint64_t ino, struct strbuf *s)
{
	if (ctl_ino(ino))
		return 0;
	struct meta_txn *t;
	int rc = meta_txn_begin(fs->meta, false, &t);
	if (rc)
		return rc;
	int n = meta_xattr_list(t, ino, NULL, 0);
	if (n > 0 && !strbuf_reserve(s, (size_t)n)) {
		if ((n = meta_xattr_list(t, ino, s->p + s->len, (size_t)n)) < 0)
			s->err = n;
		else
			s->len += (size_t)n;
	} else if (n < 0) {
		s->err = n;
	}
	struct meta_inode a;
	bool reg = !meta_inode_get(t, ino, &a) && S_ISREG(a.mode);
	meta_txn_abort(t);
	if (!s->err && reg) {
		/* A pin is listed where it is set, so that getfattr -d shows
		 * it and cp --preserve=xattr, rsync -X and the updater's
		 * replacement of a state file carry it over. */
		tfs_lock(&fs->lock);
		struct inode *in = fs_inode_find(fs, ino);
		int32_t pin = in ? in->attr.pin_tier : a.pin_tier;
		bool pinned = pin >= 0 && fs_tier_of_id(fs, (uint16_t)pin) >= 0;
		tfs_unlock(&fs->lock);
		const char *names[] = {X_PLACEMENT, X_BLOCKS, X_CACHED, X_PIN};
		for (size_t i = 0; i < (pinned ? 4u : 3u); i++) {
			strbuf_printf(s, "%s", names[i]);
			strbuf_nul(s);
		}
	}
	if (!s->err && ino == META_ROOT_INO) {
		strbuf_printf(s, "%s", X_TIERS);
		strbuf_nul(s);
	}
	return s->err;
}

int xattr_remove(struct fs *fs, uint64_t ino, const char *name)
{
	if (ctl_ino(ino))
		return -EROFS;
	if (!strcmp(name, X_PIN))
		return set_pin(fs, ino, "", 0);
	if (is_tierfs_name(name))
		return -EPERM;
	struct meta_txn *t;
	int rc = meta_txn_begin(fs->meta, true, &t);
	if (!rc) {
		rc = meta_xattr_del(t, ino, name);
		if (rc)
			meta_txn_abort(t);
		else
			rc = meta_txn_commit(t);
	}
	if (!rc)
		rc = touch_ctime(fs, ino);
	return rc;
}
