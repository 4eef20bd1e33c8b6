/*
 * policy/order_predict.c — what the learner tells its caller: when a key
 * is used or read next, the keys that come next, the cycle as recorded,
 * the eviction choice among candidates, and the counters. Every function
 * here only reads the learner.
 */
#include "policy/order_int.h"

size_t order_max_cycle(const struct order *o)
{
	return o->max_cycle;
}

uint64_t order_now(const struct order *o)
{
	return o->st.deduped;
}

bool order_learned(const struct order *o)
{
	return o->learned;
}

size_t order_cycle_len(const struct order *o)
{
	return o->learned ? o->clen : 0;
}

size_t order_cycle(const struct order *o, const uint64_t **keys, const uint8_t **writes)
{
	*keys = o->learned ? o->cyc : NULL;
	*writes = o->learned ? o->cycw : NULL;
	return o->learned ? o->clen : 0;
}

uint64_t order_learn_count(const struct order *o)
{
	return o->st.learns;
}

size_t order_tolerance(const struct order *o)
{
	return o->learned ? (size_t)order_jitter(o, o->clen) : o->window;
}

static uint64_t next_of(const struct order *o, uint64_t key, bool reads_only)
{
	if (!o || !o->learned)
		return UINT64_MAX;
	const struct cent *e = order_ctab_find(o, key);
	if (!e)
		return UINT64_MAX;
	uint64_t w = (uint64_t)order_jitter(o, o->clen);
	/* Accesses since the key's last one, counting the coming one (the
	 * latest access has clock t; the next will have t + 1). */
	uint64_t elapsed = (uint64_t)(uint32_t)(o->t - e->last_t) + 1;
	if (e->last_q != UINT32_MAX && elapsed <= o->clen + w) {
		/* Relative to the key's own last access: ranks drift apart, so
		 * one global position is wrong for some of them, but each
		 * rank keeps its own pace. Walk the key's occurrences after the
		 * one last seen, in cycle order; the first not yet passed
		 * (allowing the window of lateness) is the next use. */
		uint32_t p = e->last_q;
		do {
			uint32_t prev = p;
			p = o->nxt[p];
			uint64_t dd = (p + o->clen - e->last_q) % o->clen;
			if (dd == 0)
				dd = o->clen;
			/* The cycle is the last period of the recording, cut at
			 * an arbitrary place; ranks drift, so an access near the
			 * cut may be in the copy twice, once at each end. A
			 * block written near the end then "is written again"
			 * just after the cut: its next access looked like an
			 * overwrite, so the cache took it for dead, wrote it
			 * back and evicted it first, and read it back a step
			 * later. A repeat of the same kind just across the cut
			 * is that copy, not a use. */
			if (p < prev && p != e->last_q && o->cycw[p] == o->cycw[e->last_q] &&
			    dd <= 2 * w)
				continue;
			if ((!reads_only || !o->cycw[p]) && dd + w >= elapsed)
				return dd > elapsed ? dd - elapsed : 0;
		} while (p != e->last_q);
	}
	/* No usable anchor: distance from the global position. */
	uint64_t best = UINT64_MAX;
	uint32_t p = e->first;
	do {
		if (!reads_only || !o->cycw[p]) {
			uint64_t d = (p + o->clen - o->cur) % o->clen;
			if (d < best)
				best = d;
		}
		p = o->nxt[p];
	} while (p != e->first);
	return best;
}

uint64_t order_next_use(const struct order *o, uint64_t key)
{
	return next_of(o, key, false);
}

uint64_t order_next_read(const struct order *o, uint64_t key)
{
	return next_of(o, key, true);
}

size_t order_upcoming(const struct order *o, size_t n, uint64_t *keys)
{
	if (!o->learned)
		return 0;
	if (n > o->clen)
		n = o->clen;
	for (size_t j = 0; j < n; j++)
		keys[j] = o->cyc[(o->cur + j) % o->clen];
	return n;
}

size_t order_position(const struct order *o)
{
	return o->learned ? o->cur : 0;
}

size_t order_upcoming_reads(const struct order *o, size_t n, uint64_t *keys, uint32_t *dist)
{
	size_t got = 0;
	if (!o->learned)
		return 0;
	for (size_t j = 0; j < o->clen && got < n; j++) {
		size_t p = (o->cur + j) % o->clen;
		if (o->cycw[p])
			continue;
		keys[got] = o->cyc[p];
		dist[got++] = (uint32_t)j;
	}
	return got;
}

void order_get_stats(const struct order *o, struct order_stats *out)
{
	*out = o->st;
	out->learned = o->learned;
	out->cycle_len = order_cycle_len(o);
}

int order_pick_victim(const struct order *o, const uint64_t *keys, size_t n,
		      const uint64_t *lru_stamp)
{
	if (n == 0)
		return -1;
	int best = 0;
	uint64_t best_nu = order_next_use(o, keys[0]);
	for (size_t i = 1; i < n; i++) {
		uint64_t nu = order_next_use(o, keys[i]);
		bool older = lru_stamp && lru_stamp[i] < lru_stamp[best];
		if (nu > best_nu || (nu == best_nu && older)) {
			best = (int)i;
			best_nu = nu;
		}
	}
	return best;
}
