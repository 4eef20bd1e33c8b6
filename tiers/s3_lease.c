/*
 * tiers/s3_lease.c — keeping one daemon per prefix, and cleaning up after
 * a crash.
 *
 * Lease: an object PREFIX + "tierfs.lease" naming its owner (host, pid)
 * and when it was last renewed. Open refuses a prefix whose lease another
 * owner renewed less than lease_timeout ago (as the posix tier's flock
 * refuses a directory), takes over an older one, and reads the lease back
 * after writing it, so that of two daemons started together the one whose
 * write lost finds out. A thread renews it every quarter of lease_timeout;
 * close removes it. S3 has no lock primitive, so this is a guard against
 * mistakes (two nodes given the same prefix), not a consensus protocol.
 *
 * Sweep: after mount (tier_mounted) the slot bitmap names every block the
 * block maps use. Objects under the prefix whose slot is free are left
 * over from a crash between a PUT and the metadata commit naming it, or
 * from DELETEs never sent; a background thread lists the prefix and queues
 * their DELETEs through the data path (s3_io_delete_orphan), which checks
 * the bitmap again under the lock a new allocation of the slot takes.
 */
#include "tiers/s3_int.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEASE_NAME "tierfs.lease"

static void *s3_lease_main(void *arg);

static struct s3_req *lease_req(CURL *easy, const struct s3_tier *s, enum s3_method m)
{
	struct s3_req *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->easy = easy;
	r->method = m;
	r->resp_max = 4096;
	snprintf(r->key, sizeof(r->key), "%s", s->lease_key);
	return r;
}

static void lease_free(struct s3_req *r)
{
	if (r) {
		s3_req_release(r);
		free(r);
	}
}

/* Fill s->lease_body with our owner line and the time now. */
static void lease_body(struct s3_tier *s)
{
	char host[256];
	if (gethostname(host, sizeof(host)))
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	snprintf(s->lease_body, sizeof(s->lease_body), "tierfs lease\nhost=%s\npid=%ld\ntime=%ld\n",
		 host, (long)getpid(), (long)time(NULL));
}

/* The owner part (host and pid lines) of a lease body, for comparing. */
static void lease_owner(const char *body, char *out, size_t len)
{
	const char *h = strstr(body, "host=");
	const char *t = strstr(body, "time=");
	size_t n = h && t && t > h ? (size_t)(t - h) : 0;
	if (n >= len)
		n = len - 1;
	memcpy(out, h ? h : "", n);
	out[n] = '\0';
}

/* Whether the lease in BODY belongs to a process of this host that is gone
 * (a daemon killed or crashed here): its lease need not age out first. */
static bool owner_dead(const char *body)
{
	char host[256], lhost[256] = "";
	const char *h = strstr(body, "host="), *p = strstr(body, "pid=");
	if (!h || !p || gethostname(host, sizeof(host)))
		return false;
	host[sizeof(host) - 1] = '\0';
	size_t n = strcspn(h + 5, "\n");
	if (n >= sizeof(lhost))
		return false;
	memcpy(lhost, h + 5, n);
	lhost[n] = '\0';
	long pid = atol(p + 4);
	if (strcmp(host, lhost) || pid <= 0)
		return false;
	if (pid == (long)getpid())
		return true;
	/* A pid reused by another program counts as gone too. */
	char path[64], comm[64] = "";
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return kill((pid_t)pid, 0) && errno == ESRCH;
	bool ours = fgets(comm, sizeof(comm), f) && !strncmp(comm, "tierfs", 6);
	fclose(f);
	return !ours;
}

static int lease_put(struct s3_tier *s, CURL *easy, char *msg, size_t msglen)
{
	struct s3_req *r = lease_req(easy, s, S3_PUT);
	if (!r)
		return -ENOMEM;
	lease_body(s);
	r->body = s->lease_body;
	r->len = strlen(s->lease_body);
	if (!s->https)
		sigv4_sha256_hex(r->body, r->len, r->payload);
	enum s3_class c = s3_req_run(s, r, true);
	if (c != S3_OK)
		s3_req_describe(r, msg, msglen);
	lease_free(r);
	return c == S3_OK ? 0 : -EIO;
}

/* GET the lease into BODY ("" when there is none). 0 or -EIO (MSG says why). */
static int lease_get(struct s3_tier *s, CURL *easy, char *body, size_t len, char *msg,
		     size_t msglen)
{
	struct s3_req *r = lease_req(easy, s, S3_GET);
	if (!r)
		return -ENOMEM;
	r->missing_ok = true;
	enum s3_class c = s3_req_run(s, r, true);
	int rc = 0;
	body[0] = '\0';
	if (c != S3_OK)
		rc = -EIO;
	else if (r->status != 404)
		snprintf(body, len, "%s", r->resp ? r->resp : "");
	if (rc)
		s3_req_describe(r, msg, msglen);
	lease_free(r);
	return rc;
}

int s3_lease_take(struct s3_tier *s)
{
	struct tier *t = s->t;
	snprintf(s->lease_key, sizeof(s->lease_key), "%s%s", s->p.prefix, LEASE_NAME);
	CURL *easy = curl_easy_init();
	if (!easy)
		return -ENOMEM;
	char body[1024], msg[1600], mine[512], theirs[512];
	int rc = lease_get(s, easy, body, sizeof(body), msg, sizeof(msg));
	if (rc) {
		tier_log(t, "reading the lease: %s", msg);
		goto out;
	}
	if (body[0]) {
		const char *tp = strstr(body, "time=");
		long when = tp ? atol(tp + 5) : 0;
		long age = (long)time(NULL) - when;
		lease_owner(body, theirs, sizeof(theirs));
		for (char *c = theirs; *c; c++)
			if (*c == '\n')
				*c = ' ';
		bool dead = owner_dead(body);
		if (!dead && age < (long)(s->p.lease_timeout_ms / 1000)) {
			tier_log(t,
				 "prefix '%s' of bucket '%s' is in use by another tierfs (%s"
				 "renewed %ld s ago); a lease not renewed for %u s is taken over",
				 s->p.prefix, s->p.bucket, theirs, age < 0 ? 0 : age,
				 s->p.lease_timeout_ms / 1000);
			rc = -EBUSY;
			goto out;
		}
		tier_log(t, "taking over the %s lease of %s(last renewed %ld s ago)",
			 dead ? "dead daemon's" : "stale", theirs, age);
	}
	if ((rc = lease_put(s, easy, msg, sizeof(msg)))) {
		tier_log(t, "writing the lease: %s", msg);
		goto out;
	}
	/* Two daemons that read "no lease" together both wrote: the store
	 * kept one, and the other must not go on. */
	if ((rc = lease_get(s, easy, body, sizeof(body), msg, sizeof(msg)))) {
		tier_log(t, "reading the lease back: %s", msg);
		goto out;
	}
	lease_owner(body, theirs, sizeof(theirs));
	lease_owner(s->lease_body, mine, sizeof(mine));
	if (strcmp(theirs, mine)) {
		tier_log(t,
			 "prefix '%s' of bucket '%s' was taken by another tierfs starting "
			 "at the same time",
			 s->p.prefix, s->p.bucket);
		rc = -EBUSY;
		goto out;
	}
	s->lease_up = true;
out:
	curl_easy_cleanup(easy);
	if (!rc) {
		int e = pthread_create(&s->lease_thread, NULL, s3_lease_main, s);
		if (e) {
			tier_log(t, "cannot start the lease thread: %s", strerror(e));
			s->lease_up = false;
			return -e;
		}
	}
	return rc;
}

/* Sleep up to NS on lease_cond; true when asked to stop. */
static bool lease_wait(struct s3_tier *s, uint64_t ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t end = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec + ns;
	ts.tv_sec = (time_t)(end / 1000000000ULL);
	ts.tv_nsec = (long)(end % 1000000000ULL);
	pthread_mutex_lock(&s->lease_lock);
	while (!s->lease_stop && pthread_cond_timedwait(&s->lease_cond, &s->lease_lock, &ts) == 0)
		;
	bool stop = s->lease_stop;
	pthread_mutex_unlock(&s->lease_lock);
	return stop;
}

static void *s3_lease_main(void *arg)
{
	struct s3_tier *s = arg;
	CURL *easy = curl_easy_init();
	uint64_t period = (uint64_t)s->p.lease_timeout_ms * 1000000 / 4;
	bool lost = false;
	while (easy && !lease_wait(s, period)) {
		if (lost)
			continue;
		char body[1024], msg[1600], mine[512], theirs[512];
		if (lease_get(s, easy, body, sizeof(body), msg, sizeof(msg))) {
			tier_log(s->t, "renewing the lease: %s", msg);
			continue;
		}
		lease_owner(body, theirs, sizeof(theirs));
		lease_owner(s->lease_body, mine, sizeof(mine));
		if (body[0] && strcmp(theirs, mine)) {
			tier_log(s->t,
				 "the lease of prefix '%s' was taken over by another tierfs: two "
				 "daemons now write the same prefix; unmount one of them",
				 s->p.prefix);
			lost = true;
			continue;
		}
		if (lease_put(s, easy, msg, sizeof(msg)))
			tier_log(s->t, "renewing the lease: %s", msg);
	}
	if (easy)
		curl_easy_cleanup(easy);
	return NULL;
}

void s3_lease_release(struct s3_tier *s)
{
	if (!s->lease_up)
		return;
	pthread_mutex_lock(&s->lease_lock);
	s->lease_stop = true;
	pthread_cond_broadcast(&s->lease_cond);
	pthread_mutex_unlock(&s->lease_lock);
	pthread_join(s->lease_thread, NULL);
	s->lease_up = false;
	CURL *easy = curl_easy_init();
	struct s3_req *r = easy ? lease_req(easy, s, S3_DELETE) : NULL;
	if (r && s3_req_run(s, r, true) != S3_OK) {
		char msg[1600];
		s3_req_describe(r, msg, sizeof(msg));
		tier_log(s->t, "removing the lease: %s", msg);
	}
	lease_free(r);
	if (easy)
		curl_easy_cleanup(easy);
}

/* The text of the first <TAG>...</TAG> at or after P into OUT; returns
 * where it ends, or NULL. */
static const char *xml_field(const char *p, const char *tag, char *out, size_t len)
{
	char open[64], close[64];
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	const char *b = strstr(p, open);
	if (!b)
		return NULL;
	b += strlen(open);
	const char *e = strstr(b, close);
	if (!e)
		return NULL;
	size_t n = (size_t)(e - b);
	if (n >= len)
		n = len - 1;
	memcpy(out, b, n);
	out[n] = '\0';
	return e + strlen(close);
}

static bool sweep_stopping(struct s3_tier *s)
{
	pthread_mutex_lock(&s->lease_lock);
	bool stop = s->lease_stop;
	pthread_mutex_unlock(&s->lease_lock);
	return stop;
}

/* DELETE KEY at once, on a handle of its own (the listing's is busy). */
static void delete_beyond(struct s3_tier *s, const char *key)
{
	CURL *easy = curl_easy_init();
	struct s3_req *r = easy ? calloc(1, sizeof(*r)) : NULL;
	if (r) {
		r->easy = easy;
		r->method = S3_DELETE;
		snprintf(r->key, sizeof(r->key), "%s", key);
		if (s3_req_run(s, r, true) != S3_OK) {
			char msg[1600];
			s3_req_describe(r, msg, sizeof(msg));
			tier_log(s->t, "orphan sweep: %s", msg);
		}
		s3_req_release(r);
		free(r);
	}
	if (easy)
		curl_easy_cleanup(easy);
}

static void *sweep_main(void *arg)
{
	struct s3_tier *s = arg;
	CURL *easy = curl_easy_init();
	struct s3_req *r = easy ? calloc(1, sizeof(*r)) : NULL;
	char token[1024] = "", key[1024];
	uint64_t listed = 0, orphans = 0;
	bool failed = !r;
	while (r && !sweep_stopping(s)) {
		s3_req_release(r);
		memset(r, 0, sizeof(*r));
		r->easy = easy;
		r->method = S3_GET;
		r->resp_max = 16u << 20;
		r->query[0] = (struct sigv4_pair){"list-type", "2"};
		r->query[1] = (struct sigv4_pair){"prefix", s->p.prefix};
		r->nquery = 2;
		if (token[0])
			r->query[r->nquery++] = (struct sigv4_pair){"continuation-token", token};
		if (s3_req_run(s, r, true) != S3_OK) {
			char msg[1600];
			s3_req_describe(r, msg, sizeof(msg));
			tier_log(s->t, "orphan sweep: listing the prefix: %s", msg);
			failed = true;
			break;
		}
		const char *p = r->resp ? r->resp : "";
		const char *c;
		while ((c = strstr(p, "<Contents>")) &&
		       (p = xml_field(c, "Key", key, sizeof(key)))) {
			uint64_t slot;
			listed++;
			if (!s3_parse_key(s, key, &slot))
				continue;
			if (slot >= s->t->slots_total) {
				/* Beyond a capacity made smaller since: no block
				 * can live there (the mount would have failed). */
				orphans++;
				delete_beyond(s, key);
			} else if (!(__atomic_load_n(&s->t->slots.words[slot / 64],
						     __ATOMIC_ACQUIRE) >>
					 (slot % 64) &
				     1)) {
				orphans++;
				s3_io_delete_orphan(s, slot);
			}
		}
		char trunc[16] = "";
		xml_field(r->resp ? r->resp : "", "IsTruncated", trunc, sizeof(trunc));
		if (strcmp(trunc, "true") ||
		    !xml_field(r->resp, "NextContinuationToken", token, sizeof(token)))
			break;
	}
	if (!failed && orphans)
		tier_log(s->t,
			 "orphan sweep: %" PRIu64 " of %" PRIu64
			 " objects under the prefix belong to no block; deleting them",
			 orphans, listed);
	if (r) {
		s3_req_release(r);
		free(r);
	}
	if (easy)
		curl_easy_cleanup(easy);
	return NULL;
}

void s3_sweep_start(struct s3_tier *s)
{
	if (s->sweep_up)
		return;
	int e = pthread_create(&s->sweep_thread, NULL, sweep_main, s);
	if (e)
		tier_log(s->t, "cannot start the orphan sweep: %s", strerror(e));
	else
		s->sweep_up = true;
}

void s3_sweep_stop(struct s3_tier *s)
{
	if (!s->sweep_up)
		return;
	pthread_mutex_lock(&s->lease_lock);
	s->lease_stop = true;
	pthread_cond_broadcast(&s->lease_cond);
	pthread_mutex_unlock(&s->lease_lock);
	pthread_join(s->sweep_thread, NULL);
	s->sweep_up = false;
}
