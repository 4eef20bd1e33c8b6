/*
 * tests/fuzz/fsbox.h — a real struct fs, opened without FUSE, for the
 * harnesses that feed names and values to the daemon's own handlers.
 *
 * The box is built once per process (a RAM tier and a directory tier in a
 * temporary directory, a rule with a glob, a regular file and a directory
 * under the root) and removed at exit. Harnesses call the handlers the
 * FUSE ops call, with the same arguments the kernel can send.
 */
#ifndef TIERFS_FUZZ_FSBOX_H
#define TIERFS_FUZZ_FSBOX_H

#include <stdint.h>

struct fs;

struct fsbox {
	struct fs *fs;
	uint64_t file; /* /file, regular, empty */
	uint64_t dir;  /* /dir */
};

/* Open the box (once; later calls return the same one). Exits the
 * process with a message when it cannot: a harness without its box has
 * nothing to test. */
struct fsbox *fsbox_get(void);

#endif
