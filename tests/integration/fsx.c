/*
 * fsx: randomized file operation tester (in the spirit of the classic fsx).
 * Writes, reads, truncates, fsyncs, reopens, and fallocate's modes: space set
 * aside (with and without --keep-size), punched holes and zeroed ranges.
 *
 * Runs the same random sequence of operations on N files in a directory under
 * test (the tierfs mount) and on N shadow files in a plain directory, and
 * compares every read byte-for-byte and every st_size.  The shadow directory
 * is the oracle: whatever the kernel's ordinary filesystem does is what the
 * filesystem under test must do.
 *
 *   fsx -d TESTDIR -S SHADOWDIR [-f NFILES] [-n OPS] [-s SEED] [-m MAXSIZE]
 *       [-l MAXLEN] [-M] [-D] [-k] [-V] [-q]
 *
 *   -M  mapped I/O too: some writes and reads go through a shared mapping
 *       of the test file (MAP_SHARED, msync at times, else left dirty)
 *   -D  open the test files O_DIRECT (the shadows stay buffered); with -M
 *       the mappings are of a second, buffered open of the same file, so
 *       page-cache and direct I/O mix on one file
 *
 *   -k  keep the files (default: keep too; files are left for a later -V)
 *   -V  verify only: compare every file of both directories in full, no ops
 *   -c  create fresh files (truncate both sides to 0) before starting
 *
 * On a mismatch it prints the last operations (the log) and exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_LEN	  64
#define MAX_FILES 64

enum op_kind {
	OP_WRITE,
	OP_WRITE_HOLE,
	OP_READ,
	OP_TRUNC,
	OP_FSYNC,
	OP_REOPEN,
	OP_STAT,
	OP_FALLOC,	/* fallocate, mode 0 */
	OP_FALLOC_KEEP, /* fallocate --keep-size */
	OP_PUNCH,	/* --punch-hole */
	OP_ZERO,	/* --zero-range */
	OP_ZERO_KEEP,	/* --zero-range --keep-size */
	OP_MAPWRITE,	/* a write through a shared mapping (-M) */
	OP_MAPREAD,	/* a read through a shared mapping (-M) */
	OP_NKINDS
};
static const char *op_names[] = {"write",      "write-hole", "read",
				 "truncate",   "fsync",	     "reopen",
				 "stat",       "fallocate",  "fallocate-keep-size",
				 "punch-hole", "zero-range", "zero-range-keep-size",
				 "map-write",  "map-read"};

struct logent {
	uint64_t n;
	int kind;
	int file;
	uint64_t off;
	uint64_t len;
};

static struct logent oplog[LOG_LEN];
static uint64_t opnum;
static uint64_t rng_state;

static const char *tdir, *sdir;
static int nfiles = 4;
static uint64_t maxsize = 8ull << 20;
static uint64_t maxlen = 2ull << 20;
static int tfd[MAX_FILES], sfd[MAX_FILES];
static int mfd[MAX_FILES]; /* the test file's fd for mappings: tfd, or a buffered open (-D) */
static int use_mmap, use_direct;
static uint64_t pagesz;
static unsigned char *wbuf, *rbuf, *sbuf;

static uint64_t rnd(void)
{
	/* xorshift64*: fast, seedable, good enough for offsets and data */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

/* Log-uniform length in [1, max]: mostly small I/O with some large ones, so
 * 100,000 operations stay fast but block boundaries are crossed often. */
static uint64_t rnd_len(uint64_t max)
{
	int bits = 0;
	while ((1ull << bits) < max)
		bits++;
	uint64_t top = 1ull << (rnd() % (bits + 1));
	uint64_t len = 1 + rnd() % top;
	return len > max ? max : len;
}

static void log_op(int kind, int file, uint64_t off, uint64_t len)
{
	struct logent *e = &oplog[opnum % LOG_LEN];
	e->n = opnum;
	e->kind = kind;
	e->file = file;
	e->off = off;
	e->len = len;
}

static void dump_log_and_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void dump_log_and_die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "fsx: FAILURE at op %" PRIu64 ": ", opnum);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nfsx: last operations (op kind file offset length):\n");
	uint64_t first = opnum >= LOG_LEN ? opnum - LOG_LEN + 1 : 0;
	for (uint64_t i = first; i <= opnum; i++) {
		struct logent *e = &oplog[i % LOG_LEN];
		if (e->n != i)
			continue;
		fprintf(stderr,
			"  %8" PRIu64 " %-10s f%d 0x%" PRIx64 " 0x%" PRIx64 " (%" PRIu64
			"..%" PRIu64 ")\n",
			e->n, op_names[e->kind], e->file, e->off, e->len, e->off, e->off + e->len);
	}
	exit(1);
}

static void die_sys(const char *what, int file)
{
	dump_log_and_die("%s on file %d: %s", what, file, strerror(errno));
}

static void path_of(char *buf, size_t n, const char *dir, int i)
{
	snprintf(buf, n, "%s/fsx.%d", dir, i);
}

static void open_pair(int i, int flags)
{
	char p[4096];
	path_of(p, sizeof(p), tdir, i);
	tfd[i] = open(p, O_RDWR | O_CREAT | flags | (use_direct ? O_DIRECT : 0), 0644);
	if (tfd[i] < 0)
		die_sys("open test file", i);
	mfd[i] = tfd[i];
	if (use_direct && use_mmap && (mfd[i] = open(p, O_RDWR)) < 0)
		die_sys("open test file for mappings", i);
	path_of(p, sizeof(p), sdir, i);
	sfd[i] = open(p, O_RDWR | O_CREAT | flags, 0644);
	if (sfd[i] < 0)
		die_sys("open shadow file", i);
}

static void close_pair(int i)
{
	if (mfd[i] != tfd[i] && close(mfd[i]) != 0)
		die_sys("close test file (mappings)", i);
	if (close(tfd[i]) != 0)
		die_sys("close test file", i);
	if (close(sfd[i]) != 0)
		die_sys("close shadow file", i);
}

static uint64_t shadow_size(int i)
{
	struct stat st;
	if (fstat(sfd[i], &st) != 0)
		die_sys("fstat shadow", i);
	return (uint64_t)st.st_size;
}

static void full_pwrite(int fd, const void *buf, size_t len, off_t off, int file, const char *which)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			dump_log_and_die("pwrite %s file %d off %" PRIu64 " len %zu: %s", which,
					 file, (uint64_t)off, len, strerror(errno));
		}
		if (n == 0)
			dump_log_and_die("pwrite %s returned 0", which);
		done += (size_t)n;
	}
}

static size_t full_pread(int fd, void *buf, size_t len, off_t off, int file, const char *which)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			dump_log_and_die("pread %s file %d off %" PRIu64 " len %zu: %s", which,
					 file, (uint64_t)off, len, strerror(errno));
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return done;
}

static void compare_range(int i, uint64_t off, uint64_t len)
{
	size_t nt = full_pread(tfd[i], rbuf, len, (off_t)off, i, "test");
	size_t ns = full_pread(sfd[i], sbuf, len, (off_t)off, i, "shadow");
	if (nt != ns)
		dump_log_and_die("short read mismatch file %d off %" PRIu64 " len %" PRIu64
				 ": test got %zu, shadow %zu",
				 i, off, len, nt, ns);
	if (memcmp(rbuf, sbuf, nt) != 0) {
		size_t k = 0;
		while (rbuf[k] == sbuf[k])
			k++;
		size_t bad = 0;
		for (size_t j = k; j < nt; j++)
			bad += rbuf[j] != sbuf[j];
		dump_log_and_die("data mismatch file %d at offset %" PRIu64 " (read off %" PRIu64
				 " len %" PRIu64 "): test 0x%02x shadow 0x%02x, %zu bytes differ",
				 i, off + k, off, len, rbuf[k], sbuf[k], bad);
	}
}

static void compare_size(int i)
{
	struct stat a, b;
	if (fstat(tfd[i], &a) != 0)
		die_sys("fstat test", i);
	if (fstat(sfd[i], &b) != 0)
		die_sys("fstat shadow", i);
	if (a.st_size != b.st_size)
		dump_log_and_die("size mismatch file %d: test %jd shadow %jd", i,
				 (intmax_t)a.st_size, (intmax_t)b.st_size);
}

static void compare_all(int i)
{
	compare_size(i);
	uint64_t size = shadow_size(i);
	for (uint64_t off = 0; off < size; off += maxlen) {
		uint64_t len = size - off < maxlen ? size - off : maxlen;
		compare_range(i, off, len);
	}
}

static void fill_random(unsigned char *b, size_t len)
{
	size_t k = 0;
	for (; k + 8 <= len; k += 8) {
		uint64_t v = rnd();
		memcpy(b + k, &v, 8);
	}
	if (k < len) {
		uint64_t v = rnd();
		memcpy(b + k, &v, len - k);
	}
}

static void do_write(int i, uint64_t off, uint64_t len)
{
	fill_random(wbuf, len);
	full_pwrite(tfd[i], wbuf, len, (off_t)off, i, "test");
	full_pwrite(sfd[i], wbuf, len, (off_t)off, i, "shadow");
}

static void do_truncate(int i, uint64_t size)
{
	if (ftruncate(tfd[i], (off_t)size) != 0)
		die_sys("ftruncate test", i);
	if (ftruncate(sfd[i], (off_t)size) != 0)
		die_sys("ftruncate shadow", i);
}

static void do_fallocate(int i, int kind, uint64_t off, uint64_t len)
{
	static const int modes[] = {
	    [OP_FALLOC] = 0,
	    [OP_FALLOC_KEEP] = FALLOC_FL_KEEP_SIZE,
	    [OP_PUNCH] = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    [OP_ZERO] = FALLOC_FL_ZERO_RANGE,
	    [OP_ZERO_KEEP] = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
	};
	if (fallocate(tfd[i], modes[kind], (off_t)off, (off_t)len) != 0)
		dump_log_and_die("%s test file %d: %s", op_names[kind], i, strerror(errno));
	if (fallocate(sfd[i], modes[kind], (off_t)off, (off_t)len) != 0)
		dump_log_and_die("%s shadow file %d: %s", op_names[kind], i, strerror(errno));
}

/* The pages of [OFF, OFF+LEN) of file I, mapped shared (PROT): the
 * mapping, with *MLEN its length and *DELTA where OFF lies in it. */
static unsigned char *map_range(int i, uint64_t off, uint64_t len, int prot, size_t *mlen,
				size_t *delta)
{
	uint64_t pg = off & ~(pagesz - 1);
	*delta = (size_t)(off - pg);
	*mlen = (size_t)(off + len - pg);
	void *p = mmap(NULL, *mlen, prot, MAP_SHARED, mfd[i], (off_t)pg);
	if (p == MAP_FAILED)
		die_sys("mmap test file", i);
	return p;
}

/* A write through a mapping; the file grows first where the write passes
 * its end (a mapping cannot grow it), as in the classic fsx. */
static void do_mapwrite(int i, uint64_t off, uint64_t len)
{
	if (off + len > shadow_size(i))
		do_truncate(i, off + len);
	fill_random(wbuf, len);
	size_t mlen, delta;
	unsigned char *p = map_range(i, off, len, PROT_READ | PROT_WRITE, &mlen, &delta);
	memcpy(p + delta, wbuf, len);
	if (rnd() % 2 && msync(p, mlen, MS_SYNC) != 0)
		die_sys("msync test file", i);
	if (munmap(p, mlen) != 0)
		die_sys("munmap test file", i);
	full_pwrite(sfd[i], wbuf, len, (off_t)off, i, "shadow");
}

/* A read through a mapping of what lies inside the file, against the
 * shadow's bytes. */
static void do_mapread(int i, uint64_t off, uint64_t len)
{
	uint64_t size = shadow_size(i);
	if (off >= size)
		return;
	if (off + len > size)
		len = size - off;
	size_t mlen, delta;
	unsigned char *p = map_range(i, off, len, PROT_READ, &mlen, &delta);
	memcpy(rbuf, p + delta, len);
	if (munmap(p, mlen) != 0)
		die_sys("munmap test file", i);
	size_t ns = full_pread(sfd[i], sbuf, len, (off_t)off, i, "shadow");
	if (ns != len || memcmp(rbuf, sbuf, len) != 0) {
		size_t k = 0;
		while (k < ns && rbuf[k] == sbuf[k])
			k++;
		dump_log_and_die("mapped read mismatch file %d at offset %" PRIu64
				 " (read off %" PRIu64 " len %" PRIu64
				 "): test 0x%02x shadow 0x%02x",
				 i, off + k, off, len, rbuf[k], sbuf[k]);
	}
}

static void one_op(void)
{
	int i = (int)(rnd() % (uint64_t)nfiles);
	uint64_t size = shadow_size(i);
	uint64_t r = rnd() % 100;
	uint64_t off, len;

	if (r < 35) { /* write anywhere */
		off = rnd() % maxsize;
		len = rnd_len(maxlen);
		if (off + len > maxsize)
			len = maxsize - off;
		if (len == 0)
			len = 1;
		if (use_mmap && r >= 25) {
			log_op(OP_MAPWRITE, i, off, len);
			do_mapwrite(i, off, len);
		} else {
			log_op(OP_WRITE, i, off, len);
			do_write(i, off, len);
		}
	} else if (r < 42) { /* write leaving a hole beyond EOF */
		uint64_t gap = rnd_len(maxsize / 4);
		off = size + gap;
		if (off >= maxsize)
			off = size / 2; /* file already large: plain overwrite */
		len = rnd_len(maxlen / 4);
		if (off + len > maxsize)
			len = maxsize - off;
		if (len == 0)
			len = 1;
		log_op(OP_WRITE_HOLE, i, off, len);
		do_write(i, off, len);
	} else if (r < 77) { /* read and compare, sometimes past EOF */
		off = rnd() % (size + size / 8 + 1);
		len = rnd_len(maxlen);
		if (use_mmap && r >= 65) {
			log_op(OP_MAPREAD, i, off, len);
			do_mapread(i, off, len);
		} else {
			log_op(OP_READ, i, off, len);
			compare_range(i, off, len);
		}
	} else if (r < 85) { /* truncate up or down */
		uint64_t ns;
		if (rnd() % 2)
			ns = size ? rnd() % size : 0; /* down */
		else
			ns = size + rnd_len(maxsize / 4); /* up */
		if (ns > maxsize)
			ns = maxsize;
		log_op(OP_TRUNC, i, ns, 0);
		do_truncate(i, ns);
	} else if (r < 89) {
		log_op(OP_FSYNC, i, 0, 0);
		if (fsync(tfd[i]) != 0)
			die_sys("fsync test", i);
	} else if (r < 93) {
		log_op(OP_REOPEN, i, 0, 0);
		close_pair(i);
		open_pair(i, 0);
	} else if (r < 97) { /* fallocate, punch or zero a range, at times past EOF */
		static const int kinds[] = {OP_FALLOC, OP_FALLOC_KEEP, OP_PUNCH, OP_ZERO,
					    OP_ZERO_KEEP};
		int kind = kinds[rnd() % 5];
		off = rnd() % (size + size / 4 + 1);
		len = rnd_len(maxlen);
		if (off >= maxsize)
			off = maxsize - 1;
		if (off + len > maxsize)
			len = maxsize - off;
		if (len == 0)
			len = 1;
		log_op(kind, i, off, len);
		do_fallocate(i, kind, off, len);
	} else {
		log_op(OP_STAT, i, 0, 0);
		compare_size(i);
	}
}

static unsigned char *xalloc(size_t n)
{
	void *p;
	if (posix_memalign(&p, 4096, n) != 0) {
		fprintf(stderr, "fsx: out of memory allocating %zu bytes\n", n);
		exit(2);
	}
	return p;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: fsx -d TESTDIR -S SHADOWDIR [-f NFILES] [-n OPS] [-s SEED] [-m MAXSIZE] "
		"[-l MAXLEN] [-M] [-D] [-c] [-V] [-q]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t nops = 10000, seed = 1;
	int verify_only = 0, create = 0, quiet = 0, c;
	tdir = sdir = NULL;
	while ((c = getopt(argc, argv, "d:S:f:n:s:m:l:cVqkMD")) != -1) {
		switch (c) {
		case 'd':
			tdir = optarg;
			break;
		case 'S':
			sdir = optarg;
			break;
		case 'f':
			nfiles = atoi(optarg);
			break;
		case 'n':
			nops = strtoull(optarg, NULL, 0);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'm':
			maxsize = strtoull(optarg, NULL, 0);
			break;
		case 'l':
			maxlen = strtoull(optarg, NULL, 0);
			break;
		case 'c':
			create = 1;
			break;
		case 'V':
			verify_only = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'k':
			break;
		case 'M':
			use_mmap = 1;
			break;
		case 'D':
			use_direct = 1;
			break;
		default:
			usage();
		}
	}
	if (!tdir || !sdir || nfiles < 1 || nfiles > MAX_FILES || maxsize < 2 || maxlen < 1)
		usage();
	rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
	pagesz = (uint64_t)sysconf(_SC_PAGESIZE);
	wbuf = xalloc(maxlen);
	rbuf = xalloc(maxlen);
	sbuf = xalloc(maxlen);

	for (int i = 0; i < nfiles; i++)
		open_pair(i, create ? O_TRUNC : 0);

	if (!verify_only) {
		for (opnum = 0; opnum < nops; opnum++) {
			one_op();
			if (!quiet && opnum && opnum % 20000 == 0)
				fprintf(stderr, "fsx: %" PRIu64 " ops\n", opnum);
		}
	}
	log_op(OP_STAT, -1, 0, 0);
	for (int i = 0; i < nfiles; i++) {
		compare_all(i);
		close_pair(i);
	}
	if (!quiet)
		printf("# fsx: %s %" PRIu64 " ops on %d files (seed %" PRIu64 "), all equal\n",
		       verify_only ? "verified" : "ran", verify_only ? 0 : nops, nfiles, seed);
	return 0;
}
