/*
 * cuda_update/pipeline_int.h — what the three files of the sub-group pipeline
 * share and nothing outside them sees: the run context (struct tu_ctx, opaque
 * in tierfs_update.h), its buffer slots, and the calls between the files.
 * pipeline_open.c opens and closes a context, pipeline_io.c moves one
 * sub-group's files in and out of a slot, pipeline.c runs the steps.
 */
#ifndef TU_PIPELINE_INT_H
#define TU_PIPELINE_INT_H

#include "cuda_update/layout.h"
#include "cuda_update/tierfs_update.h"

#include <liburing.h>
#include <stdint.h>

struct op;

struct slot {
	char *buf;
	int sg;	     /* sub-group held, -1 none */
	int valid;   /* buf holds (or, while reads are pending, will hold) sg's latest data */
	int dirty;   /* updated but not written (kept for the next step) */
	int in_use;  /* the current or the prefetched job */
	int regrad;  /* reload the gradients once the current update is done */
	int pending; /* ops in flight on this slot */
	uint64_t lru;
};

struct tu_ctx {
	struct tu_options o;
	char *dir;
	struct tu_layout_info li;
	struct io_uring ring;
	int ring_ok;
	struct slot *slots;
	int nslots;
	int cuda_host; /* slot buffers from tu_cuda_host_alloc */
	uint64_t lru_clock;
	uint64_t base_step; /* steps applied before this run */
	/* The first step of the first run skips the sub-groups that an
	 * interrupted run already took one step past the others. */
	int resume;
	struct op *retry;
	int err;
	char msg[1024];
	uint64_t bytes_read, bytes_written;
	long crash_after; /* TIERFS_UPDATE_CRASH_AFTER, 0: off */
	long fail_after;  /* TIERFS_UPDATE_FAIL_AFTER, 0: off */
	long writes_seen;
	int nfiles; /* struct fileio open, two descriptors each at most */
	/* State files (those renamed into place) written but not yet
	 * committed or given up; and the step of the last write-back. No
	 * state file of step t+1 is written before every one of step t is
	 * committed, so a kill leaves sub-groups at most one step apart. */
	int commits_open;
	uint64_t write_step;
	int max_files;
	long writes_done;
};

/* pipeline_open.c: sets the context's error (the first one sticks) and
 * returns it. */
int tu_set_err(struct tu_ctx *c, int err, const char *fmt, ...);

enum xfer { XFER_READ_ALL, XFER_WRITE_STATE, XFER_READ_GRADS };

/* pipeline_io.c: the I/O of one sub-group, each call explained where it is
 * defined. */
int tu_io_transfer(struct tu_ctx *c, struct slot *s, int sg, enum xfer mode);
int tu_io_wait_slot(struct tu_ctx *c, struct slot *s);
int tu_io_wait_commits(struct tu_ctx *c, uint64_t step);
int tu_io_sync_dir(struct tu_ctx *c);

#endif
