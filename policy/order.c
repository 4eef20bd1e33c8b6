/*
 * policy/order.c — the access-order learner (see order.h for the model).
 *
 * Memory layout, all allocated by order_create:
 *   rec/recw  the recording of deduplicated accesses (key, write flag) while
 *             learning; once learned, rec[0..clen) IS the cycle (the last
 *             period of the recording moved to the front), so learning and
 *             predicting share one buffer.
 *   tab       open-addressing hash key -> entry. An entry belongs to the
 *             current generation only if its epoch matches, so emptying the
 *             table is one increment (no O(size) clear per relearn). While
 *             learning an entry keeps the key's last ORDER_KPOS positions in
 *             rec; once learned, pos[0] = first position in the cycle,
 *             pos[1] = last one, pos[2] = when it was last accessed.
 *   nxt       learned only: the next position of the same key in the cycle
 *             (circular), so all of a key's positions are a short chain.
 *   hbits     learned only: hit (1) / miss (0) of the last health_window
 *             accesses, the pattern's health.
 * Not thread-safe: the cache's lock guards every field.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/order.h"

#define ORDER_KPOS  4 /* positions remembered per key while learning */
#define ORDER_NCAND 8 /* candidate periods tried at once */

struct ent {
	uint64_t key;
	uint32_t epoch; /* 0 never matches: empty */
	uint32_t npos;	/* learning: positions pushed so far (ring index) */
	uint32_t pos[ORDER_KPOS];
};

struct cand {
	bool used;
	uint32_t lag;	  /* candidate period */
	uint32_t start;	  /* rec position of its first check */
	uint32_t checked; /* accesses compared so far */
	uint32_t miss;	  /* of those, not found lag back (+-window) */
};

struct order {
	/* Parameters (fixed after create). */
	size_t max_cycle, min_cycle;
	unsigned window;
	double threshold;
	unsigned hsize;

	uint64_t *rec;
	uint8_t *recw; /* 1 = every request of that access wrote */
	size_t rec_cap, len;

	struct ent *tab;
	size_t tab_mask, tab_used, tab_limit;
	uint32_t epoch;

	struct cand cand[ORDER_NCAND];

	bool learned;
	size_t clen, cur; /* cycle length; position of the next expected access */
	uint32_t *nxt;
	uint8_t *hbits;
	unsigned hpos, hfill, hhits;
	unsigned miss_run;
	uint32_t t; /* deduplicated access clock (wraps; only differences matter) */

	bool have_last;
	uint64_t last_key;
	struct order_stats st;
};

static uint64_t mix(uint64_t x)
{
	/* splitmix64 finalizer: keys are ino<<24|block, highly structured. */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static struct ent *tab_find(const struct order *o, uint64_t key)
{
	for (size_t i = mix(key) & o->tab_mask;; i = (i + 1) & o->tab_mask) {
		struct ent *e = &o->tab[i];
		if (e->epoch != o->epoch)
			return NULL;
		if (e->key == key)
			return e;
	}
}

/* Caller guarantees tab_used < tab_limit (< table size), so a slot exists. */
static struct ent *tab_get(struct order *o, uint64_t key, bool *fresh)
{
	for (size_t i = mix(key) & o->tab_mask;; i = (i + 1) & o->tab_mask) {
		struct ent *e = &o->tab[i];
		if (e->epoch != o->epoch) {
			e->key = key;
			e->epoch = o->epoch;
			e->npos = 0;
			o->tab_used++;
			*fresh = true;
			return e;
		}
		if (e->key == key) {
			*fresh = false;
			return e;
		}
	}
}

static void tab_clear(struct order *o)
{
	if (++o->epoch == 0) {
		memset(o->tab, 0, (o->tab_mask + 1) * sizeof(*o->tab));
		o->epoch = 1;
	}
	o->tab_used = 0;
}

static void push_pos(struct ent *e, uint32_t p)
{
	e->pos[e->npos % ORDER_KPOS] = p;
	e->npos++;
}

/* Whether e occurred within +-w of position target (may be negative). */
static bool near(const struct ent *e, int64_t target, int64_t w)
{
	unsigned n = e->npos < ORDER_KPOS ? e->npos : ORDER_KPOS;
	for (unsigned j = 0; j < n; j++) {
		int64_t d = (int64_t)e->pos[j] - target;
		if (d >= -w && d <= w)
			return true;
	}
	return false;
}

static void restart_learning(struct order *o)
{
	o->learned = false;
	o->clen = 0;
	o->cur = 0;
	o->len = 0;
	memset(o->cand, 0, sizeof(o->cand));
	tab_clear(o);
}

/* Drop the oldest part of the recording, keeping enough for the longest
 * candidate period plus the window, and re-index the rest. O(max_cycle),
 * done at most once per max_cycle/4 accesses. */
static void slide(struct order *o)
{
	size_t keep = o->max_cycle + o->window;
	if (keep > o->len)
		keep = o->len;
	size_t shift = o->len - keep;
	memmove(o->rec, o->rec + shift, keep * sizeof(*o->rec));
	memmove(o->recw, o->recw + shift, keep);
	o->len = keep;
	tab_clear(o);
	for (size_t p = 0; p < keep; p++) {
		bool fresh;
		push_pos(tab_get(o, o->rec[p], &fresh), (uint32_t)p);
	}
	for (int c = 0; c < ORDER_NCAND; c++) {
		struct cand *k = &o->cand[c];
		if (!k->used)
			continue;
		if (k->start < shift)
			k->used = false;
		else
			k->start -= (uint32_t)shift;
	}
}

/* The last `lag` recorded accesses become the cycle. */
static void become_learned(struct order *o, size_t lag)
{
	memmove(o->rec, o->rec + (o->len - lag), lag * sizeof(*o->rec));
	memmove(o->recw, o->recw + (o->len - lag), lag);
	o->len = lag;
	o->clen = lag;
	o->cur = 0;
	tab_clear(o);
	for (size_t p = 0; p < lag; p++) {
		bool fresh;
		struct ent *e = tab_get(o, o->rec[p], &fresh);
		if (fresh)
			e->pos[0] = (uint32_t)p;
		else
			o->nxt[e->pos[1]] = (uint32_t)p;
		e->pos[1] = (uint32_t)p;
		/* The clock of its last access in the recording (which ends now). */
		e->pos[2] = o->t - (uint32_t)(lag - 1 - p);
	}
	/* Close each key's chain: its last position links to its first. */
	for (size_t p = 0; p < lag; p++) {
		struct ent *e = tab_find(o, o->rec[p]);
		if (e->pos[1] == p)
			o->nxt[p] = e->pos[0];
	}
	memset(o->cand, 0, sizeof(o->cand));
	o->learned = true;
	o->hpos = o->hfill = o->hhits = 0;
	o->miss_run = 0;
	o->st.learns++;
}

static void learn_access(struct order *o, uint64_t key, bool write)
{
	if (o->len >= o->rec_cap || o->tab_used + 1 >= o->tab_limit)
		slide(o);
	size_t i = o->len;
	bool fresh;
	struct ent *e = tab_get(o, key, &fresh);
	size_t confirmed = 0;

	for (int c = 0; c < ORDER_NCAND; c++) {
		struct cand *k = &o->cand[c];
		if (!k->used)
			continue;
		int64_t w = o->window < k->lag / 4 ? o->window : k->lag / 4;
		k->checked++;
		if (!near(e, (int64_t)i - k->lag, w))
			k->miss++;
		double allowed = (1.0 - o->threshold) * k->lag;
		if ((double)k->miss > allowed) {
			k->used = false;
		} else if (k->checked >= k->lag && (!confirmed || k->lag < confirmed)) {
			confirmed = k->lag; /* the shortest period that holds */
		}
	}

	if (!fresh && !confirmed) {
		uint32_t prev = e->pos[(e->npos - 1) % ORDER_KPOS];
		size_t lag = i - prev;
		bool dup = false;
		int slot = -1;
		for (int c = 0; c < ORDER_NCAND; c++) {
			struct cand *k = &o->cand[c];
			if (!k->used) {
				if (slot < 0)
					slot = c;
				continue;
			}
			size_t w = o->window < k->lag / 4 ? o->window : k->lag / 4;
			if (lag + w >= k->lag && lag <= k->lag + w)
				dup = true;
		}
		if (!dup && slot >= 0 && lag >= o->min_cycle && lag <= o->max_cycle) {
			/* This access is the candidate's first match. */
			o->cand[slot] = (struct cand){.used = true,
						      .lag = (uint32_t)lag,
						      .start = (uint32_t)i,
						      .checked = 1,
						      .miss = 0};
		}
	}

	o->rec[i] = key;
	o->recw[i] = write;
	push_pos(e, (uint32_t)i);
	o->len++;
	if (confirmed)
		become_learned(o, confirmed);
}

/* Signed circular distance from the current position to q, in
 * (-clen/2, clen/2]. */
static int64_t cdist(const struct order *o, size_t q)
{
	int64_t d = (int64_t)((q + o->clen - o->cur) % o->clen);
	if (d > (int64_t)o->clen / 2)
		d -= (int64_t)o->clen;
	return d;
}

static void health_push(struct order *o, bool hit)
{
	if (o->hfill == o->hsize) {
		o->hhits -= o->hbits[o->hpos];
	} else {
		o->hfill++;
	}
	o->hbits[o->hpos] = hit;
	o->hhits += hit;
	o->hpos = (o->hpos + 1) % o->hsize;
}

/* Returns false when the pattern broke (the caller relearns). */
static bool learned_access(struct order *o, uint64_t key)
{
	struct ent *e = tab_find(o, key);
	bool hit = false;
	int64_t w = o->window < o->clen / 4 ? o->window : o->clen / 4;
	if (e) {
		/* The key's occurrence nearest the current position. */
		int64_t best = 0;
		bool have = false;
		uint32_t p = e->pos[0];
		do {
			int64_t d = cdist(o, p);
			if (!have || llabs(d) < llabs(best)) {
				best = d;
				have = true;
			}
			p = o->nxt[p];
		} while (p != e->pos[0]);
		if (llabs(best) <= w) {
			hit = true;
			/* Late accesses (jitter) do not move the position back. */
			if (best >= 0)
				o->cur = (o->cur + (size_t)best + 1) % o->clen;
		} else if (o->miss_run >= 1) {
			/* Second miss in a row on a key of the cycle: we lost
			 * our place; continue after this occurrence. */
			o->cur = (o->cur + o->clen + (size_t)best + 1) % o->clen;
		}
		e->pos[2] = o->t;
	}
	o->miss_run = hit ? 0 : o->miss_run + 1;
	o->st.learned_accesses++;
	if (hit)
		o->st.predicted_hits++;
	health_push(o, hit);
	if (o->hfill == o->hsize && (double)o->hhits < o->threshold * o->hsize)
		return false;
	return true;
}

void order_access(struct order *o, uint64_t key, bool write)
{
	o->st.accesses++;
	if (o->have_last && o->last_key == key) {
		/* Another request on the same block: one access. A read among
		 * them means the data is needed. */
		if (!o->learned && o->len > 0 && !write)
			o->recw[o->len - 1] = 0;
		return;
	}
	o->have_last = true;
	o->last_key = key;
	o->st.deduped++;
	o->t++;
	if (o->learned) {
		if (learned_access(o, key))
			return;
		o->st.relearns++;
		restart_learning(o);
	}
	learn_access(o, key, write);
}

int order_create(const struct order_params *p, struct order **out)
{
	struct order_params d = {0};
	if (p)
		d = *p;
	if (!d.max_cycle)
		d.max_cycle = ORDER_DEFAULT_MAX_CYCLE;
	if (!d.min_cycle)
		d.min_cycle = 8;
	if (!d.window)
		d.window = 64;
	if (d.threshold == 0)
		d.threshold = 0.9;
	if (!d.health_window)
		d.health_window = 4096;
	if (d.max_cycle > (1u << 30) || d.min_cycle < 2 || d.min_cycle > d.max_cycle ||
	    d.threshold <= 0 || d.threshold > 1)
		return -EINVAL;
	if (d.window > d.max_cycle / 4)
		d.window = (unsigned)(d.max_cycle / 4);

	struct order *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->max_cycle = d.max_cycle;
	o->min_cycle = d.min_cycle;
	o->window = d.window;
	o->threshold = d.threshold;
	o->hsize = d.health_window;
	o->rec_cap = 2 * d.max_cycle + d.window;
	size_t tsize = 1;
	while (tsize < 2 * d.max_cycle)
		tsize <<= 1;
	o->tab_mask = tsize - 1;
	/* Load <= 3/4 keeps probes short; slide() leaves at most
	 * max_cycle + window (<= 1.25 max_cycle < 3/4 tsize) keys. */
	o->tab_limit = tsize / 4 * 3;
	o->epoch = 1;
	o->rec = malloc(o->rec_cap * sizeof(*o->rec));
	o->recw = malloc(o->rec_cap);
	o->tab = calloc(tsize, sizeof(*o->tab));
	o->nxt = malloc(d.max_cycle * sizeof(*o->nxt));
	o->hbits = calloc(o->hsize, 1);
	if (!o->rec || !o->recw || !o->tab || !o->nxt || !o->hbits) {
		order_destroy(o);
		return -ENOMEM;
	}
	*out = o;
	return 0;
}

void order_destroy(struct order *o)
{
	if (!o)
		return;
	free(o->rec);
	free(o->recw);
	free(o->tab);
	free(o->nxt);
	free(o->hbits);
	free(o);
}

bool order_learned(const struct order *o)
{
	return o->learned;
}

size_t order_cycle_len(const struct order *o)
{
	return o->learned ? o->clen : 0;
}

static uint64_t next_of(const struct order *o, uint64_t key, bool reads_only)
{
	if (!o->learned)
		return UINT64_MAX;
	const struct ent *e = tab_find(o, key);
	if (!e)
		return UINT64_MAX;
	uint64_t w = o->window < o->clen / 4 ? o->window : o->clen / 4;
	/* Not accessed within the last couple of windows: an occurrence just
	 * behind the position is still pending (its rank lags), not done. */
	bool recent = (uint32_t)(o->t - e->pos[2]) <= 2 * w + 1;
	uint64_t best = UINT64_MAX;
	uint32_t p = e->pos[0];
	do {
		if (!reads_only || !o->recw[p]) {
			uint64_t d = (p + o->clen - o->cur) % o->clen;
			if (!recent && d > 0 && d + w >= o->clen)
				d = 0;
			if (d < best)
				best = d;
		}
		p = o->nxt[p];
	} while (p != e->pos[0]);
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
		keys[j] = o->rec[(o->cur + j) % o->clen];
	return n;
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
