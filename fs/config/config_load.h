/*
 * fs/config/config_load.h — read the tierfs config file (INI, parsed with
 * inih) into a struct config (policy/config.h), and the value parsers it
 * uses, which the tools share.
 *
 *   [mount]        block_size, metadata, sync_on_close, allow_other, threads,
 *                  dirty_ratio, flush_interval, commit_interval,
 *                  writeback_timeout, log_level
 *   [tier NAME]    type = ram | posix, path, capacity, persistent, weight,
 *                  direct, queue_depth, slab_size, bandwidth[_read|_write],
 *                  max_bandwidth[_read|_write]
 *   [policy]       stripe, learn
 *   [expert]       prefetch_depth, learn_max_cycle, keep_plan, gap_plan
 *                  (still read in [policy], their old place, with a warning)
 *   [rule NAME]    match (glob on the path inside the mount), tier, persistent
 *
 * docs/config.md says what each key is for. Sizes take K/M/G/T suffixes
 * (powers of 1024); bandwidths are SIZE/s. Every error is reported as
 * "CONFIG:LINE: key 'x': reason" (or "CONFIG:LINE: section [x]: reason")
 * so the user can go straight to it.
 */
#ifndef TIERFS_CONFIG_LOAD_H
#define TIERFS_CONFIG_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "policy/config.h"

/* Parse and validate PATH into *c (fully initialised with defaults first).
 * Returns 0, or -EINVAL (bad content) / -errno (cannot read) with a message
 * "PATH:LINE: key 'x': reason" in err. Warnings ("PATH:LINE: key 'x': ...",
 * a key under a deprecated name) are printed to stderr as "tierfs: ..."
 * lines, only when the file loads. Not thread-safe: it sets inih's
 * process-wide options; call it once, before any thread exists. */
int config_load(const char *path, struct config *c, char *err, size_t errlen);

/* A warning, one line without a newline, and the ARG given with it. */
typedef void config_warn_fn(void *arg, const char *msg);

/* config_load() that hands each warning to WARN instead (NULL: none). */
int config_load_warn(const char *path, struct config *c, char *err, size_t errlen,
		     config_warn_fn *warn, void *arg);

/* Where each key of a loaded file was: kept by config_load_lines() for
 * messages about keys after the load (a reload's refusals). */
struct config_lines;

/* config_load_warn() that also hands back, in *LINES (only when it returns
 * 0), the line of each key; C must outlive *LINES. Free with
 * config_lines_free(). */
int config_load_lines(const char *path, struct config *c, char *err, size_t errlen,
		      config_warn_fn *warn, void *arg, struct config_lines **lines);
void config_lines_free(struct config_lines *lines);

/* The line of KEY in section SECT ("mount", "tier", "policy", "expert",
 * "rule"; IDX: the tier's or rule's index in the config), else of the
 * section's header where the key was left out, else 0. */
int config_key_line(const struct config_lines *lines, const char *sect, int idx, const char *key);

/* Whether KEY was given in section SECT (IDX) of the file. */
bool config_key_given(const struct config_lines *lines, const char *sect, int idx, const char *key);

/* Print every key the parser knows, "SECTION KEY" a line, in table order
 * ("tier" and "rule" stand for [tier NAME] and [rule NAME]). */
void config_list_keys(FILE *f);

/* Parse "64M", "1.5G", "4096" into bytes. Returns 0 or -EINVAL. */
int config_parse_size(const char *s, uint64_t *out);
/* Parse "2G/s" or "500M/s" into bytes per second. Returns 0 or -EINVAL. */
int config_parse_bandwidth(const char *s, uint64_t *out);
/* Parse yes/no/true/false/on/off/1/0. Returns 0 or -EINVAL. */
int config_parse_bool(const char *s, bool *out);

#endif
