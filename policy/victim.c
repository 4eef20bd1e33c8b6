/*
 * policy/victim.c — the eviction decisions (see victim.h). The cache
 * (fs/cache.c) walks its LRU lists and asks these for each candidate.
 */
#include "policy/victim.h"
#include "policy/keepplan.h"

bool victim_evictable(int refs, bool valid, bool dirty, bool flushing, bool pinned,
		      bool allow_pinned)
{
	return refs == 0 && valid && !dirty && !flushing && (allow_pinned || !pinned);
}

bool victim_evictable_unkept(int refs, bool valid, bool dirty, bool flushing, bool pinned,
			     bool allow_pinned, uint8_t plan)
{
	return victim_evictable(refs, valid, dirty, flushing, pinned, allow_pinned) &&
	       plan != KEEPPLAN_KEEP;
}

uint64_t victim_next_read(uint64_t next_read, uint64_t next_use, uint8_t plan, bool gap_mode,
			  uint64_t stale)
{
	uint64_t t = next_read;
	if (t == UINT64_MAX && gap_mode && plan == KEEPPLAN_KEEP)
		t = next_use;
	if (t != UINT64_MAX && t < stale)
		return UINT64_MAX - 1;
	return t;
}

bool victim_better(uint64_t when, uint64_t best_when, bool have_best)
{
	return !have_best || when > best_when;
}

bool victim_search_done(uint64_t best_when)
{
	return best_when == UINT64_MAX;
}

int victim_first_pass(bool have_tail_plan, bool gap_mode)
{
	return have_tail_plan && !gap_mode ? -1 : 0;
}

struct victim_pass victim_pass(int pass, bool have_tail_plan, bool gap_mode, uint64_t need_at)
{
	bool spare = have_tail_plan && !gap_mode;
	return (struct victim_pass){
	    .lists = 1u << (pass > 0),
	    .allow_pinned = pass == 1,
	    .unkept_only = pass < 0 || (spare && need_at != UINT64_MAX),
	};
}

enum victim_verdict victim_pass_verdict(bool found, uint64_t when, uint64_t need_at)
{
	if (found && (need_at == UINT64_MAX || when > need_at))
		return VICTIM_TAKE;
	if (found && need_at != UINT64_MAX)
		return VICTIM_NONE;
	return VICTIM_NEXT;
}

bool victim_lru_fallback(uint64_t need_at)
{
	return need_at == UINT64_MAX;
}

bool victim_write_back_frees(bool pinned, bool volatile_file, bool flushing)
{
	if (pinned || volatile_file)
		return false;
	return flushing;
}

bool victim_may_wait(bool patient, bool learned, bool reads_idle)
{
	return patient && learned && !reads_idle;
}

bool victim_farther(bool found, uint64_t when, uint64_t after)
{
	return found && when > after;
}

bool victim_unused_since_learn(uint64_t stamp, uint64_t learn_clock)
{
	return stamp <= learn_clock;
}

bool victim_kept_by_horizon(uint64_t keep_until, uint64_t horizon)
{
	return keep_until <= horizon;
}

bool victim_evicts_kept(bool learned, uint8_t plan, uint64_t next_read, uint64_t stale)
{
	return learned && plan == KEEPPLAN_KEEP && next_read != UINT64_MAX && next_read >= stale;
}
