/*
 * tests/unit/test_codec.c — the per-block codec (tiers/codec.h): OpenSSL's
 * AES-256-GCM as the codec drives it against published vectors (the GCM
 * specification's test cases 13 to 16, and one of NIST CAVP's
 * gcmEncryptExtIV256), a frame decrypted independently of the codec (so
 * the format is plain AES-256-GCM over the documented additional data),
 * lz4 round trips of incompressible, zero and fp32 optimizer-like blocks,
 * every kind of damage (a flipped byte in header, payload or tag, a
 * truncated frame, another key, another slot or tier) failing with -EIO
 * and zeros, never bytes; the key file's checks; and the codec under a
 * posix tier: round trip, partial blocks, remount, a byte flipped in a
 * slab file, a remount with encryption turned off refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tier_posix_fixture.h"
#include "tiers/codec.h"
#include "tiers/probe.h"

#define ALIGN 4096u

/* ---- helpers ---------------------------------------------------------- */

static size_t unhex(const char *h, unsigned char *out)
{
	size_t n = strlen(h) / 2;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		sscanf(h + 2 * i, "%2x", &v);
		out[i] = (unsigned char)v;
	}
	return n;
}

static void write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static const char key_hex[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

/* A key file in the test directory: hex digits of KEYHEX. */
static void key_path(char *out, size_t len, const char *name, const char *keyhex)
{
	snprintf(out, len, "%s/%s", dir, name);
	char text[80];
	int n = snprintf(text, sizeof(text), "%s\n", keyhex);
	write_file(out, text, (size_t)n, 0600);
}

static struct codec *open_codec(enum codec_compress z, enum codec_cipher ci, const char *key,
				const char *name, uint32_t bs)
{
	struct codec_params p = {.compress = z, .cipher = ci, .key_file = key};
	struct codec *c = NULL;
	assert_int_equal(codec_open(&p, name, bs, ALIGN, &c), 0);
	return c;
}

static void fill_random(unsigned char *b, size_t n, uint32_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (unsigned char)(x >> 24);
	}
}

/* fp32 optimizer state as the replay bench makes it (tests/bench/
 * replay_data.c): parameters in [-1, 1) from its hash, then Adam's moments
 * after a few steps of such gradients. */
static void fill_adam(float *p, float *m, float *v, size_t n)
{
	const float scale = 1.0f / 2147483648.0f;
	for (size_t i = 0; i < n; i++)
		p[i] = m[i] = v[i] = 0;
	for (uint32_t step = 0; step < 3; step++) {
		for (size_t i = 0; i < n; i++) {
			uint32_t x = (uint32_t)i * 2654435761U ^ (0x1234u + step);
			x ^= x >> 15;
			x *= 0x2c1b3c6dU;
			x ^= x >> 12;
			float g = (float)(int32_t)x * scale * 1e-2f;
			m[i] = 0.9f * m[i] + 0.1f * g;
			v[i] = 0.999f * v[i] + 0.001f * g * g;
			p[i] -= 1e-3f * m[i] / (__builtin_sqrtf(v[i]) + 1e-8f);
		}
	}
}

/* ---- AES-256-GCM vectors ---------------------------------------------- */

struct gcm_vec {
	const char *key, *iv, *aad, *pt, *ct, *tag;
};

/* The GCM specification (McGrew and Viega), test cases 13-16, and NIST
 * CAVP gcmEncryptExtIV256.rsp ([Keylen = 256] [IVlen = 96] [PTlen = 128]
 * [AADlen = 160] [Taglen = 128], Count = 0). */
static const struct gcm_vec vecs[] = {
    {"0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000",
     "", "", "", "530f8afbc74536b9a963b4f1c4cb738b"},
    {"0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000",
     "", "00000000000000000000000000000000", "cea7403d4d606b6e074ec5d3baf39d18",
     "d0d1c8a799996bf0265b98b5d48ab919"},
    {"feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
     "",
     "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
     "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
     "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
     "b094dac5d93471bdec1a502270e3cc6c"},
    {"feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
     "feedfacedeadbeeffeedfacedeadbeefabaddad2",
     "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
     "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
     "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
     "76fc6ece0f4e1768cddf8853bb2d551b"},
    {"83688deb4af8007f9b713b47cfa6c73e35ea7a3aa4ecdb414dded03bf7a0fd3a", "0b459724904e010a46901cf3",
     "794a14ccd178c8ebfd1379dc704c5e208f9d8424", "33d893a2114ce06fc15d55e454cf90c3",
     "cc66bee423e3fcd4c0865715e9586696", "0fb291bd3dba94a1dfd8b286cfb97ac5"},
};

/* One AES-256-GCM seal or open through EVP in the codec's order of calls:
 * key and IV length once, then IV, AAD, data, final, tag. Open returns
 * whether the tag verified. */
static int gcm(bool enc, const unsigned char *key, const unsigned char *iv,
	       const unsigned char *aad, size_t aadlen, const unsigned char *in, size_t len,
	       unsigned char *out, unsigned char *tag)
{
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	int outl = 0, fin = 0, ok;
	assert_int_equal(EVP_CipherInit_ex(x, EVP_aes_256_gcm(), NULL, key, NULL, enc), 1);
	assert_int_equal(EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_IVLEN, 12, NULL), 1);
	assert_int_equal(EVP_CipherInit_ex(x, NULL, NULL, NULL, iv, enc), 1);
	if (aadlen)
		assert_int_equal(EVP_CipherUpdate(x, NULL, &outl, aad, (int)aadlen), 1);
	if (len)
		assert_int_equal(EVP_CipherUpdate(x, out, &outl, in, (int)len), 1);
	if (!enc)
		assert_int_equal(EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, 16, tag), 1);
	ok = EVP_CipherFinal_ex(x, out + outl, &fin) == 1;
	if (enc && ok)
		assert_int_equal(EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, 16, tag), 1);
	EVP_CIPHER_CTX_free(x);
	return ok;
}

static void test_gcm_vectors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) {
		unsigned char key[32], iv[12], aad[64], pt[64], ct[64], tag[16];
		unsigned char out[64], otag[16];
		assert_int_equal(unhex(vecs[i].key, key), 32);
		assert_int_equal(unhex(vecs[i].iv, iv), 12);
		size_t aadlen = unhex(vecs[i].aad, aad), len = unhex(vecs[i].pt, pt);
		assert_int_equal(unhex(vecs[i].ct, ct), len);
		unhex(vecs[i].tag, tag);
		assert_true(gcm(true, key, iv, aad, aadlen, pt, len, out, otag));
		assert_memory_equal(out, ct, len);
		assert_memory_equal(otag, tag, 16);
		assert_true(gcm(false, key, iv, aad, aadlen, ct, len, out, tag));
		assert_memory_equal(out, pt, len);
		tag[15] ^= 1;
		assert_false(gcm(false, key, iv, aad, aadlen, ct, len, out, tag));
	}
}

/* ---- frames ------------------------------------------------------------ */

enum { CBS = 64 * 1024 };

/* A frame is AES-256-GCM under the key file's key, its nonce in the header,
 * over the additional data docs/codec.md gives: header, le64 slot, name
 * length, name. Decrypted here without the codec. Two frames never share
 * a nonce. */
static void test_frame_is_plain_gcm(void **state)
{
	(void)state;
	char kp[128];
	key_path(kp, sizeof(kp), "k", key_hex);
	struct codec *c = open_codec(CODEC_COMPRESS_NONE, CODEC_CIPHER_AES256GCM, kp, "nvme0", CBS);
	unsigned char *in = malloc(CBS), *out = malloc(CBS), key[32], nonce1[12];
	fill_random(in, CBS, 7);
	unhex(key_hex, key);
	struct codec_buf *b = codec_buf_get(c);
	assert_non_null(b);
	unsigned char *f = codec_buf_data(b);
	for (int round = 0; round < 2; round++) {
		int64_t n = codec_encode(c, b, 42, in, CBS);
		assert_int_equal(n, CBS + ALIGN);
		assert_memory_equal(f, "TFCF", 4);
		assert_int_equal(f[5], 2); /* aes, no lz4 */
		uint32_t plen = f[12] | f[13] << 8 | f[14] << 16 | (uint32_t)f[15] << 24;
		assert_int_equal(plen, CBS);
		unsigned char aad[32 + 8 + 1 + 5];
		memcpy(aad, f, 32);
		for (int i = 0; i < 8; i++)
			aad[32 + i] = (unsigned char)(42ULL >> (8 * i));
		aad[40] = 5;
		memcpy(aad + 41, "nvme0", 5);
		assert_true(
		    gcm(false, key, f + 16, aad, sizeof(aad), f + 32, CBS, out, f + 32 + CBS));
		assert_memory_equal(out, in, CBS);
		if (round == 0)
			memcpy(nonce1, f + 16, 12);
		else
			assert_memory_not_equal(nonce1, f + 16, 12);
	}
	codec_buf_put(c, b);
	codec_close(c);
	free(in);
	free(out);
}

/* Encode IN (LEN bytes) with C at SLOT, decode it back; the frame length. */
static int64_t round_trip(struct codec *c, uint64_t slot, const void *in, uint32_t len)
{
	struct codec_buf *b = codec_buf_get(c);
	unsigned char *out = malloc(CBS);
	memset(out, 0xAA, CBS);
	int64_t n = codec_encode(c, b, slot, in, len);
	assert_true(n >= 0);
	if (n > 0) {
		assert_int_equal(n % ALIGN, 0);
		assert_true(n <= CBS + ALIGN);
		assert_int_equal(codec_decode(c, b, slot, (uint32_t)n, out, CBS), 0);
		assert_memory_equal(out, in, len);
		for (uint32_t i = len; i < CBS; i++)
			assert_int_equal(out[i], 0);
	}
	codec_buf_put(c, b);
	free(out);
	return n;
}

static void test_lz4_round_trips(void **state)
{
	(void)state;
	char kp[128];
	key_path(kp, sizeof(kp), "k", key_hex);
	struct codec *z = open_codec(CODEC_COMPRESS_LZ4, CODEC_CIPHER_NONE, NULL, "t", CBS);
	struct codec *ze = open_codec(CODEC_COMPRESS_LZ4, CODEC_CIPHER_AES256GCM, kp, "t", CBS);
	unsigned char *rnd = malloc(CBS), *zero = calloc(1, CBS);
	float *adam = malloc(3 * CBS);
	fill_random(rnd, CBS, 3);
	fill_adam(adam, adam + CBS / 4, adam + CBS / 2, CBS / 4);
	/* Incompressible: stored as it is without a cipher, a frame of a
	 * page more with one. */
	assert_int_equal(round_trip(z, 1, rnd, CBS), 0);
	assert_int_equal(round_trip(ze, 1, rnd, CBS), CBS + ALIGN);
	/* Zeros shrink to one page, whole or partial. */
	assert_int_equal(round_trip(z, 2, zero, CBS), ALIGN);
	assert_int_equal(round_trip(ze, 2, zero, CBS), ALIGN);
	assert_int_equal(round_trip(z, 2, zero, 8192), ALIGN);
	/* A partial block of one page cannot shrink below a page. */
	assert_int_equal(round_trip(z, 2, zero, 4096), 0);
	assert_int_equal(round_trip(ze, 2, rnd, 4096), 2 * ALIGN);
	/* fp32 state: whatever lz4 makes of it, it comes back. */
	for (int k = 0; k < 3; k++) {
		assert_true(round_trip(z, 3, (char *)adam + k * CBS, CBS) >= 0);
		assert_true(round_trip(ze, 3, (char *)adam + k * CBS, CBS) > 0);
	}
	/* A block that is half zeros: compressed, stored in less. */
	memcpy(zero, rnd, CBS / 4);
	int64_t n = round_trip(z, 4, zero, CBS);
	assert_true(n > 0 && n < CBS);
	codec_close(z);
	codec_close(ze);
	free(rnd);
	free(zero);
	free(adam);
}

/* Decode a damaged copy of a good frame: -EIO and OUT all zeros. */
static void expect_eio(struct codec *c, const unsigned char *frame, uint32_t n, uint64_t slot,
		       uint32_t stored, size_t flip)
{
	struct codec_buf *b = codec_buf_get(c);
	unsigned char *f = codec_buf_data(b), *out = malloc(CBS);
	memcpy(f, frame, n);
	if (flip != SIZE_MAX)
		f[flip] ^= 0x10;
	memset(out, 0xAA, CBS);
	assert_int_equal(codec_decode(c, b, slot, stored, out, CBS), -EIO);
	for (size_t i = 0; i < CBS; i++)
		assert_int_equal(out[i], 0);
	codec_buf_put(c, b);
	free(out);
}

static void test_tamper(void **state)
{
	(void)state;
	char kp[128], kp2[128];
	key_path(kp, sizeof(kp), "k", key_hex);
	key_path(kp2, sizeof(kp2), "k2",
		 "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
	for (int z = 0; z < 2; z++) {
		enum codec_compress zc = z ? CODEC_COMPRESS_LZ4 : CODEC_COMPRESS_NONE;
		struct codec *c = open_codec(zc, CODEC_CIPHER_AES256GCM, kp, "nvme0", CBS);
		struct codec *other = open_codec(zc, CODEC_CIPHER_AES256GCM, kp2, "nvme0", CBS);
		struct codec *rename = open_codec(zc, CODEC_CIPHER_AES256GCM, kp, "nvme1", CBS);
		struct codec *plain =
		    open_codec(CODEC_COMPRESS_LZ4, CODEC_CIPHER_NONE, NULL, "nvme0", CBS);
		unsigned char *in = malloc(CBS), *frame = malloc(CBS + ALIGN);
		fill_random(in, CBS / 2, 9);
		memset(in + CBS / 2, 0, CBS / 2);
		struct codec_buf *b = codec_buf_get(c);
		int64_t n = codec_encode(c, b, 5, in, CBS);
		assert_true(n > 0);
		memcpy(frame, codec_buf_data(b), (size_t)n);
		codec_buf_put(c, b);
		uint32_t plen = frame[12] | frame[13] << 8 | frame[14] << 16;
		size_t tag = 32 + plen;
		/* Untouched, it decodes (the helper's copy is faithful). */
		assert_int_equal(round_trip(c, 5, in, CBS), n);
		/* Each header field, the payload's first, middle and last
		 * byte, the tag. */
		size_t at[] = {0,	4,   5,	      6, 8, 12, 16, 27, 28, 32, 32 + plen / 2,
			       tag - 1, tag, tag + 15};
		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
			expect_eio(c, frame, (uint32_t)n, 5, (uint32_t)n, at[i]);
		/* Truncated: one page less than was written. */
		if (n > ALIGN)
			expect_eio(c, frame, (uint32_t)n, 5, (uint32_t)n - ALIGN, SIZE_MAX);
		expect_eio(c, frame, (uint32_t)n, 5, 16, SIZE_MAX);
		/* The tag cut off: the frame's bytes end before it. */
		unsigned char *cut = malloc(CBS + ALIGN);
		memcpy(cut, frame, (size_t)n);
		memset(cut + tag, 0, 16);
		expect_eio(c, cut, (uint32_t)n, 5, (uint32_t)n, SIZE_MAX);
		free(cut);
		/* Another slot, another tier, another key, no key. */
		expect_eio(c, frame, (uint32_t)n, 6, (uint32_t)n, SIZE_MAX);
		expect_eio(rename, frame, (uint32_t)n, 5, (uint32_t)n, SIZE_MAX);
		expect_eio(other, frame, (uint32_t)n, 5, (uint32_t)n, SIZE_MAX);
		expect_eio(plain, frame, (uint32_t)n, 5, (uint32_t)n, SIZE_MAX);
		/* A frame without encryption where the tier requires it. */
		struct codec_buf *pb = codec_buf_get(plain);
		int64_t pn = codec_encode(plain, pb, 5, in, CBS);
		assert_true(pn > 0);
		expect_eio(c, codec_buf_data(pb), (uint32_t)pn, 5, (uint32_t)pn, SIZE_MAX);
		codec_buf_put(plain, pb);
		assert_true(codec_errors(c) > 10);
		codec_close(c);
		codec_close(other);
		codec_close(rename);
		codec_close(plain);
		free(in);
		free(frame);
	}
}

static void test_key_file(void **state)
{
	(void)state;
	char kp[128];
	struct codec_params p = {
	    .compress = CODEC_COMPRESS_NONE, .cipher = CODEC_CIPHER_AES256GCM, .key_file = kp};
	struct codec *c = NULL;
	unsigned char raw[33];
	fill_random(raw, sizeof(raw), 1);
	snprintf(kp, sizeof(kp), "%s/key", dir);
	write_file(kp, raw, 32, 0600);
	assert_int_equal(codec_open(&p, "t", CBS, ALIGN, &c), 0);
	codec_close(c);
	/* Raw and hex of the same key are the same key. */
	char hex[66];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	struct codec *h = NULL;
	assert_int_equal(codec_open(&p, "t", CBS, ALIGN, &c), 0);
	hex[64] = '\n';
	write_file(kp, hex, 65, 0600);
	assert_int_equal(codec_open(&p, "t", CBS, ALIGN, &h), 0);
	unsigned char *in = calloc(1, CBS), *out = malloc(CBS);
	struct codec_buf *b = codec_buf_get(c);
	int64_t n = codec_encode(c, b, 1, in, CBS);
	struct codec_buf *hb = codec_buf_get(h);
	memcpy(codec_buf_data(hb), codec_buf_data(b), (size_t)n);
	assert_int_equal(codec_decode(h, hb, 1, (uint32_t)n, out, CBS), 0);
	codec_buf_put(c, b);
	codec_buf_put(h, hb);
	codec_close(c);
	codec_close(h);
	/* Readable by others: works (with a warning). */
	write_file(kp, raw, 32, 0644);
	assert_int_equal(codec_open(&p, "t", CBS, ALIGN, &c), 0);
	codec_close(c);
	/* Wrong sizes, bad digits, writable by others, missing, none. */
	write_file(kp, raw, 31, 0600);
	assert_int_equal(codec_open(&p, "t", CBS, ALIGN, &c), -EINVAL);
	write_file(kp, raw, 33, 0600);
	assert_int_equal(codec_open(&p, "t", CBS, ALIGN, &c), -EINVAL);
	hex[3] = 'g';
	write_file(kp, hex, 65, 0600);
	assert_int_equal(codec_open(&p, "t", CBS, ALIGN, &c), -EINVAL);
	write_file(kp, raw, 32, 0620);
	assert_int_equal(codec_open(&p, "t", CBS, ALIGN, &c), -EPERM);
	unlink(kp);
	assert_int_equal(codec_open(&p, "t", CBS, ALIGN, &c), -ENOENT);
	p.key_file = NULL;
	assert_int_equal(codec_open(&p, "t", CBS, ALIGN, &c), -EINVAL);
	assert_null(c);
	free(in);
	free(out);
}

/* ---- under a posix tier ----------------------------------------------- */

static struct tier *open_coded(enum codec_compress z, enum codec_cipher ci, const char *key)
{
	struct tier_params p = params(64);
	p.codec = (struct codec_params){.compress = z, .cipher = ci, .key_file = key};
	struct tier *t = NULL;
	int rc = tier_open(&p, &t);
	return rc ? NULL : t;
}

static void flip_slab_byte(uint64_t slot, uint32_t slot_size, uint64_t off)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/slab-00000.dat", dir);
	int fd = open(p, O_RDWR);
	assert_true(fd >= 0);
	unsigned char c;
	off_t at = (off_t)(slot * slot_size + off);
	assert_int_equal(pread(fd, &c, 1, at), 1);
	c ^= 0x01;
	assert_int_equal(pwrite(fd, &c, 1, at), 1);
	close(fd);
}

static void test_posix_tier(void **state)
{
	(void)state;
	char kp[128];
	key_path(kp, sizeof(kp), "k", key_hex);
	unsigned char *data = aligned_alloc(4096, BS), *back = aligned_alloc(4096, BS);
	fill_random(data, BS / 2, 11);
	memset(data + BS / 2, 0, BS / 2);
	uint64_t csum[3];
	uint32_t stored[3];
	uint32_t lens[3] = {0, 8192, 0};
	struct tier *t = open_coded(CODEC_COMPRESS_LZ4, CODEC_CIPHER_AES256GCM, kp);
	assert_non_null(t);
	assert_int_equal(tier_slot_size(t), BS + 4096);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(tier_alloc(t), i);
		assert_int_equal(tier_rw_stored(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, (uint64_t)i,
						data, lens[i], &csum[i], &stored[i]),
				 0);
		assert_true(stored[i] > 0 && stored[i] % 4096 == 0 && stored[i] < BS);
		assert_true(csum[i] == tier_checksum_block(data, lens[i] ? lens[i] : BS, BS));
	}
	tier_close(t);
	/* Remount: compression may change, the blocks read back. */
	t = open_coded(CODEC_COMPRESS_NONE, CODEC_CIPHER_AES256GCM, kp);
	assert_non_null(t);
	for (int i = 0; i < 3; i++) {
		memset(back, 0x55, BS);
		assert_int_equal(tier_rw_stored(t, TIER_OP_READ, TIER_PRIO_DEMAND, (uint64_t)i,
						back, lens[i], &csum[i], &stored[i]),
				 0);
		uint32_t l = lens[i] ? lens[i] : BS;
		assert_memory_equal(back, data, l);
		for (uint32_t j = l; j < BS; j++)
			assert_int_equal(back[j], 0);
	}
	tier_close(t);
	flip_slab_byte(2, BS + 4096, 100);
	t = open_coded(CODEC_COMPRESS_LZ4, CODEC_CIPHER_AES256GCM, kp);
	memset(back, 0x55, BS);
	assert_int_equal(
	    tier_rw_stored(t, TIER_OP_READ, TIER_PRIO_DEMAND, 2, back, 0, &csum[2], &stored[2]),
	    -EIO);
	for (uint32_t j = 0; j < BS; j++)
		assert_int_equal(back[j], 0);
	struct tier_stats st;
	tier_get_stats(t, &st);
	assert_int_equal(st.csum_errors, 1);
	/* The bandwidth probe reads its frames back through the codec. */
	uint64_t rd = 0, wr = 0;
	assert_int_equal(tier_probe_bandwidth(t, 8 * BS, &rd, &wr), 0);
	tier_get_stats(t, &st);
	assert_int_equal(st.errors, 1); /* the flipped one, above */
	tier_close(t);
	/* Another key: EIO on read, not at open. */
	char kp2[128];
	key_path(kp2, sizeof(kp2), "k2",
		 "ee0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
	t = open_coded(CODEC_COMPRESS_LZ4, CODEC_CIPHER_AES256GCM, kp2);
	assert_non_null(t);
	assert_int_equal(
	    tier_rw_stored(t, TIER_OP_READ, TIER_PRIO_DEMAND, 0, back, 0, &csum[0], &stored[0]),
	    -EIO);
	tier_close(t);
	/* Encryption turned off, or on for a tier made without it: refused. */
	assert_null(open_coded(CODEC_COMPRESS_LZ4, CODEC_CIPHER_NONE, NULL));
	remove_dir();
	assert_int_equal(make_dir("/tmp"), 0);
	t = open_coded(CODEC_COMPRESS_LZ4, CODEC_CIPHER_NONE, NULL);
	assert_non_null(t);
	assert_int_equal(tier_slot_size(t), BS);
	/* Compression alone: an incompressible block goes as it is. */
	fill_random(back, BS, 12);
	assert_int_equal(
	    tier_rw_stored(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, 0, back, 0, &csum[0], &stored[0]),
	    0);
	assert_int_equal(stored[0], 0);
	assert_int_equal(
	    tier_rw_stored(t, TIER_OP_WRITE, TIER_PRIO_DEMAND, 1, data, 0, &csum[1], &stored[1]),
	    0);
	assert_true(stored[1] > 0 && stored[1] < BS);
	/* With compress turned off, the frames still read. */
	tier_close(t);
	t = open_coded(CODEC_COMPRESS_NONE, CODEC_CIPHER_NONE, NULL);
	assert_non_null(t);
	memset(back, 0x55, BS);
	assert_int_equal(
	    tier_rw_stored(t, TIER_OP_READ, TIER_PRIO_DEMAND, 1, back, 0, &csum[1], &stored[1]), 0);
	assert_memory_equal(back, data, BS);
	/* A compressed frame's damage the checksum catches. */
	flip_slab_byte(1, BS, 200);
	assert_int_equal(
	    tier_rw_stored(t, TIER_OP_READ, TIER_PRIO_DEMAND, 1, back, 0, &csum[1], &stored[1]),
	    -EIO);
	tier_close(t);
	key_path(kp, sizeof(kp), "k", key_hex);
	assert_null(open_coded(CODEC_COMPRESS_LZ4, CODEC_CIPHER_AES256GCM, kp));
	/* Never on a RAM tier. */
	struct tier_params rp = {.name = "ram",
				 .kind = TIER_RAM,
				 .capacity = 4 * BS,
				 .block_size = BS,
				 .queue_depth = 1,
				 .codec = {.compress = CODEC_COMPRESS_LZ4}};
	assert_int_equal(tier_open(&rp, &t), -EINVAL);
	free(data);
	free(back);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gcm_vectors),
	    cmocka_unit_test_setup_teardown(test_frame_is_plain_gcm, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_lz4_round_trips, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_tamper, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_key_file, setup_tmp, teardown),
	    cmocka_unit_test_setup_teardown(test_posix_tier, setup_tmp, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
