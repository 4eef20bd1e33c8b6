/*
 * policy/order_grow.c — a larger learner to take an old one's place
 * (order_grow), and the same in parts so that the long part runs with no
 * lock held while the old learner goes on (order_seed_take,
 * order_seed_grow, order_grow_finish): the new learner is fed the old
 * one's recording, so a cycle learned stays learned.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/order_int.h"

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
		order_become_learned(o, s->clen);
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
