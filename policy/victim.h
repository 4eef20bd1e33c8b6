/*
 * policy/victim.h — which RAM block the cache evicts, decided one
 * candidate at a time.
 *
 * Without a learned order the victim is the least recently used clean
 * block nobody holds, pinned ones last. With one it is Belady's choice:
 * among the most recently used candidates (on a repeating scan those are
 * needed last), the one whose next read is farthest. The cache walks its
 * LRU lists under its lock; these functions judge and compare what the walk
 * finds. Pure: no locks, no clocks, no I/O; times are in learner clock
 * units (engine_now), UINT64_MAX meaning "not needed again as far as the
 * order knows".
 */
#ifndef TIERFS_VICTIM_H
#define TIERFS_VICTIM_H

#include <stdbool.h>
#include <stdint.h>

/* Whether a block may be evicted at all: nobody holds it (REFS), it is
 * loaded (VALID), it has nothing to write back (neither DIRTY nor
 * FLUSHING), and it is not RAM-homed (PINNED) unless ALLOW_PINNED. */
bool victim_evictable(int refs, bool valid, bool dirty, bool flushing, bool pinned,
		      bool allow_pinned);

/* victim_evictable, and not a block the keep plan keeps (PLAN, an enum
 * keepplan_verdict). Outside gap mode the keep plan's blocks are the last
 * victims, and never read-ahead's: an idle stretch writes them back, and
 * once clean they were taken like any other, for read-ahead (a disk read
 * for a disk read) and for misses, where dirty they had waited for a
 * write-back. */
bool victim_evictable_unkept(int refs, bool valid, bool dirty, bool flushing, bool pinned,
			     bool allow_pinned, uint8_t plan);

/* When a block is next read, for choosing a victim: NEXT_READ and
 * NEXT_USE as the learned order stamped them (centry.next_read, next_use),
 * PLAN its keep-plan verdict, GAP_MODE whether the cache follows the tail
 * plan, STALE the oldest prediction still believed (engine_stale_before).
 *
 * A prediction older than STALE did not happen where the order said (a
 * stray access, a rank far behind): the block is treated as not needed
 * soon, UINT64_MAX - 1, behind every block with a live prediction but
 * ahead of the unknown. Within the learner's tolerance a late read is
 * ordinary drift between ranks or between a rank's reader and writer; the
 * learner itself counts it as on time, so the cache must not call it stale
 * sooner.
 *
 * A block read and not yet overwritten is dead (UINT64_MAX), the first to
 * go, except in gap mode when the tail plan keeps the write that comes:
 * that write takes over the block's RAM, and without it waits for a slot.
 * Ranked by its write (NEXT_USE), the dead blocks of the step's last
 * sub-groups stay while other clean blocks, read only in the next step
 * (and taken by the gap's read-ahead anyway), go first; when they went
 * first, whatever the update's last iterations needed took them, and the
 * last sub-group's writes waited for the disk. */
uint64_t victim_next_read(uint64_t next_read, uint64_t next_use, uint8_t plan, bool gap_mode,
			  uint64_t stale);

/* Whether a candidate needed at WHEN beats the best so far (needed at
 * BEST_WHEN; HAVE_BEST false: none yet): Belady's choice is the one needed
 * farthest ahead, the first seen among equals. */
bool victim_better(uint64_t when, uint64_t best_when, bool have_best);

/* Whether a walk may stop at a best candidate needed at BEST_WHEN: nothing
 * is needed later than never. */
bool victim_search_done(uint64_t best_when);

/* One pass of the learned-order victim search (pick_victim_before): which
 * lists it walks (bit 0: the blocks that may go, bit 1: the pinned ones),
 * whether pinned blocks may go, and whether the keep plan's blocks are
 * left out. */
struct victim_pass {
	unsigned lists;
	bool allow_pinned;
	bool unkept_only;
};

/* The first pass of the learned-order search: -1 where a keep plan's
 * blocks are spared (a tail plan exists and the cache is not in gap mode:
 * a pass without them comes first), else 0. The passes run up to 1. */
int victim_first_pass(bool have_tail_plan, bool gap_mode);

/* Pass PASS (victim_first_pass .. 1) for a search that needs a block free
 * before NEED_AT (UINT64_MAX: any victim will do; else read-ahead, which
 * never takes the keep plan's blocks while they are spared). */
struct victim_pass victim_pass(int pass, bool have_tail_plan, bool gap_mode, uint64_t need_at);

enum victim_verdict {
	VICTIM_TAKE, /* evict the pass's best */
	VICTIM_NONE, /* give up: no victim */
	VICTIM_NEXT, /* try the next pass */
};

/* What a pass that found a best (FOUND) needed at WHEN means for a search
 * needing a block before NEED_AT: the best is taken only if it is needed
 * after NEED_AT; read-ahead (NEED_AT set) does not look further than the
 * first pass that found one, since later passes only add blocks needed
 * sooner or kept. */
enum victim_verdict victim_pass_verdict(bool found, uint64_t when, uint64_t need_at);

/* Whether the learned-order search, having found nothing in any pass, or
 * the search without a learned order, falls back to the least recently
 * used clean block: only where any victim will do (NEED_AT UINT64_MAX). */
bool victim_lru_fallback(uint64_t need_at);

/* Whether a block being written back frees its RAM slot once that
 * write-back completes: not RAM-homed (PINNED) nor of a volatile file, and
 * the write-back under way (FLUSHING). Only those: waiting for a
 * write-back yet to be started stalls the caller longer than the read it
 * saves. */
bool victim_write_back_frees(bool pinned, bool volatile_file, bool flushing);

/* Whether a reclaim may wait for a write-back instead of evicting the
 * victim it found: only while waiting still pays (PATIENT: write-back
 * moved lately), under a learned order, and while the tier the victim
 * would be read back from has reads in flight (not READS_IDLE). With that
 * tier's reads idle every request waits for RAM, and the wait only turns
 * the disk's write time into the step's; where reads are in flight, a
 * saved read of the victim fills the wait. The cache then waits if a block
 * under write-back is needed later (victim_farther) or the victim is a
 * stale kept block (victim_kept_over_due). */
bool victim_may_wait(bool patient, bool learned, bool reads_idle);

/* Whether the farthest block under write-back (FOUND; needed at WHEN) is
 * read later than the victim (needed at AFTER): Belady's choice is then
 * that block, so wait for its write-back rather than evict a block that is
 * read again within the step. */
bool victim_farther(bool found, uint64_t when, uint64_t after);

/* The first two tests of whether clean victim V is a kept block left over
 * from before the cycle was learned, while a dirty block the kept set does
 * not hold waits for write-back (Belady's choice is then that dirty
 * block). In a steady step the kept blocks are dirty (read from RAM, then
 * rewritten), so reclaim never sees them; the blocks in RAM when the cycle
 * is learned are clean, left there by LRU, and each reclaim took one of
 * them while the step's own write-backs were under way, so that the kept
 * set formed anew from that step's blocks. Only such blocks: waiting so
 * for every kept clean block cost reads and writes in the steady state.
 *
 * victim_unused_since_learn: V's last use (STAMP) is not after the cache
 * clock at the last learn (LEARN_CLOCK). */
bool victim_unused_since_learn(uint64_t stamp, uint64_t learn_clock);

/* victim_kept_by_horizon: V's keep time (wbhorizon_keep_until) is within
 * the write-back horizon, i.e. the kept set holds it. */
bool victim_kept_by_horizon(uint64_t keep_until, uint64_t horizon);

/* Whether an eviction throws out a block the keep plan meant to stay until
 * a read still to come (counted apart, stats.evictions_kept): under a
 * learned order, kept by PLAN, with a NEXT_READ known and not older than
 * STALE. */
bool victim_evicts_kept(bool learned, uint8_t plan, uint64_t next_read, uint64_t stale);

#endif
