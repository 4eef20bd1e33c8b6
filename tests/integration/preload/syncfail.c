/*
 * syncfail.so — LD_PRELOAD into tierfs to make a disk's flush fail: while
 * the file named by SYNCFAIL_FLAG exists, every fdatasync returns EIO, as
 * it does when a drive loses cached writes (t_syncfail).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*fdatasync_fn)(int);

int fdatasync(int fd)
{
	static _Atomic(fdatasync_fn) real;
	fdatasync_fn f = atomic_load(&real);
	if (!f) {
		f = (fdatasync_fn)dlsym(RTLD_NEXT, "fdatasync");
		if (!f) {
			errno = ENOSYS;
			return -1;
		}
		atomic_store(&real, f);
	}
	const char *flag = getenv("SYNCFAIL_FLAG");
	if (flag && access(flag, F_OK) == 0) {
		errno = EIO;
		return -1;
	}
	return f(fd);
}
