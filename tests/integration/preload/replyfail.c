/*
 * replyfail.so — LD_PRELOAD into tierfs to make its read replies fail as
 * they do once the FUSE connection is gone (an aborted or forced unmount
 * with reads in flight): while the file named by REPLYFAIL_FLAG exists,
 * fuse_reply_iov and fuse_reply_buf send the reply and free the request
 * as libfuse always does, then return -ENOENT. A caller that replies again
 * then uses a freed request (t_replyfail).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

/* libfuse's own types, opaque here: the shim needs no FUSE headers. */
typedef struct fuse_req *fuse_req_t;
typedef int (*reply_iov_fn)(fuse_req_t, const struct iovec *, int);
typedef int (*reply_buf_fn)(fuse_req_t, const char *, size_t);

static int failing(void)
{
	const char *flag = getenv("REPLYFAIL_FLAG");
	return flag && access(flag, F_OK) == 0;
}

int fuse_reply_iov(fuse_req_t req, const struct iovec *iov, int count)
{
	static _Atomic(reply_iov_fn) real;
	reply_iov_fn f = atomic_load(&real);
	if (!f) {
		f = (reply_iov_fn)dlsym(RTLD_NEXT, "fuse_reply_iov");
		if (!f)
			return -ENOSYS;
		atomic_store(&real, f);
	}
	int rc = f(req, iov, count);
	return failing() ? -ENOENT : rc;
}

int fuse_reply_buf(fuse_req_t req, const char *buf, size_t size)
{
	static _Atomic(reply_buf_fn) real;
	reply_buf_fn f = atomic_load(&real);
	if (!f) {
		f = (reply_buf_fn)dlsym(RTLD_NEXT, "fuse_reply_buf");
		if (!f)
			return -ENOSYS;
		atomic_store(&real, f);
	}
	int rc = f(req, buf, size);
	return failing() ? -ENOENT : rc;
}
