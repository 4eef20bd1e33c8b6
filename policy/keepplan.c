/*
 * policy/keepplan.c — the keep plan (see keepplan.h for why).
 *
 * Building: one pass over the cycle gathers, per disk key, the positions of
 * its accesses (open-addressing hash). A key's worth is the disk I/Os that
 * keeping it saves per cycle: each read, and each write that a read
 * follows (a write that another write follows needs no write-back of its
 * own). Keys never read are left out: keeping them saves no read, and their
 * data must reach the disk anyway. Candidates are ranked by worth, then by
 * the position of their first read; the budget takes whole classes of
 * worth from the top, and the class it runs out in evenly, every
 * count/left-th key along the cycle (Bresenham's rule, so the kept keys
 * are spaced within one of each other, with no randomness to clump them).
 *
 * Lookup: a second, compact hash key -> verdict; the build's records are
 * freed before keepplan_build returns.
 */
#include "policy/keepplan.h"
#include "policy/mix.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct krec {
	uint64_t key;
	uint32_t nocc;
	uint32_t first_read; /* position of its first read in the cycle */
	uint32_t worth;	     /* disk I/Os per cycle kept off the disk if kept */
	uint32_t wmask;	     /* bit j: occurrence j wrote */
	uint32_t tail;	     /* the tail plan: accesses from its last write to the boundary */
	bool nondisk;
	bool over; /* accessed more than KEEPPLAN_MAX_OCCUR times */
	bool keep;
	uint32_t pos[KEEPPLAN_MAX_OCCUR];
};

struct kslot {
	uint64_t key;
	uint8_t verdict; /* 0: empty slot */
};

struct keepplan {
	struct kslot *tab;
	size_t mask;
	struct keepplan_stats st;
};

static size_t pow2_at_least(size_t n)
{
	size_t s = 16;
	while (s < n)
		s <<= 1;
	return s;
}

/* Each key's accesses: REC[0..*NREC), RTAB its hash (record index + 1). */
static void gather(const uint64_t *keys, const uint8_t *writes, size_t n, const uint8_t *ondisk,
		   struct krec *rec, size_t *nrec, uint32_t *rtab, size_t rmask, uint8_t *nondisk)
{
	for (size_t i = 0; i < n; i++) {
		size_t h = mix64(keys[i]) & rmask;
		while (rtab[h] && rec[rtab[h] - 1].key != keys[i])
			h = (h + 1) & rmask;
		struct krec *k;
		if (rtab[h]) {
			k = &rec[rtab[h] - 1];
		} else {
			k = &rec[(*nrec)++];
			memset(k, 0, sizeof(*k));
			k->key = keys[i];
			k->nondisk = ondisk && !ondisk[i];
			rtab[h] = (uint32_t)*nrec;
		}
		if (nondisk)
			nondisk[i] = k->nondisk;
		if (k->nondisk || k->over)
			continue;
		if (k->nocc == KEEPPLAN_MAX_OCCUR) {
			k->over = true;
			continue;
		}
		if (writes[i])
			k->wmask |= 1u << k->nocc;
		k->pos[k->nocc++] = (uint32_t)i;
	}
}

/* A key's worth (0: not a candidate) and its first read. */
static void assess(struct krec *k)
{
	k->worth = 0;
	if (k->nondisk || k->over)
		return;
	for (uint32_t j = 0; j < k->nocc; j++) {
		if (!(k->wmask >> j & 1)) {
			if (!k->worth)
				k->first_read = k->pos[j];
			k->worth++;
		}
	}
	if (!k->worth)
		return; /* never read */
	for (uint32_t j = 0; j < k->nocc; j++) {
		uint32_t nx = (j + 1) % k->nocc;
		if ((k->wmask >> j & 1) && !(k->wmask >> nx & 1))
			k->worth++; /* a write-back the next read makes needed */
	}
}

static int by_worth_then_read(const void *a, const void *b)
{
	const struct krec *x = *(struct krec *const *)a, *y = *(struct krec *const *)b;
	if (x->worth != y->worth)
		return x->worth > y->worth ? -1 : 1;
	return x->first_read < y->first_read ? -1 : x->first_read > y->first_read;
}

/* Mark the kept candidates among CAND[0..NC), ranked: whole classes of worth
 * while they fit, then every count/left-th of the class that does not. */
static void choose(struct krec **cand, size_t nc, size_t budget)
{
	size_t left = budget;
	for (size_t c = 0; c < nc && left;) {
		size_t e = c;
		while (e < nc && cand[e]->worth == cand[c]->worth)
			e++;
		size_t count = e - c;
		for (size_t i = 0; i < count; i++)
			cand[c + i]->keep =
			    count <= left || ((i + 1) * left) / count > (i * left) / count;
		left = count <= left ? left - count : 0;
		c = e;
	}
}

/* The first position of the longest run (cyclic) of accesses to keys that
 * are not disk keys: where the backward pass writes the gradients in RAM
 * and the disks have nothing to do. -ENOENT where no access or every
 * access is to a non-disk key. */
static int64_t boundary(const uint8_t *nondisk, size_t n)
{
	size_t best = 0, best_at = 0, run = 0;
	for (size_t j = 0; j < 2 * n && run < n; j++) {
		run = nondisk[j % n] ? run + 1 : 0;
		if (run > best) {
			best = run;
			best_at = (j + 1 - run) % n;
		}
	}
	return best && best < n ? (int64_t)best_at : -ENOENT;
}

static int by_tail(const void *a, const void *b)
{
	const struct krec *x = *(struct krec *const *)a, *y = *(struct krec *const *)b;
	return x->tail < y->tail ? -1 : x->tail > y->tail;
}

/* The tail plan: the BUDGET candidates written last before the boundary
 * AT are kept; every other one drops. */
static void choose_tail(struct krec **cand, size_t nc, size_t n, size_t at, size_t budget)
{
	for (size_t c = 0; c < nc; c++) {
		struct krec *k = cand[c];
		k->tail = UINT32_MAX;
		for (uint32_t j = 0; j < k->nocc; j++) {
			uint32_t d = (uint32_t)((at + 2 * n - 1 - k->pos[j]) % n);
			if ((k->wmask >> j & 1) && d < k->tail)
				k->tail = d;
		}
	}
	qsort(cand, nc, sizeof(*cand), by_tail);
	for (size_t c = 0; c < nc; c++)
		cand[c]->keep = c < budget && cand[c]->tail != UINT32_MAX;
}

static int emit(struct krec **cand, size_t nc, struct keepplan *kp)
{
	kp->mask = pow2_at_least(2 * nc) - 1;
	kp->tab = calloc(kp->mask + 1, sizeof(*kp->tab));
	if (!kp->tab)
		return -ENOMEM;
	for (size_t c = 0; c < nc; c++) {
		const struct krec *k = cand[c];
		size_t i = mix64(k->key) & kp->mask;
		while (kp->tab[i].verdict)
			i = (i + 1) & kp->mask;
		kp->tab[i].key = k->key;
		kp->tab[i].verdict = k->keep ? KEEPPLAN_KEEP : KEEPPLAN_DROP;
		kp->st.ios += k->worth;
		if (k->keep) {
			kp->st.kept++;
			kp->st.saved += k->worth;
		}
	}
	kp->st.candidates = nc;
	return 0;
}

static int build(const uint64_t *keys, const uint8_t *writes, size_t n, const uint8_t *ondisk,
		 size_t budget, bool tail, struct keepplan **out)
{
	*out = NULL;
	if (!n || n > UINT32_MAX / 2)
		return -EINVAL;
	size_t rmask = pow2_at_least(2 * n) - 1, nrec = 0, nc = 0;
	struct krec *rec = malloc(n * sizeof(*rec));
	uint32_t *rtab = calloc(rmask + 1, sizeof(*rtab));
	uint8_t *nondisk = tail ? malloc(n) : NULL;
	struct krec **cand = NULL;
	struct keepplan *kp = calloc(1, sizeof(*kp));
	int err = -ENOMEM;
	int64_t at = 0;
	if (!rec || !rtab || !kp || (tail && !nondisk))
		goto out;
	gather(keys, writes, n, ondisk, rec, &nrec, rtab, rmask, nondisk);
	free(rtab);
	rtab = NULL;
	if (tail && (at = boundary(nondisk, n)) < 0) {
		err = (int)at;
		goto out;
	}
	cand = malloc(nrec * sizeof(*cand) + 1);
	if (!cand)
		goto out;
	for (size_t r = 0; r < nrec; r++) {
		assess(&rec[r]);
		if (rec[r].worth)
			cand[nc++] = &rec[r];
	}
	if (tail) {
		choose_tail(cand, nc, n, (size_t)at, budget);
	} else {
		qsort(cand, nc, sizeof(*cand), by_worth_then_read);
		choose(cand, nc, budget);
	}
	err = emit(cand, nc, kp);
out:
	free(rec);
	free(rtab);
	free(nondisk);
	free(cand);
	if (err) {
		keepplan_free(kp);
		return err;
	}
	*out = kp;
	return 0;
}

int keepplan_build(const uint64_t *keys, const uint8_t *writes, size_t n, const uint8_t *ondisk,
		   size_t budget, struct keepplan **out)
{
	return build(keys, writes, n, ondisk, budget, false, out);
}

int keepplan_build_tail(const uint64_t *keys, const uint8_t *writes, size_t n,
			const uint8_t *ondisk, size_t budget, struct keepplan **out)
{
	return build(keys, writes, n, ondisk, budget, true, out);
}

void keepplan_free(struct keepplan *kp)
{
	if (!kp)
		return;
	free(kp->tab);
	free(kp);
}

enum keepplan_verdict keepplan_lookup(const struct keepplan *kp, uint64_t key)
{
	if (!kp)
		return KEEPPLAN_NONE;
	for (size_t i = mix64(key) & kp->mask;; i = (i + 1) & kp->mask) {
		if (!kp->tab[i].verdict)
			return KEEPPLAN_NONE;
		if (kp->tab[i].key == key)
			return (enum keepplan_verdict)kp->tab[i].verdict;
	}
}

void keepplan_get_stats(const struct keepplan *kp, struct keepplan_stats *out)
{
	if (!kp) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = kp->st;
}
