/*
 * policy/order.h — the access-order learner: learns the block access cycle
 * that DeepSpeed repeats every training step, and predicts from it.
 *
 * Why: the update phase touches the whole optimizer state in the same order
 * every step. LRU evicts exactly the block needed next on such a scan; with
 * the order known, the cache can evict the block needed farthest in the
 * future (Belady) and prefetch the blocks needed next.
 *
 * Input: every block access, as an opaque 64-bit key and a write flag.
 * The engine (fs/engine.c) passes id << 24 | block index, the id being the
 * file's order id (fs_order_id): the name id of a file created on the
 * mount, which a file rewritten under the same name keeps, or else its
 * inode number. Consecutive accesses to the same key collapse into one
 * (several requests cover one block). The stream is the interleaving of
 * several ranks, so one step is never byte-identical to the last: matching
 * tolerates positions that moved by up to `window` accesses or an eighth of
 * the cycle, whichever is more (local swaps, rank drift, a pipelined reader
 * and writer taking turns differently), stray extra accesses and missing
 * ones.
 *
 * Learning: a recording of the deduplicated stream that never stops. Each
 * access whose key occurred before as the same kind of access (read or
 * write) proposes candidate periods (the distance to each such occurrence
 * among its last 4); up to 8 candidates are checked on every access: does
 * the key occur one period back (+-window), as the same kind? Matching
 * kinds kills the periods that hold only for a while, such as "sub-group
 * read, then written" (a write never matches the read before it), without
 * looking back before the candidate started: the stream before the first
 * step (the initial write of every file) is not periodic, and a check over
 * it would delay learning by a whole step. A candidate that holds with
 * match rate >= threshold over max(period, min_verify) accesses becomes the
 * cycle: its period is re-centred on the median offset of its matches, and
 * the last period of the recording is copied as the cycle, repaired where
 * drifting ranks put an access on the wrong side of the cut. It stays on
 * probation for two more spans: if it fails then, the cycle is dropped (a
 * false lock) and a waiting candidate takes over. A key may occur several
 * times per cycle (read, later written).
 *
 * Learned: the learner follows the position in the cycle (an access found
 * within the tolerance of it, or of where the key's own previous access
 * says it should be, is a hit; only the former moves the position forward;
 * two misses in a row resynchronise). next_use is measured from each key's own
 * last access (the occurrence it matched plus the time since), so ranks
 * that drift apart keep exact-enough predictions; without such an anchor it
 * is the distance from the global position. When the hit rate over the last
 * `health_window` accesses falls below threshold, the pattern is declared
 * broken: not learned until a candidate (already running) holds again.
 * Candidates keep running while learned: one that matches clearly better
 * than the cycle has lately (more hits, or matches close where the
 * cycle's are only within the tolerance) replaces it, which counts as a
 * new learn.
 *
 * Cost: O(1) amortised per access (8 candidates x 4 positions, hashed
 * lookups); queries cost O(occurrences of the key per cycle).
 * All memory is allocated by order_create (no malloc per access): about
 * 160 bytes per unit of max_cycle. Cycles longer than max_cycle are never
 * learned.
 *
 * Thread safety: none. The engine calls every function on the learner in
 * use under its lock (the const queries too: they read state that
 * order_access changes); only order_seed_grow runs without it, on a seed
 * and a learner of its own.
 */
#ifndef TIERFS_ORDER_H
#define TIERFS_ORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct order;

/* The learner's memory per unit of max_cycle, for estimates in messages. */
#define ORDER_BYTES_PER_ACCESS 160

struct order_params {
	size_t max_cycle;	/* longest learnable cycle (deduplicated accesses);
				   0 = ORDER_DEFAULT_MAX_CYCLE, at most 2^30 */
	size_t min_cycle;	/* shortest cycle considered; 0 = 8 */
	unsigned window;	/* least position tolerance for jitter; 0 = 128.
				   A cycle of N accesses tolerates N / 8 if
				   that is more (a pipelined reader and writer
				   take turns differently each step, by up to
				   a sub-group); clamped to N / 4 */
	double threshold;	/* match rate to learn and to stay learned; 0 = 0.9 */
	unsigned health_window; /* accesses over which a learned cycle's hit rate
				   is judged; 0 = 4096 */
	size_t min_verify;	/* a candidate period is checked over at least
				   this many accesses (and one period); 0 = 256 */
};

#define ORDER_DEFAULT_MAX_CYCLE (1u << 18)

struct order_stats {
	uint64_t accesses;	   /* calls to order_access */
	uint64_t deduped;	   /* accesses left after collapsing repeats */
	uint64_t learned_accesses; /* deduped accesses made while learned */
	uint64_t predicted_hits;   /* of those, the ones found where predicted */
	uint64_t learns;	   /* times a cycle was learned */
	uint64_t relearns;	   /* times a learned cycle broke (health) */
	uint64_t false_locks;	   /* cycles dropped while still on probation */
	uint64_t repaired;	   /* accesses put back into a learned cycle's cut */
	bool learned;
	size_t cycle_len;
};

/* Returns 0, -EINVAL (bad parameters) or -ENOMEM. p may be NULL (defaults). */
int order_create(const struct order_params *p, struct order **out);
void order_destroy(struct order *o);

/* Record one access. A collapsed repeat that reads marks the access as a
 * read (data needed) even if the first request was a write. */
void order_access(struct order *o, uint64_t key, bool write);

/* A learner of MAX_CYCLE (at least FROM's) to take FROM's place, fed
 * FROM's recording: a cycle FROM had learned stays learned, and one it
 * had seen enough of is learned as it returns, so growing loses no step.
 * It goes on with FROM's clock and counters, so the times the cache
 * stamped stay comparable. FROM is left as it was, for the caller to
 * destroy. Returns 0, -EINVAL or -ENOMEM; O(recording) time. */
int order_grow(const struct order *from, size_t max_cycle, struct order **out);

/* order_grow in three parts, so that the O(recording) part runs with no
 * lock held while FROM goes on learning: order_seed_take copies what FROM
 * has recorded (a memcpy), order_seed_grow feeds it to the new learner,
 * the caller then gives the new learner every access FROM got since the
 * seed was taken (order_access, in order), and order_grow_finish hands it
 * FROM's clock and counters. order_seed_take and order_seed_grow return
 * 0, -EINVAL (a MAX_CYCLE below FROM's, or one order_create refuses) or
 * -ENOMEM. */
struct order_seed;
int order_seed_take(const struct order *from, size_t max_cycle, struct order_seed **out);
int order_seed_grow(const struct order_seed *s, struct order **out);
void order_seed_free(struct order_seed *s);
void order_grow_finish(struct order *o, const struct order *from);
size_t order_max_cycle(const struct order *o);

bool order_learned(const struct order *o);
/* The learner's clock: deduplicated accesses so far. Adding a next_use or
 * next_read distance to it gives an absolute time that stays comparable
 * while the clock moves on (the cache stamps its entries with those). */
uint64_t order_now(const struct order *o);
size_t order_cycle_len(const struct order *o); /* 0 when not learned */
/* Times a cycle was learned: a new count while learned means the cycle
 * was replaced by a better one, and predictions made from the old one are
 * stale. */
uint64_t order_learn_count(const struct order *o);
/* How many accesses an access of the learned cycle may come late or early
 * and still be where the cycle says (the window, or cycle/8 if more). A
 * prediction overdue by more did not happen where predicted. */
size_t order_tolerance(const struct order *o);

/* Accesses from the current position until KEY's next predicted access:
 * 0 = it is the next access expected. UINT64_MAX when not learned or KEY is
 * not in the cycle. */
uint64_t order_next_use(const struct order *o, uint64_t key);
/* Same, counting only accesses that read the block (a block whose next
 * access is a full overwrite does not need its data kept). */
uint64_t order_next_read(const struct order *o, uint64_t key);

/* The learned cycle as recorded: *keys and *writes (1 = every request of
 * that access wrote) point at the learner's own arrays of
 * order_cycle_len() entries, valid until the next order_access. Returns
 * the length; 0 (and NULLs) when not learned. */
size_t order_cycle(const struct order *o, const uint64_t **keys, const uint8_t **writes);

/* Up to N keys predicted next, in order (from the current position, at
 * most one cycle). Returns how many were written; 0 when not learned. */
size_t order_upcoming(const struct order *o, size_t n, uint64_t *keys);
/* Where in the cycle (order_cycle's arrays) the next expected access is;
 * 0 when not learned. */
size_t order_position(const struct order *o);

/* Up to N keys whose predicted next access reads them, in order, with
 * DIST[i] the accesses until then; writes are stepped over (at most one
 * cycle is scanned). Between training steps the next accesses are the
 * backward pass's gradient writes, which need no read: this sees past them
 * to the update's first reads. Returns how many; 0 when not learned. */
size_t order_upcoming_reads(const struct order *o, size_t n, uint64_t *keys, uint32_t *dist);

void order_get_stats(const struct order *o, struct order_stats *out);

/* Eviction choice among N candidate keys (a sample of the cache): the
 * index of the one whose next use is farthest; unknown next use (not in the
 * cycle) counts as farthest; ties go to the smallest lru_stamp (least
 * recently used). Not learned (or o NULL): plain LRU, the smallest stamp.
 * -1 if n == 0. lru_stamp may be NULL (ties: the first). */
int order_pick_victim(const struct order *o, const uint64_t *keys, size_t n,
		      const uint64_t *lru_stamp);

#endif
