/*
 * tiers/bitmap.h — the slot allocator of a tier: one bit per slot.
 *
 * Lock-free (compare-and-swap on 64-bit words) because every block write of
 * every file allocates a slot, from many FUSE threads at once; a hint of the
 * word where the last free bit was found keeps allocation O(1) in the common
 * case of a tier filling up from slot 0.
 */
#ifndef TIERFS_BITMAP_H
#define TIERFS_BITMAP_H

#include <stdint.h>

struct bitmap {
	uint64_t *words; /* bit set = slot used; bits past nbits are preset */
	uint64_t nbits;
	uint64_t nwords;
	uint64_t used; /* atomic */
	uint64_t hint; /* atomic; a word likely to hold a free bit */
};

/* 0 or -ENOMEM. nbits may be 0 (every alloc then fails with -ENOSPC). */
int bitmap_init(struct bitmap *b, uint64_t nbits);
void bitmap_destroy(struct bitmap *b);
/* A free bit, now set, or -ENOSPC. */
int64_t bitmap_alloc(struct bitmap *b);
/* 0, or -ERANGE beyond nbits, or -EINVAL if the bit was not set. */
int bitmap_free(struct bitmap *b, uint64_t bit);
/* 0, or -ERANGE beyond nbits, or -EEXIST if the bit was already set. */
int bitmap_reserve(struct bitmap *b, uint64_t bit);
uint64_t bitmap_used(const struct bitmap *b);

#endif
