/*
 * policy/order_int.h — the access-order learner's insides, shared by its
 * files (order.h is its face): the learner's state and the functions one
 * of its files calls in another.
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
 * Not thread-safe: the caller's lock guards every field.
 */
#ifndef TIERFS_ORDER_INT_H
#define TIERFS_ORDER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/order.h"

#define ORDER_KPOS  4 /* positions remembered per key while learning */
#define ORDER_NCAND 8 /* candidate periods tried at once */
/* Offsets a candidate's histogram re-centres over. A candidate's lag is one
 * key's recurrence distance, off the real period by as much as the ranks
 * drifted in between: up to the tolerance, far more than the window on a
 * long cycle with several ranks. Over a narrower range a cycle was learned
 * too long now and then; its probation check then failed, the right cycle
 * was dropped and relearned a step later at twice its length. */
#define ORDER_HIST_W	     1024
#define ORDER_DEFAULT_WINDOW 128
/* Coarse bins, each side, for the offsets beyond +-ORDER_HIST_W that the
 * jitter tolerance still lets match (up to a quarter of the lag). A lag
 * off by more than the fine histogram spans matched every access there,
 * and the median was lost: a step read forwards then backwards (a cycle of
 * two steps) was learned as a cycle a tenth shorter, a period whose
 * tolerance reached the real one, and kept for good. */
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

/* order.c: how far an access of a cycle of length LAG may stray from its
 * place one cycle earlier. */
int64_t order_jitter(const struct order *o, size_t lag);

/* order_learn.c: record one access and run the candidate periods over it;
 * a period that holds becomes the cycle. */
void order_record(struct order *o, uint64_t key, bool write);

/* order_cycle.c: the learned cycle. */
/* The cycle table's entry for KEY; NULL when KEY is not in the cycle. */
struct cent *order_ctab_find(const struct order *o, uint64_t key);
/* Learn a cycle of about LAG accesses from the end of the recording;
 * returns the length learned. */
size_t order_become_learned(struct order *o, size_t lag);
/* Drop the learned cycle. */
void order_unlearn(struct order *o);
/* Follow the position with one access while learned. Returns false when
 * the pattern broke. */
bool order_track(struct order *o, uint64_t key, bool write);

#endif
