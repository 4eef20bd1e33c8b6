/*
 * fs/loop.h — the FUSE request loop (fs/loop.c).
 */
#ifndef TIERFS_FS_LOOP_H
#define TIERFS_FS_LOOP_H

#include <stdint.h>

#include "fs/fs.h"

/* Serve SE with FS's conf.threads worker threads until the session ends
 * (unmount or a signal). Returns 0, or -errno if reading /dev/fuse failed. */
int loop_run(struct fs *fs, struct fuse_session *se);

/* The calling worker's landing slot, for cache_write's donor: the RAM slot
 * the request being served was received into. NULL outside a worker, or
 * when the worker has none. */
uint64_t *loop_landing(void);

#endif
