/*
 * tiers/s3_int.h — what the files of the s3 backend share: the state of one
 * open s3 tier and the functions that cross its files. Private to s3*.c; the
 * rest of tierfs sees the backend only through tier_s3_backend (backend.h).
 *
 *   s3.c        open (credentials, mount-time checks) and close, the table
 *   s3_http.c   one request: URL, SigV4 headers, libcurl easy setup, the
 *               verdict on its outcome (done, retry, fail) and the stats
 *   s3_io.c     the data path: scheduler, libcurl multi on the tier's own
 *               thread, retries with back-off, deferred DELETEs
 *   s3_lease.c  the lease object that keeps a second daemon off the prefix,
 *               and the background sweep of orphaned objects
 *
 * One object per slot: PREFIX + 2 hex digits of a hash of the slot (so one
 * bucket partition is not hot) + "/" + the slot in 16 hex digits.
 *
 * Locks: lock guards the scheduler, the request lists and the delete
 * state; it is never held across a call out of the backend
 * (tier_io_complete) nor across a network transfer.
 */
#ifndef TIERFS_S3_INT_H
#define TIERFS_S3_INT_H

#include "tiers/backend.h"
#include "tiers/sched.h"
#include "tiers/sigv4.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* S3_POST: a DeleteObjects batch (POST ?delete with an XML body). */
enum s3_method { S3_GET, S3_PUT, S3_DELETE, S3_HEAD, S3_POST };

/* How a request ended, for retries and the error counters. */
enum s3_class {
	S3_OK = 0,
	S3_RETRY_5XX,	   /* 500, 502, 503, 504 ... */
	S3_RETRY_THROTTLE, /* 429, 503 SlowDown */
	S3_RETRY_NET,	   /* timeout, reset, refused */
	S3_FAIL_4XX,	   /* refused for good */
	S3_FAIL_OTHER,	   /* a short object, a local error */
};

#define S3_LAT_BUCKETS 64

struct s3_stats {
	uint64_t requests, retries;
	uint64_t err_4xx, err_5xx, throttled, network;
	uint64_t lat[S3_LAT_BUCKETS]; /* log2 microseconds of each request */
};

/* One HTTP request and the state of its attempts. */
struct s3_req {
	enum s3_method method;
	char key[1024];		    /* object key, unencoded ("" = the bucket) */
	struct sigv4_pair query[4]; /* raw names and values, the caller's strings */
	size_t nquery;
	char *body;	  /* PUT: bytes to send; GET: where the object goes */
	size_t len;	  /* PUT: body length; GET: bytes wanted (0 = any, into resp) */
	bool range;	  /* GET: ask for bytes 0..len-1 */
	bool missing_ok;  /* a 404 is an answer (status 404, class S3_OK) */
	char payload[65]; /* PUT: hex SHA-256 of body, or "" for UNSIGNED-PAYLOAD */
	size_t got;	  /* bytes received into body */
	size_t sent;	  /* bytes of body handed to libcurl */
	char *resp;	  /* error or listing body (malloc'd, NUL-terminated) */
	size_t resp_len, resp_cap, resp_max;
	long status; /* HTTP status of the last attempt */
	int curl_rc; /* CURLcode of the last attempt */
	char curl_err[CURL_ERROR_SIZE];
	long server_date; /* the Date header, Unix seconds, 0 if none */
	unsigned attempts;
	uint64_t first_ns, start_ns, due_ns;
	struct curl_slist *hdrs;
	CURL *easy;
	/* Data path only. */
	struct tier_io *io; /* NULL: a DELETE (or a batch) of the delete queue */
	uint64_t *slots;    /* a batch: the slots whose objects it deletes (malloc'd) */
	size_t nslots;
	char md5[32]; /* POST: base64 MD5 of the body (Content-MD5) */
	uint64_t slot;
	struct s3_req *next;
};

struct s3_tier {
	struct tier *t;
	struct tier_s3_params p;
	char access_key[256], secret_key[256], token[4096];
	/* Parsed endpoint. */
	bool https;
	char host[720];	 /* the Host header: host[:port], bucket. in front if virtual */
	char base[1200]; /* URL up to the key: scheme://host[:port]/bucket */

	pthread_mutex_t lock;
	struct sched sched;	  /* under lock */
	struct s3_req *free_reqs; /* under lock */
	struct s3_req *retry;	  /* under lock: waiting for due_ns */
	struct tier_io *parked;	  /* under lock: PUTs waiting for a DELETE of their slot */
	uint64_t *del_pending;	  /* under lock: bit per slot, a DELETE is wanted */
	uint64_t *del_inflight;	  /* under lock: bit per slot, a DELETE is on the wire */
	uint64_t *del_queue;	  /* under lock: ring of slots to delete */
	size_t del_head, del_count, del_cap;
	unsigned del_running, del_limit; /* under lock */
	bool stop;			 /* under lock */

	CURLM *multi; /* the I/O thread's */
	pthread_t thread;
	bool thread_up;

	/* Lease and sweep. */
	char lease_key[1024];
	char lease_body[512];
	pthread_t lease_thread;
	bool lease_up;
	pthread_mutex_t lease_lock;
	pthread_cond_t lease_cond;
	bool lease_stop; /* under lease_lock */
	pthread_t sweep_thread;
	bool sweep_up;

	struct s3_stats st; /* __atomic adds */
};

/* s3_http.c */
void s3_object_key(const struct s3_tier *s, uint64_t slot, char *key, size_t len);
/* Whether KEY (below the prefix) names a slot object; its slot in *SLOT. */
bool s3_parse_key(const struct s3_tier *s, const char *key, uint64_t *slot);
/* Set up R's easy handle (R->easy must exist) for its next attempt. 0 or -errno. */
int s3_req_setup(struct s3_tier *s, struct s3_req *r);
/* After an attempt: fill status, classify, count. */
enum s3_class s3_req_finish(struct s3_tier *s, struct s3_req *r, CURLcode rc);
/* The delay before retry number R->attempts + 1, or 0 when the request
 * must not be retried again (attempts or time spent). */
uint64_t s3_retry_delay(const struct s3_tier *s, const struct s3_req *r);
/* One line naming the failure of R (status, S3 code, key) into BUF. */
void s3_req_describe(const struct s3_req *r, char *buf, size_t len);
/* The <Code> of an S3 error body, or "" */
void s3_error_code(const struct s3_req *r, char *code, size_t len);
/* Run R to its end on the calling thread (blocking), with retries when
 * RETRY. Returns its last class. */
enum s3_class s3_req_run(struct s3_tier *s, struct s3_req *r, bool retry);
void s3_req_release(struct s3_req *r); /* frees resp and hdrs, keeps easy */
void s3_stats_add(struct s3_tier *s, uint64_t lat_ns);

/* s3_io.c */
int s3_io_start(struct s3_tier *s);
void s3_io_stop(struct s3_tier *s);
int s3_io_submit(struct tier *t, struct tier_io *io);
void s3_io_free_slot(struct tier *t, uint64_t slot);
int s3_io_prepare_slot(struct tier *t, uint64_t slot, bool need_space);
/* Queue a DELETE of SLOT's object if the slot is still free (the sweep). */
void s3_io_delete_orphan(struct s3_tier *s, uint64_t slot);

/* s3_lease.c */
int s3_lease_take(struct s3_tier *s);
void s3_lease_release(struct s3_tier *s);
void s3_sweep_start(struct s3_tier *s);
void s3_sweep_stop(struct s3_tier *s);

#endif
