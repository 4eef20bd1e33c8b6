/*
 * fs/config/validate.c — the checks that need the whole file, run once it
 * is parsed: required keys, stripe and rule tier names (tiers may be
 * defined below the key that names them), the ram tier (one, or a small
 * one synthesized), and defaults that depend on other sections (a posix
 * tier's capacity, the metadata directory, the stripe). Messages point at
 * the lines recorded while parsing.
 */
#include "fs/config/config_load.h"
#include "fs/config/parse_state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#define RAM_DEFAULT_CAPACITY (256 * MIB)

/* The codec keys of tier T, any kind: 0, or -1 with the error recorded. */
static int finish_codec(struct config_parse *p, const struct conf_tier *t,
			const struct config_tier_extra *tx)
{
	static const int keys[] = {TK_COMPRESS, TK_ENCRYPT, TK_KEY_FILE};
	for (size_t k = 0; t->kind == TIER_RAM && k < sizeof(keys) / sizeof(keys[0]); k++) {
		if (tx->kline[keys[k]]) {
			config_key_error(p, tx->kline[keys[k]], config_tier_keys[keys[k]],
					 "tier '%s' is a ram tier: blocks in RAM are never "
					 "compressed or encrypted",
					 t->name);
			return -1;
		}
	}
	if (t->encrypt != CODEC_CIPHER_NONE && !tx->kline[TK_KEY_FILE]) {
		config_key_error(p, tx->kline[TK_ENCRYPT], "encrypt",
				 "%s needs a key_file (32 raw bytes or 64 hex digits, e.g. "
				 "from openssl rand -hex 32)",
				 codec_cipher_name(t->encrypt));
		return -1;
	}
	if (t->encrypt == CODEC_CIPHER_NONE && tx->kline[TK_KEY_FILE]) {
		config_key_error(p, tx->kline[TK_KEY_FILE], "key_file",
				 "given, but encrypt is not set: nothing would be encrypted "
				 "(add encrypt = aes-256-gcm)");
		return -1;
	}
	return 0;
}

void config_finish_tiers(struct config_parse *p)
{
	struct config *c = p->c;
	int nram = 0;

	for (int i = 0; i < c->ntiers && !p->failed; i++) {
		struct conf_tier *t = &c->tiers[i];
		struct config_tier_extra *tx = &p->tx[i];
		char sect[CONF_NAME_MAX + 8];

		snprintf(sect, sizeof(sect), "tier %s", t->name);
		if (!tx->kline[TK_TYPE]) {
			config_sect_error(p, t->line, sect,
					  "missing required key 'type' (ram, posix or s3)");
			return;
		}
		if (!tx->kline[TK_PERSISTENT])
			t->persistent = t->kind != TIER_RAM;
		config_finish_s3(p, i);
		if (p->failed)
			return;
		/* A specific direction overrides "bandwidth", in either order. */
		t->bandwidth_read = tx->kline[TK_BW_READ] ? tx->bw_read : tx->bw;
		t->bandwidth_write = tx->kline[TK_BW_WRITE] ? tx->bw_write : tx->bw;
		t->max_bandwidth_read = tx->kline[TK_MAX_BW_READ] ? tx->max_bw_read : tx->max_bw;
		t->max_bandwidth_write = tx->kline[TK_MAX_BW_WRITE] ? tx->max_bw_write : tx->max_bw;
		if (finish_codec(p, t, tx))
			return;

		if (t->kind == TIER_RAM) {
			static const int posix_only[] = {TK_PATH, TK_DIRECT, TK_SLAB};
			if (++nram > 1) {
				config_sect_error(p, t->line, sect,
						  "only one ram tier is supported");
				return;
			}
			for (size_t k = 0; k < sizeof(posix_only) / sizeof(posix_only[0]); k++) {
				int key = posix_only[k];
				if (tx->kline[key]) {
					config_key_error(
					    p, tx->kline[key], config_tier_keys[key],
					    "only posix tiers have a %s; tier '%s' is a ram tier",
					    config_tier_keys[key], t->name);
					return;
				}
			}
			if (!tx->kline[TK_CAPACITY]) {
				config_sect_error(
				    p, t->line, sect,
				    "missing required key 'capacity' (a ram tier needs one, "
				    "e.g. capacity = 8G)");
				return;
			}
			if (t->persistent) {
				config_key_error(p, tx->kline[TK_PERSISTENT], "persistent",
						 "a ram tier cannot be persistent");
				return;
			}
			c->ram_tier = i;
		} else if (t->kind == TIER_S3) {
			/* config_finish_s3 checked it. */
		} else {
			if (!tx->kline[TK_PATH]) {
				config_sect_error(
				    p, t->line, sect,
				    "missing required key 'path' (the directory for this tier)");
				return;
			}
			/* Nothing would ever go there: blocks leave RAM only for
			 * a durable home. Scratch files are a rule's business. */
			if (!t->persistent) {
				config_key_error(
				    p, tx->kline[TK_PERSISTENT], "persistent",
				    "a posix tier is always persistent; for files that need "
				    "not outlive the mount, use a [rule] with persistent = no");
				return;
			}
			for (int j = 0; j < i; j++) {
				if (c->tiers[j].kind == TIER_POSIX && p->tx[j].dev == tx->dev &&
				    p->tx[j].ino == tx->ino) {
					config_key_error(
					    p, tx->kline[TK_PATH], "path",
					    "%s is the same directory as tier '%s' (line %d)",
					    t->path, c->tiers[j].name, p->tx[j].kline[TK_PATH]);
					return;
				}
			}
			if (!tx->kline[TK_CAPACITY]) {
				struct statvfs vfs;
				if (statvfs(t->path, &vfs) < 0) {
					config_key_error(p, tx->kline[TK_PATH], "path",
							 "%s: statvfs: %s", t->path,
							 strerror(errno));
					return;
				}
				/* Slabs are preallocated: free space alone would
				 * shrink by the tier's own data at every mount,
				 * until slots in use fall beyond the capacity. */
				uint64_t held;
				int rc = tier_posix_held(t->path, &held);
				if (rc) {
					config_key_error(
					    p, tx->kline[TK_PATH], "path",
					    "%s: cannot size the tier's slab files: %s", t->path,
					    strerror(-rc));
					return;
				}
				t->capacity = (uint64_t)vfs.f_bavail * vfs.f_frsize + held;
			}
			if (t->slab_size % c->block_size) {
				config_key_error(p, tx->kline[TK_SLAB], "slab_size",
						 "%llu bytes is not a multiple of block_size (%u)",
						 (unsigned long long)t->slab_size, c->block_size);
				return;
			}
		}
		if (t->capacity < c->block_size) {
			if (tx->kline[TK_CAPACITY])
				config_key_error(
				    p, tx->kline[TK_CAPACITY], "capacity",
				    "%llu bytes is less than one block (block_size %u)",
				    (unsigned long long)t->capacity, c->block_size);
			else
				config_key_error(p, tx->kline[TK_PATH], "path",
						 "%s has less than one block (%u bytes) free; "
						 "set capacity",
						 t->path, c->block_size);
			return;
		}
	}
	if (p->failed)
		return;

	if (nram == 0) {
		/* The cache is not optional: synthesize a small one. */
		if (c->ntiers >= CONF_MAX_TIERS) {
			struct conf_tier *last = &c->tiers[c->ntiers - 1];
			char sect[CONF_NAME_MAX + 8];
			snprintf(sect, sizeof(sect), "tier %s", last->name);
			config_sect_error(
			    p, last->line, sect,
			    "too many tiers: at most %d besides the implicit ram tier "
			    "(or declare a [tier NAME] with type = ram)",
			    CONF_MAX_TIERS - 1);
			return;
		}
		static const char *const names[] = {"ram", "ram-cache", "tierfs-ram"};
		const char *name = NULL;
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]) && !name; k++)
			if (config_tier_index(c, names[k]) < 0)
				name = names[k];
		if (!name) {
			config_line_error(p, 1,
					  "no name left for the implicit ram tier; declare one");
			return;
		}
		struct conf_tier *t = &c->tiers[c->ntiers];
		snprintf(t->name, sizeof(t->name), "%s", name);
		t->kind = TIER_RAM;
		t->capacity = RAM_DEFAULT_CAPACITY;
		t->persistent = false;
		t->implicit = true;
		t->line = 0;
		c->ram_tier = c->ntiers++;
		if (t->capacity < c->block_size)
			t->capacity = c->block_size;
	}
}

void config_finish_mount(struct config_parse *p)
{
	struct config *c = p->c;

	if (c->metadata[0])
		return;
	int first = -1;
	for (int i = 0; i < c->ntiers && first < 0; i++)
		if (c->tiers[i].kind == TIER_POSIX)
			first = i;
	if (first < 0) {
		config_key_error(p, p->mount_line ? p->mount_line : 1, "metadata",
				 "required when no posix tier is configured");
		return;
	}
	snprintf(c->metadata, sizeof(c->metadata), "%s/%s",
		 strcmp(c->tiers[first].path, "/") ? c->tiers[first].path : "", META_DIRNAME);
}

void config_finish_policy(struct config_parse *p)
{
	struct config *c = p->c;

	c->nstripe = 0;
	if (!p->pkline[PK_STRIPE]) {
		for (int i = 0; i < c->ntiers; i++)
			if (c->tiers[i].kind != TIER_RAM)
				c->stripe[c->nstripe++] = i;
		return;
	}
	int line = p->pkline[PK_STRIPE];
	const char *sep = ", \t";
	char *save = NULL;
	for (char *tok = strtok_r(p->stripe, sep, &save); tok; tok = strtok_r(NULL, sep, &save)) {
		int i = config_tier_index(c, tok);
		if (i < 0) {
			config_key_error(p, line, "stripe", "no tier named '%s'", tok);
			return;
		}
		if (c->tiers[i].kind == TIER_RAM) {
			config_key_error(
			    p, line, "stripe",
			    "tier '%s' is the ram tier (the cache); stripe over persistent "
			    "posix tiers",
			    tok);
			return;
		}
		for (int j = 0; j < c->nstripe; j++) {
			if (c->stripe[j] == i) {
				config_key_error(p, line, "stripe", "tier '%s' is listed twice",
						 tok);
				return;
			}
		}
		c->stripe[c->nstripe++] = i;
	}
	if (c->nstripe == 0)
		config_key_error(p, line, "stripe",
				 "empty (leave the key out for every persistent tier)");
}

void config_finish_rules(struct config_parse *p)
{
	struct config *c = p->c;

	for (int i = 0; i < c->nrules && !p->failed; i++) {
		struct conf_rule *r = &c->rules[i];
		struct config_rule_extra *rx = &p->rx[i];
		char sect[CONF_NAME_MAX + 8];

		snprintf(sect, sizeof(sect), "rule %s", r->name);
		if (!rx->kline[RK_MATCH]) {
			config_sect_error(p, r->line, sect,
					  "missing required key 'match' (a path glob)");
			return;
		}
		if (!rx->kline[RK_TIER]) {
			config_sect_error(p, r->line, sect, "missing required key 'tier'");
			return;
		}
		r->tier = config_tier_index(c, rx->tier);
		if (r->tier < 0) {
			config_key_error(p, rx->kline[RK_TIER], "tier",
					 "rule '%s': no tier named '%s'", r->name, rx->tier);
			return;
		}
	}
}
