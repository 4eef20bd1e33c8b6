/*
 * tiers/backend.h — what a tier backend implements, and the part of the
 * generic tier layer (tier.c) that backends may use. Private to tiers/.
 *
 * tier.c owns everything common to every kind (validation, slot bitmap,
 * checksums, the codec, stats, blocking wrapper); a backend moves io->len
 * bytes (at most t->slot_size) from the slot's start between io->buf and
 * its slot, schedules them
 * (queue_depth, priority, the max_bandwidth cap; posix uses sched.h) without
 * blocking the submitter, and reports each result through
 * tier_io_complete().
 */
#ifndef TIERFS_TIER_BACKEND_H
#define TIERFS_TIER_BACKEND_H

#include "tiers/bitmap.h"
#include "tiers/tier.h"

#include <pthread.h>

struct tier_backend {
	const char *kind_name;
	/* Set t->be_priv; t->name, block_size, slots_total, queue_depth are
	 * already filled. Returns 0 or -errno (and has logged why). */
	int (*open)(struct tier *t, const struct tier_params *p);
	/* Called once nothing is in flight. */
	void (*close)(struct tier *t);
	/* Start io (validated by tier.c; io->csum already set for writes).
	 * Must eventually call tier_io_complete(io, result) exactly once; may
	 * do so before returning. Returns 0, or -errno without completing. */
	int (*submit)(struct tier *t, struct tier_io *io);
	int (*sync)(struct tier *t);
	/* Optional: make a slot usable (posix: create its slab file). Called
	 * by tier_alloc (NEED_SPACE: the slot is new, its space must be there
	 * now, -ENOSPC sends the block to another tier) and tier_reserve (the
	 * slot holds a block already), off the I/O path. 0 or -errno. */
	int (*prepare_slot)(struct tier *t, uint64_t slot, bool need_space);
	/* Optional: SLOT is about to be freed (called before the bitmap lets
	 * it go, so a later tier_alloc of it comes after this). */
	void (*free_slot)(struct tier *t, uint64_t slot);
	/* Optional: see tier_mounted. */
	void (*mounted)(struct tier *t);
	/* Optional: see tier_stats_extra. */
	void (*stats_extra)(const struct tier *t, char *buf, size_t len);
};

extern const struct tier_backend tier_ram_backend;
extern const struct tier_backend tier_posix_backend;
extern const struct tier_backend tier_s3_backend;

struct tier {
	/* Immutable after tier_open. */
	char name[TIER_NAME_MAX];
	enum tier_kind kind;
	bool persistent;
	bool checksummed; /* every tier but RAM */
	uint32_t block_size;
	uint64_t slots_total;
	unsigned queue_depth;
	uint64_t max_bandwidth[2]; /* bytes/s per enum tier_op, 0 = none; applied by the backend */
	const struct tier_backend *be;
	void *be_priv;
	bool direct; /* set by the posix backend's open */
	/* The per-block codec, NULL for none; and the most bytes an I/O moves
	 * (block_size, or more for a codec's frames: tier_slot_size). */
	struct codec *codec;
	uint32_t slot_size;

	struct bitmap slots;	 /* lock-free */
	struct tier_stats stats; /* __atomic adds */

	/* I/Os accepted by tier_submit whose done() has not returned yet
	 * (atomic); tier_close waits on idle_cond under idle_lock for zero. */
	uint64_t outstanding;
	pthread_mutex_t idle_lock;
	pthread_cond_t idle_cond;

	/* Per enum tier_op: I/Os accepted and not yet complete, and since when
	 * that count has been above zero; busy_lock guards both and
	 * stats.busy_ns. */
	pthread_mutex_t busy_lock;
	unsigned busy_count[2];
	uint64_t busy_since[2];
	uint64_t idle_since; /* when the last I/O in flight completed, 0 never */
	/* The longest time without I/O that ended since idle_mark, counted
	 * from idle_mark at the earliest (tier_idle_take). */
	uint64_t idle_max, idle_mark;

	struct tier_ratelimit err_log; /* tier_log_io_error's */
};

/* Report an I/O's result (0 or -errno): verifies read checksums, fills
 * stats, calls io->done. Runs on the backend's completion thread. */
void tier_io_complete(struct tier_io *io, int result);

/* "tierfs: tier NAME: " + message on stderr. */
void tier_log(const struct tier *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* tier_log for a failed I/O, at most one line a second per tier: a disk
 * that fails every I/O would otherwise print a line per block, thousands
 * a second. The next line printed says how many were left out. */
void tier_log_io_error(struct tier *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Block buffers: anonymous memory aligned to a huge page and advised as
 * huge-page backed (plain pages where THP is off). The RAM tier's slots and
 * the bandwidth probe's buffers both come from here, so that the probe
 * measures what the cache gets: a 1 MiB O_DIRECT request into 4 KiB pages
 * is split into many segments, which a disk reads markedly slower than
 * the same request into huge pages. */
struct tier_mem {
	char *base; /* LEN bytes, huge-page aligned */
	void *map;  /* the whole mapping, for tier_mem_unmap */
	size_t maplen;
};
int tier_mem_map(struct tier_mem *m, size_t len); /* 0 or -errno */
void tier_mem_unmap(struct tier_mem *m);

#endif
