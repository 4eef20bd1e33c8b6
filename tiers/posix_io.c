/*
 * tiers/posix_io.c — the data path of a posix tier: the scheduler, the
 * io_uring it submits to, and the thread that reaps completions.
 *
 * I/O goes through one io_uring per tier with O_DIRECT when the file system
 * allows it. Every request goes through the tier's scheduler (sched.h):
 * in-flight I/O is bounded by queue_depth, waiting requests are served by
 * priority (demand > reclaim > prefetch > write-back, with aging), and an
 * optional max_bandwidth cap paces dispatch. tier_submit never blocks on the
 * device or the cap: a request that cannot start waits in the scheduler and
 * is issued by a later completion, or by a ring timer when only the cap
 * holds it back. One completion thread reaps the ring and reports results
 * through tier_io_complete().
 */
#include "tiers/posix_int.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

/* user_data of the ring timeout that resumes a queue held by the cap. */
#define TIMER_TOKEN (UINT64_MAX - 1)
/* user_data of the update that moves that timeout earlier. */
#define TIMER_MOVE_TOKEN (UINT64_MAX - 2)

/* Hand the SQEs queued in the ring to the kernel; false if some are left
 * there. liburing publishes them in the ring before io_uring_enter, and
 * there is no taking one back: if the kernel refuses now (-EAGAIN,
 * -EBUSY) or takes fewer, the rest go with the next submit and complete
 * through their CQEs. Completing such an I/O here as failed would
 * complete it twice, the second time on freed memory. So: retry a
 * little, then leave them queued. sq_lock held. */
bool posix_submit_ring(struct posix_tier *pt, const char *what)
{
	for (int tries = 1;; tries++) {
		int rc = io_uring_submit(&pt->ring);
		if (rc >= 0 && io_uring_sq_ready(&pt->ring) == 0)
			return true;
		if (tries >= 100) {
			tier_log(pt->t, "%s: io_uring_submit: %s; left queued for the next submit",
				 what, rc < 0 ? strerror(-rc) : "not all taken");
			return false;
		}
		if (rc != -EINTR)
			usleep(100);
	}
}

/* Queue the rest of io (io->result bytes already moved). sq_lock held. */
static int issue(struct posix_tier *pt, struct tier_io *io)
{
	uint64_t bs = pt->t->slot_size;
	uint64_t idx = io->slot / pt->slots_per_slab;
	int fd = __atomic_load_n(&pt->fds[idx], __ATOMIC_ACQUIRE);
	uint64_t done = (uint64_t)io->result;
	uint64_t off = (io->slot % pt->slots_per_slab) * bs + done;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&pt->ring);
	if (!sqe) {
		/* Cannot happen: in-flight <= queue_depth < ring entries. */
		tier_log(pt->t, "slot %" PRIu64 ": submission ring full", io->slot);
		return -EBUSY;
	}
	char *buf = (char *)io->buf + done;
	if (io->op == TIER_OP_READ)
		io_uring_prep_read(sqe, fd, buf, (unsigned)(io->len - done), off);
	else
		io_uring_prep_write(sqe, fd, buf, (unsigned)(io->len - done), off);
	io_uring_sqe_set_data(sqe, io);
	posix_submit_ring(pt, io->op == TIER_OP_READ ? "read" : "write");
	return 0;
}

/* Ask the ring to wake the completion thread after wait_ns, when a cap
 * allows the next dispatch; if the timer is armed for later (the other
 * direction's cap), move it. sq_lock held. */
static void arm_timer(struct posix_tier *pt, uint64_t wait_ns)
{
	uint64_t due = tier_now_ns() + wait_ns;
	if (pt->timer_armed && due >= pt->timer_due_ns)
		return;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&pt->ring);
	if (!sqe) {
		/* Cannot happen: in-flight + timer + its update + stop < ring
		 * entries. The next submission or completion dispatches
		 * again. */
		tier_log(pt->t, "cannot arm the bandwidth timer: submission ring full");
		return;
	}
	struct __kernel_timespec *ts = pt->timer_armed ? &pt->timer_move_ts : &pt->timer_ts;
	ts->tv_sec = (long long)(wait_ns / 1000000000ULL);
	ts->tv_nsec = (long long)(wait_ns % 1000000000ULL);
	if (pt->timer_armed) {
		/* If it has just fired, the update fails (-ENOENT, ignored)
		 * and timer_fired dispatches anyway. */
		io_uring_prep_timeout_update(sqe, ts, TIMER_TOKEN, 0);
		io_uring_sqe_set_data64(sqe, TIMER_MOVE_TOKEN);
		if (posix_submit_ring(pt, "bandwidth timer update"))
			pt->timer_due_ns = due;
		return;
	}
	io_uring_prep_timeout(sqe, ts, 0, 0);
	io_uring_sqe_set_data64(sqe, TIMER_TOKEN);
	/* Armed only once the kernel has it: a timer left in the ring would
	 * keep the next dispatch from arming one, and nothing would submit
	 * it while the cap holds every I/O back. */
	pt->timer_armed = posix_submit_ring(pt, "bandwidth timer");
	pt->timer_due_ns = due;
}

/* Issue what the scheduler allows now. sq_lock held. Returns the I/Os that
 * could not be issued (linked through next, io->result = -errno): the
 * caller completes them once sq_lock is released, since completion
 * callbacks may submit again. */
static struct tier_io *dispatch(struct posix_tier *pt)
{
	struct tier_io *failed = NULL;
	for (;;) {
		uint64_t wait_ns = 0;
		struct tier_io *io = sched_pop(&pt->sched, tier_now_ns(), &wait_ns);
		if (!io) {
			if (wait_ns)
				arm_timer(pt, wait_ns);
			break;
		}
		int rc = issue(pt, io);
		if (rc) {
			sched_done(&pt->sched);
			io->result = rc;
			io->next = failed;
			failed = io;
		}
	}
	return failed;
}

static void complete_failed(struct tier_io *failed)
{
	while (failed) {
		struct tier_io *q = failed;
		failed = q->next;
		tier_io_complete(q, q->result);
	}
}

int posix_submit(struct tier *t, struct tier_io *io)
{
	struct posix_tier *pt = t->be_priv;
	if (pt->direct && ((uintptr_t)io->buf & 4095)) {
		tier_log(t, "slot %" PRIu64 ": buffer %p is not page-aligned (O_DIRECT)", io->slot,
			 io->buf);
		return -EINVAL;
	}
	/* Normally done by tier_alloc/tier_reserve; this covers callers that
	 * write a slot they track themselves. */
	int rc = posix_ensure_slab(pt, io->slot / pt->slots_per_slab, io->slot, false);
	if (rc)
		return rc;
	io->result = 0; /* bytes moved so far, until completion */
	pthread_mutex_lock(&pt->sq_lock);
	sched_push(&pt->sched, io);
	struct tier_io *failed = dispatch(pt);
	pthread_mutex_unlock(&pt->sq_lock);
	/* Accepted: even a failure to issue (io or another one) is reported
	 * through done(). */
	complete_failed(failed);
	return 0;
}

/* io is done (err 0 or -errno): free its in-flight place, start queued
 * requests, then report. Completion callbacks run without sq_lock, so they
 * may submit again. */
static void finish(struct posix_tier *pt, struct tier_io *io, int err)
{
	pthread_mutex_lock(&pt->sq_lock);
	sched_done(&pt->sched);
	struct tier_io *failed = dispatch(pt);
	pthread_mutex_unlock(&pt->sq_lock);
	tier_io_complete(io, err);
	complete_failed(failed);
}

/* The cap's wait is over: dispatch what it held back. */
static void timer_fired(struct posix_tier *pt)
{
	pthread_mutex_lock(&pt->sq_lock);
	pt->timer_armed = false;
	struct tier_io *failed = dispatch(pt);
	pthread_mutex_unlock(&pt->sq_lock);
	complete_failed(failed);
}

static void handle_cqe(struct posix_tier *pt, struct tier_io *io, int res)
{
	struct tier *t = pt->t;
	const char *what = io->op == TIER_OP_READ ? "read" : "write";
	char path[PATH_MAX + 32];
	if (io->op == TIER_OP_WRITE)
		__atomic_store_n(&pt->written[io->slot / pt->slots_per_slab], true,
				 __ATOMIC_RELEASE);
	if (res == -EAGAIN || res == -EINTR || res > 0) {
		if (res > 0)
			io->result += res;
		if ((uint32_t)io->result == io->len) {
			finish(pt, io, 0);
			return;
		}
		/* Short transfer or transient error: issue the rest. Keeps
		 * its in-flight place. */
		pthread_mutex_lock(&pt->sq_lock);
		int rc = issue(pt, io);
		pthread_mutex_unlock(&pt->sq_lock);
		if (rc)
			finish(pt, io, rc);
		return;
	}
	posix_slab_path(pt, io->slot / pt->slots_per_slab, path, sizeof(path));
	if (res == 0) {
		tier_log(t, "%s: slot %" PRIu64 ": %s hit end of file after %d bytes", path,
			 io->slot, what, io->result);
		finish(pt, io, -EIO);
		return;
	}
	tier_log_io_error(t, "%s: slot %" PRIu64 ": %s failed: %s", path, io->slot, what,
			  strerror(-res));
	finish(pt, io, res);
}

void *posix_completion_thread(void *arg)
{
	struct posix_tier *pt = arg;
	for (;;) {
		struct io_uring_cqe *cqe;
		/* Wake now and then to submit SQEs that posix_submit_ring left in
		 * the ring: with nothing else in flight no other call would,
		 * and their waiters would wait for ever. Only where the kernel
		 * takes the timeout as an argument: otherwise liburing would
		 * take an SQE here, outside sq_lock. */
		struct __kernel_timespec idle = {.tv_nsec = 50 * 1000 * 1000};
		int rc = pt->ring.features & IORING_FEAT_EXT_ARG
			     ? io_uring_wait_cqe_timeout(&pt->ring, &cqe, &idle)
			     : io_uring_wait_cqe(&pt->ring, &cqe);
		if (rc == -ETIME) {
			pthread_mutex_lock(&pt->sq_lock);
			if (io_uring_sq_ready(&pt->ring))
				posix_submit_ring(pt, "retry");
			pthread_mutex_unlock(&pt->sq_lock);
			continue;
		}
		if (rc == -EINTR || rc == -EAGAIN)
			continue;
		if (rc < 0) {
			/* Nothing sane to do but report: the ring is broken. */
			tier_log(pt->t, "io_uring_wait_cqe failed: %s", strerror(-rc));
			usleep(10000);
			continue;
		}
		uint64_t ud = cqe->user_data;
		int res = cqe->res;
		io_uring_cqe_seen(&pt->ring, cqe);
		if (ud == STOP_TOKEN)
			break;
		if (ud == TIMER_TOKEN) {
			/* res is -ETIME: the timeout expired, as asked. */
			timer_fired(pt);
			continue;
		}
		if (ud == TIMER_MOVE_TOKEN)
			continue; /* the update's own result: moved, or too late */
		handle_cqe(pt, (struct tier_io *)(uintptr_t)ud, res);
	}
	return NULL;
}
