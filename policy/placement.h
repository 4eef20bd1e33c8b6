/*
 * policy/placement.h — which tier a block of a file goes to.
 *
 * Pure decisions, no I/O: the daemon asks (fs/ops.c for a file's rule,
 * fs/cache/slots.c for a block's tier), then allocates on the tier.
 *   - rules: the first [rule] whose glob matches the file's path names the
 *     tier (and whether the file is persistent);
 *   - stripe: otherwise block i of a file goes to the stripe tier chosen by
 *     a smooth weighted round-robin over the stripe weights, started at an
 *     offset derived from the inode so files do not all begin on one tier;
 *   - spill: when the chosen tier is full, the next stripe tier (in stripe
 *     order, wrapping) that is not full; -ENOSPC when none is left.
 */
#ifndef TIERFS_PLACEMENT_H
#define TIERFS_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/config.h"

#define STRIPE_SEQ_MAX 1024

struct stripe {
	int n;
	int tier[CONF_MAX_TIERS]; /* config tier indexes */
	uint64_t weight[CONF_MAX_TIERS];
	int seqlen;		 /* length of one round of the pattern */
	int seq[STRIPE_SEQ_MAX]; /* config tier index per position in a round */
};

/* Build the pattern for N tiers with the given weights (all > 0). Weights
 * are reduced to at most STRIPE_SEQ_MAX positions per round, keeping every
 * tier at least one position. Returns 0 or -EINVAL. */
int stripe_init(struct stripe *s, int n, const int *tiers, const uint64_t *weights);

/* stripe_init() over the config's [policy] stripe tiers and their weights.
 * Returns 0, -ENOENT when the config stripes over nothing (ram-only), or
 * -EINVAL. */
int stripe_init_config(struct stripe *s, const struct config *c);

/* The tier (a config tier index) for block BLOCK of inode INO; -1 if S is
 * empty. */
int stripe_tier(const struct stripe *s, uint64_t ino, uint64_t block);

/* The rule index whose glob matches PATH ("/dir/file" relative to the
 * mount root), or -1. */
int placement_rule_for(const struct config *c, const char *path);

/* Pick the tier for a block: PREFERRED first; if full[PREFERRED], the stripe
 * tiers in order starting after PREFERRED's position (or from the start if
 * PREFERRED is not a stripe tier), skipping full ones. FULL is indexed by
 * config tier index. Returns a tier index or -ENOSPC. */
int placement_spill(const struct config *c, const struct stripe *s, int preferred,
		    const bool *full);

#endif
