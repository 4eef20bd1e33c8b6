/*
 * fs/config/keys.c — the keys of each section: their names, their defaults
 * (config_set_defaults), and what each accepts. A key is checked alone
 * here, on its own line; whatever depends on other keys or sections waits
 * for validate.c.
 *
 * Paths must be absolute: the daemon may chdir("/") when it detaches, and
 * fstab mounts run from an unknown directory.
 */
#include "fs/config/config_load.h"
#include "fs/config/parse_state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static const char *const config_mount_keys[MK_N] = {
    "block_size",  "metadata",	     "sync_on_close",	"allow_other",	    "threads",
    "dirty_ratio", "flush_interval", "commit_interval", "writeback_timeout"};
const char *const config_tier_keys[TK_N] = {"type",
					    "path",
					    "capacity",
					    "persistent",
					    "weight",
					    "direct",
					    "queue_depth",
					    "slab_size",
					    "bandwidth",
					    "bandwidth_read",
					    "bandwidth_write",
					    "max_bandwidth",
					    "max_bandwidth_read",
					    "max_bandwidth_write",
					    "compress",
					    "encrypt",
					    "key_file"};
static const char *const config_policy_keys[PK_N] = {"stripe", "learn"};
static const char *const config_rule_keys[RK_N] = {"match", "tier", "persistent"};

void config_set_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	c->block_size = MIB;
	c->sync_on_close = false;
	c->allow_other = false;
	c->threads = 16;
	c->dirty_ratio = 25;
	c->flush_interval_ms = 1000;
	c->commit_interval_ms = 5000;
	c->writeback_timeout_ms = 5000;
	c->ram_tier = -1;
	c->learn = true;
	c->keep_plan = true;
	c->gap_plan = CONF_GAP_AUTO;
	c->prefetch_depth = 64;
	for (int i = 0; i < CONF_MAX_TIERS; i++) {
		struct conf_tier *t = &c->tiers[i];
		t->weight = 1;
		t->direct = -1;
		t->queue_depth = 8;
		/* 0: the tier keeps the slab size it was formatted with (a
		 * new one gets 1G), so the key can be left out once set. */
		t->slab_size = 0;
		config_s3_defaults(&t->s3);
	}
}

int config_key_index(const char *const *keys, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcasecmp(keys[i], name))
			return i;
	return -1;
}

/* Common checks; returns the key id or -1 (error already recorded). */
static int key_begin(struct config_parse *p, const char *const *keys, int nkeys, int *klines,
		     const char *name)
{
	int k = config_key_index(keys, nkeys, name);

	if (k < 0) {
		config_key_error(p, p->line, name, "unknown key in section [%s]", p->sect_name);
		return -1;
	}
	if (klines[k]) {
		config_key_error(p, p->line, name, "given twice in section [%s] (first on line %d)",
				 p->sect_name, klines[k]);
		return -1;
	}
	klines[k] = p->line;
	return k;
}

static int check_abs_path(struct config_parse *p, const char *key, const char *v)
{
	if (v[0] != '/') {
		config_key_error(p, p->line, key, "'%s' must be an absolute path", v);
		return -1;
	}
	if (strlen(v) >= PATH_MAX - sizeof(META_DIRNAME) - 1) {
		config_key_error(p, p->line, key, "path too long");
		return -1;
	}
	return 0;
}

/* Copy V into DST without trailing slashes ("/a/b/" -> "/a/b", "/" stays). */
static void copy_path(char *dst, const char *v)
{
	size_t n = strlen(v);

	while (n > 1 && v[n - 1] == '/')
		n--;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

/* A period in seconds (flush_interval, commit_interval, writeback_timeout)
 * into *MS. */
static void interval_key(struct config_parse *p, const char *name, const char *v, unsigned *ms)
{
	uint64_t x;
	if (config_parse_seconds_ms(v, &x) < 0 || x == 0 || x > 3600 * 1000)
		config_key_error(p, p->line, name,
				 "'%s' must be seconds, more than 0 and at most 3600 "
				 "(fractions down to 0.001 allowed)",
				 v);
	else
		*ms = (unsigned)x;
}

void config_key_mount(struct config_parse *p, const char *name, const char *v)
{
	struct config *c = p->c;
	uint64_t x;
	int k = key_begin(p, config_mount_keys, MK_N, p->mkline, name);

	switch (k) {
	case MK_BLOCK_SIZE:
		if (config_parse_size(v, &x) < 0)
			config_key_error(p, p->line, name, "'%s' is not a size (e.g. 1M, 64K)", v);
		else if (x < 4 * KIB || x > 64 * MIB || (x & (x - 1)))
			config_key_error(p, p->line, name,
					 "'%s' must be a power of two from 4K to 64M", v);
		else
			c->block_size = (uint32_t)x;
		break;
	case MK_METADATA:
		if (check_abs_path(p, name, v) == 0)
			copy_path(c->metadata, v);
		break;
	case MK_SYNC:
	case MK_ALLOW_OTHER:
		if (config_parse_bool(v, k == MK_SYNC ? &c->sync_on_close : &c->allow_other) < 0)
			config_key_error(p, p->line, name, "'%s' is not yes or no", v);
		break;
	case MK_THREADS:
		if (config_parse_uint(v, 1, 256, &x) < 0)
			config_key_error(p, p->line, name, "'%s' must be an integer from 1 to 256",
					 v);
		else
			c->threads = (unsigned)x;
		break;
	case MK_DIRTY:
		if (config_parse_uint(v, 1, 100, &x) < 0)
			config_key_error(p, p->line, name,
					 "'%s' must be a percentage from 1 to 100", v);
		else
			c->dirty_ratio = (unsigned)x;
		break;
	case MK_FLUSH:
		interval_key(p, name, v, &c->flush_interval_ms);
		break;
	case MK_COMMIT:
		interval_key(p, name, v, &c->commit_interval_ms);
		break;
	case MK_WB_TIMEOUT:
		interval_key(p, name, v, &c->writeback_timeout_ms);
		break;
	default:
		break;
	}
}

void config_key_tier(struct config_parse *p, const char *name, const char *v)
{
	struct conf_tier *t = &p->c->tiers[p->idx];
	struct config_tier_extra *tx = &p->tx[p->idx];
	uint64_t x;
	bool b;
	if (config_key_s3(p, name, v))
		return;
	int k = key_begin(p, config_tier_keys, TK_N, tx->kline, name);

	switch (k) {
	case TK_TYPE:
		if (!strcmp(v, "ram"))
			t->kind = TIER_RAM;
		else if (!strcmp(v, "posix"))
			t->kind = TIER_POSIX;
		else if (!strcmp(v, "s3"))
			t->kind = TIER_S3;
		else
			config_key_error(p, p->line, name,
					 "'%s' is not a tier type (ram, posix or s3)", v);
		break;
	case TK_PATH: {
		struct stat st;
		if (check_abs_path(p, name, v) < 0)
			break;
		if (stat(v, &st) < 0) {
			config_key_error(p, p->line, name, "%s: %s", v, strerror(errno));
			break;
		}
		if (!S_ISDIR(st.st_mode)) {
			config_key_error(p, p->line, name, "%s: %s", v, strerror(ENOTDIR));
			break;
		}
		copy_path(t->path, v);
		tx->dev = st.st_dev;
		tx->ino = st.st_ino;
		break;
	}
	case TK_CAPACITY:
		if (config_parse_size(v, &x) < 0)
			config_key_error(p, p->line, name, "'%s' is not a size (e.g. 8G, 512M)", v);
		else if (x == 0)
			config_key_error(p, p->line, name, "must be greater than zero");
		else
			t->capacity = x;
		break;
	case TK_PERSISTENT:
		if (config_parse_bool(v, &t->persistent) < 0)
			config_key_error(p, p->line, name, "'%s' is not yes or no", v);
		break;
	case TK_WEIGHT:
		if (config_parse_uint(v, 1, UINT32_MAX, &x) < 0)
			config_key_error(p, p->line, name, "'%s' must be an integer of at least 1",
					 v);
		else {
			t->weight = x;
			t->weight_set = true;
		}
		break;
	case TK_DIRECT:
		if (!strcasecmp(v, "auto"))
			t->direct = -1;
		else if (config_parse_bool(v, &b) == 0)
			t->direct = b;
		else
			config_key_error(p, p->line, name, "'%s' must be auto, yes or no", v);
		break;
	case TK_QD:
		if (config_parse_uint(v, 1, 1024, &x) < 0)
			config_key_error(p, p->line, name, "'%s' must be an integer from 1 to 1024",
					 v);
		else
			t->queue_depth = (unsigned)x;
		break;
	case TK_SLAB:
		if (config_parse_size(v, &x) < 0 || x == 0)
			config_key_error(p, p->line, name, "'%s' is not a size (e.g. 1G)", v);
		else
			t->slab_size = x;
		break;
	case TK_BW:
	case TK_BW_READ:
	case TK_BW_WRITE: {
		uint64_t *dst = k == TK_BW	  ? &tx->bw
				: k == TK_BW_READ ? &tx->bw_read
						  : &tx->bw_write;
		if (!strcasecmp(v, "auto")) {
			*dst = 0; /* measured at mount */
			if (k == TK_BW)
				tx->bw_auto = true;
		} else if (config_parse_bandwidth(v, &x) < 0) {
			config_key_error(p, p->line, name,
					 "'%s' is not auto or a bandwidth (e.g. 2G/s)", v);
		} else if (x == 0) {
			config_key_error(p, p->line, name, "must be greater than zero (or auto)");
		} else {
			*dst = x;
		}
		break;
	}
	case TK_MAX_BW:
	case TK_MAX_BW_READ:
	case TK_MAX_BW_WRITE: {
		uint64_t *dst = k == TK_MAX_BW	      ? &tx->max_bw
				: k == TK_MAX_BW_READ ? &tx->max_bw_read
						      : &tx->max_bw_write;
		if (!strcasecmp(v, "none"))
			*dst = 0;
		else if (config_parse_bandwidth(v, &x) < 0)
			config_key_error(p, p->line, name,
					 "'%s' is not none or a bandwidth (e.g. 2G/s)", v);
		else if (x == 0)
			config_key_error(p, p->line, name, "must be greater than zero (or none)");
		else
			*dst = x;
		break;
	}
	case TK_COMPRESS: {
		int c = codec_compress_parse(v);
		if (c < 0)
			config_key_error(p, p->line, name, "'%s' must be lz4 or none", v);
		else
			t->compress = (enum codec_compress)c;
		break;
	}
	case TK_ENCRYPT: {
		int c = codec_cipher_parse(v);
		if (c < 0)
			config_key_error(p, p->line, name, "'%s' must be aes-256-gcm or none", v);
		else
			t->encrypt = (enum codec_cipher)c;
		break;
	}
	case TK_KEY_FILE:
		/* Read (and its size and mode checked) when the tier opens. */
		if (v[0] != '/')
			config_key_error(p, p->line, name, "'%s' must be an absolute path", v);
		else if (strlen(v) >= sizeof(t->key_file))
			config_key_error(p, p->line, name, "path too long");
		else
			snprintf(t->key_file, sizeof(t->key_file), "%s", v);
		break;
	default:
		break;
	}
}

void config_key_policy(struct config_parse *p, const char *name, const char *v)
{
	struct config *c = p->c;

	if (config_key_index(config_expert_keys, XK_N, name) >= 0) {
		config_key_moved(p, name, v);
		return;
	}
	int k = key_begin(p, config_policy_keys, PK_N, p->pkline, name);

	switch (k) {
	case PK_STRIPE:
		/* Resolved after parsing: the tiers may be defined below. */
		snprintf(p->stripe, sizeof(p->stripe), "%s", v);
		break;
	case PK_LEARN:
		if (config_parse_bool(v, &c->learn) < 0)
			config_key_error(p, p->line, name, "'%s' is not yes or no", v);
		break;
	default:
		break;
	}
}

void config_key_rule(struct config_parse *p, const char *name, const char *v)
{
	struct conf_rule *r = &p->c->rules[p->idx];
	struct config_rule_extra *rx = &p->rx[p->idx];
	int k = key_begin(p, config_rule_keys, RK_N, rx->kline, name);

	switch (k) {
	case RK_MATCH:
		if (!*v) {
			config_key_error(p, p->line, name, "empty pattern");
		} else if (strlen(v) >= sizeof(r->match)) {
			config_key_error(p, p->line, name, "pattern too long");
		} else if (strchr(v, '/') && v[0] != '/' && v[0] != '*') {
			/* A pattern with '/' is matched against the whole path,
			 * which always starts with '/': it could never match. */
			config_key_error(
			    p, p->line, name,
			    "'%s' contains '/' so it is matched against the whole path "
			    "inside the mount, which starts with '/'",
			    v);
		} else {
			snprintf(r->match, sizeof(r->match), "%s", v);
		}
		break;
	case RK_TIER:
		if (strlen(v) >= sizeof(rx->tier))
			config_key_error(p, p->line, name, "rule '%s': no tier named '%s'", r->name,
					 v);
		else
			snprintf(rx->tier, sizeof(rx->tier), "%s", v);
		break;
	case RK_PERSISTENT:
		if (config_parse_bool(v, &r->persistent) < 0)
			config_key_error(p, p->line, name, "'%s' is not yes or no", v);
		break;
	default:
		break;
	}
}
