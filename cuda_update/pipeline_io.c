/*
 * cuda_update/pipeline_io.c — the I/O of one sub-group: its files read into a
 * slot or its state written back from one, through io_uring, and the commit
 * of what was written.
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
 */
#include "cuda_update/pipeline_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MAX_OP_BYTES (8u << 20)

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

static struct io_uring_sqe *get_sqe(struct tu_ctx *c)
{
	struct io_uring_sqe *sqe;
	while (!(sqe = io_uring_get_sqe(&c->ring))) {
		int rc = io_uring_submit(&c->ring);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
			tu_set_err(c, rc, "io_uring_submit: %s", strerror(-rc));
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
		 * it must not stay counted (tu_io_wait_slot would wait forever). */
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
		return tu_set_err(c, -errno, "%s: open for %s (sub-group %s): %s", f->path,
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
		return tu_set_err(c, -ENOMEM, "out of memory queueing I/O on %s", f->path);
	*op = (struct op){s, f, buf, off, len, 0, direct, len == 0, NULL};
	f->refs++;
	s->pending++;
	issue(c, op);
	return c->err;
}

static int reap(struct tu_ctx *c);
static void reissue_retries(struct tu_ctx *c);

/* Queues the transfer of sub-group sg's segments between its files and slot s:
 * everything in, the state out, or only the gradients in. */
int tu_io_transfer(struct tu_ctx *c, struct slot *s, int sg, enum xfer mode)
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
			return tu_set_err(c, -ENOMEM, "out of memory opening %s", seg->path);
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
					return tu_set_err(
					    c, -e, "%s: open for %s (sub-group %s): %s", f->path,
					    write ? "writing" : "reading", g->name, strerror(e));
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
		tu_set_err(c, res, "%s: fdatasync (sub-group %s): %s", f->path, f->sg_name,
			   strerror(-res));
		return;
	}
	if (f->commit_to && rename(f->path, f->commit_to) < 0)
		tu_set_err(c, -errno, "%s: rename to %s (sub-group %s): %s", f->path, f->commit_to,
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
		tu_set_err(c, res, "%s: %s at offset %" PRIu64 ": %s", f->path,
			   f->write ? "write" : "read", op->off + op->done, strerror(-res));
	} else if (res == 0 && op->done < op->len) {
		tu_set_err(c, -EIO, "%s: %s at offset %" PRIu64 " returned 0 (file shrank?)",
			   f->path, f->write ? "write" : "read", op->off + op->done);
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
int tu_io_sync_dir(struct tu_ctx *c)
{
	if (c->o.layout != TU_LAYOUT_NATIVE)
		return 0;
	int fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return tu_set_err(c, -errno, "%s: open directory to sync it: %s", c->dir,
				  strerror(errno));
	if (fsync(fd) < 0) {
		int e = errno;
		close(fd);
		return tu_set_err(c, -e, "%s: fsync directory: %s", c->dir, strerror(e));
	}
	if (close(fd) < 0)
		return tu_set_err(c, -errno, "%s: close directory: %s", c->dir, strerror(errno));
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
		return tu_set_err(c, rc, "io_uring_submit_and_wait: %s", strerror(-rc));
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
int tu_io_wait_slot(struct tu_ctx *c, struct slot *s)
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
int tu_io_wait_commits(struct tu_ctx *c, uint64_t step)
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
