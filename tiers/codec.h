/*
 * tiers/codec.h — the per-block codec between the cache and a tier that is
 * not RAM: LZ4 block compression and AES-256-GCM encryption of each block
 * written, undone and verified on each read.
 *
 * An encoded block ("frame") is a small header, the payload (the block,
 * compressed or not, encrypted or not) and, when encrypted, a 16-byte GCM
 * tag; then zeros up to the caller's alignment. The header says how the
 * block was stored, so a tier may hold frames of different settings (the
 * compress setting may change across mounts). With encryption, the header,
 * the tier's name and the slot are authenticated with the payload: a block
 * moved to another slot or tier, tampered, truncated or read with another
 * key fails the tag. docs/codec.md has the format.
 *
 * Threading: codec_encode/codec_decode may run on many threads at once,
 * each with a work buffer of its own (codec_buf_get); the cipher state
 * lives in the work buffer, so nothing is locked on the data path but the
 * pool's free list.
 */
#ifndef TIERFS_CODEC_H
#define TIERFS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum codec_compress { CODEC_COMPRESS_NONE = 0, CODEC_COMPRESS_LZ4 = 1 };
enum codec_cipher { CODEC_CIPHER_NONE = 0, CODEC_CIPHER_AES256GCM = 1 };

struct codec_params {
	enum codec_compress compress;
	enum codec_cipher cipher;
	const char *key_file; /* with a cipher: 32 raw bytes or 64 hex digits */
};

/* The config names ("lz4", "none"; "aes-256-gcm", "none"): the value, or
 * -1 for an unknown name. */
int codec_compress_parse(const char *name);
int codec_cipher_parse(const char *name);
const char *codec_compress_name(enum codec_compress c);
const char *codec_cipher_name(enum codec_cipher c);

/* Whether P asks for any coding at all. */
static inline bool codec_wanted(const struct codec_params *p)
{
	return p && (p->compress != CODEC_COMPRESS_NONE || p->cipher != CODEC_CIPHER_NONE);
}

/* Bytes a frame adds to a block at most, before alignment (header + tag). */
#define CODEC_OVERHEAD 48u

struct codec;
/* A work buffer: ALIGN-aligned memory of codec_buf_size() bytes, and the
 * cipher state that goes with it. */
struct codec_buf;

/* Open a codec for tier NAME (bound into every frame's tag) with blocks of
 * at most BLOCK_SIZE bytes, frames padded to a multiple of ALIGN (a power
 * of two). Reads and checks the key file. Returns 0 or -errno, having
 * printed why ("tierfs: tier NAME: ..."). */
int codec_open(const struct codec_params *p, const char *name, uint32_t block_size, uint32_t align,
	       struct codec **out);
void codec_close(struct codec *c);
bool codec_encrypts(const struct codec *c);
/* Whether C codes what it writes (compress or encrypt set): a codec with
 * neither writes every block as it is, and only decodes frames written
 * under another setting. */
bool codec_codes(const struct codec *c);

/* Buffers from the codec's pool (made on first need, kept for reuse):
 * NULL when out of memory. */
struct codec_buf *codec_buf_get(struct codec *c);
void codec_buf_put(struct codec *c, struct codec_buf *b);
void *codec_buf_data(struct codec_buf *b);
/* The bytes of every work buffer: the largest frame, block_size plus one
 * ALIGN. */
size_t codec_buf_size(const struct codec *c);

/* Encode LEN bytes of IN (the block of SLOT) into B. Returns the frame's
 * length rounded up to ALIGN, or 0 when the block is better stored as it
 * is (no cipher, and compression saves less than it costs to read), or
 * -errno. */
int64_t codec_encode(struct codec *c, struct codec_buf *b, uint64_t slot, const void *in,
		     uint32_t len);

/* Decode the frame of STORED bytes in B, read back from SLOT, into OUT
 * (room for LEN bytes: the block's bytes from its start, the rest of OUT
 * up to LEN zeroed). A frame that fails its tag, does not parse, was
 * stored with another key, in another slot or tier, or without the
 * encryption this codec requires: -EIO, with a line naming the tier, the
 * slot and what failed; OUT then holds zeros, never unverified bytes. */
int codec_decode(struct codec *c, struct codec_buf *b, uint64_t slot, uint32_t stored, void *out,
		 uint32_t len);

/* Frames decoded that failed (any cause), for the stats. */
uint64_t codec_errors(const struct codec *c);

#endif
