/*
 * tiers/sched.c — per-tier I/O scheduler: priority FIFOs, bounded in-flight,
 * anti-starvation aging and a GCRA bandwidth cap. See sched.h for the rules
 * and for why they exist. Not thread-safe: the backend lock guards it all.
 */
#include <errno.h>
#include <string.h>

#include "tiers/sched.h"

#define SCHED_STARVE_DEFAULT 8

int sched_init(struct sched *s, const struct sched_params *p)
{
	if (!p || p->limit == 0)
		return -EINVAL;
	if (p->max_bandwidth && p->io_bytes == 0)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->limit = p->limit;
	s->starve_after = p->starve_after ? p->starve_after : SCHED_STARVE_DEFAULT;
	s->max_wait_ns = p->max_wait_ns;
	if (p->max_bandwidth) {
		/* Per-I/O cost in ns of budget; at least 1 so a huge cap still
		 * counts. 128-bit to avoid overflow for big blocks. */
		unsigned __int128 c = (unsigned __int128)p->io_bytes * 1000000000u;
		c /= p->max_bandwidth;
		s->cost_ns = c ? (uint64_t)c : 1;
		uint64_t burst = p->burst_bytes ? p->burst_bytes : (uint64_t)p->limit * p->io_bytes;
		unsigned __int128 b = (unsigned __int128)burst * 1000000000u / p->max_bandwidth;
		/* GCRA tolerance: the first I/O always passes, so the depth
		 * beyond it is burst - one I/O (0 = strict pacing). */
		s->burst_ns = (uint64_t)b >= s->cost_ns ? (uint64_t)b - s->cost_ns : 0;
	}
	return 0;
}

void sched_push(struct sched *s, struct tier_io *io)
{
	unsigned c = (unsigned)io->prio;
	if (c >= SCHED_NPRIO)
		c = SCHED_NPRIO - 1;
	io->next = NULL;
	if (s->tail[c])
		s->tail[c]->next = io;
	else
		s->head[c] = io;
	s->tail[c] = io;
	s->queued[c]++;
	s->st.pushed[c]++;
}

/* The class to serve: an aged one if any rule says so, else the most
 * urgent non-empty one; -1 when all are empty. *aged tells which. */
static int pick_class(const struct sched *s, uint64_t now_ns, bool *aged)
{
	int top = -1;
	for (int c = 0; c < SCHED_NPRIO; c++) {
		if (s->head[c]) {
			top = c;
			break;
		}
	}
	*aged = false;
	if (top < 0)
		return -1;
	/* Time aging: the oldest expired head, the top class's included: a
	 * backlog of expired write-backs must not hold back a demand read
	 * older than all of them. */
	if (s->max_wait_ns) {
		int best = -1;
		uint64_t best_ts = 0;
		for (int c = top; c < SCHED_NPRIO; c++) {
			const struct tier_io *h = s->head[c];
			if (!h || h->submit_ns == 0 || now_ns < h->submit_ns ||
			    now_ns - h->submit_ns <= s->max_wait_ns)
				continue;
			if (best < 0 || h->submit_ns < best_ts) {
				best = c;
				best_ts = h->submit_ns;
			}
		}
		if (best > top) {
			*aged = true;
			return best;
		}
		if (best == top)
			return top;
	}
	/* Dispatch aging: the most passed-over class beyond the bound. */
	int best = -1;
	for (int c = top + 1; c < SCHED_NPRIO; c++) {
		if (s->head[c] && s->skipped[c] >= s->starve_after &&
		    (best < 0 || s->skipped[c] > s->skipped[best]))
			best = c;
	}
	if (best >= 0) {
		*aged = true;
		return best;
	}
	return top;
}

struct tier_io *sched_pop(struct sched *s, uint64_t now_ns, uint64_t *wait_ns)
{
	if (wait_ns)
		*wait_ns = 0;
	if (s->inflight >= s->limit)
		return NULL;
	bool aged;
	int c = pick_class(s, now_ns, &aged);
	if (c < 0)
		return NULL;
	if (s->cost_ns) {
		/* GCRA: allowed when the theoretical arrival time is no more
		 * than burst_ns ahead of now. */
		uint64_t tat = s->tat_ns > now_ns ? s->tat_ns : now_ns;
		if (tat > now_ns + s->burst_ns) {
			if (wait_ns)
				*wait_ns = tat - now_ns - s->burst_ns;
			s->st.throttled++;
			return NULL;
		}
		s->tat_ns = tat + s->cost_ns;
	}
	struct tier_io *io = s->head[c];
	s->head[c] = io->next;
	if (!s->head[c])
		s->tail[c] = NULL;
	io->next = NULL;
	s->queued[c]--;
	s->skipped[c] = 0;
	for (int o = 0; o < SCHED_NPRIO; o++) {
		if (o != c && s->head[o])
			s->skipped[o]++;
	}
	s->inflight++;
	s->st.dispatched[c]++;
	if (aged)
		s->st.aged++;
	return io;
}

void sched_done(struct sched *s)
{
	if (s->inflight > 0)
		s->inflight--;
}

unsigned sched_inflight(const struct sched *s)
{
	return s->inflight;
}

size_t sched_queued(const struct sched *s)
{
	size_t n = 0;
	for (int c = 0; c < SCHED_NPRIO; c++)
		n += s->queued[c];
	return n;
}

void sched_get_stats(const struct sched *s, struct sched_stats *out)
{
	*out = s->st;
}
