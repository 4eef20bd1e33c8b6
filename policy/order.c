/*
 * policy/order.c — the access-order learner (see order.h for the model):
 * creating and destroying it, and taking one access: collapsing repeats,
 * following the learned cycle (order_cycle.c) and recording the access for
 * the period search (order_learn.c). The tolerance every part matches
 * with lives here too.
 */
#include <errno.h>
#include <stdlib.h>

#include "policy/order_int.h"

/* How far an access of a cycle of length LAG may stray from its place one
 * cycle earlier: at least `window`, and an eighth of the cycle. A pipelined
 * rank reads sub-group i+1 while it writes i-1, and how the two streams
 * take turns depends on which of them the cache serves from RAM, so a write
 * can move by up to a sub-group's reads from one step to the next: half a
 * sub-group's share of the cycle, a sixteenth of it with 8 sub-groups, an
 * eighth with 4. A long cycle drifts by more than a fixed window, which
 * pushed some steps below the match threshold and dropped a correct
 * cycle. At most a quarter of the cycle. */
int64_t order_jitter(const struct order *o, size_t lag)
{
	int64_t w = o->window;
	if (w < (int64_t)(lag / 8))
		w = (int64_t)(lag / 8);
	if (w > (int64_t)(lag / 4))
		w = (int64_t)(lag / 4);
	return w;
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
	if (o->learned && !order_track(o, key, write)) {
		o->st.relearns++;
		order_unlearn(o);
	}
	order_record(o, key, write);
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
	o->rec_cap = 2 * d.max_cycle + (size_t)order_jitter(o, d.max_cycle);
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