/*
 * policy/mix.h — one 64-bit hash finaliser for the policy layer's tables
 * and stripe offsets.
 *
 * Keys there are highly structured (order id << 24 | block index, the id
 * often a consecutive inode number); splitmix64's finaliser spreads them
 * over every bit, so linear probing and the stripe's start offsets do not
 * cluster.
 */
#ifndef TIERFS_MIX_H
#define TIERFS_MIX_H

#include <stdint.h>

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

#endif
