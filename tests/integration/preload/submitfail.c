/*
 * submitfail.so — LD_PRELOAD into tierfs to make the kernel refuse its
 * io_uring submissions: while the file named by SUBMITFAIL_FLAG exists,
 * io_uring_submit returns -EAGAIN and leaves the SQEs in the ring, as
 * io_uring_enter does when it cannot allocate (t_submitfail).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*submit_fn)(struct io_uring *);

int io_uring_submit(struct io_uring *ring)
{
	static _Atomic(submit_fn) real;
	submit_fn f = atomic_load(&real);
	if (!f) {
		f = (submit_fn)dlsym(RTLD_NEXT, "io_uring_submit");
		if (!f)
			return -ENOSYS;
		atomic_store(&real, f);
	}
	const char *flag = getenv("SUBMITFAIL_FLAG");
	if (flag && access(flag, F_OK) == 0)
		return -EAGAIN;
	return f(ring);
}
