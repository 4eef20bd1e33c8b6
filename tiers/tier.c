/*
 * tiers/tier.c — the generic tier layer: dispatch to a backend by kind, slot
 * allocation, the per-block checksum, the hook of the per-block codec
 * (codec.h: a write is encoded into a work buffer the backend writes from,
 * a read lands in one and is decoded into the caller's buffer), stats and
 * the blocking tier_rw wrapper. Backends (ram.c, posix.c) only move blocks; scheduling (priority,
 * in-flight bound, max_bandwidth) is the backend's, through sched.h, because
 * only the backend knows when the device has room: pacing here would block
 * the submitter (the flusher, or a completion callback).
 */
#include "tiers/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack (tier_checksum_block) */
#include <xxhash.h>
#if defined(__x86_64__) || defined(__i386__)
/* Debian's libxxhash carries XXH3's runtime dispatch: the same hash, with
 * AVX2/AVX-512 where the CPU has them, several times faster than the SSE2
 * build XXH3_64bits is. Every write-back and every block read from a
 * persistent tier is hashed, so the hash's speed shows in the daemon's
 * CPU time. */
#include <xxh_x86dispatch.h>
#endif

uint64_t tier_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#define HUGE_PAGE (2u << 20)

int tier_mem_map(struct tier_mem *m, size_t len)
{
	size_t maplen = len + HUGE_PAGE;
	void *map = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return -errno;
	m->map = map;
	m->maplen = maplen;
	m->base = (char *)(((uintptr_t)map + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	/* Advice only: without THP the memory is still usable. */
	(void)madvise(m->base, len, MADV_HUGEPAGE);
	return 0;
}

void tier_mem_unmap(struct tier_mem *m)
{
	if (m->map && munmap(m->map, m->maplen))
		fprintf(stderr, "tierfs: munmap of %zu bytes of buffers: %s\n", m->maplen,
			strerror(errno));
	m->map = NULL;
}

void tier_log(const struct tier *t, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One fprintf so lines from concurrent threads do not interleave. */
	fprintf(stderr, "tierfs: tier %s: %s\n", t ? t->name : "?", msg);
}

#define TIER_ERR_LOG_NS 1000000000ULL

bool tier_ratelimit_ok(struct tier_ratelimit *rl, uint64_t now, uint64_t period_ns,
		       uint64_t *skipped)
{
	uint64_t last = __atomic_load_n(&rl->last_ns, __ATOMIC_RELAXED);
	/* One thread wins the period's report; the others count themselves. */
	if ((last && now - last < period_ns) ||
	    !__atomic_compare_exchange_n(&rl->last_ns, &last, now, false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED)) {
		__atomic_add_fetch(&rl->skipped, 1, __ATOMIC_RELAXED);
		return false;
	}
	*skipped = __atomic_exchange_n(&rl->skipped, 0, __ATOMIC_RELAXED);
	return true;
}

void tier_log_io_error(struct tier *t, const char *fmt, ...)
{
	uint64_t left;
	if (!tier_ratelimit_ok(&t->err_log, tier_now_ns(), TIER_ERR_LOG_NS, &left))
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (left)
		tier_log(t, "%s (and %" PRIu64 " more failed I/Os since the last such line)", msg,
			 left);
	else
		tier_log(t, "%s", msg);
}

static int fsync_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) ? -errno : 0;
	close(fd);
	return rc;
}

int tier_sync_dir(const char *dir)
{
	char copy[PATH_MAX]; /* dirname(3) may write into its argument */
	if (snprintf(copy, sizeof(copy), "%s", dir) >= (int)sizeof(copy))
		return -ENAMETOOLONG;
	int rc = fsync_path(dir);
	int r = fsync_path(dirname(copy));
	return rc ? rc : r;
}

uint64_t tier_checksum(const void *buf, size_t len)
{
	return XXH3_64bits(buf, len);
}

uint64_t tier_checksum_block(const void *buf, size_t len, size_t block_size)
{
	if (len >= block_size)
		return XXH3_64bits(buf, block_size);
	static const char zeros[64 * 1024];
	XXH3_state_t st;
	/* XXH3's streaming result equals the one-shot hash of the same bytes. */
	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, buf, len);
	for (size_t left = block_size - len; left;) {
		size_t n = left < sizeof(zeros) ? left : sizeof(zeros);
		XXH3_64bits_update(&st, zeros, n);
		left -= n;
	}
	return XXH3_64bits_digest(&st);
}

static const struct tier_backend *backend_for(enum tier_kind kind)
{
	switch (kind) {
	case TIER_RAM:
		return &tier_ram_backend;
	case TIER_POSIX:
		return &tier_posix_backend;
	case TIER_S3:
		return &tier_s3_backend;
	}
	return NULL;
}

int tier_open(const struct tier_params *p, struct tier **out)
{
	*out = NULL;
	const char *name = p->name ? p->name : "?";
	if (!p->name || !p->name[0] || strlen(p->name) >= TIER_NAME_MAX) {
		fprintf(stderr, "tierfs: tier %s: name must be 1..%d characters\n", name,
			TIER_NAME_MAX - 1);
		return -EINVAL;
	}
	const struct tier_backend *be = backend_for(p->kind);
	if (!be) {
		fprintf(stderr, "tierfs: tier %s: unknown tier kind %d\n", name, (int)p->kind);
		return -EINVAL;
	}
	if (p->block_size < 4096 || (p->block_size & (p->block_size - 1))) {
		fprintf(stderr,
			"tierfs: tier %s: block size %" PRIu32 " is not a power of two >= 4096\n",
			name, p->block_size);
		return -EINVAL;
	}
	if (p->queue_depth < 1) {
		fprintf(stderr, "tierfs: tier %s: queue depth must be >= 1\n", name);
		return -EINVAL;
	}
	if (p->kind == TIER_RAM && codec_wanted(&p->codec)) {
		fprintf(stderr, "tierfs: tier %s: a RAM tier has no compress or encrypt\n", name);
		return -EINVAL;
	}
	uint64_t slots = p->capacity / p->block_size;
	if (slots == 0) {
		fprintf(stderr,
			"tierfs: tier %s: capacity %" PRIu64
			" bytes is less than one block of %" PRIu32 "\n",
			name, p->capacity, p->block_size);
		return -EINVAL;
	}

	struct tier *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	snprintf(t->name, sizeof(t->name), "%s", p->name);
	t->kind = p->kind;
	t->persistent = p->kind != TIER_RAM && p->persistent;
	t->checksummed = p->kind != TIER_RAM;
	t->block_size = p->block_size;
	t->slot_size = p->block_size;
	t->slots_total = slots + p->extra_slots;
	t->queue_depth = p->queue_depth;
	t->max_bandwidth[TIER_OP_READ] = p->max_bandwidth[TIER_OP_READ];
	t->max_bandwidth[TIER_OP_WRITE] = p->max_bandwidth[TIER_OP_WRITE];
	t->be = be;
	pthread_mutex_init(&t->idle_lock, NULL);
	pthread_cond_init(&t->idle_cond, NULL);
	pthread_mutex_init(&t->busy_lock, NULL);
	if (p->kind == TIER_RAM &&
	    (p->max_bandwidth[TIER_OP_READ] || p->max_bandwidth[TIER_OP_WRITE]))
		tier_log(t, "max_bandwidth is ignored on a RAM tier");
	int rc = bitmap_init(&t->slots, t->slots_total);
	if (rc) {
		tier_log(t, "cannot allocate the slot bitmap for %" PRIu64 " slots",
			 t->slots_total);
		goto fail;
	}
	/* Every tier that is not RAM has a codec, coding or not: blocks
	 * stored as frames under another compress setting must still read. */
	if (p->kind != TIER_RAM) {
		rc = codec_open(&p->codec, t->name, t->block_size, TIER_IO_ALIGN, &t->codec);
		if (rc)
			goto fail;
		/* Compressed frames fit a block (else the block goes as it is);
		 * an encrypted incompressible one needs a page more. */
		if (codec_encrypts(t->codec))
			t->slot_size = t->block_size + TIER_IO_ALIGN;
	}
	rc = be->open(t, p);
	if (rc)
		goto fail;
	*out = t;
	return 0;
fail:
	codec_close(t->codec);
	bitmap_destroy(&t->slots);
	pthread_mutex_destroy(&t->idle_lock);
	pthread_cond_destroy(&t->idle_cond);
	pthread_mutex_destroy(&t->busy_lock);
	free(t);
	return rc;
}

void tier_close(struct tier *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->idle_lock);
	while (__atomic_load_n(&t->outstanding, __ATOMIC_ACQUIRE) > 0)
		pthread_cond_wait(&t->idle_cond, &t->idle_lock);
	pthread_mutex_unlock(&t->idle_lock);
	t->be->close(t);
	codec_close(t->codec);
	bitmap_destroy(&t->slots);
	pthread_mutex_destroy(&t->idle_lock);
	pthread_cond_destroy(&t->idle_cond);
	pthread_mutex_destroy(&t->busy_lock);
	free(t);
}

/* One more (get) or one fewer (put) I/O of direction D in flight: the busy
 * time of D runs while the count is above zero. */
static void busy_get(struct tier *t, unsigned d)
{
	pthread_mutex_lock(&t->busy_lock);
	if (t->busy_count[d]++ == 0) {
		uint64_t now = tier_now_ns();
		t->busy_since[d] = now;
		if (!t->busy_count[!d] && t->idle_since) {
			uint64_t from = t->idle_since > t->idle_mark ? t->idle_since : t->idle_mark;
			if (now > from && now - from > t->idle_max)
				t->idle_max = now - from;
		}
	}
	pthread_mutex_unlock(&t->busy_lock);
}

static void busy_put(struct tier *t, unsigned d)
{
	pthread_mutex_lock(&t->busy_lock);
	if (t->busy_count[d] > 0 && --t->busy_count[d] == 0) {
		uint64_t now = tier_now_ns();
		t->stats.busy_ns[d] += now - t->busy_since[d];
		if (!t->busy_count[!d])
			t->idle_since = now;
	}
	pthread_mutex_unlock(&t->busy_lock);
}

uint64_t tier_idle_ns(const struct tier *t)
{
	pthread_mutex_t *busy = (pthread_mutex_t *)&t->busy_lock; /* see tier_get_stats */
	pthread_mutex_lock(busy);
	uint64_t idle = 0;
	if (!t->busy_count[0] && !t->busy_count[1])
		idle = t->idle_since ? tier_now_ns() - t->idle_since : UINT64_MAX;
	pthread_mutex_unlock(busy);
	return idle;
}

uint64_t tier_idle_take(struct tier *t)
{
	pthread_mutex_lock(&t->busy_lock);
	uint64_t idle = t->idle_max;
	t->idle_max = 0;
	t->idle_mark = tier_now_ns();
	pthread_mutex_unlock(&t->busy_lock);
	return idle;
}

unsigned tier_busy(const struct tier *t, unsigned dir)
{
	pthread_mutex_t *busy = (pthread_mutex_t *)&t->busy_lock; /* see tier_get_stats */
	pthread_mutex_lock(busy);
	unsigned n = t->busy_count[dir];
	pthread_mutex_unlock(busy);
	return n;
}

/* Drop one outstanding I/O. The last one is dropped under idle_lock: were it
 * dropped before taking the lock, tier_close could see zero, free t, and the
 * lock taken here would be freed memory. */
static void outstanding_put(struct tier *t)
{
	uint64_t v = __atomic_load_n(&t->outstanding, __ATOMIC_ACQUIRE);
	while (v > 1) {
		if (__atomic_compare_exchange_n(&t->outstanding, &v, v - 1, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return;
	}
	pthread_mutex_lock(&t->idle_lock);
	__atomic_sub_fetch(&t->outstanding, 1, __ATOMIC_ACQ_REL);
	pthread_cond_broadcast(&t->idle_cond);
	pthread_mutex_unlock(&t->idle_lock);
}

/* Put the frame IO carried back in its caller's place: buf and len as the
 * caller gave them, the work buffer back in the pool. */
static void codec_unswap(struct tier *t, struct tier_io *io)
{
	io->buf = io->user_buf;
	io->len = io->user_len;
	codec_buf_put(t->codec, io->bounce);
	io->bounce = NULL;
}

/* With a codec: a write is encoded into a work buffer, and the backend
 * writes the frame (or the block as it is, when coding would not pay); a
 * read of a frame (stored_len) lands in a work buffer. 0 or -errno. */
static int codec_swap(struct tier *t, struct tier_io *io)
{
	io->bounce = NULL;
	if (io->op == TIER_OP_READ && !io->stored_len)
		return 0; /* written as it is: read as it is */
	if (io->op == TIER_OP_WRITE && !codec_codes(t->codec))
		return 0;
	if (io->op == TIER_OP_READ &&
	    (io->stored_len % TIER_IO_ALIGN || io->stored_len > t->slot_size)) {
		tier_log(t, "slot %" PRIu64 ": stored length %" PRIu32 " cannot be a frame",
			 io->slot, io->stored_len);
		return -EINVAL;
	}
	struct codec_buf *b = codec_buf_get(t->codec);
	if (!b)
		return -ENOMEM;
	if (io->op == TIER_OP_WRITE) {
		int64_t n = codec_encode(t->codec, b, io->slot, io->buf, io->len);
		if (n <= 0) {
			codec_buf_put(t->codec, b);
			io->stored_len = 0;
			return (int)n;
		}
		io->stored_len = (uint32_t)n;
	}
	io->user_buf = io->buf;
	io->user_len = io->len;
	io->bounce = b;
	io->buf = codec_buf_data(b);
	io->len = io->stored_len;
	return 0;
}

int tier_submit(struct tier *t, struct tier_io *io)
{
	if (!io || !io->buf || !io->done || (io->op != TIER_OP_READ && io->op != TIER_OP_WRITE))
		return -EINVAL;
	if (io->len % TIER_IO_ALIGN || io->len > t->block_size) {
		tier_log(t,
			 "slot %" PRIu64 ": I/O of %" PRIu32
			 " bytes: not a multiple of %u up to the %" PRIu32 "-byte block",
			 io->slot, io->len, TIER_IO_ALIGN, t->block_size);
		return -EINVAL;
	}
	if (!io->len)
		io->len = t->block_size;
	if (io->slot >= t->slots_total) {
		tier_log(t, "slot %" PRIu64 ": beyond the %" PRIu64 " slots of the tier", io->slot,
			 t->slots_total);
		return -ERANGE;
	}
	io->tier = t;
	io->next = NULL;
	io->result = 0;
	if (io->op == TIER_OP_WRITE && t->checksummed)
		io->csum = tier_checksum_block(io->buf, io->len, t->block_size);
	io->bounce = NULL;
	if (io->op == TIER_OP_WRITE)
		io->stored_len = 0;
	if (t->codec) {
		int rc = codec_swap(t, io);
		if (rc)
			return rc;
	}
	io->submit_ns = tier_now_ns();
	__atomic_add_fetch(&t->outstanding, 1, __ATOMIC_ACQ_REL);
	unsigned dir = tier_io_dir(io);
	busy_get(t, dir);
	int rc = t->be->submit(t, io);
	if (rc) {
		/* Not accepted: done() will not run, so undo the counts here. */
		if (io->bounce)
			codec_unswap(t, io);
		busy_put(t, dir);
		outstanding_put(t);
	}
	return rc;
}

void tier_io_complete(struct tier_io *io, int result)
{
	struct tier *t = io->tier;
	struct tier_stats *s = &t->stats;
	if (io->bounce) {
		struct codec_buf *b = io->bounce;
		uint32_t stored = io->len;
		if (result == 0 && io->op == TIER_OP_READ) {
			result =
			    codec_decode(t->codec, b, io->slot, stored, io->user_buf, io->user_len);
			if (result)
				__atomic_add_fetch(&s->csum_errors, 1, __ATOMIC_RELAXED);
		}
		codec_unswap(t, io);
		if (io->op == TIER_OP_WRITE)
			io->stored_len = result ? 0 : stored;
	}
	if (result == 0 && io->op == TIER_OP_READ && io->len < t->block_size)
		memset((char *)io->buf + io->len, 0, t->block_size - io->len);
	if (result == 0 && io->op == TIER_OP_READ && t->checksummed) {
		uint64_t got = tier_checksum(io->buf, t->block_size);
		if (got != io->csum) {
			tier_log(t,
				 "slot %" PRIu64 ": checksum mismatch (expected %016" PRIx64
				 ", got %016" PRIx64 ")",
				 io->slot, io->csum, got);
			__atomic_add_fetch(&s->csum_errors, 1, __ATOMIC_RELAXED);
			result = -EIO;
		}
	}
	uint64_t dt = tier_now_ns() - io->submit_ns;
	if (result) {
		__atomic_add_fetch(&s->errors, 1, __ATOMIC_RELAXED);
	} else if (io->op == TIER_OP_READ) {
		__atomic_add_fetch(&s->reads, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&s->bytes_read, io->len, __ATOMIC_RELAXED);
		__atomic_add_fetch(&s->read_ns, dt, __ATOMIC_RELAXED);
	} else {
		__atomic_add_fetch(&s->writes, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&s->bytes_written, io->len, __ATOMIC_RELAXED);
		__atomic_add_fetch(&s->write_ns, dt, __ATOMIC_RELAXED);
	}
	io->result = result;
	busy_put(t, tier_io_dir(io));
	/* io may be freed by done(): touch only t afterwards. */
	io->done(io);
	outstanding_put(t);
}

struct rw_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done; /* guarded by lock */
};

static void rw_done(struct tier_io *io)
{
	struct rw_wait *w = io->priv;
	pthread_mutex_lock(&w->lock);
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int tier_rw(struct tier *t, enum tier_op op, enum tier_prio prio, uint64_t slot, void *buf,
	    uint32_t len, uint64_t *csum)
{
	return tier_rw_stored(t, op, prio, slot, buf, len, csum, NULL);
}

int tier_rw_stored(struct tier *t, enum tier_op op, enum tier_prio prio, uint64_t slot, void *buf,
		   uint32_t len, uint64_t *csum, uint32_t *stored)
{
	struct rw_wait w = {.done = false};
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	struct tier_io io = {
	    .op = op,
	    .prio = prio,
	    .slot = slot,
	    .buf = buf,
	    .len = len,
	    .csum = (op == TIER_OP_READ && csum) ? *csum : 0,
	    .stored_len = (op == TIER_OP_READ && stored) ? *stored : 0,
	    .done = rw_done,
	    .priv = &w,
	};
	int rc = tier_submit(t, &io);
	if (rc == 0) {
		pthread_mutex_lock(&w.lock);
		while (!w.done)
			pthread_cond_wait(&w.cond, &w.lock);
		pthread_mutex_unlock(&w.lock);
		rc = io.result;
		if (op == TIER_OP_WRITE && csum && rc == 0)
			*csum = io.csum;
		if (op == TIER_OP_WRITE && stored && rc == 0)
			*stored = io.stored_len;
	}
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
	return rc;
}

int tier_sync(struct tier *t)
{
	return t->be->sync ? t->be->sync(t) : 0;
}

int64_t tier_alloc(struct tier *t)
{
	int64_t slot = bitmap_alloc(&t->slots);
	if (slot < 0)
		return slot;
	if (t->be->prepare_slot) {
		int rc = t->be->prepare_slot(t, (uint64_t)slot, true);
		if (rc) {
			bitmap_free(&t->slots, (uint64_t)slot);
			return rc;
		}
	}
	return slot;
}

void tier_free(struct tier *t, uint64_t slot)
{
	if (t->be->free_slot && slot < t->slots_total)
		t->be->free_slot(t, slot);
	int rc = bitmap_free(&t->slots, slot);
	if (rc == -ERANGE)
		tier_log(t, "slot %" PRIu64 ": freed, but beyond the %" PRIu64 " slots", slot,
			 t->slots_total);
	else if (rc)
		tier_log(t, "slot %" PRIu64 ": freed, but it was not allocated", slot);
}

int tier_reserve(struct tier *t, uint64_t slot)
{
	int rc = bitmap_reserve(&t->slots, slot);
	if (rc)
		return rc;
	if (t->be->prepare_slot) {
		rc = t->be->prepare_slot(t, slot, false);
		if (rc)
			bitmap_free(&t->slots, slot);
	}
	return rc;
}

void tier_mounted(struct tier *t)
{
	if (t->be->mounted)
		t->be->mounted(t);
}

void tier_stats_extra(const struct tier *t, char *buf, size_t len)
{
	if (len)
		buf[0] = '\0';
	if (t->be->stats_extra)
		t->be->stats_extra(t, buf, len);
}

uint64_t tier_slots_total(const struct tier *t)
{
	return t->slots_total;
}

uint64_t tier_slots_used(const struct tier *t)
{
	return bitmap_used(&t->slots);
}

const char *tier_name(const struct tier *t)
{
	return t->name;
}

enum tier_kind tier_kind(const struct tier *t)
{
	return t->kind;
}

bool tier_persistent(const struct tier *t)
{
	return t->persistent;
}

uint32_t tier_block_size(const struct tier *t)
{
	return t->block_size;
}

uint32_t tier_slot_size(const struct tier *t)
{
	return t->slot_size;
}

void tier_get_stats(const struct tier *t, struct tier_stats *out)
{
	const struct tier_stats *s = &t->stats;
	out->reads = __atomic_load_n(&s->reads, __ATOMIC_RELAXED);
	out->writes = __atomic_load_n(&s->writes, __ATOMIC_RELAXED);
	out->bytes_read = __atomic_load_n(&s->bytes_read, __ATOMIC_RELAXED);
	out->bytes_written = __atomic_load_n(&s->bytes_written, __ATOMIC_RELAXED);
	out->errors = __atomic_load_n(&s->errors, __ATOMIC_RELAXED);
	out->csum_errors = __atomic_load_n(&s->csum_errors, __ATOMIC_RELAXED);
	out->read_ns = __atomic_load_n(&s->read_ns, __ATOMIC_RELAXED);
	out->write_ns = __atomic_load_n(&s->write_ns, __ATOMIC_RELAXED);
	/* The lock is the tier's own bookkeeping, not part of what the caller
	 * reads: taking it through a const tier is sound. */
	pthread_mutex_t *busy = (pthread_mutex_t *)&t->busy_lock;
	pthread_mutex_lock(busy);
	uint64_t now = tier_now_ns();
	for (int d = 0; d < 2; d++)
		out->busy_ns[d] = s->busy_ns[d] + (t->busy_count[d] ? now - t->busy_since[d] : 0);
	pthread_mutex_unlock(busy);
}

bool tier_is_direct(const struct tier *t)
{
	return t->direct;
}
