/*
 * policy/gap.h — gap mode: what the cache does with the time the disks
 * idle between training steps, and whether a metadata commit fits there.
 *
 * A real step leaves the disks idle between two update phases: forward and
 * backward run on the GPU, and the gradients they write stay in RAM. In
 * that stretch every dirty block can be written back for free, and the
 * next update's first reads fetched into the RAM that frees, so RAM can
 * serve the end of one update and the start of the next with different
 * blocks. That pays more than the keep plan: the pipelined update opens
 * with reads alone and closes with writes alone, and a block of RAM that
 * holds a tail write until the idle stretch, and then a head read, takes a
 * block off each of those one-sided phases, where a block the keep plan
 * keeps takes a read and a write off the middle, in which the two sides
 * overlap.
 *
 * So the cache watches for stretches with no request for a disk-homed
 * block and no I/O on a persistent tier (GAPMODE_IDLE_NS): in one, the
 * flusher writes everything back and the prefetcher reads ahead past the
 * gradient writes. Requests alone do not tell: inside an update phase the
 * ranks' requests pause for tens of ms at a time, longer while a metadata
 * sync stalls the disk, with reads and write-backs still under way, and
 * working those pauses cost hit ratio. Once a stretch has been seen to
 * finish both before the next request (within the last cycle and a
 * quarter), the cache is in gap mode: it follows the tail plan instead of
 * the keep plan, so that the last writes before the backward pass stay
 * dirty in RAM and every other block is written back as soon as it is
 * written. A stretch too short for that (update phases back to back)
 * leaves the keep plan in charge.
 *
 * A stretch too short to finish its work did not pay for it: the blocks
 * written back were to be overwritten in RAM, and the clean blocks read
 * ahead took RAM the keep plan had given to others. So with gap_plan =
 * auto the work starts only once a stretch has lasted a quarter longer
 * than the longest worked one that ended before its work did: the steps
 * of a run are alike, so that settles within a step or two, and a run
 * whose compute time grows finds its way back. gap_plan = yes starts the
 * work in every stretch, at GAPMODE_IDLE_NS.
 *
 * Pure: the state is a struct the cache holds under its lock, changed by
 * the events below; clocks and tier state come in as arguments. Times
 * named _ns are the tiers' monotonic clock (tier_now_ns), those named
 * clock the learner's (engine_now).
 */
#ifndef TIERFS_GAP_H
#define TIERFS_GAP_H

#include <stdbool.h>
#include <stdint.h>

/* How long the disks must idle, at least, for a stretch to count. */
#define GAPMODE_IDLE_NS (20 * 1000000ULL)

struct gapmode {
	/* fs.disk_demand_ns: when a request last touched a disk-homed block
	 * under a tail plan (0: none yet). */
	uint64_t demand_ns;
	/* fs.disk_req_ns: when a request for a disk-homed block last came
	 * (learned or not), or the last one being served was done. */
	uint64_t req_ns;
	/* fs.disk_reqs: requests for disk-homed blocks being served. */
	unsigned reqs;
	/* fs.gap_seen_ns, fs.gap_seen_clock: the longest stretch without
	 * such a request within the last two cycles, and the learner's clock
	 * when it was seen; fs.gap_prev_ns: the longest of the two cycles
	 * before. */
	uint64_t seen_ns, seen_clock, prev_ns;
	/* fs.gap_measured: whether seen_ns or prev_ns holds a measured
	 * stretch (0 ns when the tiers were busy at every request). */
	bool measured;
	/* fs.idle_short_ns: with gap_plan = auto, the longest worked stretch
	 * that ended before its work did. */
	uint64_t short_ns;
	/* fs.idle_from_ns: when the stretch being worked began (0: none is). */
	uint64_t from_ns;
	/* fs.gap_ok_clock: the learner's clock (+1) when an idle stretch last
	 * wrote everything back and read ahead all it could (0: none). */
	uint64_t ok_clock;
	/* fs.gap_mode: whether the cache follows the tail plan. */
	bool on;
	/* fs.gap_on_ns: when gap mode last came on. */
	uint64_t on_ns;
};

/* How long the disks must idle before a stretch is worked. */
uint64_t gapmode_idle_after(const struct gapmode *g);

/* Whether the disks idle (cache_disk_idle), as far as the state alone
 * tells: 0 no (no learned order, no tail plan, or no request under it
 * yet), 1 yes (a stretch is being worked until the next request: the work
 * keeps the tiers busy), -1 ask the clocks (gapmode_quiet_long). */
int gapmode_idle_known(const struct gapmode *g, bool learned, bool have_tail_plan);

/* Whether, at NOW, with every persistent tier without I/O for QUIET ns
 * (UINT64_MAX: never busy), the time since the last request and QUIET both
 * reach gapmode_idle_after. The cache then also asks whether the learned
 * order is in its gap (engine_in_gap) before gapmode_work_begins. */
bool gapmode_quiet_long(const struct gapmode *g, uint64_t now, uint64_t quiet);

/* The stretch is worked from now: it began QUIET or the time since the
 * last request before NOW, whichever is shorter. */
void gapmode_work_begins(struct gapmode *g, uint64_t now, uint64_t quiet);

/* Whether an idle stretch did all it could: nothing left to write back
 * among disk-homed blocks (DIRTY_LEFT, FLUSHING_LEFT), no read-ahead still
 * under way (PREFETCH_INFLIGHT). */
bool gapmode_idle_done(bool dirty_left, bool flushing_left, unsigned prefetch_inflight);

/* How long gap mode's own work takes in a stretch: PLAN_BUDGET blocks of
 * BS bytes (the tail plan's RAM) written back and as many read ahead, one
 * after the other, at READ_RATE and WRITE_RATE (bytes per ns, the sums over
 * the persistent tiers of what each sustained while busy), or 0 before
 * either rate is known. A stretch that finished the keep plan's work
 * (what is dirty outside gap mode, and read-ahead into free RAM) may be
 * too short for this: gap mode on there made the next step longer. */
uint64_t gapmode_work_ns(double read_rate, double write_rate, uint64_t plan_budget, uint32_t bs);

/* Whether a stretch of LEN ns holds work of NEED ns (gapmode_work_ns),
 * with the quarter to spare that auto's threshold has. */
bool gapmode_fits(uint64_t len, uint64_t need);

/* What gapmode_stretch_ended found. */
enum {
	GAPMODE_STRETCH = 1, /* the disks idled GAPMODE_IDLE_NS or more (counted) */
	GAPMODE_WORKED = 2,  /* and the stretch was worked: judge it (gapmode_judge) */
};

/* A request at NOW, under a tail plan and a learned order, ends the
 * stretch without one since demand_ns (none before the plan's first
 * request). Returns GAPMODE_ flags; with GAPMODE_WORKED, *QUIET and *FROM
 * say how long the worked stretch was and when it began, and no stretch
 * is worked any more. */
unsigned gapmode_stretch_ended(struct gapmode *g, uint64_t now, uint64_t *quiet, uint64_t *from);

/* Judge a worked stretch of QUIET ns that began at FROM and ended at
 * learner clock CLOCK: DONE whether it finished its work
 * (gapmode_idle_done), FITS whether it holds gap mode's own work too
 * (gapmode_fits; the caller need not compute it unless DONE), COMMIT_BEGAN
 * and COMMIT_ENDED when the last metadata commit began and ended, GAP_AUTO
 * whether gap_plan is auto.
 *
 * A finished stretch makes gap mode ok if its own work fits too. One that
 * did not finish says nothing where a metadata commit ran in it (its sync
 * stalls the disk, and judged on it a stretch a long commit had taken
 * turned gap mode off for good) or gap mode came on within it (it had
 * only what was left after the keep plan's work for its own): gap mode
 * then stays as it was. Else gap mode goes off before the step that would
 * begin without its reads, and with auto the stretch raises the threshold.
 * Returns whether it did (short_ns grew), for the caller to log. */
bool gapmode_judge(struct gapmode *g, uint64_t clock, uint64_t quiet, uint64_t from, bool done,
		   bool fits, uint64_t commit_began, uint64_t commit_ended, bool gap_auto);

/* Whether gap mode holds at learner clock CLOCK, with a learned cycle of
 * CYCLE_LEN accesses: a stretch finished its work within the last cycle
 * and a quarter. */
bool gapmode_holds(const struct gapmode *g, uint64_t clock, uint64_t cycle_len);

/* The plans were dropped (a cycle lost or relearned): gap mode goes off
 * without a replan (there is no plan), and no stretch spans two plans. */
void gapmode_plan_dropped(struct gapmode *g);

/* Turn gap mode ON or off at NOW. Returns whether it changed: the cache
 * then replans its entries. */
bool gapmode_set(struct gapmode *g, bool on, uint64_t now);

/* The first stretch to finish its work turns gap mode on at once, not at
 * the request that ends it: outside gap mode read-ahead leaves the keep
 * plan's blocks alone, so that stretch read ahead less, and the first
 * step in gap mode began with half its first reads still on disk. Only
 * where the gaps are long enough for gap mode's own work, though: the
 * longest seen lately between requests for disk blocks, or this stretch
 * once it lasts that long.
 *
 * gapmode_may_progress: whether that can happen now, gap mode off and a
 * stretch being worked that is DONE (gapmode_idle_done). */
bool gapmode_may_progress(const struct gapmode *g, bool done);
/* The length to judge with gapmode_fits: the stretch so far at NOW, or the
 * longest seen lately if longer. */
uint64_t gapmode_progress_len(const struct gapmode *g, uint64_t now);
/* An idle stretch did all it could at learner clock CLOCK. */
void gapmode_mark_ok(struct gapmode *g, uint64_t clock);

/* A request for a disk-homed block at NOW (learner clock CLOCK, a learned
 * cycle of CYCLE_LEN accesses, 0: none; IDLE the least over the persistent
 * tiers of the longest time without I/O since the last call; COMMIT_BEGAN
 * and COMMIT_ENDED the last commit's times): keep the longest stretch with
 * no such request being served, within the last two cycles (any, before
 * one is learned). A request still being served (waiting for RAM, or for
 * a commit's sync) ends no stretch: counted, a step stalled on a commit
 * looked like an idle stretch that holds one, and each such commit made
 * the next. A stretch counts for as long as the tiers went without I/O in
 * it, as I/O would share the disk with a commit; I/O that a commit run
 * wholly in the stretch held up is no sign that it did not fit, so such a
 * stretch counts from the commit's start at least. Call before
 * gapmode_demand_begin. */
void gapmode_seen(struct gapmode *g, uint64_t now, uint64_t clock, uint64_t idle,
		  uint64_t cycle_len, uint64_t commit_began, uint64_t commit_ended);

/* A request for a disk-homed block is being served from now. */
void gapmode_demand_begin(struct gapmode *g);
/* Under a tail plan, the request came at NOW (after any gapmode_judge). */
void gapmode_demand_at(struct gapmode *g, uint64_t now);
/* A request gapmode_demand_begin counted (COUNTED) is served. Returns
 * whether it was the last one being served: a stretch starts, and the
 * caller marks when (gapmode_stretch_starts) and restarts the tiers' idle
 * record. Takes no clock: most requests are not the last. */
bool gapmode_demand_done(struct gapmode *g, bool counted);
/* The last request being served ended at NOW. */
void gapmode_stretch_starts(struct gapmode *g, uint64_t now);

/* The longest idle stretch of the learned step in the last two cycles or
 * the two before (gapmode_seen starts its window afresh with whatever
 * stretch comes next), ns; 0 if none yet. */
uint64_t gapmode_commit_gap(const struct gapmode *g);

/* Whether a commit as long as the last quiet ones (COMMIT_QUIET_NS, 0:
 * none yet) fits in the idle stretches of the learned step. With the
 * update phases back to back the only stretch is the fraction of a second
 * in which the application makes its gradients, and a commit longer than
 * that ran on into the next update phase, where it stalled the disk.
 * Without a learned order, before any quiet commit, or before two
 * requests for disk blocks were seen, any quiet moment does; a stretch
 * measured as 0 (the tiers busy at every request) holds none. */
bool gapmode_commit_fits(const struct gapmode *g, bool learned, uint64_t commit_quiet_ns);

#endif
