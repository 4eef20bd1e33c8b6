/*
 * fs/cache/sync.c — fsync and unmount: writing back a file's (or every) dirty
 * block, and syncing the tiers once for many callers.
 *
 * Tier syncs run in rounds (group commit): an fsync whose write-backs
 * completed before a round began is served by it, instead of syncing
 * every tier again. A tier sync that fails is charged to the files whose
 * write-backs it covered, and their fsyncs report it from then on.
 *
 * Locking: fs/lock.h.
 */
#include <errno.h>

#include "fs/cache/internal.h"

/* One tier's part of sync_tiers, on a thread of its own or the caller's. */
struct tier_sync_job {
	struct fs *fs;
	struct tier *t;
	int id;	      /* its index in fs->tiers */
	bool started; /* on a thread of its own */
	pthread_t thread;
	int rc;	      /* tier_sync's */
	uint64_t end; /* with rc != 0: fs->commit.wb_epoch[id] when it returned */
};

static void *tier_sync_main(void *arg)
{
	struct tier_sync_job *job = arg;
	struct fs *fs = job->fs;
	job->rc = tier_sync(job->t);
	/* The failed flush may have covered write-backs that completed while
	 * it ran, and the kernel reports it once: charge them too (a success
	 * covers only those before it began), and no later ones. */
	if (job->rc)
		job->end = atomic_fetch_add(&fs->commit.wb_epoch[job->id], 1);
	return NULL;
}

/* Sync every persistent tier; charge a failed sync to the files written
 * back to that tier before it began. Returns the first error, for callers
 * that answer for the whole mount (syncfs, unmount); an fsync asks its
 * inode's wb_err instead. */
int sync_tiers(struct fs *fs)
{
	int n = fs->conf.ntiers;
	uint64_t epoch[CONF_MAX_TIERS], end[CONF_MAX_TIERS];
	int err[CONF_MAX_TIERS] = {0};
	uint64_t seen = atomic_load(&fs->commit.rounds_begun);
	tfs_lock(&fs->commit.sync_lock);
	if (fs->commit.rounds_done > seen) {
		/* A round that began after our write-backs has ended. */
		int rc = fs->commit.round_rc;
		tfs_unlock(&fs->commit.sync_lock);
		return rc;
	}
	uint64_t round = atomic_fetch_add(&fs->commit.rounds_begun, 1) + 1;
	tfs_lock(&fs->lock);
	for (int i = 0; i < n; i++)
		epoch[i] = atomic_fetch_add(&fs->commit.wb_epoch[i], 1);
	tfs_unlock(&fs->lock);
	/* The tiers flush side by side: one after the other, the disk's
	 * flush and a parallel file system's round trips added up. */
	struct tier_sync_job jobs[CONF_MAX_TIERS];
	int njobs = 0;
	for (int i = 0; i < n; i++)
		if (fs->tiers[i] && tier_persistent(fs->tiers[i]))
			jobs[njobs++] =
			    (struct tier_sync_job){.fs = fs, .t = fs->tiers[i], .id = i};
	for (int j = 1; j < njobs; j++)
		jobs[j].started = !pthread_create(&jobs[j].thread, NULL, tier_sync_main, &jobs[j]);
	for (int j = 0; j < njobs; j++)
		if (!jobs[j].started)
			tier_sync_main(&jobs[j]); /* the first, or no thread */
	int rc = 0;
	for (int j = 0; j < njobs; j++) {
		if (jobs[j].started)
			pthread_join(jobs[j].thread, NULL);
		int i = jobs[j].id;
		err[i] = jobs[j].rc;
		end[i] = jobs[j].end;
		if (err[i] && !rc)
			rc = err[i];
	}
	tfs_lock(&fs->lock);
	for (size_t h = 0; h < fs->itab_size; h++)
		for (struct inode *in = fs->itab[h]; in; in = in->hnext)
			for (int i = 0; i < n; i++) {
				if (!in->wb_first[i])
					continue;
				if (err[i] && in->wb_first[i] <= end[i] && !in->wb_err)
					in->wb_err = err[i];
				if (in->wb_first[i] > epoch[i])
					continue;
				/* Write-backs after this sync began are not
				 * covered: the next sync answers for them. */
				in->wb_first[i] = in->wb_last[i] <= epoch[i] ? 0 : epoch[i] + 1;
			}
	tfs_unlock(&fs->lock);
	fs->commit.rounds_done = round;
	fs->commit.round_rc = rc;
	tfs_unlock(&fs->commit.sync_lock);
	return rc;
}

/* Write back every dirty block of IN (pinned ones too unless the file is
 * volatile); with DURABLE, also sync the tiers and the metadata. */
int cache_flush_inode(struct fs *fs, struct inode *in, bool durable)
{
	struct flush_batch batch = {.fs = fs};
	tfs_lock(&fs->lock);
	/* Changes from here on need a flush of their own. */
	bool unsynced = in->unsynced;
	if (durable)
		in->unsynced = false;
	int rc = 0;
	if (!inode_is_volatile(in)) {
		for (int pass = 0; pass < 2 && !rc; pass++) {
			fs_for_each_blk (in, i, 0) {
				if ((rc = flush_block(fs, in, i, &batch)))
					break;
			}
			flush_batch_wait(fs, &batch);
			if (in->ndirty == 0)
				break;
		}
		while (in->nflushing)
			tfs_cond_wait(&fs->cond, &fs->lock);
	}
	tfs_unlock(&fs->lock);
	if (!rc)
		rc = batch.err;
	if (!rc && durable)
		sync_tiers(fs); /* a failure that concerns IN is in its wb_err */
	int r = durable ? cache_commit_durable(fs) : cache_commit(fs);
	if (!rc)
		rc = r;
	tfs_lock(&fs->lock);
	if (!rc && durable)
		rc = in->wb_err;
	if (rc && durable && unsynced)
		in->unsynced = true;
	tfs_unlock(&fs->lock);
	return rc;
}

/* Write back every dirty block, each once: a block whose write-back fails
 * here stays dirty and is not tried again. Picking it again, as any dirty
 * block, retried it for ever while the disk failed its writes, and the
 * daemon never exited at unmount. */
int cache_flush_all(struct fs *fs)
{
	struct flush_batch batch = {.fs = fs};
	int rc = 0;
	tfs_lock(&fs->lock);
	/* Failures before this call are the flusher's: those get a try too. */
	for (struct centry *e = lru_oldest(fs, LRU_DIRTY, true); e; e = lru_older(fs, e, true))
		e->wb_failed = false;
	for (;;) {
		struct centry *pick = NULL;
		for (struct centry *e = lru_oldest(fs, LRU_DIRTY, true); e;
		     e = lru_older(fs, e, true))
			if (e->dirty && !e->flushing && !e->wb_failed && e->refs == 0 &&
			    e->state == CE_VALID && !inode_is_volatile(e->inode)) {
				pick = e;
				break;
			}
		if (!pick) {
			if (batch.inflight) {
				tfs_cond_wait(&fs->cond, &fs->lock);
				continue;
			}
			break;
		}
		int r = flush_start(fs, pick, &batch, TIER_PRIO_WRITEBACK);
		if (r == -EAGAIN)
			continue;
		if (r) {
			rc = r;
			break;
		}
	}
	flush_batch_wait(fs, &batch);
	tfs_unlock(&fs->lock);
	if (!rc)
		rc = batch.err;
	int r = sync_tiers(fs);
	if (!rc)
		rc = r;
	r = cache_commit_durable(fs);
	return rc ? rc : r;
}
