/*
 * policy/order_cycle.c — the learned cycle (order.h, "Learned"): made
 * from the last period of the recording and repaired at its cut, indexed
 * by key, and followed access by access, with the health that says when
 * it broke.
 *
 * Owns cyc/cycw, the cycle table (ctab), the key chains (nxt), the
 * position and the health bits.
 */
#include <stdlib.h>
#include <string.h>

#include "policy/mix.h"
#include "policy/order_int.h"

/* Cycle table: keys of the learned cycle. Same open addressing and epoch
 * trick as tab; at most max_cycle keys in 2 * max_cycle slots. */
struct cent *order_ctab_find(const struct order *o, uint64_t key)
{
	for (size_t i = mix64(key) & o->ctab_mask;; i = (i + 1) & o->ctab_mask) {
		struct cent *e = &o->ctab[i];
		if (e->epoch != o->cepoch)
			return NULL;
		if (e->key == key)
			return e;
	}
}

static struct cent *ctab_get(struct order *o, uint64_t key, bool *fresh)
{
	for (size_t i = mix64(key) & o->ctab_mask;; i = (i + 1) & o->ctab_mask) {
		struct cent *e = &o->ctab[i];
		if (e->epoch != o->cepoch) {
			e->key = key;
			e->epoch = o->cepoch;
			*fresh = true;
			return e;
		}
		if (e->key == key) {
			*fresh = false;
			return e;
		}
	}
}

/* Index the cycle cyc[0..clen): each key's positions as a circular chain
 * (ctab first/last, nxt), anchored at its last position. */
static void index_cycle(struct order *o)
{
	size_t lag = o->clen;
	if (++o->cepoch == 0) {
		memset(o->ctab, 0, (o->ctab_mask + 1) * sizeof(*o->ctab));
		o->cepoch = 1;
	}
	for (size_t p = 0; p < lag; p++) {
		bool fresh;
		struct cent *e = ctab_get(o, o->cyc[p], &fresh);
		if (fresh)
			e->first = (uint32_t)p;
		else
			o->nxt[e->last] = (uint32_t)p;
		e->last = (uint32_t)p;
		/* Its last access in the recording (which ends now). */
		e->last_t = o->t - (uint32_t)(lag - 1 - p);
		e->last_q = (uint32_t)p;
	}
	/* Close each key's chain: its last position links to its first. */
	for (size_t p = 0; p < lag; p++) {
		struct cent *e = order_ctab_find(o, o->cyc[p]);
		if (e->last == p)
			o->nxt[p] = e->first;
	}
}

static int64_t cdiff(const struct order *o, size_t a, size_t b);

/* Whether the cycle has KEY as an access of kind WRITE other than at SKIP,
 * within cyclic distance NEAR of SKIP (SIZE_MAX: anywhere). */
static bool cycle_has(const struct order *o, uint64_t key, bool write, size_t skip, size_t near)
{
	const struct cent *e = order_ctab_find(o, key);
	if (!e)
		return false;
	uint32_t p = e->first;
	do {
		if (p != skip && (o->cycw[p] != 0) == write &&
		    (near == SIZE_MAX || (size_t)llabs(cdiff(o, skip, p)) <= near))
			return true;
		p = o->nxt[p];
	} while (p != e->first);
	return false;
}

/* Take position P out of its key's chain (the key has others). */
static void chain_remove(struct order *o, size_t p)
{
	struct cent *e = order_ctab_find(o, o->cyc[p]);
	uint32_t q = e->last;
	while (o->nxt[q] != p)
		q = o->nxt[q];
	o->nxt[q] = o->nxt[p];
	if (e->first == p)
		e->first = o->nxt[p];
	if (e->last == p)
		e->last = q;
	if (e->last_q == p)
		e->last_q = UINT32_MAX;
}

/* Put KEY at position P of its chain, kept in position order (next_of
 * walks a chain in cycle order). LAST_T: when it was last accessed. */
static void chain_insert(struct order *o, uint64_t key, uint32_t p, uint32_t last_t)
{
	bool fresh;
	struct cent *e = ctab_get(o, key, &fresh);
	o->cyc[p] = key;
	if (fresh) {
		e->first = e->last = p;
		o->nxt[p] = p;
		e->last_t = last_t;
		e->last_q = p;
		return;
	}
	if (p < e->first || p > e->last) {
		o->nxt[p] = e->first;
		o->nxt[e->last] = p;
		if (p < e->first)
			e->first = p;
		else
			e->last = p;
		return;
	}
	uint32_t q = e->first;
	while (o->nxt[q] < p && o->nxt[q] != e->first)
		q = o->nxt[q];
	o->nxt[p] = o->nxt[q];
	o->nxt[q] = p;
}

/* The last period of the recording is one step, cut at an arbitrary place.
 * Ranks drift against each other from step to step, so near the cut an
 * access may fall on either side of it: a block read just before the cut
 * (and next read after the cycle's end) is missing from the copy, while
 * another is there twice, once at each end. A missing read made a block
 * look dead after its write: the cache's first victim, and a needless miss
 * every step. So each
 * (key, kind) seen in the band just before the copy but absent from it
 * takes the place of a same-kind repeat straddling the cut. Position
 * errors stay within the band, which the matching tolerates. O(band). */
static size_t repair_cycle(struct order *o)
{
	/* order_jitter() <= lag / 4 keeps the two bands of the cut apart. */
	size_t lag = o->clen, w = (size_t)order_jitter(o, lag);
	/* A cycle learned early in the second step has less before it. */
	size_t from = o->len >= lag + w ? o->len - lag - w : 0;
	size_t dup = 0, lacking = 0; /* dup: next of the 2w band positions to look at */
	for (size_t i = from; i < o->len - lag; i++) {
		uint64_t key = o->rec[i];
		bool write = o->recw[i] != 0;
		if (cycle_has(o, key, write, SIZE_MAX, SIZE_MAX))
			continue;
		size_t p = 0;
		for (; dup < 2 * w; dup++) {
			p = dup < w ? dup : lag - 2 * w + dup;
			if (cycle_has(o, o->cyc[p], o->cycw[p] != 0, p, 2 * w))
				break;
		}
		if (dup == 2 * w) {
			lacking++;
			continue;
		}
		dup++;
		chain_remove(o, p);
		o->cycw[p] = write;
		chain_insert(o, key, (uint32_t)p, o->t - (uint32_t)(o->len - 1 - i));
		o->st.repaired++;
	}
	return lacking;
}

/* The last LAG recorded accesses become the cycle, repaired at the cut.
 * Returns how many of the band's accesses it still lacks. O(lag). */
static size_t copy_cycle(struct order *o, size_t lag)
{
	memcpy(o->cyc, o->rec + (o->len - lag), lag * sizeof(*o->cyc));
	memcpy(o->cycw, o->recw + (o->len - lag), lag);
	o->clen = lag;
	o->cur = 0;
	index_cycle(o);
	return repair_cycle(o);
}

/* Learn a cycle of about LAG accesses; returns the length learned. A
 * candidate needs at least lag accesses to get here. The median offset
 * can come out short of the period: when a step's accesses came a few
 * places earlier than the step before (a pipelined reader and writer
 * taking turns differently; all of them, as when one access moved from a
 * step's head to its tail), more than half the matches sit at -1 or -2.
 * The copy then lacks the period's first accesses for good: blocks read
 * every step that the cycle never reads, the cache's first victims and a
 * miss each step. Those accesses are the ones before the copy that it
 * lacks once the repeats at the cut are used up; the copy grows by that
 * many. An access lacked by jitter alone becomes a repeat, which the
 * matching tolerates. */
size_t order_become_learned(struct order *o, size_t lag)
{
	size_t lacking = copy_cycle(o, lag);
	if (lacking && lag + lacking <= o->len && lag + lacking <= o->max_cycle) {
		lag += lacking;
		copy_cycle(o, lag);
	}
	o->learned = true;
	o->hpos = o->hfill = o->hhits = o->hclose = 0;
	o->miss_run = 0;
	o->st.learns++;
	return lag;
}

void order_unlearn(struct order *o)
{
	o->learned = false;
	o->clen = 0;
	o->cur = 0;
	for (int c = 0; c < ORDER_NCAND; c++)
		o->cand[c].probation = false;
}

static void health_push(struct order *o, bool hit, bool close)
{
	if (o->hfill == o->hsize) {
		o->hhits -= o->hbits[o->hpos] & 1;
		o->hclose -= o->hbits[o->hpos] >> 1;
	} else {
		o->hfill++;
	}
	o->hbits[o->hpos] = (uint8_t)(hit | (close && hit) << 1);
	o->hhits += hit;
	o->hclose += close && hit;
	o->hpos = (o->hpos + 1) % o->hsize;
}

/* Signed circular distance from a to b, in (-clen/2, clen/2]. */
static int64_t cdiff(const struct order *o, size_t a, size_t b)
{
	int64_t d = (int64_t)((b + o->clen - a) % o->clen);
	if (d > (int64_t)o->clen / 2)
		d -= (int64_t)o->clen;
	return d;
}

/* The occurrence of e nearest cycle position target, and its distance.
 * Only occurrences of the access's own kind (read or write) are candidates
 * when the key has one: a block read, then written a sub-group later, has
 * two occurrences, and with several ranks drifting a write can land nearer
 * the read's. Matched to the read, its next use would be "the write"
 * again, and a block to be read next step looked dead (overwritten before
 * it is read): the cache's first victim. */
static uint32_t nearest(const struct order *o, const struct cent *e, size_t target, bool write,
			int64_t *dist)
{
	uint32_t bestp = UINT32_MAX, p;
	int64_t best = 0;
	for (int any = 0; any < 2 && bestp == UINT32_MAX; any++) {
		p = e->first;
		do {
			if (any || (o->cycw[p] != 0) == write) {
				int64_t d = cdiff(o, target, p);
				if (bestp == UINT32_MAX || llabs(d) < llabs(best)) {
					best = d;
					bestp = p;
				}
			}
			p = o->nxt[p];
		} while (p != e->first);
	}
	*dist = best;
	return bestp;
}

/* Follow the position. Returns false when the pattern broke. */
bool order_track(struct order *o, uint64_t key, bool write)
{
	struct cent *e = order_ctab_find(o, key);
	bool hit = false;
	int64_t w = order_jitter(o, o->clen);
	int64_t err = w + 1; /* how far from where the cycle has it */
	if (e) {
		int64_t dcur;
		uint32_t q = nearest(o, e, o->cur, write, &dcur);
		hit = llabs(dcur) <= w;
		err = llabs(dcur);
		uint64_t elapsed = (uint32_t)(o->t - e->last_t);
		if (e->last_q != UINT32_MAX && elapsed <= o->clen + (uint64_t)w) {
			/* Ranks drift apart, so the global position can be far
			 * from a lagging rank; the key's own last access says
			 * where in the cycle this one should be. */
			int64_t dself;
			uint32_t qs = nearest(o, e, (e->last_q + elapsed) % o->clen, write, &dself);
			if (llabs(dself) <= w) {
				hit = true;
				q = qs;
				if (llabs(dself) < err)
					err = llabs(dself);
			}
		}
		/* The occurrence this access was: anchors next_of. */
		e->last_q = q;
		e->last_t = o->t;
		int64_t d = cdiff(o, o->cur, q);
		if (llabs(d) <= w) {
			/* Late accesses (jitter) do not move the position back. */
			if (d >= 0)
				o->cur = (q + 1) % o->clen;
		} else if (!hit && o->miss_run >= 1) {
			/* Second miss in a row on a key of the cycle: we lost
			 * our place; continue after this occurrence. */
			o->cur = (q + 1) % o->clen;
		}
	}
	o->miss_run = hit ? 0 : o->miss_run + 1;
	o->st.learned_accesses++;
	if (hit)
		o->st.predicted_hits++;
	health_push(o, hit, err <= w / 4);
	if (o->hfill == o->hsize && (double)o->hhits < o->threshold * o->hsize)
		return false;
	return true;
}
