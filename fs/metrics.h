/*
 * fs/metrics.h — the mount's figures in the Prometheus text exposition
 * format (version 0.0.4): one renderer, read by the HTTP endpoint that
 * [mount] metrics configures and by MOUNTPOINT/.tierfs/metrics (for
 * node_exporter's textfile collector).
 */
#ifndef TIERFS_METRICS_H
#define TIERFS_METRICS_H

#include <stddef.h>

struct fs;

/* .tierfs/metrics: a control node (fs/ctl.c) beside CTL_STATS. */
#define CTL_METRICS (CTL_BASE | 5)

/* The whole exposition, malloc'd into *OUT (free() it), its length in
 * *LEN. The same figures as .tierfs/stats. Takes fs->lock briefly: no
 * lock held. Returns 0 or -ENOMEM. */
int metrics_text(struct fs *fs, char **out, size_t *len);

/* Serve GET /metrics on the configured address, from a thread of the
 * HTTP library's own, if the config asks for it (a no-op otherwise).
 * Call once the mount is up enough for metrics_text. Returns 0, or
 * -errno with a log line naming the address (a port in use fails the
 * mount). */
int metrics_start(struct fs *fs);
/* Stop serving (waits for a request being answered); safe if never
 * started. */
void metrics_stop(struct fs *fs);

#endif
