/*
 * ds_aio: DeepSpeed ZeRO-Infinity's swap-file I/O pattern, as a test client.
 *
 * DeepSpeed (runtime/swap_tensor, csrc/aio) opens every read O_RDONLY|O_DIRECT
 * and every write O_WRONLY|O_CREAT|O_DIRECT mode 0600 without O_TRUNC, keeps
 * queue_depth 1 MiB requests in flight through libaio from page-aligned
 * buffers, and stat()s a file before reading it, refusing when
 * offset+bytes > st_size.  This client reproduces that on the real file names
 * and sizes (multiples of 1024 bytes, not of 1 MiB) and verifies every byte.
 *
 *   ds_aio -d DIR [-e aio|uring] [-g GEN] [-n SUBGROUPS] [-q QD] [-b BS] [-u OFF] [-w|-r]
 *
 *   -g GEN  content generation: a rewrite with another GEN changes every byte,
 *           so a stale block read back after an overwrite is caught
 *   -u OFF  reads go OFF bytes past a page boundary (DeepSpeed's gradient reads)
 *   -w      write only   -r  read and verify only (default: write then read)
 * Exits 0 when everything verified, 1 on any mismatch or error (with context).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libaio.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_QD 64

enum engine { ENG_AIO, ENG_URING };

struct ioq {
	enum engine eng;
	int qd;
	io_context_t aio;
	struct io_uring ring;
};

static const char *dir = NULL;
static size_t bs = 1 << 20;
static int qd = 8;
static uint64_t gen = 1;
/* Reads land this many bytes past a page boundary: DeepSpeed reads each
 * gradient file into a narrowed slice of its swap buffer, aligned to 4
 * bytes only (an O_DIRECT read that ext4 refuses with EINVAL). */
static size_t roff;
static uint64_t bytes_done;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "ds_aio: " __VA_ARGS__);                                           \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

/* Expected 8-byte word at byte offset off of file id: depends on file,
 * generation and position, so misplaced, stale or swapped blocks all show. */
static uint64_t word_at(uint64_t fid, uint64_t off)
{
	uint64_t x = (fid << 48) ^ (gen << 40) ^ (off >> 3);
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static void fill(unsigned char *buf, size_t len, uint64_t fid, uint64_t off)
{
	for (size_t k = 0; k < len; k += 8) {
		uint64_t w = word_at(fid, off + k);
		memcpy(buf + k, &w, 8);
	}
}

static void verify(const unsigned char *buf, size_t len, uint64_t fid, uint64_t off,
		   const char *path)
{
	for (size_t k = 0; k < len; k += 8) {
		uint64_t w = word_at(fid, off + k), got;
		memcpy(&got, buf + k, 8);
		if (got != w)
			FAIL("%s: wrong data at offset %" PRIu64 " (request offset %" PRIu64
			     " len %zu): got %016" PRIx64 " want %016" PRIx64 " (gen %" PRIu64 ")",
			     path, off + k, off, len, got, w, gen);
	}
}

static void q_init(struct ioq *q, enum engine e)
{
	q->eng = e;
	q->qd = qd;
	if (e == ENG_AIO) {
		memset(&q->aio, 0, sizeof(q->aio));
		int rc = io_setup(qd, &q->aio);
		if (rc < 0)
			FAIL("io_setup(%d): %s", qd, strerror(-rc));
	} else {
		int rc = io_uring_queue_init((unsigned)qd, &q->ring, 0);
		if (rc < 0)
			FAIL("io_uring_queue_init(%d): %s", qd, strerror(-rc));
	}
}

static void q_exit(struct ioq *q)
{
	if (q->eng == ENG_AIO)
		io_destroy(q->aio);
	else
		io_uring_queue_exit(&q->ring);
}

struct req {
	unsigned char *buf;  /* where this request's bytes go: base, or base + roff */
	unsigned char *base; /* page aligned, bs + 4096 bytes */
	size_t len;
	uint64_t off;
	int busy;
	struct iocb cb;
};

static void q_submit(struct ioq *q, struct req *r, int fd, int write)
{
	if (q->eng == ENG_AIO) {
		struct iocb *cbs[1] = {&r->cb};
		if (write)
			io_prep_pwrite(&r->cb, fd, r->buf, r->len, (long long)r->off);
		else
			io_prep_pread(&r->cb, fd, r->buf, r->len, (long long)r->off);
		r->cb.data = r;
		int rc = io_submit(q->aio, 1, cbs);
		if (rc != 1)
			FAIL("io_submit %s off %" PRIu64 " len %zu: %s", write ? "write" : "read",
			     r->off, r->len, rc < 0 ? strerror(-rc) : "short");
	} else {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
		if (!sqe)
			FAIL("io_uring_get_sqe: ring full");
		if (write)
			io_uring_prep_write(sqe, fd, r->buf, (unsigned)r->len, r->off);
		else
			io_uring_prep_read(sqe, fd, r->buf, (unsigned)r->len, r->off);
		io_uring_sqe_set_data(sqe, r);
		int rc = io_uring_submit(&q->ring);
		if (rc != 1)
			FAIL("io_uring_submit: %s", rc < 0 ? strerror(-rc) : "short");
	}
}

/* Wait for one completion; returns the request and stores its result. */
static struct req *q_reap(struct ioq *q, long *res)
{
	if (q->eng == ENG_AIO) {
		struct io_event ev;
		int rc;
		do
			rc = io_getevents(q->aio, 1, 1, &ev, NULL);
		while (rc == -EINTR);
		if (rc != 1)
			FAIL("io_getevents: %s", rc < 0 ? strerror(-rc) : "no event");
		*res = (long)ev.res;
		return ev.data;
	} else {
		struct io_uring_cqe *cqe;
		int rc;
		do
			rc = io_uring_wait_cqe(&q->ring, &cqe);
		while (rc == -EINTR);
		if (rc < 0)
			FAIL("io_uring_wait_cqe: %s", strerror(-rc));
		struct req *r = io_uring_cqe_get_data(cqe);
		*res = cqe->res;
		io_uring_cqe_seen(&q->ring, cqe);
		return r;
	}
}

static struct req reqs[MAX_QD];

static void complete(struct req *r, long res, int write, uint64_t fid, const char *path)
{
	if (res < 0)
		FAIL("%s: async %s at offset %" PRIu64 " len %zu failed: %s", path,
		     write ? "write" : "read", r->off, r->len, strerror((int)-res));
	if ((size_t)res != r->len)
		FAIL("%s: async %s at offset %" PRIu64 " len %zu: short (%ld bytes)", path,
		     write ? "write" : "read", r->off, r->len, res);
	if (!write)
		verify(r->buf, r->len, fid, r->off, path);
	bytes_done += r->len;
	r->busy = 0;
}

/* Write or read+verify the whole file with qd requests in flight. */
static void file_io(struct ioq *q, const char *path, uint64_t size, uint64_t fid, int write)
{
	int fd;
	if (write) {
		fd = open(path, O_WRONLY | O_CREAT | O_DIRECT, 0600);
	} else {
		/* DeepSpeed checks the size before every read (exact st_size) */
		struct stat st;
		if (stat(path, &st) != 0)
			FAIL("stat %s: %s", path, strerror(errno));
		if ((uint64_t)st.st_size != size)
			FAIL("%s: st_size %jd, expected %" PRIu64, path, (intmax_t)st.st_size,
			     size);
		if ((st.st_mode & 07777) != 0600)
			FAIL("%s: mode %o, expected 0600", path, (unsigned)(st.st_mode & 07777));
		fd = open(path, O_RDONLY | O_DIRECT);
	}
	if (fd < 0)
		FAIL("open %s (%s, O_DIRECT): %s", path, write ? "write" : "read", strerror(errno));

	uint64_t next = 0;
	int inflight = 0;
	while (next < size || inflight > 0) {
		while (next < size && inflight < q->qd) {
			struct req *r = NULL;
			for (int k = 0; k < q->qd; k++)
				if (!reqs[k].busy) {
					r = &reqs[k];
					break;
				}
			r->off = next;
			r->len = size - next < bs ? size - next : bs;
			r->buf = write ? r->base : r->base + roff;
			if (!write) {
				struct stat st;
				if (fstat(fd, &st) != 0)
					FAIL("fstat %s: %s", path, strerror(errno));
				if (r->off + r->len > (uint64_t)st.st_size)
					FAIL("%s: read offset %" PRIu64 " + %zu > st_size %jd",
					     path, r->off, r->len, (intmax_t)st.st_size);
				memset(r->buf, 0xA5, r->len);
			} else {
				fill(r->buf, r->len, fid, r->off);
			}
			r->busy = 1;
			q_submit(q, r, fd, write);
			next += r->len;
			inflight++;
		}
		long res;
		struct req *r = q_reap(q, &res);
		complete(r, res, write, fid, path);
		inflight--;
	}
	if (close(fd) != 0)
		FAIL("close %s: %s", path, strerror(errno));
	if (write) {
		struct stat st;
		if (stat(path, &st) != 0)
			FAIL("stat %s: %s", path, strerror(errno));
		if ((uint64_t)st.st_size < size)
			FAIL("%s: st_size %jd after writing %" PRIu64 " bytes", path,
			     (intmax_t)st.st_size, size);
	}
}

static void mkdirs(const char *base)
{
	char p[4096];
	const char *parts[] = {"zero_stage_3", "optimizer", "rank0"};
	snprintf(p, sizeof(p), "%s", base);
	for (int i = 0; i < 3; i++) {
		strncat(p, "/", sizeof(p) - strlen(p) - 1);
		strncat(p, parts[i], sizeof(p) - strlen(p) - 1);
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			FAIL("mkdir %s: %s", p, strerror(errno));
	}
}

int main(int argc, char **argv)
{
	enum engine eng = ENG_AIO;
	int nsub = 3, do_write = 1, do_read = 1, c;
	while ((c = getopt(argc, argv, "d:e:g:n:q:b:u:wr")) != -1) {
		switch (c) {
		case 'd':
			dir = optarg;
			break;
		case 'e':
			if (strcmp(optarg, "aio") == 0)
				eng = ENG_AIO;
			else if (strcmp(optarg, "uring") == 0)
				eng = ENG_URING;
			else
				FAIL("unknown engine %s (aio|uring)", optarg);
			break;
		case 'g':
			gen = strtoull(optarg, NULL, 0);
			break;
		case 'n':
			nsub = atoi(optarg);
			break;
		case 'q':
			qd = atoi(optarg);
			break;
		case 'b':
			bs = strtoull(optarg, NULL, 0);
			break;
		case 'u':
			roff = strtoull(optarg, NULL, 0);
			break;
		case 'w':
			do_read = 0;
			break;
		case 'r':
			do_write = 0;
			break;
		default:
			fprintf(stderr, "usage: ds_aio -d DIR [-e aio|uring] [-g GEN] [-n "
					"SUBGROUPS] [-q QD] [-b BS] [-u READ_OFFSET] [-w|-r]\n");
			return 2;
		}
	}
	if (!dir || qd < 1 || qd > MAX_QD || bs < 4096 || bs % 4096 || nsub < 1 || roff >= 4096 ||
	    roff % 4)
		FAIL("bad arguments (need -d DIR, 1 <= qd <= %d, bs a multiple of 4096, "
		     "READ_OFFSET a multiple of 4 below 4096)",
		     MAX_QD);
	for (int k = 0; k < qd; k++) {
		void *p;
		if (posix_memalign(&p, 4096, bs + 4096) != 0)
			FAIL("posix_memalign %zu", bs + 4096);
		reqs[k].base = reqs[k].buf = p;
	}
	mkdirs(dir);

	struct ioq q;
	q_init(&q, eng);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int phases[2] = {do_write, do_read};
	for (int ph = 0; ph < 2; ph++) {
		if (!phases[ph])
			continue;
		int write = ph == 0;
		uint64_t fid = 0;
		for (int s = 0; s < nsub; s++) {
			/* sizes: numel*4 bytes, numel a multiple of 256 but not of 2^18,
			 * so sizes are multiples of 1024 and never of 1 MiB */
			uint64_t numel = (uint64_t)(s + 1) * 262144 + 256 * (uint64_t)(3 + 5 * s);
			uint64_t size = numel * 4;
			char id[64], path[4096];
			snprintf(id, sizeof(id), "%d_%d", s * 100, s * 100 + 99);
			const char *fmts[] = {
			    "%s/zero_stage_3/optimizer/rank0/%s.tensor.swp",
			    "%s/zero_stage_3/optimizer/rank0/exp_avg-%s.tensor.swp",
			    "%s/zero_stage_3/optimizer/rank0/exp_avg_sq-%s.tensor.swp"};
			for (int f = 0; f < 3; f++) {
				snprintf(path, sizeof(path), fmts[f], dir, id);
				file_io(&q, path, size, ++fid, write);
			}
			/* gradient: a smaller slice, offset and numel in the name */
			uint64_t gnumel = numel / 2 + 256;
			snprintf(path, sizeof(path),
				 "%s/zero_stage_3/optimizer/rank0/%s_gradient_%" PRIu64 "_%" PRIu64
				 ".tensor.swp",
				 dir, id, (uint64_t)s * 1000, gnumel);
			file_io(&q, path, gnumel * 4, ++fid, write);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	q_exit(&q);
	double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("# ds_aio: %s %s%s gen %" PRIu64 ": %" PRIu64
	       " MiB verified-ok in %.2fs (%.0f MiB/s)\n",
	       eng == ENG_AIO ? "libaio" : "io_uring", do_write ? "write" : "",
	       do_read ? "+read" : "", gen, bytes_done >> 20, sec,
	       sec > 0 ? (double)(bytes_done >> 20) / sec : 0.0);
	return 0;
}
