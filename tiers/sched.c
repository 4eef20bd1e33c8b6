/*
 * tiers/sched.c — per-tier I/O scheduler: priority FIFOs, bounded in-flight,
 * anti-starvation aging and GCRA bandwidth caps, one per direction. See
 * sched.h for the rules and for why they exist. Not thread-safe: the
 * backend lock guards it all.
 */
#include <errno.h>
#include <string.h>

#include "tiers/sched.h"

#define SCHED_STARVE_DEFAULT 8

/* Direction D's bucket for a cap of CAP bytes/s (0: none). */
static void cap_set(struct sched *s, int d, uint64_t cap)
{
	s->cost_ns[d] = 0;
	s->burst_ns[d] = 0;
	if (!cap)
		return;
	/* Per-I/O cost in ns of budget; at least 1 so a huge cap still
	 * counts. 128-bit to avoid overflow for big blocks. */
	unsigned __int128 c = (unsigned __int128)s->io_bytes * 1000000000u;
	c /= cap;
	s->cost_ns[d] = c ? (uint64_t)c : 1;
	uint64_t burst = s->burst_bytes ? s->burst_bytes : (uint64_t)s->limit * s->io_bytes;
	unsigned __int128 b = (unsigned __int128)burst * 1000000000u / cap;
	/* GCRA tolerance: the first I/O always passes, so the depth
	 * beyond it is burst - one I/O (0 = strict pacing). */
	s->burst_ns[d] = (uint64_t)b >= s->cost_ns[d] ? (uint64_t)b - s->cost_ns[d] : 0;
}

int sched_init(struct sched *s, const struct sched_params *p)
{
	if (!p || p->limit == 0)
		return -EINVAL;
	if ((p->max_bandwidth[TIER_OP_READ] || p->max_bandwidth[TIER_OP_WRITE]) && p->io_bytes == 0)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->limit = p->limit;
	s->starve_after = p->starve_after ? p->starve_after : SCHED_STARVE_DEFAULT;
	s->max_wait_ns = p->max_wait_ns;
	s->io_bytes = p->io_bytes;
	s->burst_bytes = p->burst_bytes;
	for (int d = 0; d < 2; d++)
		cap_set(s, d, p->max_bandwidth[d]);
	return 0;
}

int sched_set_caps(struct sched *s, const uint64_t max_bandwidth[2])
{
	if ((max_bandwidth[TIER_OP_READ] || max_bandwidth[TIER_OP_WRITE]) && s->io_bytes == 0)
		return -EINVAL;
	/* The arrival times stay: what went before the change was paid for at
	 * the old rate, and the next I/O pays the new one. */
	for (int d = 0; d < 2; d++)
		cap_set(s, d, max_bandwidth[d]);
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

/* ns until direction D's bucket lets one I/O through; 0 = now. */
static uint64_t cap_wait(const struct sched *s, unsigned d, uint64_t now_ns)
{
	if (!s->cost_ns[d])
		return 0;
	uint64_t tat = s->tat_ns[d] > now_ns ? s->tat_ns[d] : now_ns;
	return tat > now_ns + s->burst_ns[d] ? tat - now_ns - s->burst_ns[d] : 0;
}

/* Whether class C's head may go now: queued, and its direction's bucket
 * has room. */
static bool ready(const struct sched *s, int c, uint64_t now_ns)
{
	return s->head[c] && cap_wait(s, tier_io_dir(s->head[c]), now_ns) == 0;
}

/* The class to serve among those ready: an aged one if any rule says so,
 * else the most urgent; -1 when none is ready. *aged tells which. */
static int pick_class(const struct sched *s, uint64_t now_ns, bool *aged)
{
	int top = -1;
	for (int c = 0; c < SCHED_NPRIO; c++) {
		if (ready(s, c, now_ns)) {
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
			if (!ready(s, c, now_ns) || h->submit_ns == 0 || now_ns < h->submit_ns ||
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
		if (ready(s, c, now_ns) && s->skipped[c] >= s->starve_after &&
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
	if (c < 0) {
		/* Nothing queued, or every head waits for its bucket: the
		 * first of those to fill decides the wait. */
		uint64_t wait = 0;
		for (int k = 0; k < SCHED_NPRIO; k++) {
			if (!s->head[k])
				continue;
			uint64_t w = cap_wait(s, tier_io_dir(s->head[k]), now_ns);
			if (w && (!wait || w < wait))
				wait = w;
		}
		if (wait) {
			s->st.throttled++;
			if (wait_ns)
				*wait_ns = wait;
		}
		return NULL;
	}
	/* Passed over are the classes that could have gone: one whose head
	 * waits for its bucket is not, or the dispatches of the other
	 * direction would age it past the classes above it in its own. */
	for (int o = 0; o < SCHED_NPRIO; o++) {
		if (o != c && ready(s, o, now_ns))
			s->skipped[o]++;
	}
	struct tier_io *io = s->head[c];
	unsigned d = tier_io_dir(io);
	if (s->cost_ns[d]) {
		/* A file's last block may move less than a block (tier_io.len):
		 * the cap is on bytes. */
		uint64_t cost = s->cost_ns[d];
		if (io->len && io->len < s->io_bytes)
			cost = (uint64_t)((unsigned __int128)cost * io->len / s->io_bytes);
		uint64_t tat = s->tat_ns[d] > now_ns ? s->tat_ns[d] : now_ns;
		s->tat_ns[d] = tat + (cost ? cost : 1);
	}
	s->head[c] = io->next;
	if (!s->head[c])
		s->tail[c] = NULL;
	io->next = NULL;
	s->queued[c]--;
	s->skipped[c] = 0;
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
