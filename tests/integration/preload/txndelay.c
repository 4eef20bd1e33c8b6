/*
 * txndelay.so — LD_PRELOAD into tierfs to widen one race window: every
 * other LMDB write transaction sleeps TXNDELAY_US microseconds before it
 * begins, as one does that waits behind another writer or is preempted.
 * A metadata commit that snapshots under the cache lock and then begins
 * its transaction may so be overtaken by a later commit (t_commitorder).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <lmdb.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*begin_fn)(MDB_env *, MDB_txn *, unsigned int, MDB_txn **);

int mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned int flags, MDB_txn **txn)
{
	static _Atomic(begin_fn) real;
	static atomic_uint n;
	begin_fn f = atomic_load(&real);
	if (!f) {
		f = (begin_fn)dlsym(RTLD_NEXT, "mdb_txn_begin");
		if (!f)
			return EINVAL;
		atomic_store(&real, f);
	}
	const char *us = getenv("TXNDELAY_US");
	if (us && !(flags & MDB_RDONLY) && (atomic_fetch_add(&n, 1) & 1))
		usleep((useconds_t)atoi(us));
	return f(env, parent, flags, txn);
}
