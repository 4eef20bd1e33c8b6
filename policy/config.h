/*
 * policy/config.h — the tierfs config file (INI, parsed with inih).
 *
 *   [mount]        block_size, metadata, sync_on_close, allow_other, threads,
 *                  dirty_ratio, flush_interval, commit_interval,
 *                  writeback_timeout
 *   [tier NAME]    type = ram | posix, path, capacity, persistent, weight,
 *                  direct, queue_depth, slab_size, bandwidth[_read|_write],
 *                  max_bandwidth[_read|_write]
 *   [policy]       stripe, learn, prefetch_depth, learn_max_cycle, keep_plan,
 *                  gap_plan
 *   [rule NAME]    match (glob on the path inside the mount), tier, persistent
 *
 * Sizes take K/M/G/T suffixes (powers of 1024); bandwidths are SIZE/s.
 * Every error is reported as "CONFIG:LINE: key 'x': reason" (or
 * "CONFIG:LINE: section [x]: reason") so the user can go straight to it.
 */
#ifndef TIERFS_CONFIG_H
#define TIERFS_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "tiers/tier.h"

#define CONF_MAX_TIERS 16
#define CONF_MAX_RULES 64
#define CONF_NAME_MAX  64

/* gap_plan: whether idle stretches between update phases are put to work.
 * AUTO does so once they have been seen long enough to finish the work. */
enum conf_gap_plan { CONF_GAP_NO, CONF_GAP_YES, CONF_GAP_AUTO };

struct conf_tier {
	char name[TIER_NAME_MAX];
	enum tier_kind kind;
	char path[PATH_MAX];	  /* posix: existing directory */
	uint64_t capacity;	  /* bytes; ram: required; posix: default = free space */
	bool persistent;	  /* default: ram no, posix yes */
	uint64_t weight;	  /* stripe weight, default 1 */
	bool weight_set;	  /* weight given: it overrides measured bandwidth */
	int direct;		  /* -1 auto (default), 0 no, 1 yes */
	unsigned queue_depth;	  /* default 8 */
	uint64_t slab_size;	  /* posix: 0 (default) = as formatted, new: 1G */
	uint64_t bandwidth_read;  /* bytes/s, 0 = auto (measure at mount) */
	uint64_t bandwidth_write; /* bytes/s, 0 = auto */
	/* bytes/s caps, 0 = none: max_bandwidth sets both, the _read and
	 * _write keys one direction each (each direction its own, as io.max) */
	uint64_t max_bandwidth_read;
	uint64_t max_bandwidth_write;
	bool implicit; /* ram cache synthesized when the file names none */
	int line;      /* line of the [tier NAME] header */
};

struct conf_rule {
	char name[CONF_NAME_MAX];
	char match[PATH_MAX]; /* fnmatch(3) glob, FNM_PATHNAME off, against "/a/b/file" */
	int tier;	      /* index into config.tiers */
	bool persistent;      /* default: yes */
	int line;
};

struct config {
	char path[PATH_MAX]; /* the config file itself */

	/* [mount] */
	uint32_t block_size;	 /* default 1M; power of two in [4K, 64M] */
	char metadata[PATH_MAX]; /* LMDB directory; default <first posix tier>/.tierfs-meta */
	bool sync_on_close;	 /* default no */
	bool allow_other;	 /* default no */
	unsigned threads;	 /* FUSE worker threads, default 16 */
	unsigned
	    dirty_ratio; /* % of the RAM tier that may be dirty before write-back, default 25 */
	unsigned flush_interval_ms; /* background flush period, default 1000 (key in seconds, may be
				       fractional) */
	unsigned commit_interval_ms; /* least time between background metadata commits,
					default 5000 (key in seconds, may be fractional) */
	/* How long a request waiting for RAM waits while write-back fails
	 * and none succeeds, before it gets EIO; default 5000 (key in
	 * seconds, may be fractional). */
	unsigned writeback_timeout_ms;

	/* [tier NAME] in file order; exactly one has kind TIER_RAM (the cache). */
	int ntiers;
	struct conf_tier tiers[CONF_MAX_TIERS];
	int ram_tier; /* index of the ram tier */

	/* [policy] */
	int nstripe;
	int stripe[CONF_MAX_TIERS]; /* tier indexes; default: every persistent posix tier */
	bool learn;		    /* learn the access order (issue 3), default yes */
	unsigned prefetch_depth;    /* blocks ahead, default 64 */
	uint64_t learn_max_cycle;   /* longest step learned, in block accesses;
				       0 = auto, sized by the data (fs/engine.c) */
	bool keep_plan;		    /* plan which blocks stay in RAM across a learned
				       step (policy/keepplan.h), default yes */
	/* put the disks' idle time between steps to work (fs/cache.c "Idle
	 * disk"), default auto */
	enum conf_gap_plan gap_plan;

	/* [rule NAME] in file order; the first match wins. */
	int nrules;
	struct conf_rule rules[CONF_MAX_RULES];
};

/* Parse and validate PATH into *c (fully initialised with defaults first).
 * Returns 0, or -EINVAL (bad content) / -errno (cannot read) with a message
 * "PATH:LINE: key 'x': reason" in err. */
int config_load(const char *path, struct config *c, char *err, size_t errlen);

/* Parse "64M", "1.5G", "4096" into bytes. Returns 0 or -EINVAL. */
int config_parse_size(const char *s, uint64_t *out);
/* Parse "2G/s" or "500M/s" into bytes per second. Returns 0 or -EINVAL. */
int config_parse_bandwidth(const char *s, uint64_t *out);
/* Parse yes/no/true/false/on/off/1/0. Returns 0 or -EINVAL. */
int config_parse_bool(const char *s, bool *out);

/* Index of the tier named NAME, or -1. */
int config_tier_index(const struct config *c, const char *name);

#endif
