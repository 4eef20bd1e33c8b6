/*
 * fs/reload.h — live reload of the config file (fs/reload.c): on SIGHUP,
 * or a write to .tierfs/reload, the keys that can change while mounted
 * change at once; those that need a remount are refused one by one.
 */
#ifndef TIERFS_RELOAD_H
#define TIERFS_RELOAD_H

#include "fs/config/config_load.h"

struct fs;

/* Start the reload thread, which SIGHUP wakes, and install the SIGHUP
 * handler (after libfuse's, which would end the session). PATH: the
 * config file, absolute (the daemon may have left its directory); LINES:
 * where the mounted config's keys were (taken over, freed at stop).
 * Returns 0 or -errno. */
int fs_reload_start(struct fs *fs, const char *path, struct config_lines *lines);
/* Stop the thread, and leave SIGHUP to its default. No lock held. */
void fs_reload_stop(struct fs *fs);

/* Reload now (serialised with every other reload); WHO says what asked,
 * for the log. Returns 0 (applied, perhaps with keys refused), -EINVAL
 * (the file has an error: nothing changed) or -errno (cannot read it).
 * No lock held. */
int fs_reload(struct fs *fs, const char *who);

#endif
