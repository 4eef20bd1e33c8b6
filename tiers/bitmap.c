/*
 * tiers/bitmap.c — lock-free slot bitmap (see bitmap.h for why lock-free).
 */
#include "tiers/bitmap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

int bitmap_init(struct bitmap *b, uint64_t nbits)
{
	b->nbits = nbits;
	b->nwords = (nbits + 63) / 64;
	b->used = 0;
	b->hint = 0;
	/* One spare word so a zero-slot bitmap still has valid memory. */
	b->words = calloc(b->nwords + 1, sizeof(uint64_t));
	if (!b->words)
		return -ENOMEM;
	/* Preset the tail bits of the last word so the allocator never has to
	 * range-check what ctz finds. */
	if (nbits % 64)
		b->words[b->nwords - 1] = ~0ULL << (nbits % 64);
	return 0;
}

void bitmap_destroy(struct bitmap *b)
{
	free(b->words);
	b->words = NULL;
}

int64_t bitmap_alloc(struct bitmap *b)
{
	if (b->nwords == 0)
		return -ENOSPC;
	uint64_t start = __atomic_load_n(&b->hint, __ATOMIC_RELAXED);
	if (start >= b->nwords)
		start = 0;
	/* nwords + 1 visits: the start word is looked at again last, in case a
	 * bit in it was freed behind us while we scanned the rest. */
	for (uint64_t n = 0; n <= b->nwords; n++) {
		uint64_t i = (start + n) % b->nwords;
		uint64_t w = __atomic_load_n(&b->words[i], __ATOMIC_RELAXED);
		while (~w) {
			uint64_t bit = 1ULL << __builtin_ctzll(~w);
			if (__atomic_compare_exchange_n(&b->words[i], &w, w | bit, false,
							__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
				__atomic_add_fetch(&b->used, 1, __ATOMIC_RELAXED);
				if (i != start)
					__atomic_store_n(&b->hint, i, __ATOMIC_RELAXED);
				return (int64_t)(i * 64 + (uint64_t)__builtin_ctzll(bit));
			}
			/* w now holds the current value; retry within this word. */
		}
	}
	return -ENOSPC;
}

int bitmap_free(struct bitmap *b, uint64_t bit)
{
	if (bit >= b->nbits)
		return -ERANGE;
	uint64_t mask = 1ULL << (bit % 64);
	uint64_t old = __atomic_fetch_and(&b->words[bit / 64], ~mask, __ATOMIC_ACQ_REL);
	if (!(old & mask))
		return -EINVAL;
	__atomic_sub_fetch(&b->used, 1, __ATOMIC_RELAXED);
	/* Point allocation back at low slots: keeps a tier's data packed into
	 * few slab files. */
	uint64_t h = __atomic_load_n(&b->hint, __ATOMIC_RELAXED);
	if (bit / 64 < h)
		__atomic_store_n(&b->hint, bit / 64, __ATOMIC_RELAXED);
	return 0;
}

int bitmap_reserve(struct bitmap *b, uint64_t bit)
{
	if (bit >= b->nbits)
		return -ERANGE;
	uint64_t mask = 1ULL << (bit % 64);
	uint64_t old = __atomic_fetch_or(&b->words[bit / 64], mask, __ATOMIC_ACQ_REL);
	if (old & mask)
		return -EEXIST;
	__atomic_add_fetch(&b->used, 1, __ATOMIC_RELAXED);
	return 0;
}

uint64_t bitmap_used(const struct bitmap *b)
{
	return __atomic_load_n(&b->used, __ATOMIC_RELAXED);
}
