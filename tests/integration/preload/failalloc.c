/*
 * failalloc.so — LD_PRELOAD into tierfs to make its memory allocations
 * fail, as on a node whose memory the training job has taken: while the
 * file named by FAILALLOC_FLAG exists, one in FAILALLOC_EVERY (default 16)
 * of the calls to malloc, calloc, realloc, posix_memalign, aligned_alloc
 * and memalign returns NULL with errno ENOMEM, in every library of the
 * daemon (libfuse, LMDB, liburing and its own code). A thread of the
 * shim's own looks for the flag every 50 ms, never from inside an
 * allocation, and writes to FAILALLOC_COUNT the count of failures made and
 * whether it fails allocations now ("812 off"): a test waits for "off"
 * before it counts on memory being back.
 *
 * Goes straight to glibc's __libc_* functions: dlsym may allocate itself.
 * Not for a build with AddressSanitizer, which brings its own allocator.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);

static atomic_uint calls; /* while on */
static atomic_bool on;
static atomic_ulong failed;
static unsigned every = 16;

static bool fail_now(void)
{
	if (!atomic_load_explicit(&on, memory_order_relaxed))
		return false;
	unsigned n = atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
	if (n % every != every / 2)
		return false;
	atomic_fetch_add_explicit(&failed, 1, memory_order_relaxed);
	errno = ENOMEM;
	return true;
}

void *malloc(size_t size)
{
	return fail_now() ? NULL : __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	return fail_now() ? NULL : __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	/* realloc(p, 0) frees: never fail that. */
	return size && fail_now() ? NULL : __libc_realloc(p, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	if (fail_now())
		return ENOMEM;
	void *p = __libc_memalign(align, size);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t size)
{
	return fail_now() ? NULL : __libc_memalign(align, size);
}

void *memalign(size_t align, size_t size)
{
	return fail_now() ? NULL : __libc_memalign(align, size);
}

static void *reporter(void *arg)
{
	(void)arg;
	const char *flag = getenv("FAILALLOC_FLAG"), *path = getenv("FAILALLOC_COUNT");
	for (;;) {
		usleep(50 * 1000);
		bool now = flag && access(flag, F_OK) == 0;
		atomic_store_explicit(&on, now, memory_order_relaxed);
		if (!path)
			continue;
		char buf[48];
		int n = snprintf(buf, sizeof(buf), "%lu %s\n",
				 atomic_load_explicit(&failed, memory_order_relaxed),
				 now ? "on" : "off");
		/* Written beside it and renamed over it: a reader never
		 * finds it truncated and not yet written (t_enomem read an
		 * empty count once, about 1 run in 30). */
		char tmp[4096];
		if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
			continue;
		int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			continue;
		bool whole = write(fd, buf, (size_t)n) == n;
		close(fd);
		if (whole)
			rename(tmp, path);
	}
	return NULL;
}

__attribute__((constructor)) static void start(void)
{
	const char *e = getenv("FAILALLOC_EVERY");
	if (e && atoi(e) > 1)
		every = (unsigned)atoi(e);
	pthread_t t;
	if (pthread_create(&t, NULL, reporter, NULL) == 0)
		pthread_detach(t);
}
