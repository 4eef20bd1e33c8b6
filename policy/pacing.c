/*
 * policy/pacing.c — read-ahead pacing (see pacing.h).
 */
#include "policy/pacing.h"

#include <errno.h>

bool pacing_pays(struct pacing *p, uint64_t now, uint64_t used, uint64_t wasted, uint64_t cycle_len)
{
	if (now < p->pause_until)
		return false;
	uint64_t du = used - p->used0, dw = wasted - p->wasted0;
	if (du + dw < PACING_WINDOW)
		return true;
	p->used0 = used;
	p->wasted0 = wasted;
	if (dw <= du)
		return true;
	p->pause_until = now + cycle_len;
	return false;
}

void pacing_restart(struct pacing *p, uint64_t used, uint64_t wasted)
{
	p->pause_until = 0;
	p->used0 = used;
	p->wasted0 = wasted;
}

bool pacing_crowds(uint64_t ncached, uint64_t cache_slots, uint64_t nprefetched,
		   unsigned prefetch_max)
{
	return ncached >= cache_slots && nprefetched >= (prefetch_max + 1) / 2;
}

bool pacing_room(unsigned inflight, unsigned prefetch_max, bool idle, bool crowds)
{
	return inflight < prefetch_max && (idle || !crowds);
}

bool pacing_wanted(uint64_t when, uint64_t next_use, uint64_t at, unsigned depth)
{
	return !(when != next_use || when > at + depth);
}

bool pacing_skip(uint64_t need_at, uint64_t none_after)
{
	return need_at >= none_after;
}

uint64_t pacing_none_after(uint64_t none_after, int rc, uint64_t need_at)
{
	if (rc == -ENOSPC)
		return need_at;
	if (rc > 0)
		return UINT64_MAX;
	return none_after;
}
