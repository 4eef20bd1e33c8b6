/*
 * fs/config/parse_state.h — what the config parser's files share, and no
 * one else: the parse state (struct config_parse), the key ids of each
 * section, the per-tier and per-rule facts kept only while parsing (the
 * line of each key, values resolved after the whole file is read), and
 * the error reporters that make every message start "FILE:LINE: ".
 *
 *   parse.c     reads the file, counts lines, sees sections, hands keys on
 *   keys.c      the keys of each section: names, defaults, values
 *   expert.c    the [expert] keys, and their old names in [policy]
 *   values.c    sizes, bandwidths, booleans, integers, seconds
 *   validate.c  checks that need the whole file, and defaults that depend
 *               on other sections
 */
#ifndef TIERFS_CONFIG_PARSE_STATE_H
#define TIERFS_CONFIG_PARSE_STATE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs/config/config_load.h"
#include "policy/config.h"

#define KIB 1024ULL
#define MIB (1024ULL * KIB)
#define GIB (1024ULL * MIB)

/* Longest line we accept: a PATH_MAX value plus its key. */
#define CONF_LINE_MAX (PATH_MAX + 256)

#define META_DIRNAME ".tierfs-meta"

enum sect_kind { S_NONE, S_MOUNT, S_TIER, S_POLICY, S_EXPERT, S_RULE, S_UNKNOWN };

enum mount_key {
	MK_BLOCK_SIZE,
	MK_METADATA,
	MK_SYNC,
	MK_ALLOW_OTHER,
	MK_THREADS,
	MK_DIRTY,
	MK_FLUSH,
	MK_COMMIT,
	MK_WB_TIMEOUT,
	MK_N
};

enum tier_key {
	TK_TYPE,
	TK_PATH,
	TK_CAPACITY,
	TK_PERSISTENT,
	TK_WEIGHT,
	TK_DIRECT,
	TK_QD,
	TK_SLAB,
	TK_BW,
	TK_BW_READ,
	TK_BW_WRITE,
	TK_MAX_BW,
	TK_MAX_BW_READ,
	TK_MAX_BW_WRITE,
	TK_COMPRESS,
	TK_ENCRYPT,
	TK_KEY_FILE,
	TK_N
};
/* Key names, in enum tier_key order: messages about a tier key name it. */
extern const char *const config_tier_keys[TK_N];

enum policy_key { PK_STRIPE, PK_LEARN, PK_N };

/* [expert]: knobs of the mechanisms behind the policy, which only someone
 * tuning the learner or the cache touches. They were [policy] keys once,
 * and are still read there, with a warning. */
enum expert_key { XK_PREFETCH, XK_MAX_CYCLE, XK_KEEP_PLAN, XK_GAP_PLAN, XK_N };
extern const char *const config_expert_keys[XK_N];

enum rule_key { RK_MATCH, RK_TIER, RK_PERSISTENT, RK_N };

/* The keys of an s3 tier (s3keys.c). */
enum s3_key {
	S3K_ENDPOINT,
	S3K_BUCKET,
	S3K_PREFIX,
	S3K_REGION,
	S3K_CREDS,
	S3K_PROFILE,
	S3K_TLS_VERIFY,
	S3K_CA_FILE,
	S3K_ADDRESSING,
	S3K_RETRIES,
	S3K_RETRY_TIME,
	S3K_REQ_TIMEOUT,
	S3K_CONN_TIMEOUT,
	S3K_LEASE_TIMEOUT,
	S3K_N
};
extern const char *const config_s3_keys[S3K_N];

struct config_tier_extra {
	int kline[TK_N]; /* line of each key, 0 = not given */
	int s3kline[S3K_N];
	bool bw_auto; /* bandwidth = auto */
	uint64_t bw, bw_read, bw_write;
	uint64_t max_bw, max_bw_read, max_bw_write; /* 0 = none */
	dev_t dev; /* posix: identity of the directory, to catch duplicates */
	ino_t ino;
};

struct config_rule_extra {
	int kline[RK_N];
	char tier[TIER_NAME_MAX + 1]; /* resolved after parsing: tiers may follow */
};

struct config_parse {
	struct config *c;
	const char *buf;
	size_t len, pos;
	bool at_line_start;
	int line; /* line of the text last handed to inih */

	enum sect_kind sect;
	char sect_name[2 * CONF_NAME_MAX + 8]; /* for messages: "tier nvme0" */
	int sect_line;
	int idx; /* current tier or rule */

	int mount_line, policy_line, expert_line;
	int mkline[MK_N];
	int pkline[PK_N];
	int xkline[XK_N];
	bool xmoved[XK_N]; /* given under its old name in [policy] */
	char stripe[CONF_LINE_MAX];
	struct config_tier_extra tx[CONF_MAX_TIERS];
	struct config_rule_extra rx[CONF_MAX_RULES];

	/* Keys read under their old place, to say so once the file loads:
	 * indexes into xkline, in file order. */
	int nmoved;
	int moved[XK_N];

	char *err;
	size_t errlen;
	bool failed;
};

/* Record the first error, "FILE:LINE: key 'KEY': ...", "FILE:LINE: section
 * [SECT]: ..." or "FILE:LINE: ...", and mark the parse failed; later errors
 * are dropped (the first one is the one the user needs). */
void __attribute__((format(printf, 4, 5)))
config_key_error(struct config_parse *p, int line, const char *key, const char *fmt, ...);
void __attribute__((format(printf, 4, 5)))
config_sect_error(struct config_parse *p, int line, const char *sect, const char *fmt, ...);
void __attribute__((format(printf, 3, 4)))
config_line_error(struct config_parse *p, int line, const char *fmt, ...);

/* keys.c: reset *C to every key's default; take one key of the current
 * section (P->line is its line); the index of NAME in KEYS (any case), or
 * -1. */
void config_set_defaults(struct config *c);
int config_key_index(const char *const *keys, int n, const char *name);
void config_key_mount(struct config_parse *p, const char *name, const char *v);
void config_key_tier(struct config_parse *p, const char *name, const char *v);
/* An s3 key (true: handled, error recorded if bad); false: not an s3 key. */
bool config_key_s3(struct config_parse *p, const char *name, const char *v);
void config_s3_defaults(struct tier_s3_params *s);
/* The checks of tier I's finished section that concern s3 keys. */
void config_finish_s3(struct config_parse *p, int i);
void config_key_policy(struct config_parse *p, const char *name, const char *v);

/* expert.c: take a key of [expert]; take one of its keys given under its
 * old name in [policy] (the same, and remembered for the warning); pass a
 * warning for each such key to WARN (ARG), in file order. */
void config_key_expert(struct config_parse *p, const char *name, const char *v);
void config_key_moved(struct config_parse *p, const char *name, const char *v);
void config_warn_moved(const struct config_parse *p, config_warn_fn *warn, void *arg);
void config_key_rule(struct config_parse *p, const char *name, const char *v);

/* values.c: plain decimal integer in [lo, hi], no sign, no suffix (-EINVAL,
 * -ERANGE); seconds, possibly fractional ("0.5", "2", "1.25s"), into
 * milliseconds. */
int config_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
int config_parse_seconds_ms(const char *s, uint64_t *ms);

/* validate.c: after the whole file is parsed, in this order; each returns
 * at its first error, recorded in P. */
void config_finish_tiers(struct config_parse *p);
void config_finish_mount(struct config_parse *p);
void config_finish_policy(struct config_parse *p);
void config_finish_rules(struct config_parse *p);

#endif
