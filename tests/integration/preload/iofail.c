/*
 * iofail.so — LD_PRELOAD into tierfs to hold and then fail its tier I/O:
 * while the file named by IOFAIL_HOLD exists, io_uring_submit returns
 * -EAGAIN and leaves the SQEs in the ring (the I/O stays in flight, as in
 * submitfail.so); while the file named by IOFAIL_EIO exists, every
 * completion that moved bytes reports -EIO instead, as a disk that fails
 * its writes does (t_wbfail). Completions that moved nothing (the
 * daemon's timers) are left as they are.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

static int flag(const char *env)
{
	const char *f = getenv(env);
	return f && access(f, F_OK) == 0;
}

static void *real(_Atomic(void *) *cache, const char *name)
{
	void *f = atomic_load(cache);
	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		atomic_store(cache, f);
	}
	return f;
}

static void fail_cqe(int rc, struct io_uring_cqe **cqe_ptr)
{
	if (rc == 0 && cqe_ptr && *cqe_ptr && (*cqe_ptr)->res > 0 && flag("IOFAIL_EIO"))
		(*cqe_ptr)->res = -EIO;
}

int io_uring_submit(struct io_uring *ring)
{
	static _Atomic(void *) cache;
	int (*f)(struct io_uring *) = (int (*)(struct io_uring *))real(&cache, "io_uring_submit");
	if (!f)
		return -ENOSYS;
	if (flag("IOFAIL_HOLD"))
		return -EAGAIN;
	return f(ring);
}

int io_uring_wait_cqe_timeout(struct io_uring *ring, struct io_uring_cqe **cqe_ptr,
			      struct __kernel_timespec *ts)
{
	static _Atomic(void *) cache;
	int (*f)(struct io_uring *, struct io_uring_cqe **, struct __kernel_timespec *) =
	    (int (*)(struct io_uring *, struct io_uring_cqe **, struct __kernel_timespec *))real(
		&cache, "io_uring_wait_cqe_timeout");
	if (!f)
		return -ENOSYS;
	int rc = f(ring, cqe_ptr, ts);
	fail_cqe(rc, cqe_ptr);
	return rc;
}

/* What io_uring_wait_cqe (inline) calls, on kernels without the timeout
 * argument. */
int __io_uring_get_cqe(struct io_uring *ring, struct io_uring_cqe **cqe_ptr, unsigned submit,
		       unsigned wait_nr, sigset_t *sigmask)
{
	static _Atomic(void *) cache;
	int (*f)(struct io_uring *, struct io_uring_cqe **, unsigned, unsigned, sigset_t *) =
	    (int (*)(struct io_uring *, struct io_uring_cqe **, unsigned, unsigned,
		     sigset_t *))real(&cache, "__io_uring_get_cqe");
	if (!f)
		return -ENOSYS;
	int rc = f(ring, cqe_ptr, submit, wait_nr, sigmask);
	fail_cqe(rc, cqe_ptr);
	return rc;
}
