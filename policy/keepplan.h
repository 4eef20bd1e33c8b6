/*
 * policy/keepplan.h — which blocks a learned cycle keeps in RAM from one
 * step to the next, chosen for time, not only for bytes.
 *
 * Why: in a steady training step every block of the optimizer state is read
 * once and then overwritten once. A block kept in RAM from its write to its
 * next read saves one disk read and one disk write, whichever block it is,
 * so Belady's count of bytes cannot tell K kept blocks from any other K.
 * Time can. DeepSpeed's pipelined update reads sub-group i+1 while it
 * writes sub-group i-1 and joins both before going on: on a disk that reads
 * and writes at once, a saved read shortens that iteration only if a saved
 * write does too. Left to next use, the kept blocks were those the cache
 * happened to have room for when they were written: whole neighbouring
 * sub-groups, which save one side of four iterations each. With two
 * storage paths a good share of the reads hit RAM and yet the update
 * phase took as long as it takes with no cache.
 *
 * Which iterations the application joins, the file system cannot see: the
 * order of requests is not the order of disk work (writes land in RAM in a
 * burst at the start of an iteration and are written back during it; reads
 * are fetched ahead of their requests). So the plan spreads the kept blocks
 * evenly along the cycle: every stretch of the step, whatever its joins,
 * loses the same share of its disk reads and of its write-backs. On the
 * pipelined step that is the best a model of the pipeline finds: an equal share
 * of every sub-group (the chains 0, 2, 4, 6 and 1, 3, 5, 7 kept alike).
 *
 * Blocks that save more I/O per cycle go first (a block read three times a
 * cycle before one read once); the spread is among blocks of equal worth.
 * Pure decisions on arrays, no locking; the caller (fs/engine.c) builds a
 * plan off fs->lock, on a copy of the cycle, and looks it up under it.
 */
#ifndef TIERFS_KEEPPLAN_H
#define TIERFS_KEEPPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct keepplan;

/* A key accessed more often than this per cycle is left out of the plan
 * (the cache ranks it by next use, as without a plan). */
#define KEEPPLAN_MAX_OCCUR 8

enum keepplan_verdict {
	KEEPPLAN_NONE, /* not in the plan: not a disk block of the cycle */
	KEEPPLAN_KEEP, /* stays in RAM from its write to its next read */
	KEEPPLAN_DROP, /* written back and evicted ahead of the kept ones */
};

struct keepplan_stats {
	size_t candidates; /* disk keys the plan ranks */
	size_t kept;	   /* of those, kept */
	uint64_t ios;	   /* disk I/Os per cycle of the candidates, keeping none */
	uint64_t saved;	   /* of those, the kept ones' */
};

/* Plan BUDGET blocks over the cycle KEYS[0..N) (WRITES[i] != 0: access i
 * overwrote the block). ONDISK[i] != 0: access i's block goes to a disk
 * tier (a block that lives in RAM anyway costs no I/O and needs no plan;
 * a key's first access says for all of its); NULL: all do. Returns 0,
 * -EINVAL (n == 0) or -ENOMEM. */
int keepplan_build(const uint64_t *keys, const uint8_t *writes, size_t n, const uint8_t *ondisk,
		   size_t budget, struct keepplan **out);

/* The tail plan, for steps with idle disks between them (fs/cache/idle.c):
 * the BUDGET disk keys written last before the cycle's longest
 * run of accesses to non-disk keys (the backward pass writing gradients
 * in RAM) are kept, every other candidate drops. Those writes then wait in
 * RAM for the idle stretch instead of holding up the update's last
 * iterations, which only write. Returns as keepplan_build, and -ENOENT
 * where no access, or every one, is to a non-disk key. */
int keepplan_build_tail(const uint64_t *keys, const uint8_t *writes, size_t n,
			const uint8_t *ondisk, size_t budget, struct keepplan **out);
void keepplan_free(struct keepplan *kp);

/* NULL kp: KEEPPLAN_NONE. */
enum keepplan_verdict keepplan_lookup(const struct keepplan *kp, uint64_t key);
void keepplan_get_stats(const struct keepplan *kp, struct keepplan_stats *out);

#endif
