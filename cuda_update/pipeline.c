/*
 * cuda_update/pipeline.c — runs optimizer steps over a directory sub-group by
 * sub-group, with the read of the next sub-group and the write-back of the
 * previous one in flight (io_uring) while the current one is updated.
 *
 * Memory is bounded: a pool of keep+3 slots, each big enough for the largest
 * sub-group (reading i+1, updating i, writing i-1, plus the kept ones), and
 * optionally extra ones: with exactly 3, the read of i+1 cannot start before
 * the write of i-2 is done, and io_uring serializes writes to one file (one
 * io-wq worker per inode on most filesystems), so a big sub-group's write
 * often is not done yet. One more buffer made the steady-state step about
 * 10% faster on a RAM-backed directory here. A slot
 * remembers which sub-group it holds after its write completes, so a sub-group
 * needed again while still resident (the turn-around of the alternating order,
 * or a single sub-group) is not read back. With --keep K the last K
 * sub-groups of a step are not written at all until they have been updated
 * again in the next step (the final step writes everything).
 *
 * I/O: O_DIRECT on page-aligned buffers for the 4 KiB-aligned part of each
 * file, a buffered descriptor for an unaligned tail (sizes must stay exact for
 * DeepSpeed), and buffered I/O throughout when O_DIRECT is refused (EINVAL at
 * open or at the first request). Every request carries IOSQE_ASYNC: on a
 * RAM-backed file a read would otherwise complete inline inside
 * io_uring_submit() and serialize with the update.
 *
 * Durability: every written file is fdatasync'ed (an io_uring fsync queued
 * when its last write completes, so the pipeline does not stall on it), and
 * the native sg-NNNNN.state is written whole to sg-NNNNN.state.tmp, synced,
 * then renamed over the old one; the directory is fsync'ed before tu_run()
 * returns. The header's step count thus always matches the data beside it: a
 * kill or power loss leaves each sub-group entirely at its old or its new
 * step. This costs no extra bytes, since the whole state file is rewritten
 * every step anyway. DeepSpeed's swap files are rewritten in place, as
 * DeepSpeed does.
 *
 * Fault injection for the tests: with TIERFS_UPDATE_CRASH_AFTER=N in the
 * environment the process SIGKILLs itself right after the N-th write-back
 * request (data write or fsync, with the rename that follows an fsync) has
 * completed: a deterministic "crash in the middle of write-back". With
 * TIERFS_UPDATE_FAIL_AFTER=N the N-th data write completes with EIO and its
 * bytes are lost (a hole punched where they went): the run fails, drains
 * what is in flight, and must commit no file it did not write whole.
 *
 * Threading: one thread drives the ring and the order; the update itself may
 * fan out to --threads workers (adam_cpu.c) or to the GPU.
 */
#include "cuda_update/layout.h"
#include "cuda_update/tierfs_update.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define RING_ENTRIES 256
#define MAX_OP_BYTES (8u << 20)

struct slot;

/* One open file of a slot's transfer; closed when its last op completes
 * (a written file: once its fdatasync, queued after its last write, has
 * completed, and it has been renamed to commit_to if that is set). */
struct fileio {
	const char *path;
	int fd_direct, fd_buf, write, refs;
	int direct_failed;
	struct slot *slot;
	const char *commit_to; /* rename path over this once synced */
	const char *sg_name;   /* for messages */
	int trunc;	       /* the next open truncates (fresh temporary file) */
	int sync_queued;
	/* Every write of the file was queued (whole) and none failed: only
	 * such a file is synced and committed, even while a failed run drains
	 * what is in flight. */
	int whole, failed;
	int counted; /* a state file counted in tu_ctx.commits_open */
	mode_t mode;
};

struct op {
	struct slot *slot;
	struct fileio *f;
	char *buf;
	uint64_t off;
	size_t len, done;
	int direct;
	int fsync; /* an fdatasync of f, not a transfer */
	struct op *next_retry;
};

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

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int set_err(struct tu_ctx *c, int err, const char *fmt, ...)
{
	if (c->err)
		return c->err;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	c->err = err;
	return err;
}

const char *tu_errmsg(const struct tu_ctx *c)
{
	return c->msg[0] ? c->msg : "no error";
}

int tu_num_subgroups(const struct tu_ctx *c)
{
	return c->li.nsub;
}

uint64_t tu_total_params(const struct tu_ctx *c)
{
	return c->li.total_params;
}

static void free_slots(struct tu_ctx *c)
{
	for (int i = 0; c->slots && i < c->nslots; i++) {
		if (c->cuda_host)
			tu_cuda_host_free(c->slots[i].buf);
		else
			free(c->slots[i].buf);
	}
	free(c->slots);
	c->slots = NULL;
}

void tu_close(struct tu_ctx *c)
{
	if (!c)
		return;
	if (c->ring_ok)
		io_uring_queue_exit(&c->ring);
	free_slots(c);
	tu_layout_free(&c->li);
	free(c->dir);
	free(c);
}

/* Adds the output-only half-precision param file to every sub-group. */
static int add_param_copy(struct tu_ctx *c)
{
	if (c->o.layout != TU_LAYOUT_NATIVE)
		return set_err(c, -EINVAL, "--param-copy needs the native layout");
	if (c->o.param_copy != TU_BF16 && c->o.param_copy != TU_F16)
		return set_err(c, -EINVAL, "--param-copy: bf16 or fp16 only");
	c->li.max_buf_bytes = 0;
	for (int i = 0; i < c->li.nsub; i++) {
		struct tu_subgroup *g = &c->li.sub[i];
		struct tu_seg *ns = realloc(g->seg, (size_t)(g->nseg + 1) * sizeof(*ns));
		if (!ns)
			return set_err(c, -ENOMEM, "out of memory");
		g->seg = ns;
		g->copy_off = g->buf_bytes; /* buf_bytes is TU_ALIGN aligned */
		g->buf_bytes += (2 * g->numel + TU_ALIGN - 1) & ~(uint64_t)(TU_ALIGN - 1);
		char *path;
		if (asprintf(&path, "%s/%s.param16", c->dir, g->name) < 0)
			return set_err(c, -ENOMEM, "out of memory");
		g->seg[g->nseg++] = (struct tu_seg){path, 2 * g->numel, g->copy_off, 1, 1, NULL};
		if (g->buf_bytes > c->li.max_buf_bytes)
			c->li.max_buf_bytes = g->buf_bytes;
	}
	return 0;
}

int tu_open(struct tu_ctx **out, const char *dir, const struct tu_options *o)
{
	struct tu_ctx *c = calloc(1, sizeof(*c));
	*out = c;
	if (!c)
		return -ENOMEM;
	c->o = *o;
	c->dir = strdup(dir);
	if (!c->dir)
		return set_err(c, -ENOMEM, "out of memory");
	int rc = tu_layout_scan(dir, o->layout, o->rank, &c->li, c->msg, sizeof(c->msg));
	if (rc)
		return c->err = rc;
	if (o->param_copy != TU_F32 && (rc = add_param_copy(c)))
		return rc;
	/* A crash during write-back leaves a partial temporary file behind:
	 * the state file beside it is whole, the leftover is only space. */
	for (int i = 0; i < c->li.nsub; i++)
		for (int k = 0; k < c->li.sub[i].nseg; k++) {
			const char *t = c->li.sub[i].seg[k].tmp_path;
			if (t && unlink(t) < 0 && errno != ENOENT)
				return set_err(c, -errno, "%s: remove stale temporary file: %s", t,
					       strerror(errno));
		}
	if (o->layout == TU_LAYOUT_NATIVE) {
		c->base_step = o->first_step ? o->first_step - 1 : c->li.native_step;
		c->resume = 1;
	} else
		c->base_step = o->first_step ? o->first_step - 1 : 0;
	if (o->device == TU_DEVICE_CUDA) {
		const char *why = NULL;
		if ((rc = tu_cuda_probe(&why)))
			return set_err(c, rc, "%s", why ? why : "CUDA unavailable");
	} else if (o->isa != TU_ISA_AUTO && !tu_isa_available(o->isa)) {
		return set_err(c, -ENOTSUP, "this CPU cannot run the %s kernel",
			       tu_isa_name(o->isa));
	}
	if (c->o.keep < 0)
		c->o.keep = 0;
	if (c->o.keep > c->li.nsub)
		c->o.keep = c->li.nsub;
	if (c->o.extra_buffers < 0 || c->o.extra_buffers > 64)
		return set_err(c, -EINVAL, "extra buffers: %d is not in 0..64", c->o.extra_buffers);
	c->nslots = c->o.keep + 3 + c->o.extra_buffers;
	c->slots = calloc((size_t)c->nslots, sizeof(*c->slots));
	if (!c->slots)
		return set_err(c, -ENOMEM, "out of memory");
	c->cuda_host = o->device == TU_DEVICE_CUDA;
	for (int i = 0; i < c->nslots; i++) {
		struct slot *s = &c->slots[i];
		s->sg = -1;
		size_t bytes = c->li.max_buf_bytes;
		if (c->cuda_host)
			s->buf = tu_cuda_host_alloc(bytes);
		else if (posix_memalign((void **)&s->buf, TU_ALIGN, bytes))
			s->buf = NULL;
		if (!s->buf) {
			int want = c->nslots;
			c->nslots = i; /* what free_slots() must release */
			return set_err(c, -ENOMEM,
				       "out of memory: %d buffers of %.1f MiB (the largest "
				       "sub-group) do not fit; lower --keep, --extra-buffers or "
				       "the sub-group size",
				       want, (double)bytes / 1048576.0);
		}
		/* Touch now: first touch of fresh pages is slow and would be
		 * charged to the first step's I/O. */
		memset(s->buf, 0, bytes);
	}
	/* Half the descriptors left under RLIMIT_NOFILE, less a reserve for
	 * the rest of the process. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return set_err(c, -errno, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
	rlim_t lim = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1 << 20 ? 1 << 20 : rl.rlim_cur;
	c->max_files = lim > 96 ? (int)(lim - 64) / 2 : 16;
	const char *crash = getenv("TIERFS_UPDATE_CRASH_AFTER");
	if (crash)
		c->crash_after = strtol(crash, NULL, 10);
	const char *fail = getenv("TIERFS_UPDATE_FAIL_AFTER");
	if (fail)
		c->fail_after = strtol(fail, NULL, 10);
	rc = io_uring_queue_init(RING_ENTRIES, &c->ring, 0);
	if (rc)
		return set_err(c, rc, "io_uring_queue_init: %s", strerror(-rc));
	c->ring_ok = 1;
	return 0;
}

static struct io_uring_sqe *get_sqe(struct tu_ctx *c)
{
	struct io_uring_sqe *sqe;
	while (!(sqe = io_uring_get_sqe(&c->ring))) {
		int rc = io_uring_submit(&c->ring);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
			set_err(c, rc, "io_uring_submit: %s", strerror(-rc));
			return NULL;
		}
	}
	return sqe;
}

static void put_file(struct tu_ctx *c, struct fileio *f);

/* An op is over: completed, failed, or never in flight. */
static void op_end(struct tu_ctx *c, struct op *op)
{
	op->slot->pending--;
	put_file(c, op->f);
	free(op);
}

static void issue(struct tu_ctx *c, struct op *op)
{
	struct io_uring_sqe *sqe = get_sqe(c);
	if (!sqe) {
		/* The error is set; no completion will come for this op, so
		 * it must not stay counted (wait_slot would wait forever). */
		op->f->failed = 1;
		op_end(c, op);
		return;
	}
	int fd = op->direct ? op->f->fd_direct : op->f->fd_buf;
	if (op->fsync)
		io_uring_prep_fsync(sqe, op->f->fd_direct >= 0 ? op->f->fd_direct : op->f->fd_buf,
				    IORING_FSYNC_DATASYNC);
	else if (op->f->write)
		io_uring_prep_write(sqe, fd, op->buf + op->done, (unsigned)(op->len - op->done),
				    op->off + op->done);
	else
		io_uring_prep_read(sqe, fd, op->buf + op->done, (unsigned)(op->len - op->done),
				   op->off + op->done);
	sqe->flags |= IOSQE_ASYNC;
	io_uring_sqe_set_data(sqe, op);
}

/* O_CREAT as DeepSpeed does (only the param copy can be missing); O_TRUNC
 * only for the first open of a fresh temporary file, never for one that an
 * earlier descriptor has written. */
static int open_file(struct fileio *f, int direct)
{
	int flags = (f->write ? O_WRONLY | O_CREAT : O_RDONLY) | O_CLOEXEC;
	if (f->write && f->trunc)
		flags |= O_TRUNC;
	int fd = open(f->path, flags | (direct ? O_DIRECT : 0), f->mode);
	if (fd >= 0)
		f->trunc = 0;
	return fd;
}

static int open_buffered(struct tu_ctx *c, struct fileio *f)
{
	if (f->fd_buf >= 0)
		return 0;
	f->fd_buf = open_file(f, 0);
	if (f->fd_buf < 0)
		return set_err(c, -errno, "%s: open for %s (sub-group %s): %s", f->path,
			       f->write ? "writing" : "reading", f->sg_name, strerror(errno));
	return 0;
}

static int add_op(struct tu_ctx *c, struct slot *s, struct fileio *f, char *buf, uint64_t off,
		  size_t len, int direct);

/* The replacement of a state file gets the user.* extended attributes of
 * the file it replaces: on a tierfs mount user.tierfs.pin keeps the
 * sub-group on its tier (a new file would fall back to the default
 * placement after one step), and a user's own attributes stay. tierfs's
 * computed names (placement, blocks) are not copied. Best effort, as
 * cp --preserve=xattr: a filesystem without xattrs has none to keep. */
static void copy_xattrs(const char *from, int to)
{
	char names[4096], val[4096];
	ssize_t n = listxattr(from, names, sizeof(names));
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
		const char *name = names + i;
		if (strncmp(name, "user.", 5) || !strcmp(name, "user.tierfs.placement") ||
		    !strcmp(name, "user.tierfs.blocks"))
			continue;
		ssize_t len = getxattr(from, name, val, sizeof(val));
		if (len < 0 || (len == 0 && !strcmp(name, "user.tierfs.pin")))
			continue;
		(void)fsetxattr(to, name, val, (size_t)len, 0);
	}
}

/* Drops a reference to f. The last one of a written file queues its
 * fdatasync (which holds a reference again) if the file was written whole;
 * the file is closed once nothing refers to it. */
static void put_file(struct tu_ctx *c, struct fileio *f)
{
	if (--f->refs > 0)
		return;
	if (f->write && !f->sync_queued && f->whole && !f->failed) {
		f->sync_queued = 1;
		/* Held across add_op: an op that cannot be issued drops its
		 * own reference at once (op_end), which must not free f
		 * under us. */
		f->refs++;
		add_op(c, f->slot, f, NULL, 0, 0, 0);
		if (--f->refs > 0)
			return;
	}
	if (f->fd_direct >= 0)
		close(f->fd_direct);
	if (f->fd_buf >= 0)
		close(f->fd_buf);
	c->nfiles--;
	if (f->counted)
		c->commits_open--;
	free(f);
}

/* len 0: an fdatasync of f. */
static int add_op(struct tu_ctx *c, struct slot *s, struct fileio *f, char *buf, uint64_t off,
		  size_t len, int direct)
{
	struct op *op = calloc(1, sizeof(*op));
	if (!op)
		return set_err(c, -ENOMEM, "out of memory queueing I/O on %s", f->path);
	*op = (struct op){s, f, buf, off, len, 0, direct, len == 0, NULL};
	f->refs++;
	s->pending++;
	issue(c, op);
	return c->err;
}

static int reap(struct tu_ctx *c);
static void reissue_retries(struct tu_ctx *c);

enum xfer { XFER_READ_ALL, XFER_WRITE_STATE, XFER_READ_GRADS };

/* Queues the transfer of sub-group sg's segments between its files and slot s:
 * everything in, the state out, or only the gradients in. */
static int transfer(struct tu_ctx *c, struct slot *s, int sg, enum xfer mode)
{
	const struct tu_subgroup *g = &c->li.sub[sg];
	int write = mode == XFER_WRITE_STATE;
	if (!write && g->grad_covered < g->numel) {
		size_t es = g->grad_dtype == TU_F32 ? 4 : 2;
		memset(s->buf + g->g_off + g->grad_covered * es, 0,
		       (g->numel - g->grad_covered) * es);
	}
	for (int k = 0; k < g->nseg; k++) {
		const struct tu_seg *seg = &g->seg[k];
		if ((mode == XFER_WRITE_STATE && !seg->write_back) ||
		    (mode == XFER_READ_GRADS && (seg->write_back || seg->no_read)) ||
		    (mode == XFER_READ_ALL && seg->no_read))
			continue;
		/* A DeepSpeed sub-group has one gradient file per tensor,
		 * possibly thousands, each open until its requests complete:
		 * past the cap, let earlier transfers finish first. */
		while (c->nfiles >= c->max_files) {
			reissue_retries(c);
			if (reap(c) || c->err)
				return c->err;
		}
		struct fileio *f = calloc(1, sizeof(*f));
		if (!f)
			return set_err(c, -ENOMEM, "out of memory opening %s", seg->path);
		*f = (struct fileio){.path = seg->path,
				     .fd_direct = -1,
				     .fd_buf = -1,
				     .write = write,
				     .refs = 1,
				     .slot = s,
				     .sg_name = g->name,
				     .mode = 0600};
		c->nfiles++;
		if (write && seg->tmp_path) {
			/* The replacement keeps the permissions of the file
			 * it replaces. */
			struct stat st;
			if (stat(seg->path, &st) == 0)
				f->mode = st.st_mode & 07777;
			f->path = seg->tmp_path;
			f->commit_to = seg->path;
			f->trunc = 1;
			f->counted = 1;
			c->commits_open++;
		} else if (write && seg->no_read) {
			/* Output only, written whole: a longer file left from
			 * another model must not keep its stale tail. */
			f->trunc = 1;
		}
		char *buf = s->buf + seg->buf_off;
		uint64_t aligned = 0;
		if (!c->o.buffered && ((uintptr_t)buf % TU_ALIGN) == 0) {
			aligned = seg->bytes & ~(uint64_t)(TU_ALIGN - 1);
			if (aligned) {
				f->fd_direct = open_file(f, 1);
				if (f->fd_direct < 0 && errno != EINVAL) {
					int e = errno;
					put_file(c, f); /* not whole: never synced */
					return set_err(c, -e, "%s: open for %s (sub-group %s): %s",
						       f->path, write ? "writing" : "reading",
						       g->name, strerror(e));
				}
				if (f->fd_direct < 0)
					aligned = 0; /* filesystem without O_DIRECT */
			}
		}
		if (aligned < seg->bytes && open_buffered(c, f)) {
			put_file(c, f);
			return c->err;
		}
		if (f->commit_to)
			copy_xattrs(f->commit_to, f->fd_direct >= 0 ? f->fd_direct : f->fd_buf);
		uint64_t o = 0;
		while (o < seg->bytes && !c->err) {
			int direct = o < aligned;
			uint64_t lim = direct ? aligned : seg->bytes;
			size_t n = lim - o > MAX_OP_BYTES ? MAX_OP_BYTES : (size_t)(lim - o);
			add_op(c, s, f, buf + o, o, n, direct);
			o += n;
		}
		f->whole = o >= seg->bytes && !c->err;
		if (write)
			c->bytes_written += seg->bytes;
		else
			c->bytes_read += seg->bytes;
		put_file(c, f);
		if (c->err)
			return c->err;
	}
	return 0;
}

/* The fdatasync of a written file completed: rename it into place. */
static void synced(struct tu_ctx *c, struct fileio *f, int res)
{
	if (res < 0) {
		set_err(c, res, "%s: fdatasync (sub-group %s): %s", f->path, f->sg_name,
			strerror(-res));
		return;
	}
	if (f->commit_to && rename(f->path, f->commit_to) < 0)
		set_err(c, -errno, "%s: rename to %s (sub-group %s): %s", f->path, f->commit_to,
			f->sg_name, strerror(errno));
}

static void complete(struct tu_ctx *c, struct op *op, int res)
{
	struct fileio *f = op->f;
	if (op->fsync) {
		if (res == -EINTR || res == -EAGAIN) {
			op->next_retry = c->retry;
			c->retry = op;
			return;
		}
		synced(c, f, res);
		goto done;
	}
	if (res == -EINVAL && op->direct && op->done == 0) {
		/* O_DIRECT accepted at open but refused per request (some FUSE
		 * and network filesystems): redo buffered. */
		f->direct_failed = 1;
		if (open_buffered(c, f) == 0) {
			op->direct = 0;
			op->next_retry = c->retry;
			c->retry = op;
			return;
		}
		res = c->err;
	}
	if (res == -EAGAIN || res == -EINTR) {
		op->next_retry = c->retry;
		c->retry = op;
		return;
	}
	if (f->write && c->fail_after && ++c->writes_seen == c->fail_after) {
		/* As a disk that lost the write: its bytes are not there. */
		int fd = op->direct ? f->fd_direct : f->fd_buf;
		fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)op->off,
			  (off_t)op->len);
		res = -EIO;
	}
	if (res < 0 || (res == 0 && op->done < op->len))
		f->failed = 1;
	if (res < 0) {
		set_err(c, res, "%s: %s at offset %" PRIu64 ": %s", f->path,
			f->write ? "write" : "read", op->off + op->done, strerror(-res));
	} else if (res == 0 && op->done < op->len) {
		set_err(c, -EIO, "%s: %s at offset %" PRIu64 " returned 0 (file shrank?)", f->path,
			f->write ? "write" : "read", op->off + op->done);
	} else {
		op->done += (size_t)res;
		if (op->done < op->len) {
			op->next_retry = c->retry;
			c->retry = op;
			return;
		}
	}
done:;
	int write = f->write;
	op_end(c, op);
	if (write && c->crash_after && ++c->writes_done == c->crash_after)
		raise(SIGKILL);
}

/* The renames are in the directory: sync it so that they survive too. */
static int sync_dir(struct tu_ctx *c)
{
	if (c->o.layout != TU_LAYOUT_NATIVE)
		return 0;
	int fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return set_err(c, -errno, "%s: open directory to sync it: %s", c->dir,
			       strerror(errno));
	if (fsync(fd) < 0) {
		int e = errno;
		close(fd);
		return set_err(c, -e, "%s: fsync directory: %s", c->dir, strerror(e));
	}
	if (close(fd) < 0)
		return set_err(c, -errno, "%s: close directory: %s", c->dir, strerror(errno));
	return 0;
}

static void reissue_retries(struct tu_ctx *c)
{
	while (c->retry) {
		struct op *op = c->retry;
		c->retry = op->next_retry;
		issue(c, op);
	}
}

/* Submits what is queued and handles at least one completion. */
static int reap(struct tu_ctx *c)
{
	struct io_uring_cqe *cqe;
	int rc = io_uring_submit_and_wait(&c->ring, 1);
	if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
		return set_err(c, rc, "io_uring_submit_and_wait: %s", strerror(-rc));
	unsigned head, n = 0;
	io_uring_for_each_cqe(&c->ring, head, cqe)
	{
		complete(c, io_uring_cqe_get_data(cqe), cqe->res);
		n++;
	}
	io_uring_cq_advance(&c->ring, n);
	return 0;
}

/* Reaps completions until s has nothing in flight (s == NULL: until nothing
 * at all is in flight). */
static int wait_slot(struct tu_ctx *c, struct slot *s)
{
	for (;;) {
		reissue_retries(c);
		int busy = 0;
		if (s)
			busy = s->pending > 0;
		else
			for (int i = 0; i < c->nslots; i++)
				busy |= c->slots[i].pending > 0;
		if (!busy)
			return c->err;
		if (reap(c))
			return c->err;
	}
}

/* Before the first write-back of a new step: reaps until every state file
 * of the earlier steps is committed (renamed into place) or has failed.
 * Writes complete out of order, so without this the first sub-group of
 * step t+1 could be committed while one of step t is still in flight, and a
 * kill in between left sub-groups two steps apart, which no resume fixes. */
static int wait_commits(struct tu_ctx *c, uint64_t step)
{
	if (step == c->write_step)
		return c->err;
	while (c->commits_open > 0 && !c->err) {
		reissue_retries(c);
		if (reap(c))
			break;
	}
	if (!c->err)
		c->write_step = step;
	return c->err;
}

/* A slot holding sub-group sg's state, or a free one loading it. Gradients
 * are new every step (backward rewrites them), so a resident sub-group still
 * reads its gradients again. */
static struct slot *acquire(struct tu_ctx *c, int sg)
{
	for (int i = 0; i < c->nslots; i++)
		if (c->slots[i].sg == sg && c->slots[i].valid) {
			if (c->slots[i].in_use) {
				/* Being updated right now (the turn-around): its
				 * gradients are reloaded after that update. */
				c->slots[i].regrad = 1;
				return &c->slots[i];
			}
			c->slots[i].in_use = 1;
			if (transfer(c, &c->slots[i], sg, XFER_READ_GRADS))
				return NULL;
			return &c->slots[i];
		}
	struct slot *best = NULL;
	for (int i = 0; i < c->nslots; i++) {
		struct slot *s = &c->slots[i];
		if (s->in_use || s->dirty)
			continue;
		/* idle before busy, then least recently used */
		if (!best || (best->pending && !s->pending) ||
		    (!best->pending == !s->pending && s->lru < best->lru))
			best = s;
	}
	if (!best) {
		set_err(c, -ENOMEM, "internal: no free buffer (keep %d, %d slots)", c->o.keep,
			c->nslots);
		return NULL;
	}
	if (wait_slot(c, best))
		return NULL;
	best->sg = sg;
	best->valid = 1;
	best->in_use = 1;
	if (transfer(c, best, sg, XFER_READ_ALL))
		return NULL;
	return best;
}

static int update(struct tu_ctx *c, struct slot *s, int sg, uint64_t step)
{
	const struct tu_subgroup *g = &c->li.sub[sg];
	if (g->hdr_off != UINT64_MAX) {
		struct tu_native_hdr *h = (struct tu_native_hdr *)(s->buf + g->hdr_off);
		if (memcmp(h->magic, TU_NATIVE_MAGIC, 8) || h->numel != g->numel)
			return set_err(c, -EIO, "%s: header changed during the run",
				       g->seg[0].path);
		h->step = step;
	}
	if (c->o.no_compute)
		return 0;
	struct tu_tensors t = {
	    .param = (float *)(s->buf + g->p_off),
	    .exp_avg = (float *)(s->buf + g->m_off),
	    .exp_avg_sq = (float *)(s->buf + g->v_off),
	    .grad = s->buf + g->g_off,
	    .grad_dtype = g->grad_dtype,
	    .param_copy = c->o.param_copy != TU_F32 ? s->buf + g->copy_off : NULL,
	    .copy_dtype = c->o.param_copy,
	    .numel = g->numel,
	};
	int rc = c->o.device == TU_DEVICE_CUDA
		     ? tu_cuda_adam_step(&c->o.hp, step, &t)
		     : tu_adam_step(&c->o.hp, step, &t, c->o.threads, c->o.isa);
	if (rc)
		return set_err(c, rc, "update of sub-group %s (step %" PRIu64 "): %s", g->name,
			       step, strerror(-rc));
	return 0;
}

/* A sub-group that an interrupted run already took to this step: its
 * state goes back as read, and its half-precision copy, if any, is made
 * from it as the update would have. */
static void resume_copy(struct tu_ctx *c, struct slot *s, const struct tu_subgroup *g)
{
	if (c->o.param_copy == TU_F32)
		return;
	const float *p = (const float *)(s->buf + g->p_off);
	uint16_t *d = (uint16_t *)(s->buf + g->copy_off);
	for (uint64_t i = 0; i < g->numel; i++)
		d[i] = c->o.param_copy == TU_BF16 ? tu_f32_to_bf16(p[i]) : tu_f32_to_f16(p[i]);
}

int tu_run(struct tu_ctx *c, int nsteps, tu_progress_fn progress, tu_step_fn step_done, void *arg)
{
	if (c->err)
		return c->err;
	int n = c->li.nsub;
	long total = (long)nsteps * n;
	if (nsteps <= 0)
		return 0;
	/* Files may have changed since the last run (new gradients, another
	 * writer): only what this run reads is trusted. */
	for (int i = 0; i < c->nslots; i++)
		if (!c->slots[i].dirty)
			c->slots[i].sg = -1;
			/* job j: step j / n of this run, position j % n in that step's order.
			 * The turn-around follows the global step, not this run's count: a
			 * trainer that runs one step per call still alternates. */
#define JOB_SG(j)                                                                                  \
	((c->o.order == TU_ORDER_ALTERNATING && (c->base_step + (j) / n) % 2)                      \
	     ? n - 1 - (int)((j) % n)                                                              \
	     : (int)((j) % n))
	double t_step = now(), compute = 0;
	uint64_t r0 = c->bytes_read, w0 = c->bytes_written;
	struct slot *cur = acquire(c, JOB_SG(0));
	for (long j = 0; j < total && cur; j++) {
		int sg = JOB_SG(j);
		long si = j / n;
		int pos = (int)(j % n);
		uint64_t step = c->base_step + (uint64_t)si + 1;
		struct slot *next = NULL;
		if (j + 1 < total && !(next = acquire(c, JOB_SG(j + 1))))
			break;
		io_uring_submit(&c->ring);
		if (wait_slot(c, cur))
			break;
		double t0 = now();
		/* Resuming a step an interrupted run did in part: the
		 * sub-groups it finished (whole, see layout.h) are written back
		 * as they are. */
		if (c->resume && si == 0 && c->li.sub[sg].hdr_step > c->li.native_step)
			resume_copy(c, cur, &c->li.sub[sg]);
		else if (update(c, cur, sg, step))
			break;
		compute += now() - t0;
		cur->in_use = next == cur; /* the same sub-group again (turn-around) */
		cur->lru = ++c->lru_clock;
		if (si + 1 < nsteps && pos >= n - c->o.keep) {
			cur->dirty = 1;
		} else {
			cur->dirty = 0;
			if (wait_commits(c, step) || transfer(c, cur, sg, XFER_WRITE_STATE))
				break;
		}
		if (cur->regrad) {
			cur->regrad = 0;
			if (transfer(c, cur, sg, XFER_READ_GRADS))
				break;
		}
		io_uring_submit(&c->ring);
		/* Kept sub-groups of the previous step are written once updated
		 * again, above; nothing else is pending. */
		if (progress)
			progress(arg, step, pos + 1, n, c->bytes_read - r0 + c->bytes_written - w0);
		if (pos == n - 1) {
			/* The last step is reported once it is durable. */
			if (si + 1 == nsteps && (wait_slot(c, NULL) || sync_dir(c)))
				break;
			double t1 = now();
			struct tu_step_stats st = {step,
						   n,
						   t1 - t_step,
						   compute,
						   c->bytes_read - r0,
						   c->bytes_written - w0};
			if (step_done)
				step_done(arg, &st);
			t_step = t1;
			compute = 0;
			r0 = c->bytes_read;
			w0 = c->bytes_written;
		}
		cur = next;
	}
	/* Flush whatever is still in flight even after an error, so no op
	 * outlives its buffer. */
	int err = c->err;
	c->err = 0;
	wait_slot(c, NULL);
	if (err)
		c->err = err;
	c->resume = 0;
	if (!c->err) {
		c->base_step += (uint64_t)nsteps;
		for (int i = 0; i < c->nslots; i++)
			c->slots[i].in_use = 0;
	} else {
		/* A failed run leaves slot contents undefined. */
		for (int i = 0; i < c->nslots; i++)
			c->slots[i] = (struct slot){.buf = c->slots[i].buf, .sg = -1};
	}
	return c->err;
#undef JOB_SG
}
