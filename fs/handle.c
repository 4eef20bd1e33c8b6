/*
 * fs/handle.c — file handle ids with references (see handle.h).
 *
 * Locking: fh_lock guards the table, every node's refs and next. Destroy
 * callbacks run without it.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "fs/handle.h"

#define FH_BUCKETS 256

static pthread_mutex_t fh_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fh_node *fh_table[FH_BUCKETS]; /* fh_lock */
static uint64_t fh_next_id = 1;		     /* fh_lock */

static struct fh_node **bucket(uint64_t id)
{
	return &fh_table[id % FH_BUCKETS];
}

uint64_t fh_publish(struct fh_node *n, void (*destroy)(struct fh_node *))
{
	pthread_mutex_lock(&fh_lock);
	n->id = fh_next_id++;
	n->refs = 1;
	n->destroy = destroy;
	n->next = *bucket(n->id);
	*bucket(n->id) = n;
	pthread_mutex_unlock(&fh_lock);
	return n->id;
}

/* The pointer to ID's link in its chain, or NULL. fh_lock held. */
static struct fh_node **find(uint64_t id)
{
	for (struct fh_node **pp = bucket(id); *pp; pp = &(*pp)->next)
		if ((*pp)->id == id)
			return pp;
	return NULL;
}

struct fh_node *fh_get(uint64_t id)
{
	pthread_mutex_lock(&fh_lock);
	struct fh_node **pp = find(id);
	struct fh_node *n = pp ? *pp : NULL;
	if (n)
		n->refs++;
	pthread_mutex_unlock(&fh_lock);
	return n;
}

void fh_put(struct fh_node *n)
{
	pthread_mutex_lock(&fh_lock);
	bool last = --n->refs == 0;
	pthread_mutex_unlock(&fh_lock);
	if (last)
		n->destroy(n);
}

void fh_release(uint64_t id)
{
	pthread_mutex_lock(&fh_lock);
	struct fh_node **pp = find(id);
	struct fh_node *n = pp ? *pp : NULL;
	bool last = false;
	if (n) {
		*pp = n->next;
		last = --n->refs == 0;
	}
	pthread_mutex_unlock(&fh_lock);
	if (last)
		n->destroy(n);
}
