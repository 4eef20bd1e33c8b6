/*
 * policy/config.h — the settings tierfs runs with (struct config): the
 * mount's options, the tiers, the placement policy and the rules, as
 * fs/config/ reads them from the config file (fs/config/config_load.h)
 * with every default filled in. docs/config.md says what each is for.
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
	/* The per-block codec (tiers/codec.h), not on a ram tier: compress,
	 * encrypt and key_file (absolute; required with encrypt). */
	enum codec_compress compress;
	enum codec_cipher encrypt;
	char key_file[PATH_MAX];

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
	struct tier_s3_params s3; /* s3 tiers: where and how (s3keys.c) */
	bool implicit;		  /* ram cache synthesized when the file names none */
	int line;		  /* line of the [tier NAME] header */
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
	int stripe[CONF_MAX_TIERS]; /* tier indexes; default: every posix and s3 tier */
	bool learn;		    /* learn the access order, default yes */

	/* [expert] (also read in [policy], their old place) */
	unsigned prefetch_depth;  /* blocks ahead, default 64 */
	uint64_t learn_max_cycle; /* longest step learned, in block accesses;
				     0 = auto, sized by the data (fs/engine.c) */
	bool keep_plan;		  /* plan which blocks stay in RAM across a learned
				     step (policy/keepplan.h), default yes */
	/* put the disks' idle time between steps to work (fs/cache/idle.c),
	 * default auto */
	enum conf_gap_plan gap_plan;

	/* [rule NAME] in file order; the first match wins. */
	int nrules;
	struct conf_rule rules[CONF_MAX_RULES];
};

/* Index of the tier named NAME, or -1. */
int config_tier_index(const struct config *c, const char *name);

#endif
