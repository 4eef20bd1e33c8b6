/*
 * tests/bench/codecbench.c — what the per-block codec (tiers/codec.h)
 * costs, on one core: MB/s of lz4 compression and decompression and of
 * AES-256-GCM encryption and decryption of blocks of the mount's size,
 * through the codec's own calls (the frame, the tag, the checks), and
 * lz4's ratio on fp32 optimizer state made as the replay bench makes it
 * (tests/bench/replay_data.c: parameters and gradients from its hash,
 * Adam's moments after a few steps), on random bytes and on zeros.
 *
 *   build/tests/bench/codecbench [BLOCK_SIZE_BYTES [SECONDS_PER_FIGURE]]
 *
 * Rates are per CPU second of the thread (CLOCK_THREAD_CPUTIME_ID), as
 * `openssl speed` reports them: "per core" whatever else the machine runs.
 * A benchmark, not a test: it prints figures and checks only that what it
 * decodes is what it encoded.
 */
#include <errno.h>
#include <inttypes.h>
#include <lz4.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tiers/codec.h"

#define ALIGN 4096u

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The replay's content hash (replay_gen). */
static void gen(float *buf, size_t n, uint32_t seed, float scale_to)
{
	const float scale = scale_to / 2147483648.0f;
	for (size_t i = 0; i < n; i++) {
		uint32_t x = (uint32_t)i * 2654435761U ^ seed;
		x ^= x >> 15;
		x *= 0x2c1b3c6dU;
		x ^= x >> 12;
		buf[i] = (float)(int32_t)x * scale;
	}
}

/* Parameters, exp_avg and exp_avg_sq after STEPS fp32 Adam steps, as the
 * replay's update (replay_adam) leaves them. */
static void optimizer_state(float *p, float *m, float *v, size_t n, int steps)
{
	float *g = malloc(n * sizeof(float));
	gen(p, n, 0x9e37u, 1.0f);
	memset(m, 0, n * sizeof(float));
	memset(v, 0, n * sizeof(float));
	for (int s = 0; s < steps; s++) {
		gen(g, n, 0x51edu + (uint32_t)s, 1.0f);
		for (size_t i = 0; i < n; i++) {
			m[i] = 0.9f * m[i] + 0.1f * g[i];
			v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
			p[i] -= 1e-3f * m[i] / (sqrtf(v[i]) + 1e-8f);
		}
	}
	free(g);
}

static struct codec *open_codec(enum codec_compress z, enum codec_cipher ci, const char *key,
				uint32_t bs)
{
	struct codec_params p = {
	    .compress = z, .cipher = ci, .key_file = ci != CODEC_CIPHER_NONE ? key : NULL};
	struct codec *c;
	if (codec_open(&p, "bench", bs, ALIGN, &c)) {
		fprintf(stderr, "codecbench: cannot open the codec\n");
		exit(1);
	}
	return c;
}

/* MB/s of encoding IN (BS bytes) with C, and of decoding it back, each
 * for SECS seconds; *STORED the frame length (0: stored as it is). */
static void codec_rate(struct codec *c, const void *in, uint32_t bs, double secs, double *enc,
		       double *dec, int64_t *stored)
{
	struct codec_buf *b = codec_buf_get(c);
	void *out = aligned_alloc(ALIGN, bs);
	uint64_t n = 0;
	double t0 = now(), t;
	do {
		*stored = codec_encode(c, b, n, in, bs);
		n++;
	} while ((t = now() - t0) < secs);
	*enc = (double)n * bs / t / 1e6;
	*dec = 0;
	if (*stored > 0) {
		/* Decoding may work in place: each round decodes a fresh copy
		 * of the frame, and the copy's own time is taken off. */
		*stored = codec_encode(c, b, 7, in, bs);
		size_t fl = (size_t)*stored;
		void *frame = malloc(fl);
		memcpy(frame, codec_buf_data(b), fl);
		n = 0;
		t0 = now();
		do {
			memcpy(codec_buf_data(b), frame, fl);
			n++;
		} while ((t = now() - t0) < secs / 4);
		double copy = t / (double)n;
		n = 0;
		t0 = now();
		do {
			memcpy(codec_buf_data(b), frame, fl);
			if (codec_decode(c, b, 7, (uint32_t)*stored, out, bs)) {
				fprintf(stderr, "codecbench: decode failed\n");
				exit(1);
			}
			n++;
		} while ((t = now() - t0) < secs);
		*dec = (double)n * bs / (t - copy * (double)n) / 1e6;
		free(frame);
		if (memcmp(out, in, bs)) {
			fprintf(stderr, "codecbench: decoded bytes differ\n");
			exit(1);
		}
	}
	codec_buf_put(c, b);
	free(out);
}

/* lz4's own ratio on LEN bytes (input / output), whether or not the codec
 * would keep it. */
static double lz4_ratio(const void *in, size_t len)
{
	int cap = LZ4_compressBound((int)len);
	char *out = malloc((size_t)cap);
	int n = LZ4_compress_default(in, out, (int)len, cap);
	free(out);
	return n > 0 ? (double)len / n : 0;
}

int main(int argc, char **argv)
{
	uint32_t bs = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 1u << 20;
	double secs = argc > 2 ? atof(argv[2]) : 1.0;
	if (bs < ALIGN || bs % ALIGN || bs > (64u << 20) || secs <= 0) {
		fprintf(stderr,
			"usage: codecbench [BLOCK_SIZE (4096-aligned, <= 64M) [SECONDS]]\n");
		return 2;
	}
	char key[] = "/tmp/codecbench-key-XXXXXX";
	int fd = mkstemp(key);
	unsigned char k[32];
	for (int i = 0; i < 32; i++)
		k[i] = (unsigned char)(i * 37 + 11);
	if (fd < 0 || write(fd, k, 32) != 32) {
		fprintf(stderr, "codecbench: cannot write a key file: %s\n", strerror(errno));
		return 1;
	}
	close(fd);
	/* One block each of parameters, exp_avg, exp_avg_sq; random; zeros. */
	size_t nf = bs / sizeof(float);
	float *st = aligned_alloc(ALIGN, 3 * (size_t)bs);
	optimizer_state(st, st + nf, st + 2 * nf, nf, 3);
	unsigned char *rnd = aligned_alloc(ALIGN, bs), *zero = aligned_alloc(ALIGN, bs);
	gen((float *)rnd, nf, 0xabcdu, 1.0f);
	for (uint32_t i = 0; i < bs; i++)
		rnd[i] ^= (unsigned char)(i * 131u >> 3);
	memset(zero, 0, bs);
	unsigned char *half = aligned_alloc(ALIGN, bs);
	memcpy(half, st + 2 * nf, bs / 2);
	memset(half + bs / 2, 0, bs / 2);

	printf("codec cost on one core, %u-byte blocks, %.1f s per figure\n", bs, secs);
	printf("lz4 ratio (input/output) on fp32 optimizer state: params %.3f, exp_avg %.3f, "
	       "exp_avg_sq %.3f; random %.3f; zeros %.1f\n",
	       lz4_ratio(st, bs), lz4_ratio(st + nf, bs), lz4_ratio(st + 2 * nf, bs),
	       lz4_ratio(rnd, bs), lz4_ratio(zero, bs));
	struct {
		const char *name;
		enum codec_compress z;
		enum codec_cipher c;
	} modes[] = {{"lz4", CODEC_COMPRESS_LZ4, CODEC_CIPHER_NONE},
		     {"aes-256-gcm", CODEC_COMPRESS_NONE, CODEC_CIPHER_AES256GCM},
		     {"lz4+aes-256-gcm", CODEC_COMPRESS_LZ4, CODEC_CIPHER_AES256GCM}};
	struct {
		const char *name;
		const void *data;
	} inputs[] = {{"exp_avg_sq", st + 2 * nf},
		      {"params", st},
		      {"half zeros", half},
		      {"random", rnd},
		      {"zeros", zero}};
	printf("%-16s %-11s %12s %12s %14s\n", "codec", "data", "encode MB/s", "decode MB/s",
	       "stored bytes");
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct codec *c = open_codec(modes[m].z, modes[m].c, key, bs);
		for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
			double e, d;
			int64_t stored;
			codec_rate(c, inputs[i].data, bs, secs, &e, &d, &stored);
			char dec[32], sto[32];
			snprintf(dec, sizeof(dec), d > 0 ? "%.0f" : "-", d);
			snprintf(sto, sizeof(sto), stored > 0 ? "%" PRId64 : "as is", stored);
			printf("%-16s %-11s %12.0f %12s %14s\n", modes[m].name, inputs[i].name, e,
			       dec, sto);
		}
		codec_close(c);
	}
	unlink(key);
	free(st);
	free(rnd);
	free(zero);
	free(half);
	return 0;
}
