/*
 * txnfail.so — LD_PRELOAD into tierfs to make its metadata commits fail:
 * while the file named by TXNFAIL_FLAG exists, every mdb_txn_commit frees
 * the transaction and returns MDB_MAP_FULL, as LMDB does when the map is
 * full or the metadata disk fails (t_nsfail).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <lmdb.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*commit_fn)(MDB_txn *);
typedef void (*abort_fn)(MDB_txn *);

int mdb_txn_commit(MDB_txn *txn)
{
	static _Atomic(commit_fn) real;
	static _Atomic(abort_fn) real_abort;
	commit_fn f = atomic_load(&real);
	abort_fn a = atomic_load(&real_abort);
	if (!f || !a) {
		f = (commit_fn)dlsym(RTLD_NEXT, "mdb_txn_commit");
		a = (abort_fn)dlsym(RTLD_NEXT, "mdb_txn_abort");
		if (!f || !a)
			return EINVAL;
		atomic_store(&real, f);
		atomic_store(&real_abort, a);
	}
	const char *flag = getenv("TXNFAIL_FLAG");
	if (flag && access(flag, F_OK) == 0) {
		a(txn);
		return MDB_MAP_FULL;
	}
	return f(txn);
}
