/*
 * landrace DIR SECONDS [HOT] — hammers one race of the FUSE loop's landing slots
 * (fs/loop.c): a whole-block write takes the slot its data landed in and
 * gives the worker the block's old slot, into which the next request lands.
 * If a reply were still copying from that old slot, a reader would get the
 * bytes of some other request. Readers of 4 hot blocks check every 16-byte
 * record; writers rewrite those blocks, and others flood 32 cold blocks so
 * that requests keep landing. With more hot blocks (HOT, even) than the
 * cache holds, hot blocks are rewritten while out of RAM: a write then
 * makes a new entry, whose slot holds another block until the write's
 * copy is in, and a reader must not get those bytes. Exit 0 when every read was right, 1 with the
 * first wrong record, 2 on a setup or I/O error.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MB	   (1u << 20)
#define MAX_HOT	   64
#define COLD	   32
#define MAGIC_HOT  0x21544f48u /* "HOT!" */
#define MAGIC_COLD 0x444c4f43u /* "COLD" */

static const char *dir;
static volatile int stop, bad;
static double deadline;
static unsigned long nreads, nwrites;
static uint32_t HOT = 4;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fill(uint32_t *buf, uint32_t magic, uint32_t block, uint32_t gen)
{
	for (uint32_t i = 0; i < MB / 16; i++) {
		buf[4 * i] = magic;
		buf[4 * i + 1] = block;
		buf[4 * i + 2] = i;
		buf[4 * i + 3] = gen;
	}
}

static int open_file(const char *name, int flags)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, flags | O_DIRECT, 0644);
	if (fd < 0) {
		fprintf(stderr, "landrace: open %s: %s\n", path, strerror(errno));
		exit(2);
	}
	return fd;
}

static void *alloc_block(void)
{
	void *p;
	if (posix_memalign(&p, 4096, MB)) {
		fprintf(stderr, "landrace: out of memory\n");
		exit(2);
	}
	return p;
}

static void io(int fd, void *buf, uint32_t block, int write)
{
	ssize_t r =
	    write ? pwrite(fd, buf, MB, (off_t)block * MB) : pread(fd, buf, MB, (off_t)block * MB);
	if (r != (ssize_t)MB) {
		fprintf(stderr, "landrace: %s block %u: %s\n", write ? "write" : "read", block,
			r < 0 ? strerror(errno) : "short transfer");
		exit(2);
	}
}

/* Writer k of the hot file owns blocks k, k + 2, k + 4...; cold writers
 * flood. */
static void *writer(void *arg)
{
	long k = (long)arg;
	int hot = k < 2;
	int fd = open_file(hot ? "hot" : "cold", O_WRONLY);
	uint32_t *buf = alloc_block();
	for (uint32_t gen = 1; !stop; gen++) {
		uint32_t block =
		    hot ? (uint32_t)k + 2 * (gen % (HOT / 2)) : (uint32_t)((gen * 7 + k) % COLD);
		fill(buf, hot ? MAGIC_HOT : MAGIC_COLD, block, gen);
		io(fd, buf, block, 1);
		__atomic_add_fetch(&nwrites, 1, __ATOMIC_RELAXED);
		if (now() > deadline)
			stop = 1;
	}
	close(fd);
	free(buf);
	return NULL;
}

static void *reader(void *arg)
{
	long k = (long)arg;
	int fd = open_file("hot", O_RDONLY);
	uint32_t *buf = alloc_block();
	for (uint32_t n = 0; !stop; n++) {
		uint32_t block = (uint32_t)(n + k) % HOT;
		io(fd, buf, block, 0);
		__atomic_add_fetch(&nreads, 1, __ATOMIC_RELAXED);
		for (uint32_t i = 0; i < MB / 16; i++) {
			if (buf[4 * i] != MAGIC_HOT || buf[4 * i + 1] != block ||
			    buf[4 * i + 2] != i) {
				fprintf(stderr,
					"landrace: hot block %u, record %u: magic %08x block %u "
					"record %u (a %s record)\n",
					block, i, buf[4 * i], buf[4 * i + 1], buf[4 * i + 2],
					buf[4 * i] == MAGIC_COLD ? "cold" : "foreign");
				bad = 1;
				stop = 1;
				break;
			}
		}
	}
	close(fd);
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: landrace DIR SECONDS [HOT]\n");
		return 2;
	}
	dir = argv[1];
	if (argc == 4) {
		HOT = (uint32_t)atoi(argv[3]);
		if (HOT < 2 || HOT > MAX_HOT || HOT % 2) {
			fprintf(stderr, "landrace: HOT must be even, 2 to %d\n", MAX_HOT);
			return 2;
		}
	}
	/* Every block written once before anyone reads. */
	uint32_t *buf = alloc_block();
	int hot = open_file("hot", O_WRONLY | O_CREAT),
	    cold = open_file("cold", O_WRONLY | O_CREAT);
	for (uint32_t b = 0; b < HOT; b++) {
		fill(buf, MAGIC_HOT, b, 0);
		io(hot, buf, b, 1);
	}
	for (uint32_t b = 0; b < COLD; b++) {
		fill(buf, MAGIC_COLD, b, 0);
		io(cold, buf, b, 1);
	}
	close(hot);
	close(cold);
	free(buf);
	deadline = now() + atof(argv[2]);
	pthread_t t[8];
	for (long i = 0; i < 8; i++) {
		int rc = pthread_create(&t[i], NULL, i < 4 ? writer : reader, (void *)(i % 4));
		if (rc) {
			fprintf(stderr, "landrace: pthread_create: %s\n", strerror(rc));
			return 2;
		}
	}
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	printf("landrace: %lu reads checked, %lu writes\n", nreads, nwrites);
	return bad;
}
