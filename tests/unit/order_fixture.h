/*
 * tests/unit/order_fixture.h — the traces the access-order unit tests share:
 * a growable trace of (key, write) accesses, keys shaped like the daemon's
 * (ino << 24 | block), DeepSpeed-like steps for one rank or several
 * interleaved with drift, and a brute-force next use to check predictions
 * against.
 */
#ifndef TIERFS_TEST_ORDER_FIXTURE_H
#define TIERFS_TEST_ORDER_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

struct trace {
	uint64_t *key;
	bool *wr;
	size_t n, cap;
};

static inline void tr_add(struct trace *t, uint64_t key, bool wr)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 1024;
		t->key = realloc(t->key, t->cap * sizeof(*t->key));
		t->wr = realloc(t->wr, t->cap * sizeof(*t->wr));
		assert_non_null(t->key);
		assert_non_null(t->wr);
	}
	t->key[t->n] = key;
	t->wr[t->n] = wr;
	t->n++;
}

static inline void tr_free(struct trace *t)
{
	free(t->key);
	free(t->wr);
	memset(t, 0, sizeof(*t));
}

static inline uint64_t mkkey(unsigned rank, unsigned block)
{
	return ((uint64_t)(rank + 1) << 24) | block; /* like ino << 24 | block */
}

/* One rank's step: for each sub-group, read its blocks then write them. */
static inline size_t rank_step(unsigned rank, unsigned groups, unsigned blocks, uint64_t *k,
			       bool *w)
{
	size_t n = 0;
	for (unsigned g = 0; g < groups; g++) {
		for (unsigned b = 0; b < blocks; b++, n++) {
			k[n] = mkkey(rank, g * blocks + b);
			w[n] = false;
		}
		for (unsigned b = 0; b < blocks; b++, n++) {
			k[n] = mkkey(rank, g * blocks + b);
			w[n] = true;
		}
	}
	return n;
}

/* Append STEPS single-rank steps of GROUPS sub-groups of BLOCKS blocks. */
static inline void add_steps(struct trace *t, unsigned groups, unsigned blocks, int steps)
{
	uint64_t *k = calloc(2u * groups * blocks, sizeof(*k));
	bool *w = calloc(2u * groups * blocks, sizeof(*w));
	assert_non_null(k);
	assert_non_null(w);
	for (int s = 0; s < steps; s++) {
		size_t n = rank_step(0, groups, blocks, k, w);
		for (size_t i = 0; i < n; i++)
			tr_add(t, k[i], w[i]);
	}
	free(k);
	free(w);
}

/* Brute force: accesses (deduplicated, as the learner counts) from trace
 * position j until key's first occurrence at or after j; UINT64_MAX if none
 * in the rest. Only used on traces without consecutive duplicates. */
static inline uint64_t brute_next(const struct trace *t, size_t j, uint64_t key, bool reads_only)
{
	for (size_t i = j; i < t->n; i++)
		if (t->key[i] == key && (!reads_only || !t->wr[i]))
			return i - j;
	return UINT64_MAX;
}

/* R ranks, each doing rank_step; the interleave picks a random rank among
 * those at most DRIFT accesses ahead of the slowest; then random adjacent
 * swaps and repeated requests (consecutive duplicates). */
static inline void gen_ranks(struct trace *t, unsigned ranks, unsigned groups, unsigned blocks,
			     unsigned steps, unsigned drift, unsigned swap_pct, unsigned dup_pct)
{
	size_t per = 2 * (size_t)groups * blocks;
	uint64_t *k = malloc(ranks * per * sizeof(*k));
	bool *w = malloc(ranks * per * sizeof(*w));
	size_t *prog = calloc(ranks, sizeof(*prog));
	uint64_t *sk = malloc(ranks * per * sizeof(*sk));
	bool *sw = malloc(ranks * per * sizeof(*sw));
	assert_true(k && w && prog && sk && sw);
	for (unsigned r = 0; r < ranks; r++)
		rank_step(r, groups, blocks, k + r * per, w + r * per);
	for (unsigned s = 0; s < steps; s++) {
		memset(prog, 0, ranks * sizeof(*prog));
		size_t n = 0;
		while (n < ranks * per) {
			size_t lo = SIZE_MAX;
			for (unsigned r = 0; r < ranks; r++)
				if (prog[r] < per && prog[r] < lo)
					lo = prog[r];
			unsigned r;
			do
				r = (unsigned)(rand() % ranks);
			while (prog[r] >= per || prog[r] > lo + drift);
			sk[n] = k[r * per + prog[r]];
			sw[n] = w[r * per + prog[r]];
			prog[r]++;
			n++;
		}
		for (size_t i = 0; i + 1 < n; i++) {
			if ((unsigned)(rand() % 100) < swap_pct) {
				uint64_t tk = sk[i];
				bool tw = sw[i];
				sk[i] = sk[i + 1];
				sw[i] = sw[i + 1];
				sk[i + 1] = tk;
				sw[i + 1] = tw;
			}
		}
		for (size_t i = 0; i < n; i++) {
			tr_add(t, sk[i], sw[i]);
			if ((unsigned)(rand() % 100) < dup_pct)
				tr_add(t, sk[i], sw[i]);
		}
	}
	free(k);
	free(w);
	free(prog);
	free(sk);
	free(sw);
}

#endif
