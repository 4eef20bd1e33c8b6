/*
 * policy/gap.c — gap mode's decisions and the idle-stretch record (see
 * gap.h).
 */
#include "policy/gap.h"

uint64_t gapmode_idle_after(const struct gapmode *g)
{
	uint64_t t = g->short_ns + g->short_ns / 4;
	return t > GAPMODE_IDLE_NS ? t : GAPMODE_IDLE_NS;
}

int gapmode_idle_known(const struct gapmode *g, bool learned, bool have_tail_plan)
{
	if (!learned || !have_tail_plan || !g->demand_ns)
		return 0;
	if (g->from_ns)
		return 1; /* worked until the next request: the work keeps the tiers busy */
	return -1;
}

bool gapmode_quiet_long(const struct gapmode *g, uint64_t now, uint64_t quiet)
{
	uint64_t after = gapmode_idle_after(g), since = now - g->demand_ns;
	return !(since < after || quiet < after);
}

void gapmode_work_begins(struct gapmode *g, uint64_t now, uint64_t quiet)
{
	uint64_t since = now - g->demand_ns;
	g->from_ns = now - (quiet < since ? quiet : since);
}

bool gapmode_idle_done(bool dirty_left, bool flushing_left, unsigned prefetch_inflight)
{
	return !dirty_left && !flushing_left && !prefetch_inflight;
}

uint64_t gapmode_work_ns(double read_rate, double write_rate, uint64_t plan_budget, uint32_t bs)
{
	if (read_rate <= 0 || write_rate <= 0)
		return 0;
	double bytes = (double)plan_budget * bs;
	return (uint64_t)(bytes / read_rate + bytes / write_rate);
}

bool gapmode_fits(uint64_t len, uint64_t need)
{
	return len >= need + need / 4;
}

unsigned gapmode_stretch_ended(struct gapmode *g, uint64_t now, uint64_t *quiet, uint64_t *from)
{
	if (!g->demand_ns)
		return 0;
	unsigned ev = now - g->demand_ns >= GAPMODE_IDLE_NS ? GAPMODE_STRETCH : 0;
	if (!g->from_ns)
		return ev; /* not worked */
	*quiet = now - g->from_ns;
	*from = g->from_ns;
	g->from_ns = 0;
	return ev | GAPMODE_WORKED;
}

bool gapmode_judge(struct gapmode *g, uint64_t clock, uint64_t quiet, uint64_t from, bool done,
		   bool fits, uint64_t commit_began, uint64_t commit_ended, bool gap_auto)
{
	if (done) {
		/* Worth working; gap mode only if its own work fits too. */
		g->ok_clock = fits ? clock + 1 : 0;
		return false;
	}
	/* A metadata commit in the stretch held the tiers: the stretch says
	 * nothing of whether the gaps hold the work. */
	bool commit_in = commit_began > commit_ended || commit_ended > from;
	/* Gap mode that came on in this stretch had only what was left of it
	 * for its own work, after the keep plan's: the stretch says nothing
	 * of whether a whole one holds that work either. */
	bool came_on = g->on && g->on_ns > from;
	if (commit_in || came_on) {
		/* Unjudged: gap mode stays as it was. */
		if (g->on)
			g->ok_clock = clock + 1;
		return false;
	}
	/* Gap mode needs the stretch before each step to finish: one that
	 * did not goes off before the step that would begin without its
	 * reads. */
	g->ok_clock = 0;
	if (!gap_auto || quiet <= g->short_ns)
		return false;
	g->short_ns = quiet;
	return true;
}

bool gapmode_holds(const struct gapmode *g, uint64_t clock, uint64_t cycle_len)
{
	return g->ok_clock && clock + 1 - g->ok_clock <= cycle_len / 4 * 5;
}

void gapmode_plan_dropped(struct gapmode *g)
{
	g->on = false;
	g->demand_ns = g->from_ns = 0; /* no stretch spans two plans */
}

bool gapmode_set(struct gapmode *g, bool on, uint64_t now)
{
	if (on == g->on)
		return false;
	g->on = on;
	if (on)
		g->on_ns = now;
	return true;
}

bool gapmode_may_progress(const struct gapmode *g, bool done)
{
	return !g->on && g->from_ns && done;
}

uint64_t gapmode_progress_len(const struct gapmode *g, uint64_t now)
{
	uint64_t len = now - g->from_ns;
	return len > g->seen_ns ? len : g->seen_ns;
}

void gapmode_mark_ok(struct gapmode *g, uint64_t clock)
{
	g->ok_clock = clock + 1;
}

void gapmode_seen(struct gapmode *g, uint64_t now, uint64_t clock, uint64_t idle,
		  uint64_t cycle_len, uint64_t commit_began, uint64_t commit_ended)
{
	uint64_t from = g->req_ns;
	uint64_t len = from && !g->reqs ? now - from : 0;
	bool expired = cycle_len && clock - g->seen_clock > 2 * cycle_len;
	if (from)
		g->measured = true;
	g->req_ns = now;
	if (len <= g->seen_ns && !expired)
		return;
	uint64_t c0 = commit_began, c1 = commit_ended;
	if (c0 >= from && c1 >= c0 && c1 <= now && now - c0 > idle)
		idle = now - c0;
	if (idle < len)
		len = idle;
	if (len > g->seen_ns || expired) {
		if (expired)
			g->prev_ns = g->seen_ns;
		g->seen_ns = len;
		g->seen_clock = clock;
	}
}

void gapmode_demand_begin(struct gapmode *g)
{
	g->reqs++;
}

void gapmode_demand_at(struct gapmode *g, uint64_t now)
{
	g->demand_ns = now;
}

bool gapmode_demand_done(struct gapmode *g, bool counted)
{
	return counted && --g->reqs == 0;
}

void gapmode_stretch_starts(struct gapmode *g, uint64_t now)
{
	g->req_ns = now;
}

uint64_t gapmode_commit_gap(const struct gapmode *g)
{
	return g->seen_ns > g->prev_ns ? g->seen_ns : g->prev_ns;
}

bool gapmode_commit_fits(const struct gapmode *g, bool learned, uint64_t commit_quiet_ns)
{
	uint64_t took = commit_quiet_ns;
	return !learned || !took || !g->measured || took <= gapmode_commit_gap(g);
}
