/*
 * syncdelay.so — LD_PRELOAD into tierfs to make its disk syncs slow: every
 * fdatasync and fsync sleeps SYNCDELAY_US microseconds before it runs, as
 * one does on a disk whose cache flush takes long (a virtual disk whose
 * host writes back its own cache first). LMDB syncs its file with them on
 * every write transaction's commit (t_commitauto).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*sync_fn)(int);

static void delay(void)
{
	const char *us = getenv("SYNCDELAY_US");
	if (us)
		usleep((useconds_t)atoi(us));
}

static int call(_Atomic(sync_fn) *cache, const char *name, int fd)
{
	sync_fn f = atomic_load(cache);
	if (!f) {
		f = (sync_fn)dlsym(RTLD_NEXT, name);
		if (!f) {
			errno = ENOSYS;
			return -1;
		}
		atomic_store(cache, f);
	}
	delay();
	return f(fd);
}

int fdatasync(int fd)
{
	static _Atomic(sync_fn) real;
	return call(&real, "fdatasync", fd);
}

int fsync(int fd)
{
	static _Atomic(sync_fn) real;
	return call(&real, "fsync", fd);
}
