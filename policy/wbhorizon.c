/*
 * policy/wbhorizon.c — the write-back horizon, its reserve for write
 * bursts and the dirty limit (see wbhorizon.h).
 */
#include "policy/wbhorizon.h"
#include "policy/keepplan.h"

#include <stddef.h>

uint64_t wbhorizon_keep_until(uint64_t next_read, uint64_t next_use, uint8_t plan, bool dirty,
			      bool written_back, bool gap_mode, uint64_t stale)
{
	uint64_t t = dirty ? next_use : next_read;
	if (t != UINT64_MAX && t < stale)
		return UINT64_MAX - 1;
	if (plan == KEEPPLAN_DROP && (dirty || written_back) && next_use == next_read &&
	    t < UINT64_MAX - 1) {
		if (gap_mode && dirty)
			return UINT64_MAX - 1; /* out at once: the tail plan's RAM */
		t += WBHORIZON_PLAN_BEHIND;
	}
	return t;
}

uint64_t wbhorizon_select_kth(uint64_t *a, size_t n, size_t k)
{
	ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1;
	while (lo < hi) {
		uint64_t pivot = a[lo + (hi - lo) / 2];
		ptrdiff_t i = lo - 1, j = hi + 1;
		for (;;) {
			do
				i++;
			while (a[i] < pivot);
			do
				j--;
			while (a[j] > pivot);
			if (i >= j)
				break;
			uint64_t t = a[i];
			a[i] = a[j];
			a[j] = t;
		}
		if ((ptrdiff_t)k <= j)
			hi = j;
		else
			lo = j + 1;
	}
	return a[k];
}

uint64_t wbhorizon_keep_room(uint64_t cache_slots, uint64_t npinned, uint64_t queue,
			     unsigned threads)
{
	uint64_t room = cache_slots > npinned ? cache_slots - npinned : 0;
	uint64_t margin = queue + threads;
	return room > margin ? room - margin : 0;
}

uint64_t wbhorizon_keep_budget(uint64_t room, uint64_t reserve)
{
	return room > reserve ? room - reserve : 0;
}

uint64_t wbhorizon_plan_budget(uint64_t budget, unsigned threads, uint64_t request_blocks,
			       unsigned prefetch_max)
{
	uint64_t reserve = (uint64_t)threads * (request_blocks - 1) + prefetch_max;
	return budget > reserve ? budget - reserve : 0;
}

uint64_t wbhorizon_of(uint64_t *keep, size_t n, uint64_t budget)
{
	if (!budget)
		return 0;
	size_t k = (size_t)budget;
	if (n <= k)
		return UINT64_MAX;
	return wbhorizon_select_kth(keep, n, k - 1);
}

bool wbhorizon_due(uint64_t keep_until, uint64_t horizon)
{
	return keep_until >= UINT64_MAX - 1 || keep_until > horizon;
}

bool wbhorizon_dirty_over(uint64_t cache_slots, uint64_t npinned, uint64_t ndirty,
			  unsigned dirty_ratio)
{
	uint64_t room = cache_slots > npinned ? cache_slots - npinned : 0;
	uint64_t dirty = ndirty > npinned ? ndirty - npinned : 0;
	return dirty > room * dirty_ratio / 100;
}

unsigned wbhorizon_kept_limit(uint64_t request_blocks, unsigned max)
{
	return request_blocks > max ? max : (unsigned)request_blocks;
}

bool wbhorizon_memo_stale(const struct wbhorizon_memo *m, uint64_t now, uint64_t ncached)
{
	uint64_t every = ncached / 64;
	if (every < 16)
		every = 16;
	return !m->ok || now - m->at >= every;
}

void wbhorizon_memo_set(struct wbhorizon_memo *m, uint64_t horizon, uint64_t now)
{
	m->horizon = horizon;
	m->at = now;
	m->ok = true;
}

void wbhorizon_memo_invalidate(struct wbhorizon_memo *m)
{
	m->ok = false;
}

void wbreserve_stall(struct wbreserve *r)
{
	r->stalls++;
}

void wbreserve_restart(struct wbreserve *r, uint64_t now)
{
	r->stalls = 0;
	r->stall_clock = now;
}

bool wbreserve_adjust(struct wbreserve *r, uint64_t now, uint64_t cycle_len, uint64_t room,
		      size_t write_runs)
{
	uint64_t n = cycle_len;
	if (!n || now - r->stall_clock < n)
		return false;
	uint64_t reserve = r->reserve, cap = room / 2;
	uint64_t runs = write_runs ? write_runs : 1, per = r->stalls / runs;
	if (per >= WBRESERVE_STALL_GROW)
		reserve += per;
	else if (r->stalls < runs)
		reserve -= (reserve + 15) / 16;
	if (reserve > cap)
		reserve = cap;
	bool changed = reserve != r->reserve;
	r->reserve = reserve;
	r->stalls = 0;
	r->stall_clock = now;
	return changed;
}
