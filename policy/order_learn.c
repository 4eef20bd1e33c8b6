/*
 * policy/order_learn.c — the learner's recording and its search for the
 * period (order.h, "Learning"): every deduplicated access is recorded and
 * checked against the candidate periods; a candidate that holds is
 * re-centred on its median offset and becomes the cycle, and one that
 * clearly beats a learned cycle replaces it.
 *
 * Owns the recording (rec/recw), the key -> recent positions table (tab)
 * and the candidates; the cycle itself is order_cycle.c's.
 */
#include <string.h>

#include "policy/mix.h"
#include "policy/order_int.h"

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
	int64_t w = order_jitter(o, k->lag);
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

/* Drop the oldest part of the recording, keeping enough for the longest
 * candidate period plus the window, and re-index the rest. O(max_cycle),
 * done at most once per max_cycle/4 accesses. */
static void slide(struct order *o)
{
	size_t keep = o->max_cycle + (size_t)order_jitter(o, o->max_cycle);
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
 *   sub-groups with two kept, a cycle of two steps, to ascending, a
 *   step a little shorter than half of it; or without, to a period of
 *   half the cycle's).
 * Ranks drifting against each other spread the candidate's matches as
 * they do the cycle's, and do not make it flap. Never a longer period: a
 * multiple of the cycle holds as well as the cycle does. */
static bool beats_cycle(const struct order *o, const struct cand *k)
{
	if (o->hfill < o->hsize || !k->checked)
		return false;
	int64_t d = (int64_t)k->lag - (int64_t)o->clen, w = order_jitter(o, o->clen);
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
void order_record(struct order *o, uint64_t key, bool write)
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
		if (!near(o, e, (int64_t)i - k->lag, order_jitter(o, k->lag), write, k))
			k->miss++;
		size_t span = k->lag > o->min_verify ? k->lag : o->min_verify;
		if ((double)k->miss > (1.0 - o->threshold) * (double)span) {
			/* The period does not hold. If the cycle came from it,
			 * that was a false lock: drop the cycle. */
			if (k->probation && o->learned) {
				order_unlearn(o);
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
			size_t w = (size_t)order_jitter(o, k->lag) / 4;
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
		 * the real period. Not the most common offset: with drifting
		 * ranks the offsets spread over hundreds of places, and the
		 * mode missed the period more often and by more than the
		 * median. A copy too short lacks reads (blocks that look
		 * dead), one too long has accesses twice. */
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
		k->lag = (uint32_t)order_become_learned(o, (size_t)lag);
		k->probation = true;
		k->miss = 0;
		k->close = 0;
		k->checked = 0;
		memset(k->hist, 0, sizeof(k->hist));
		memset(k->far_lo, 0, sizeof(k->far_lo));
		memset(k->far_hi, 0, sizeof(k->far_hi));
	}
}
