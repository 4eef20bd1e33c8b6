/*
 * failalloc.so — LD_PRELOAD into tierfs to make its memory allocations
 * fail, as on a node whose memory the training job has taken: while the
 * file named by FAILALLOC_FLAG exists, one in FAILALLOC_EVERY (default 16)
 * of the calls to malloc, calloc, realloc, posix_memalign, aligned_alloc
 * and memalign returns NULL with errno ENOMEM, in every library of the
 * daemon (libfuse, LMDB, liburing and its own code). Whether the flag
 * exists is looked at every 64th call, so that the check costs little.
 * The count of failures made is written to FAILALLOC_COUNT (if set) by a
 * thread of the shim's own, once a second, never from inside an
 * allocation.
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

static atomic_uint calls;
static atomic_bool on;
static atomic_ulong failed;
static unsigned every = 16;

static bool fail_now(void)
{
	unsigned n = atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
	if (n % 64 == 0) {
		const char *f = getenv("FAILALLOC_FLAG");
		atomic_store_explicit(&on, f && access(f, F_OK) == 0, memory_order_relaxed);
	}
	if (!atomic_load_explicit(&on, memory_order_relaxed) || n % every != every / 2)
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
	const char *path = arg;
	for (;;) {
		sleep(1);
		char buf[32];
		int n = snprintf(buf, sizeof(buf), "%lu\n",
				 atomic_load_explicit(&failed, memory_order_relaxed));
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			continue;
		if (write(fd, buf, (size_t)n) != n) {
			/* A short write is seen by the test as a wrong count. */
		}
		close(fd);
	}
	return NULL;
}

__attribute__((constructor)) static void start(void)
{
	const char *e = getenv("FAILALLOC_EVERY");
	if (e && atoi(e) > 1)
		every = (unsigned)atoi(e);
	const char *path = getenv("FAILALLOC_COUNT");
	pthread_t t;
	if (path && pthread_create(&t, NULL, reporter, (void *)path) == 0)
		pthread_detach(t);
}
