/*
 * tiers/probe.h — measure a persistent tier's read and write bandwidth
 * through the real I/O path (tier_submit, the scheduler, the codec), so the
 * placement can stripe each file's blocks in proportion to what every tier
 * delivers (a tier's "bandwidth = auto").
 */
#ifndef TIERFS_PROBE_H
#define TIERFS_PROBE_H

#include <stdint.h>

#include "tiers/tier.h"

/* Write about `bytes` (rounded down to whole blocks, at least 4 blocks) into
 * free slots of t with queue_depth I/Os in flight, tier_sync, read them back
 * (checksums verified), free the slots. Uses fewer slots when fewer are
 * free. *write_bps and *read_bps get bytes/s; the write figure includes the
 * syncs, so buffered tiers are not credited with page-cache speed.
 * Returns 0, -EINVAL for a RAM tier (nothing to measure: it is the cache),
 * -ENOSPC with fewer than 4 free slots, -ENOMEM, or the first I/O error.
 * Each direction runs one untimed pass (a device's or a throttle's initial
 * burst), then timed passes for at least 200 ms (at most 16 passes); each
 * write pass ends with a tier_sync, timed with it.
 * Blocks the caller; takes ~max(2 * bytes / bandwidth, 0.2 s + bytes /
 * bandwidth) per direction. Call it while the tier is otherwise idle (at
 * mount), or the figures include the contention. */
int tier_probe_bandwidth(struct tier *t, uint64_t bytes, uint64_t *read_bps, uint64_t *write_bps);

#endif
