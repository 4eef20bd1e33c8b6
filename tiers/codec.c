/*
 * tiers/codec.c — the per-block codec (codec.h): LZ4 block compression
 * (liblz4) and AES-256-GCM (OpenSSL EVP, which uses AES-NI and PCLMUL
 * where the CPU has them), the frame format, the key file, and the pool of
 * work buffers the tier layer encodes into and reads frames into.
 *
 * Frame: a 32-byte header (all fields little-endian)
 *   0  magic "TFCF"       4  version (1)      5  flags (1 lz4, 2 aes-256-gcm)
 *   6  header length (32) 8  plaintext bytes  12 payload bytes
 *   16 nonce (12 bytes; zeros without a cipher) 28 reserved (0)
 * then the payload, then with a cipher the 16-byte GCM tag, then zeros up
 * to the alignment. The whole header is GCM's additional data, followed
 * by the slot (le64) and the tier's name: a frame verifies only where it
 * was written.
 *
 * Nonces: each codec_open draws a random 96-bit base (RAND_bytes), and the
 * N-th frame it encrypts uses the base plus N in its low 64 bits. One open
 * never repeats a nonce (a 64-bit counter); two opens under one key (every
 * mount, every node, every tier sharing the key file) collide only if
 * their ranges of nonces overlap, about (opens x frames) / 2^96 over the
 * key's life: far below the (frames)^2 / 2^97 of a fresh random nonce per
 * frame, which NIST caps at 2^32 frames per key, a bound a cluster
 * writing optimizer state for weeks could reach. A per-mount random
 * prefix with a counter from zero would be worse still: two mounts that
 * drew the same prefix would reuse every nonce from the first frame on.
 */
#include "tiers/codec.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lz4.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiers/tier.h" /* tier_ratelimit, tier_now_ns */

#define HDR_LEN	     32u
#define TAG_LEN	     16u
#define NONCE_LEN    12u
#define KEY_LEN	     32u
#define FRAME_V1     1u
#define F_LZ4	     0x1u
#define F_AES	     0x2u
#define LOG_EVERY_NS 1000000000ULL

_Static_assert(HDR_LEN + TAG_LEN <= CODEC_OVERHEAD, "CODEC_OVERHEAD too small");

static const unsigned char frame_magic[4] = {'T', 'F', 'C', 'F'};

struct codec_buf {
	struct codec_buf *next; /* free list, under codec.pool_lock */
	unsigned char *mem;
	EVP_CIPHER_CTX *enc, *dec; /* keyed once, at the buffer's birth */
};

struct codec {
	/* Immutable after codec_open. */
	char name[TIER_NAME_MAX];
	enum codec_compress compress;
	enum codec_cipher cipher;
	uint32_t block_size, align;
	size_t bufsize;
	unsigned char key[KEY_LEN]; /* wiped at close */
	unsigned char nonce_base[NONCE_LEN];

	uint64_t nonce_ctr; /* frames encrypted (atomic) */
	uint64_t errors;    /* frames that failed to decode (atomic) */
	struct tier_ratelimit log;

	pthread_mutex_t pool_lock;
	struct codec_buf *free; /* under pool_lock */
	unsigned nbufs;		/* made, under pool_lock */
};

int codec_compress_parse(const char *name)
{
	if (!strcmp(name, "none"))
		return CODEC_COMPRESS_NONE;
	if (!strcmp(name, "lz4"))
		return CODEC_COMPRESS_LZ4;
	return -1;
}

int codec_cipher_parse(const char *name)
{
	if (!strcmp(name, "none"))
		return CODEC_CIPHER_NONE;
	if (!strcmp(name, "aes-256-gcm"))
		return CODEC_CIPHER_AES256GCM;
	return -1;
}

const char *codec_compress_name(enum codec_compress c)
{
	return c == CODEC_COMPRESS_LZ4 ? "lz4" : "none";
}

const char *codec_cipher_name(enum codec_cipher c)
{
	return c == CODEC_CIPHER_AES256GCM ? "aes-256-gcm" : "none";
}

static void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le64(const unsigned char *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

static void __attribute__((format(printf, 2, 3)))
codec_log(const struct codec *c, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "tierfs: tier %s: %s\n", c->name, msg);
}

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = tolower(ch);
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Read the key file into c->key: 32 raw bytes, or 64 hex digits (and
 * trailing white space). A file that others may write is refused (they
 * could swap the key and have every block written from then on in their
 * key); one others may read gets a warning. */
static int load_key(struct codec *c, const char *path)
{
	if (!path || !path[0]) {
		codec_log(c, "encrypt = %s needs a key_file", codec_cipher_name(c->cipher));
		return -EINVAL;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		codec_log(c, "key_file %s: cannot open: %s", path, strerror(e));
		return -e;
	}
	struct stat st;
	unsigned char raw[160];
	int rc = 0;
	if (fstat(fd, &st)) {
		rc = -errno;
		codec_log(c, "key_file %s: cannot stat: %s", path, strerror(-rc));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		codec_log(c, "key_file %s: not a regular file", path);
		rc = -EINVAL;
		goto out;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		codec_log(c,
			  "key_file %s: writable by group or others (mode %03o): refused; "
			  "chmod 600 it",
			  path, (unsigned)(st.st_mode & 0777));
		rc = -EPERM;
		goto out;
	}
	if (st.st_mode & (S_IRGRP | S_IROTH))
		codec_log(
		    c,
		    "warning: key_file %s is readable by group or others (mode %03o); chmod 600 it",
		    path, (unsigned)(st.st_mode & 0777));
	ssize_t n = read(fd, raw, sizeof(raw));
	if (n < 0) {
		rc = -errno;
		codec_log(c, "key_file %s: cannot read: %s", path, strerror(-rc));
		goto out;
	}
	if (n == KEY_LEN) {
		memcpy(c->key, raw, KEY_LEN);
		goto out;
	}
	size_t len = (size_t)n;
	while (len && isspace(raw[len - 1]))
		len--;
	bool hex = len == 2 * KEY_LEN;
	for (size_t i = 0; hex && i < KEY_LEN; i++) {
		int hi = hexval(raw[2 * i]), lo = hexval(raw[2 * i + 1]);
		if (hi < 0 || lo < 0)
			hex = false;
		else
			c->key[i] = (unsigned char)(hi << 4 | lo);
	}
	if (!hex) {
		codec_log(c,
			  "key_file %s: must hold 32 raw bytes or 64 hex digits, not %zd bytes%s "
			  "(make one with: openssl rand -hex 32 > FILE)",
			  path, n, n == (ssize_t)sizeof(raw) ? " or more" : "");
		OPENSSL_cleanse(c->key, sizeof(c->key));
		rc = -EINVAL;
	}
out:
	OPENSSL_cleanse(raw, sizeof(raw));
	close(fd);
	return rc;
}

int codec_open(const struct codec_params *p, const char *name, uint32_t block_size, uint32_t align,
	       struct codec **out)
{
	*out = NULL;
	struct codec *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	snprintf(c->name, sizeof(c->name), "%s", name ? name : "?");
	c->compress = p->compress;
	c->cipher = p->cipher;
	c->block_size = block_size;
	c->align = align;
	c->bufsize = (size_t)block_size + align;
	pthread_mutex_init(&c->pool_lock, NULL);
	int rc = 0;
	if (align < CODEC_OVERHEAD || (align & (align - 1)) || block_size % align ||
	    block_size > INT32_MAX - align) {
		codec_log(c, "codec: alignment %" PRIu32 " does not suit blocks of %" PRIu32, align,
			  block_size);
		rc = -EINVAL;
	} else if (c->cipher != CODEC_CIPHER_NONE) {
		rc = load_key(c, p->key_file);
		if (!rc && RAND_bytes(c->nonce_base, sizeof(c->nonce_base)) != 1) {
			codec_log(c, "codec: no random bytes for the nonces (RAND_bytes failed)");
			rc = -EIO;
		}
	} else if (p->key_file && p->key_file[0]) {
		codec_log(c, "key_file is set but encrypt = none: nothing would be encrypted");
		rc = -EINVAL;
	}
	if (rc) {
		codec_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

static void buf_free(struct codec_buf *b)
{
	EVP_CIPHER_CTX_free(b->enc);
	EVP_CIPHER_CTX_free(b->dec);
	free(b->mem);
	free(b);
}

void codec_close(struct codec *c)
{
	if (!c)
		return;
	while (c->free) {
		struct codec_buf *b = c->free;
		c->free = b->next;
		buf_free(b);
	}
	pthread_mutex_destroy(&c->pool_lock);
	OPENSSL_cleanse(c->key, sizeof(c->key));
	free(c);
}

bool codec_encrypts(const struct codec *c)
{
	return c && c->cipher != CODEC_CIPHER_NONE;
}

bool codec_codes(const struct codec *c)
{
	return c && (c->compress != CODEC_COMPRESS_NONE || c->cipher != CODEC_CIPHER_NONE);
}

size_t codec_buf_size(const struct codec *c)
{
	return c->bufsize;
}

void *codec_buf_data(struct codec_buf *b)
{
	return b->mem;
}

uint64_t codec_errors(const struct codec *c)
{
	return __atomic_load_n(&c->errors, __ATOMIC_RELAXED);
}

/* A new work buffer, its cipher contexts keyed: the key schedule is paid
 * once per buffer, not per block. */
static struct codec_buf *buf_new(struct codec *c)
{
	struct codec_buf *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	if (posix_memalign((void **)&b->mem, c->align < 4096 ? 4096 : c->align, c->bufsize)) {
		free(b);
		return NULL;
	}
	if (c->cipher != CODEC_CIPHER_NONE) {
		b->enc = EVP_CIPHER_CTX_new();
		b->dec = EVP_CIPHER_CTX_new();
		if (!b->enc || !b->dec ||
		    EVP_EncryptInit_ex(b->enc, EVP_aes_256_gcm(), NULL, c->key, NULL) != 1 ||
		    EVP_DecryptInit_ex(b->dec, EVP_aes_256_gcm(), NULL, c->key, NULL) != 1 ||
		    EVP_CIPHER_CTX_ctrl(b->enc, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1 ||
		    EVP_CIPHER_CTX_ctrl(b->dec, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1) {
			codec_log(c, "codec: cannot set up AES-256-GCM");
			buf_free(b);
			return NULL;
		}
	}
	return b;
}

struct codec_buf *codec_buf_get(struct codec *c)
{
	pthread_mutex_lock(&c->pool_lock);
	struct codec_buf *b = c->free;
	if (b) {
		c->free = b->next;
		pthread_mutex_unlock(&c->pool_lock);
		return b;
	}
	pthread_mutex_unlock(&c->pool_lock);
	/* Only until the pool holds as many as are ever in flight at once. */
	b = buf_new(c);
	if (b) {
		pthread_mutex_lock(&c->pool_lock);
		c->nbufs++;
		pthread_mutex_unlock(&c->pool_lock);
	}
	return b;
}

void codec_buf_put(struct codec *c, struct codec_buf *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&c->pool_lock);
	b->next = c->free;
	c->free = b;
	pthread_mutex_unlock(&c->pool_lock);
}

/* GCM's additional data after the header: where the frame belongs. */
static int add_binding(EVP_CIPHER_CTX *ctx, const struct codec *c, const unsigned char *hdr,
		       uint64_t slot, bool enc)
{
	unsigned char bind[8 + 1 + TIER_NAME_MAX];
	size_t nlen = strlen(c->name);
	put_le64(bind, slot);
	bind[8] = (unsigned char)nlen;
	memcpy(bind + 9, c->name, nlen);
	int outl;
	if (enc)
		return EVP_EncryptUpdate(ctx, NULL, &outl, hdr, HDR_LEN) == 1 &&
			       EVP_EncryptUpdate(ctx, NULL, &outl, bind, (int)(9 + nlen)) == 1
			   ? 0
			   : -EIO;
	return EVP_DecryptUpdate(ctx, NULL, &outl, hdr, HDR_LEN) == 1 &&
		       EVP_DecryptUpdate(ctx, NULL, &outl, bind, (int)(9 + nlen)) == 1
		   ? 0
		   : -EIO;
}

static uint32_t round_up(uint32_t n, uint32_t align)
{
	return (n + align - 1) & ~(align - 1);
}

int64_t codec_encode(struct codec *c, struct codec_buf *b, uint64_t slot, const void *in,
		     uint32_t len)
{
	if (len > c->block_size)
		return -EINVAL;
	unsigned char *f = b->mem, *payload = f + HDR_LEN;
	const unsigned char *src = in;
	uint32_t plen = len, flags = 0;
	bool aes = c->cipher != CODEC_CIPHER_NONE;
	if (c->compress == CODEC_COMPRESS_LZ4 && len > 0) {
		/* Worth it only if it saves an eighth: a smaller gain is
		 * eaten by the decompression on every read. A bound on the
		 * output makes LZ4 give up as soon as it cannot meet it. */
		int limit = (int)(len - len / 8);
		int n = LZ4_compress_default(in, (char *)payload, (int)len, limit);
		if (n > 0 && (aes || round_up(HDR_LEN + (uint32_t)n, c->align) < len)) {
			flags |= F_LZ4;
			src = payload;
			plen = (uint32_t)n;
		}
	}
	if (!aes && !(flags & F_LZ4))
		return 0;
	memcpy(f, frame_magic, 4);
	f[4] = FRAME_V1;
	f[5] = (unsigned char)(flags | (aes ? F_AES : 0));
	f[6] = HDR_LEN;
	f[7] = 0;
	put_le32(f + 8, len);
	put_le32(f + 12, plen);
	memset(f + 16, 0, NONCE_LEN + 4);
	uint32_t flen = HDR_LEN + plen;
	if (aes) {
		unsigned char *nonce = f + 16;
		uint64_t n = __atomic_fetch_add(&c->nonce_ctr, 1, __ATOMIC_RELAXED);
		memcpy(nonce, c->nonce_base, NONCE_LEN);
		put_le64(nonce + 4, get_le64(c->nonce_base + 4) + n);
		int outl = 0, fin = 0;
		/* GCM encrypts in place (src == payload) or from the caller's
		 * block straight into the frame: no copy either way. */
		if (EVP_EncryptInit_ex(b->enc, NULL, NULL, NULL, nonce) != 1 ||
		    add_binding(b->enc, c, f, slot, true) ||
		    EVP_EncryptUpdate(b->enc, payload, &outl, src, (int)plen) != 1 ||
		    EVP_EncryptFinal_ex(b->enc, payload + outl, &fin) != 1 ||
		    (uint32_t)(outl + fin) != plen ||
		    EVP_CIPHER_CTX_ctrl(b->enc, EVP_CTRL_GCM_GET_TAG, TAG_LEN, payload + plen) !=
			1) {
			codec_log(c, "slot %" PRIu64 ": AES-256-GCM encryption failed", slot);
			return -EIO;
		}
		flen += TAG_LEN;
	}
	uint32_t total = round_up(flen, c->align);
	memset(f + flen, 0, total - flen);
	return total;
}

static int decode_fail(struct codec *c, uint64_t slot, void *out, uint32_t len, const char *why)
{
	memset(out, 0, len);
	__atomic_add_fetch(&c->errors, 1, __ATOMIC_RELAXED);
	uint64_t skipped;
	if (tier_ratelimit_ok(&c->log, tier_now_ns(), LOG_EVERY_NS, &skipped)) {
		if (skipped)
			codec_log(c,
				  "slot %" PRIu64 ": %s (and %" PRIu64 " more since the last line)",
				  slot, why, skipped);
		else
			codec_log(c, "slot %" PRIu64 ": %s", slot, why);
	}
	return -EIO;
}

int codec_decode(struct codec *c, struct codec_buf *b, uint64_t slot, uint32_t stored, void *out,
		 uint32_t len)
{
	const unsigned char *f = b->mem;
	unsigned char *payload = b->mem + HDR_LEN;
	if (stored < HDR_LEN || stored > c->bufsize)
		return decode_fail(c, slot, out, len, "codec frame of impossible length");
	if (memcmp(f, frame_magic, 4) || f[4] != FRAME_V1 || f[6] != HDR_LEN || f[7] ||
	    (f[5] & ~(F_LZ4 | F_AES)) || get_le32(f + 28))
		return decode_fail(c, slot, out, len,
				   "not a codec frame (bad header: overwritten or corrupt)");
	uint32_t flags = f[5], plain = get_le32(f + 8), plen = get_le32(f + 12);
	bool aes = flags & F_AES;
	uint64_t need = (uint64_t)HDR_LEN + plen + (aes ? TAG_LEN : 0);
	if (plain > len || need > stored || (!(flags & F_LZ4) && plen != plain))
		return decode_fail(c, slot, out, len,
				   "codec frame lengths do not fit (truncated or corrupt)");
	if (c->cipher != CODEC_CIPHER_NONE && !aes)
		return decode_fail(c, slot, out, len,
				   "block is not encrypted, and the tier requires encryption");
	if (aes && c->cipher == CODEC_CIPHER_NONE)
		return decode_fail(c, slot, out, len,
				   "block is encrypted, and the tier has no key (encrypt = none)");
	unsigned char *dst = flags & F_LZ4 ? payload : out;
	if (aes) {
		/* The plaintext lands before the tag is checked: on failure it
		 * is wiped (decode_fail) and the caller gets -EIO only. */
		int outl = 0, fin = 0;
		unsigned char tag[TAG_LEN];
		memcpy(tag, payload + plen, TAG_LEN);
		if (EVP_DecryptInit_ex(b->dec, NULL, NULL, NULL, f + 16) != 1 ||
		    add_binding(b->dec, c, f, slot, false) ||
		    EVP_DecryptUpdate(b->dec, dst, &outl, payload, (int)plen) != 1 ||
		    EVP_CIPHER_CTX_ctrl(b->dec, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) != 1 ||
		    EVP_DecryptFinal_ex(b->dec, dst + outl, &fin) != 1) {
			if (dst == payload)
				memset(payload, 0, plen);
			return decode_fail(c, slot, out, len,
					   "AES-256-GCM tag mismatch: wrong key, or the block was "
					   "changed, truncated or moved from another slot");
		}
	} else if (!(flags & F_LZ4)) {
		memcpy(out, payload, plain);
	}
	if (flags & F_LZ4) {
		int n = LZ4_decompress_safe((const char *)payload, out, (int)plen, (int)len);
		if (n < 0 || (uint32_t)n != plain)
			return decode_fail(c, slot, out, len, "lz4 payload does not decompress");
	}
	if (plain < len)
		memset((char *)out + plain, 0, len - plain);
	return 0;
}
