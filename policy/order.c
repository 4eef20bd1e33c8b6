/*
 * policy/order.c — the access-order learner (see order.h for the model).
 *
 * Memory layout, all allocated by order_create:
 *   rec/recw  the recording of deduplicated accesses (key, write flag). It
 *             never stops, even once learned: candidate periods keep being
 *             checked, so a false lock (a sub-period that held for a while,
 *             e.g. "read a sub-group, write it") is caught by its candidate
 *             failing later, and a new pattern is found without starting over.
 *   tab       open-addressing hash key -> the key's last ORDER_KPOS positions
 *             in rec. An entry is live only if its epoch matches, so emptying
 *             the table is one increment (no O(size) clear per slide).
 *   cyc/cycw  the learned cycle (a copy of the last period of the recording).
 *   ctab      hash key -> first and last position in cyc, last access time.
 *   nxt       the next position of the same key in the cycle (circular), so
 *             all of a key's positions are a short chain.
 *   hbits     hit (bit 0) / miss, and close (bit 1: within a quarter of the
 *             tolerance), of the last health_window accesses while
 *             learned: the pattern's health.
 * Not thread-safe: the cache's lock guards every field.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/order.h"
#include "policy/mix.h"

#define ORDER_KPOS  4 /* positions remembered per key while learning */
#define ORDER_NCAND 8 /* candidate periods tried at once */
/* Offsets a candidate's histogram re-centres over. A candidate's lag is one
 * key's recurrence distance, off the real period by as much as the ranks
 * drifted in between: up to the window, 700 accesses with 4 ranks on the
 * bench. Over +-128, one run in 12 learned a cycle 190 accesses too long; its
 * probation check then failed (590 misses against a budget of 589), the
 * right cycle was dropped and relearned a step later at twice its length. */
#define ORDER_HIST_W	     1024
#define ORDER_DEFAULT_WINDOW 128
/* Coarse bins, each side, for the offsets beyond +-ORDER_HIST_W that the
 * jitter tolerance still lets match (up to a quarter of the lag). A lag
 * off by more than the fine histogram spans matched every access there,
 * and the median was lost: a step read forwards then backwards (a cycle of
 * two steps, 140000 accesses) was learned as a cycle of 126584, a period
 * whose +-12.5% reached the real one, and kept for good. */
#define ORDER_FAR 32

struct ent {
	uint64_t key;
	uint32_t epoch; /* 0 never matches: empty */
	uint32_t npos;	/* learning: positions pushed so far (ring index) */
	uint32_t pos[ORDER_KPOS];
};

struct cent {
	uint64_t key;
	uint32_t epoch;
	uint32_t first, last; /* positions in cyc */
	uint32_t last_t;      /* clock of the key's last access */
	uint32_t last_q;      /* the occurrence that access matched (UINT32_MAX: none) */
};

struct cand {
	bool used;
	bool probation; /* the current cycle came from it: still being checked */
	uint32_t lag;	/* candidate period */
	/* How many accesses had an occurrence at each offset from exactly
	 * lag back: the mode is the real period (every access of a periodic
	 * stream has an occurrence one period back; other offsets only
	 * catch keys that occur twice per cycle). */
	uint32_t hist[2 * ORDER_HIST_W + 1];
	/* The offsets beyond the fine histogram, before and after it, in
	 * ORDER_FAR equal bins out to the jitter tolerance. */
	uint32_t far_lo[ORDER_FAR], far_hi[ORDER_FAR];
	uint32_t start;	  /* rec position of its first check (0 once slid past) */
	uint32_t checked; /* accesses compared so far */
	uint32_t miss;	  /* of those, not found lag back (+-window) */
	uint32_t close;	  /* of those, found within a quarter of the window */
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

	size_t min_verify;

	bool learned;
	size_t clen, cur; /* cycle length; position of the next expected access */
	uint64_t *cyc;
	uint8_t *cycw;
	struct cent *ctab;
	size_t ctab_mask;
	uint32_t cepoch;
	uint32_t *nxt;
	uint8_t *hbits;
	unsigned hpos, hfill, hhits, hclose;
	unsigned miss_run;
	uint32_t t; /* deduplicated access clock (wraps; only differences matter) */

	bool have_last;
	uint64_t last_key;
	struct order_stats st;
};

/* Caller guarantees tab_used < tab_limit (< table size), so a slot exists. */
static struct ent *tab_get(struct order *o, uint64_t key, bool *fresh)
{
	for (size_t i = mix64(key) & o->tab_mask;; i = (i + 1) & o->tab_mask) {
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

static int64_t jitter(const struct order *o, size_t lag);

/* The coarse bin of an offset of magnitude AD beyond the fine histogram,
 * out to W, and the middle of bin J. */
static unsigned far_bin(int64_t ad, int64_t w)
{
	unsigned j = (unsigned)((ad - ORDER_HIST_W - 1) * ORDER_FAR / (w - ORDER_HIST_W));
	return j < ORDER_FAR ? j : ORDER_FAR - 1;
}

static int64_t far_mid(unsigned j, int64_t w)
{
	return ORDER_HIST_W + 1 + ((int64_t)(2 * j + 1) * (w - ORDER_HIST_W)) / (2 * ORDER_FAR);
}

/* Whether e occurred within +-w of position target (may be negative);
 * each such occurrence is counted in k's histograms at its offset. */
static bool near(const struct order *o, const struct ent *e, int64_t target, int64_t w, bool write,
		 struct cand *k)
{
	unsigned n = e->npos < ORDER_KPOS ? e->npos : ORDER_KPOS;
	bool found = false, close = false;
	for (unsigned j = 0; j < n; j++) {
		if (o->recw[e->pos[j]] != write)
			continue;
		int64_t d = (int64_t)e->pos[j] - target;
		if (d >= -w / 4 && d <= w / 4)
			close = true;
		if (d >= -w && d <= w) {
			if (d >= -ORDER_HIST_W && d <= ORDER_HIST_W)
				k->hist[d + ORDER_HIST_W]++;
			else if (d < 0)
				k->far_lo[far_bin(-d, w)]++;
			else
				k->far_hi[far_bin(d, w)]++;
			found = true;
		}
	}
	k->close += close;
	return found;
}

/* The median offset of k's matches: exact when it lies in the fine
 * histogram (*far false), else the middle of its coarse bin. */
static int64_t median_offset(const struct order *o, const struct cand *k, bool *far)
{
	int64_t w = jitter(o, k->lag);
	uint64_t total = 0, run = 0;
	for (int64_t d = 0; d <= 2 * ORDER_HIST_W; d++)
		total += k->hist[d];
	for (unsigned j = 0; j < ORDER_FAR; j++)
		total += k->far_lo[j] + k->far_hi[j];
	*far = false;
	if (!total)
		return 0;
	for (unsigned j = ORDER_FAR; j-- > 0;)
		if (2 * (run += k->far_lo[j]) >= total) {
			*far = true;
			return -far_mid(j, w);
		}
	for (int64_t d = 0; d <= 2 * ORDER_HIST_W; d++)
		if (2 * (run += k->hist[d]) >= total)
			return d - ORDER_HIST_W;
	*far = true;
	for (unsigned j = 0; j < ORDER_FAR; j++)
		if (2 * (run += k->far_hi[j]) >= total)
			return far_mid(j, w);
	return far_mid(ORDER_FAR - 1, w);
}

/* How far an access of a cycle of length LAG may stray from its place one
 * cycle earlier: at least `window`, and an eighth of the cycle. A pipelined
 * rank reads sub-group i+1 while it writes i-1, and how the two streams
 * take turns depends on which of them the cache serves from RAM, so a write
 * can move by up to a sub-group's reads from one step to the next: half a
 * sub-group's share of the cycle, a sixteenth of it with 8 sub-groups, an
 * eighth with 4. The bench's 5600-access cycle drifts by 140-350 places,
 * which pushed a fixed window of 128 below the match threshold in some
 * steps and dropped a correct cycle. At most a quarter of the cycle. */
static int64_t jitter(const struct order *o, size_t lag)
{
	int64_t w = o->window;
	if (w < (int64_t)(lag / 8))
		w = (int64_t)(lag / 8);
	if (w > (int64_t)(lag / 4))
		w = (int64_t)(lag / 4);
	return w;
}

/* Cycle table: keys of the learned cycle. Same open addressing and epoch
 * trick as tab; at most max_cycle keys in 2 * max_cycle slots. */
static struct cent *ctab_find(const struct order *o, uint64_t key)
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

/* Drop the oldest part of the recording, keeping enough for the longest
 * candidate period plus the window, and re-index the rest. O(max_cycle),
 * done at most once per max_cycle/4 accesses. */
static void slide(struct order *o)
{
	size_t keep = o->max_cycle + (size_t)jitter(o, o->max_cycle);
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
	/* Candidates live on: they only look lag + window back, which the
	 * kept part still holds. */
	for (int c = 0; c < ORDER_NCAND; c++) {
		struct cand *k = &o->cand[c];
		k->start = k->start >= shift ? k->start - (uint32_t)shift : 0;
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
		struct cent *e = ctab_find(o, o->cyc[p]);
		if (e->last == p)
			o->nxt[p] = e->first;
	}
}

static int64_t cdiff(const struct order *o, size_t a, size_t b);

/* Whether the cycle has KEY as an access of kind WRITE other than at SKIP,
 * within cyclic distance NEAR of SKIP (SIZE_MAX: anywhere). */
static bool cycle_has(const struct order *o, uint64_t key, bool write, size_t skip, size_t near)
{
	const struct cent *e = ctab_find(o, key);
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
	struct cent *e = ctab_find(o, o->cyc[p]);
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
 * every step (4 drifting ranks on the bench: 10% of the blocks). So each
 * (key, kind) seen in the band just before the copy but absent from it
 * takes the place of a same-kind repeat straddling the cut. Position
 * errors stay within the band, which the matching tolerates. O(band). */
static size_t repair_cycle(struct order *o)
{
	/* jitter() <= lag / 4 keeps the two bands of the cut apart. */
	size_t lag = o->clen, w = (size_t)jitter(o, lag);
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
 * miss each step (t_keepplan under ASan learned 1023 of 1024 and ranked
 * 383 of 384 blocks). Those accesses are the ones before the copy that it
 * lacks once the repeats at the cut are used up; the copy grows by that
 * many. An access lacked by jitter alone becomes a repeat, which the
 * matching tolerates. */
static size_t become_learned(struct order *o, size_t lag)
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

static void unlearn(struct order *o)
{
	o->learned = false;
	o->clen = 0;
	o->cur = 0;
	for (int c = 0; c < ORDER_NCAND; c++)
		o->cand[c].probation = false;
}

static bool cycle_on_probation(const struct order *o)
{
	for (int c = 0; c < ORDER_NCAND; c++)
		if (o->cand[c].used && o->cand[c].probation)
			return true;
	return false;
}

/* Whether candidate K, its check done, matches the accesses clearly better
 * than the learned cycle has lately, by half the threshold's margin:
 * - a period near the cycle's own that holds where the cycle misses: a
 *   part of the step changed (a file deleted and created again, under a
 *   new inode) by less than the health threshold lets through, and the
 *   stale cycle would stay for good, the new file's blocks never
 *   predicted;
 * - a period near the cycle's, or shorter, whose matches are close
 *   (within a quarter of the tolerance) where the cycle's are not: the
 *   order changed to one the cycle still matches within its tolerance,
 *   and the cycle kept half its predictions off for good (alternating
 *   sub-groups with two kept, 445 accesses in two steps, to ascending,
 *   410 a step; or without, to a period of half the cycle's).
 * Ranks drifting against each other spread the candidate's matches as
 * they do the cycle's, and do not make it flap. Never a longer period: a
 * multiple of the cycle holds as well as the cycle does. */
static bool beats_cycle(const struct order *o, const struct cand *k)
{
	if (o->hfill < o->hsize || !k->checked)
		return false;
	int64_t d = (int64_t)k->lag - (int64_t)o->clen, w = jitter(o, o->clen);
	double margin = (1.0 - o->threshold) / 2;
	double kclose = (double)k->close / (double)k->checked;
	bool closer = kclose >= o->threshold + margin &&
		      kclose > (double)o->hclose / (double)o->hfill + margin;
	if (d < -w || d > w)
		return d < -w && closer;
	double rate = 1.0 - (double)k->miss / (double)k->checked;
	return rate > (double)o->hhits / (double)o->hfill + margin || closer;
}

/* Record one access and run the candidate periods over it. */
static void record(struct order *o, uint64_t key, bool write)
{
	if (o->len >= o->rec_cap || o->tab_used + 1 >= o->tab_limit)
		slide(o);
	size_t i = o->len;
	bool fresh;
	struct ent *e = tab_get(o, key, &fresh);
	int confirmed = -1;

	for (int c = 0; c < ORDER_NCAND; c++) {
		struct cand *k = &o->cand[c];
		if (!k->used)
			continue;
		k->checked++;
		if (!near(o, e, (int64_t)i - k->lag, jitter(o, k->lag), write, k))
			k->miss++;
		size_t span = k->lag > o->min_verify ? k->lag : o->min_verify;
		if ((double)k->miss > (1.0 - o->threshold) * (double)span) {
			/* The period does not hold. If the cycle came from it,
			 * that was a false lock: drop the cycle. */
			if (k->probation && o->learned) {
				unlearn(o);
				o->st.false_locks++;
			}
			k->used = false;
		} else if (k->probation) {
			/* Held over two spans: trusted; health takes over. */
			if (k->checked >= 2 * span)
				k->used = false;
		} else if (k->checked >= span) {
			/* A cycle on probation may still turn out false: keep
			 * the candidate going, ready to take over. A trusted
			 * cycle stands unless the candidate clearly beats it;
			 * health decides when it breaks. */
			if (o->learned) {
				if (beats_cycle(o, k)) {
					if (confirmed < 0 || k->lag < o->cand[confirmed].lag)
						confirmed = c;
				} else if (!cycle_on_probation(o)) {
					k->used = false;
				}
			} else if (confirmed < 0 || k->lag < o->cand[confirmed].lag) {
				confirmed = c; /* the shortest period that holds */
			}
		}
	}

	/* Each earlier occurrence of the key proposes a period: the latest
	 * alone is not enough, since a key read then written in one step
	 * recurs first at (period - read-to-write distance). */
	unsigned nprev = e->npos < ORDER_KPOS ? e->npos : ORDER_KPOS;
	for (unsigned j = 0; j < nprev; j++) {
		if (o->recw[e->pos[j]] != write)
			continue;
		size_t lag = i - e->pos[j];
		if (lag < o->min_cycle || lag > o->max_cycle)
			continue;
		bool dup = false;
		int slot = -1;
		for (int c = 0; c < ORDER_NCAND; c++) {
			struct cand *k = &o->cand[c];
			if (!k->used) {
				if (slot < 0)
					slot = c;
				continue;
			}
			/* Close lags are one hypothesis: the offset histogram
			 * finds the exact period later. */
			size_t w = (size_t)jitter(o, k->lag) / 4;
			if (lag + w >= k->lag && lag <= k->lag + w)
				dup = true;
		}
		if (dup || slot < 0)
			continue;
		/* This access is the candidate's first match. */
		o->cand[slot] = (struct cand){.used = true,
					      .lag = (uint32_t)lag,
					      .start = (uint32_t)i,
					      .checked = 1,
					      .close = 1};
	}

	o->rec[i] = key;
	o->recw[i] = write;
	push_pos(e, (uint32_t)i);
	o->len++;
	if (confirmed >= 0) {
		/* The lag that spawned the candidate came from one key's previous
		 * occurrence, which may be another occurrence in the same cycle
		 * or a jittered one: re-centre it on the median match, which is
		 * the real period. Not the most common offset: with 4 drifting
		 * ranks the offsets spread over hundreds of places. On 12
		 * recorded 4-rank bench runs the mode gave cycles of 5636-5847
		 * accesses, the median 5636-5793 with 197 accesses in the copy
		 * twice on average against 247; in test_cut_repeat the mode
		 * missed the period by 17 of 1024. A copy too short lacks reads
		 * (blocks that look dead), one too long has accesses twice. */
		struct cand *k = &o->cand[confirmed];
		bool far;
		int64_t lag = (int64_t)k->lag - median_offset(o, k, &far);
		if (far) {
			/* Off by more than the fine histogram spans: check the
			 * coarse estimate afresh, where the fine one finds the
			 * exact period; a period longer than the learner holds
			 * is not learned (a cut of it would be a wrong cycle,
			 * kept for good). */
			if (lag < (int64_t)o->min_cycle || lag > (int64_t)o->max_cycle)
				k->used = false;
			else
				*k = (struct cand){.used = true,
						   .lag = (uint32_t)lag,
						   .start = (uint32_t)i,
						   .checked = 0};
			return;
		}
		if (lag < (int64_t)o->min_cycle)
			lag = (int64_t)o->min_cycle;
		if (lag > (int64_t)o->max_cycle)
			lag = (int64_t)o->max_cycle;
		if (lag > (int64_t)o->len)
			lag = (int64_t)o->len;
		k->lag = (uint32_t)become_learned(o, (size_t)lag);
		k->probation = true;
		k->miss = 0;
		k->close = 0;
		k->checked = 0;
		memset(k->hist, 0, sizeof(k->hist));
		memset(k->far_lo, 0, sizeof(k->far_lo));
		memset(k->far_hi, 0, sizeof(k->far_hi));
	}
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

/* Follow the position. Returns false when the pattern broke. */
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
static bool track(struct order *o, uint64_t key, bool write)
{
	struct cent *e = ctab_find(o, key);
	bool hit = false;
	int64_t w = jitter(o, o->clen);
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

void order_access(struct order *o, uint64_t key, bool write)
{
	o->st.accesses++;
	if (o->have_last && o->last_key == key) {
		/* Another request on the same block: one access. A read among
		 * them means the data is needed. */
		if (o->len > 0 && !write)
			o->recw[o->len - 1] = 0;
		return;
	}
	o->have_last = true;
	o->last_key = key;
	o->st.deduped++;
	o->t++;
	if (o->learned && !track(o, key, write)) {
		o->st.relearns++;
		unlearn(o);
	}
	record(o, key, write);
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
		d.window = ORDER_DEFAULT_WINDOW;
	if (d.threshold == 0)
		d.threshold = 0.9;
	if (!d.health_window)
		d.health_window = 4096;
	if (!d.min_verify)
		d.min_verify = 256;
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
	o->min_verify = d.min_verify;
	o->window = d.window;
	o->threshold = d.threshold;
	o->hsize = d.health_window;
	o->rec_cap = 2 * d.max_cycle + (size_t)jitter(o, d.max_cycle);
	size_t tsize = 1;
	while (tsize < 2 * d.max_cycle)
		tsize <<= 1;
	o->tab_mask = tsize - 1;
	o->ctab_mask = tsize - 1;
	/* Load <= 3/4 keeps probes short; slide() leaves at most
	 * max_cycle + jitter (<= 1.25 max_cycle < 3/4 tsize) keys. */
	o->tab_limit = tsize / 4 * 3;
	o->epoch = 1;
	o->cepoch = 1;
	o->rec = malloc(o->rec_cap * sizeof(*o->rec));
	o->recw = malloc(o->rec_cap);
	o->tab = calloc(tsize, sizeof(*o->tab));
	o->cyc = malloc(d.max_cycle * sizeof(*o->cyc));
	o->cycw = malloc(d.max_cycle);
	o->ctab = calloc(tsize, sizeof(*o->ctab));
	o->nxt = malloc(d.max_cycle * sizeof(*o->nxt));
	o->hbits = calloc(o->hsize, 1);
	if (!o->rec || !o->recw || !o->tab || !o->cyc || !o->cycw || !o->ctab || !o->nxt ||
	    !o->hbits) {
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
	free(o->cyc);
	free(o->cycw);
	free(o->ctab);
	free(o->nxt);
	free(o->hbits);
	free(o);
}

struct order_seed {
	struct order_params p;
	size_t len;
	uint64_t *rec;
	uint8_t *recw;
	bool have_last;
	uint64_t last_key;
	size_t clen; /* the cycle learned when the seed was taken, 0 none */
};

void order_seed_free(struct order_seed *s)
{
	if (!s)
		return;
	free(s->rec);
	free(s->recw);
	free(s);
}

int order_seed_take(const struct order *from, size_t max_cycle, struct order_seed **out)
{
	if (max_cycle < from->max_cycle)
		return -EINVAL;
	struct order_seed *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->p = (struct order_params){.max_cycle = max_cycle,
				     .min_cycle = from->min_cycle,
				     .window = from->window,
				     .threshold = from->threshold,
				     .health_window = from->hsize,
				     .min_verify = from->min_verify};
	/* malloc(0) may return NULL: at least one entry each. */
	s->rec = malloc((from->len ? from->len : 1) * sizeof(*s->rec));
	s->recw = malloc(from->len ? from->len : 1);
	if (!s->rec || !s->recw) {
		order_seed_free(s);
		return -ENOMEM;
	}
	s->len = from->len;
	memcpy(s->rec, from->rec, from->len * sizeof(*s->rec));
	memcpy(s->recw, from->recw, from->len);
	s->have_last = from->have_last;
	s->last_key = from->last_key;
	s->clen = from->learned ? from->clen : 0;
	*out = s;
	return 0;
}

int order_seed_grow(const struct order_seed *s, struct order **out)
{
	struct order *o;
	int rc = order_create(&s->p, &o);
	if (rc)
		return rc;
	/* The recording is deduplicated already: each entry one access. */
	for (size_t i = 0; i < s->len; i++)
		order_access(o, s->rec[i], s->recw[i] != 0);
	/* The recording kept may hold too little of a cycle learned for the
	 * new learner to find it again (one of three quarters of its size:
	 * a step of prediction lost to LRU per doubling). It ends where the
	 * old learner's did, so its last period is that cycle, at the same
	 * place in it. O(cycle), as the replay. */
	if (s->clen && !o->learned && s->clen <= o->len && s->clen <= o->max_cycle)
		become_learned(o, s->clen);
	/* A repeat of the last access that comes next collapses into it,
	 * as it would have in the learner the seed was taken from. */
	o->have_last = s->have_last;
	o->last_key = s->last_key;
	*out = o;
	return 0;
}

void order_grow_finish(struct order *o, const struct order *from)
{
	uint64_t learns = from->st.learns + (o->learned && !from->learned);
	o->st = from->st;
	o->st.learns = learns;
}

int order_grow(const struct order *from, size_t max_cycle, struct order **out)
{
	struct order_seed *s;
	int rc = order_seed_take(from, max_cycle, &s);
	if (rc)
		return rc;
	rc = order_seed_grow(s, out);
	order_seed_free(s);
	if (!rc)
		order_grow_finish(*out, from);
	return rc;
}

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
	return o->learned ? (size_t)jitter(o, o->clen) : o->window;
}

static uint64_t next_of(const struct order *o, uint64_t key, bool reads_only)
{
	if (!o || !o->learned)
		return UINT64_MAX;
	const struct cent *e = ctab_find(o, key);
	if (!e)
		return UINT64_MAX;
	uint64_t w = (uint64_t)jitter(o, o->clen);
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
			 * cut may be in the copy twice, once at each end (on the
			 * bench 72-215 keys of 5700 in 12 runs). A block written
			 * near the end then "is written again" just after the
			 * cut: its next access looked like an overwrite, so the
			 * cache took it for dead, wrote it back and evicted it
			 * first, and read it back a step later (4 ranks: 60-100
			 * such misses per step). A repeat of the same kind just
			 * across the cut is that copy, not a use. */
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
