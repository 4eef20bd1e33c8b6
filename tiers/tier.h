/*
 * tiers/tier.h — one asynchronous block interface over every storage tier.
 *
 * A tier stores fixed-size blocks (the mount's block size) in numbered
 * slots. The layers above never see files, objects or offsets: they ask for
 * a free slot, write a block into it, read it back, free it. Each backend
 * (ram.c; posix.c with its posix_*.c) fills in a struct tier_backend;
 * adding a tier kind means writing one backend and nothing above this
 * header.
 *
 * The tier layer owns the per-block codec: every block written to a tier
 * that is not host RAM gets an xxHash (XXH3-64) checksum over its full
 * block_size bytes, returned in io->csum; every read from such a tier is
 * verified against the checksum the caller passes in io->csum, and a
 * mismatch completes the I/O with -EIO and a log line naming tier and slot.
 * Such a tier may also compress and encrypt each block (params.codec,
 * tiers/codec.h): the checksum stays over the plaintext, and the backend
 * moves the encoded frame, whose length the caller keeps (stored_len).
 *
 * Threading: tier_submit() may be called from any thread. Completion
 * callbacks run on the backend's completion thread, or inline in a thread
 * that submits (always on the RAM backend; on posix, for an I/O that could
 * not be issued): they must not block.
 */
#ifndef TIERFS_TIER_H
#define TIERFS_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tiers/codec.h"

#define TIER_NAME_MAX 32

enum tier_kind {
	TIER_RAM = 0,
	TIER_POSIX = 1,
	TIER_S3 = 2,
};

enum tier_op {
	TIER_OP_READ = 0,
	TIER_OP_WRITE = 1,
};

/* Scheduling classes, most urgent first (used by the scheduler, sched.h). */
enum tier_prio {
	TIER_PRIO_DEMAND = 0,	 /* a reader is waiting */
	TIER_PRIO_RECLAIM = 1,	 /* write-back that frees RAM someone waits for */
	TIER_PRIO_PREFETCH = 2,	 /* read ahead along the learned order */
	TIER_PRIO_WRITEBACK = 3, /* background write-back */
};

/* What a partial I/O's length is a multiple of (O_DIRECT's alignment on
 * 4 KiB-sector devices). */
#define TIER_IO_ALIGN 4096u

struct tier;
struct tier_io;
typedef void (*tier_io_cb)(struct tier_io *io);

struct tier_io {
	/* Filled by the caller. */
	enum tier_op op;
	enum tier_prio prio;
	uint64_t slot;
	void *buf; /* page-aligned, block_size bytes */
	/* Bytes moved from the block's start: a multiple of TIER_IO_ALIGN, at
	 * most block_size; 0, the whole block (tier_submit sets that). The
	 * rest of a block is zeros: a read fills it in, and the checksum
	 * counts it as zeros whatever buf holds there, so that a file's last
	 * block moves its bytes up to EOF only and reads back with the
	 * checksum of the whole block. */
	uint32_t len;
	uint64_t csum; /* READ: expected checksum (ignored by RAM); WRITE: set on completion */
	/* The bytes the block takes on the tier, a multiple of TIER_IO_ALIGN,
	 * on a tier with a codec: WRITE: set on completion (0: stored as
	 * it is, LEN bytes); READ: what the write set, 0 if it was 0. The
	 * caller keeps it next to the checksum. */
	uint32_t stored_len;
	tier_io_cb done;
	void *priv;
	/* Set before done() is called. */
	int result; /* 0 or -errno */
	/* Private to the tier layer and its backends. */
	struct tier *tier;
	struct tier_io *next;
	uint64_t submit_ns;
	struct codec_buf *bounce; /* the frame, while the backend moves it */
	void *user_buf;		  /* with bounce: the caller's buf and len */
	uint32_t user_len;
};

/* The direction an I/O counts in (its cap's bucket, its busy time). */
static inline unsigned tier_io_dir(const struct tier_io *io)
{
	return io->op == TIER_OP_WRITE ? TIER_OP_WRITE : TIER_OP_READ;
}

/* TIER_S3: where the objects go and how to reach them (tiers/s3*.c;
 * docs/s3.md says what each is for). Strings are NUL-terminated. */
struct tier_s3_params {
	char endpoint[512]; /* scheme://host[:port] */
	char bucket[256];
	char prefix[512];	     /* this node's keys begin with it */
	char region[64];	     /* default us-east-1 */
	char credentials_file[4096]; /* "" = the environment */
	char profile[128];	     /* default "default" */
	char ca_file[4096];	     /* "" = the system's CA store */
	bool tls_verify;	     /* verify the server's certificate (https) */
	bool virtual_host;	     /* bucket.host/key instead of host/bucket/key */
	unsigned retries;	     /* attempts per request, >= 1 */
	unsigned retry_time_ms;	     /* give up retrying a request after this long */
	unsigned request_timeout_ms; /* one attempt */
	unsigned connect_timeout_ms;
	unsigned lease_timeout_ms; /* a lease not renewed for this long is stale */
};

struct tier_params {
	/* The per-block codec, not on RAM tiers; all zero: none. */
	struct codec_params codec;

	const char *name;
	enum tier_kind kind;
	const char *path;		 /* TIER_POSIX: the directory holding slab files */
	uint64_t capacity;		 /* bytes; rounded down to whole blocks */
	uint32_t block_size;		 /* bytes, power of two, >= 4096 */
	bool persistent;		 /* survives unmount (ram: never) */
	int direct;			 /* TIER_POSIX: -1 auto, 0 buffered, 1 O_DIRECT required */
	unsigned queue_depth;		 /* in-flight I/O bound, >= 1 */
	uint64_t slab_size;		 /* TIER_POSIX: bytes per slab file (0 = default 1 GiB) */
	uint64_t max_bandwidth[2];	 /* bytes/s cap per enum tier_op, 0 = none */
	uint64_t extra_slots;		 /* slots beyond the capacity, for the caller's own use */
	const struct tier_s3_params *s3; /* TIER_S3 only */
};

/* Counters; updated atomically by the tier layer, read by anyone. */
struct tier_stats {
	uint64_t reads, writes;		    /* completed I/Os */
	uint64_t bytes_read, bytes_written; /* completed bytes */
	uint64_t errors;		    /* I/Os completed with an error */
	uint64_t csum_errors;		    /* reads that failed verification (checksum or codec) */
	uint64_t read_ns, write_ns;	    /* summed submit-to-completion time */
	/* Time with at least one read (write) accepted and not complete: a
	 * tier idles while the other side of the step waits on it only if
	 * this falls short of the elapsed time. */
	uint64_t busy_ns[2]; /* by enum tier_op */
};

/* Open (create if needed) a tier. Returns 0 or -errno, with a message on
 * stderr naming the tier and path. */
int tier_open(const struct tier_params *p, struct tier **out);
/* Wait for every submitted I/O to complete, then release everything. */
void tier_close(struct tier *t);

/* Queue io. Returns 0 when accepted (io->done will be called exactly once,
 * possibly before tier_submit returns), or -errno when rejected (done is not
 * called). Slot must be < tier_slots_total(). */
int tier_submit(struct tier *t, struct tier_io *io);

/* Blocking convenience around tier_submit, LEN as tier_io.len. For WRITE,
 * *csum receives the block's checksum; for READ, *csum is the expected
 * one. Returns io result. */
int tier_rw(struct tier *t, enum tier_op op, enum tier_prio prio, uint64_t slot, void *buf,
	    uint32_t len, uint64_t *csum);
/* tier_rw with tier_io.stored_len: for WRITE, *STORED receives it; for
 * READ, *STORED is the write's (NULL: 0). */
int tier_rw_stored(struct tier *t, enum tier_op op, enum tier_prio prio, uint64_t slot, void *buf,
		   uint32_t len, uint64_t *csum, uint32_t *stored);
/* The bytes one slot of T holds: block_size, plus TIER_IO_ALIGN on a tier
 * that encrypts (a frame's header and tag on an incompressible block). */
uint32_t tier_slot_size(const struct tier *t);

/* Make every write that has completed so far durable (fdatasync on posix;
 * a no-op on RAM). Returns 0 or -errno. */
int tier_sync(struct tier *t);

/* The caller has reserved (tier_reserve) every slot its block maps use:
 * background work that needs the complete slot map may start (s3: deleting
 * the objects no slot names). Call once, after mount-time reserves. */
void tier_mounted(struct tier *t);

/* One line of backend-specific counters (s3: requests, retries, errors by
 * class, latency percentiles) as " key=value..." into BUF, or "" where the
 * backend has none. */
void tier_stats_extra(const struct tier *t, char *buf, size_t len);

/* Slot allocation (a bitmap; thread-safe). tier_alloc returns a free slot
 * or -ENOSPC. tier_reserve marks a slot used while loading the block map at
 * mount: -EEXIST if it was already used, -ERANGE if beyond capacity. */
int64_t tier_alloc(struct tier *t);
void tier_free(struct tier *t, uint64_t slot);
int tier_reserve(struct tier *t, uint64_t slot);
uint64_t tier_slots_total(const struct tier *t);
uint64_t tier_slots_used(const struct tier *t);

const char *tier_name(const struct tier *t);
enum tier_kind tier_kind(const struct tier *t);
bool tier_persistent(const struct tier *t);
uint32_t tier_block_size(const struct tier *t);
/* A snapshot of the counters. */
void tier_get_stats(const struct tier *t, struct tier_stats *out);
/* How long T has had no I/O accepted and not complete: 0 while it has
 * some, UINT64_MAX if it never had any. */
uint64_t tier_idle_ns(const struct tier *t);
/* The longest time T had no I/O that ended since the last call (counted
 * from that call at the earliest); 0 if none did. With tier_idle_ns, how
 * long the disk idled within a stretch even if I/O ran at its end. */
uint64_t tier_idle_take(struct tier *t);
/* How many I/Os of direction DIR (tier_io_dir) T has accepted and not
 * completed. */
unsigned tier_busy(const struct tier *t, unsigned dir);
/* Whether the posix tier really uses O_DIRECT (false after fallback). */
bool tier_is_direct(const struct tier *t);

/* RAM tier only: the memory of a slot (page-aligned, block_size bytes,
 * prefaulted at open). The cache uses these as its buffers. The
 * TIER_RAM_HEADROOM bytes before each slot, and after the last, belong to
 * no slot: a reader may put a header there (fs/loop.c). */
void *tier_ram_ptr(struct tier *t, uint64_t slot);
#define TIER_RAM_HEADROOM 4096u

/* Posix tier only: the bytes of disk space that the tier in DIR already
 * holds (its slab files, preallocated, and tier.info), whether or not it is
 * open. Free space plus this is what the tier could use if it had the file
 * system to itself. A missing DIR holds 0. Returns 0 or -errno (logged). */
int tier_posix_held(const char *dir, uint64_t *bytes);

/* The checksum the codec uses, for callers that need to compute one. */
uint64_t tier_checksum(const void *buf, size_t len);
/* The checksum of a block_size block whose bytes from LEN on are zeros,
 * whatever BUF holds there: tier_checksum(buf, block_size) when they are. */
uint64_t tier_checksum_block(const void *buf, size_t len, size_t block_size);

/* fsync the directory DIR and the one holding it, so that the files made in
 * DIR and DIR itself survive a power loss (a file's own fsync does not
 * promise its directory entry). Returns 0 or -errno; the caller logs. */
int tier_sync_dir(const char *dir);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t tier_now_ns(void);

/* At most one report per period of something that may happen thousands of
 * times a second (a disk failing every I/O): zero-initialised; lock-free. */
struct tier_ratelimit {
	uint64_t last_ns; /* when the last report went out, 0 never */
	uint64_t skipped; /* events held back since */
};
/* Whether an event at NOW is reported: the first of each PERIOD_NS. If it
 * is, *SKIPPED gets the events held back since the last one reported; if
 * not, it is counted among them. */
bool tier_ratelimit_ok(struct tier_ratelimit *rl, uint64_t now, uint64_t period_ns,
		       uint64_t *skipped);

#endif
