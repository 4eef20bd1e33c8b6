/*
 * syncfail.so — LD_PRELOAD into tierfs to make a disk's flush fail: while
 * the file named by SYNCFAIL_FLAG exists, every fdatasync returns EIO, as
 * it does when a drive loses cached writes (t_syncfail). With SYNCFAIL_PATH
 * set, only the fdatasync of files whose path contains it fails: one tier's
 * disk of several. With SYNCFAIL_ONCE_MS set, the failing call first waits
 * that long, then flushes for real, removes the flag and fails: one slow
 * flush that loses what it covered, as the kernel reports it once.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*fdatasync_fn)(int);

static int on_path(int fd, const char *part)
{
	if (!part)
		return 1;
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return 0;
	path[n] = '\0';
	return strstr(path, part) != NULL;
}

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
	if (flag && access(flag, F_OK) == 0 && on_path(fd, getenv("SYNCFAIL_PATH"))) {
		const char *once = getenv("SYNCFAIL_ONCE_MS");
		if (once) {
			usleep((useconds_t)atoi(once) * 1000);
			f(fd);
			unlink(flag);
		}
		errno = EIO;
		return -1;
	}
	return f(fd);
}
