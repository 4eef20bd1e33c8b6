/*
 * tiers/s3_io.c — the s3 tier's data path: block I/Os queue in the tier's
 * scheduler (sched.h: priorities, queue_depth in flight, max_bandwidth) and
 * run as HTTP requests on the libcurl multi interface of one thread per
 * tier, whose connections stay open and are reused. Failed attempts that
 * may succeed later (5xx, throttling, timeouts, resets) wait out a
 * back-off and go again; the others complete the I/O with EIO.
 *
 * Freed slots: their DELETEs are queued here and sent off the I/O path,
 * below every block I/O, batched into DeleteObjects requests (one request
 * per thousand objects: deleting a large file costs a few requests, not one
 * per block). A slot allocated again before its
 * DELETE went out just drops it (the PUT replaces the object anyway); a PUT
 * whose slot's DELETE is on the wire waits for it, and a slot has at most
 * one DELETE on the wire, so a DELETE can never land after the new object.
 */
#include "tiers/s3_int.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Objects one DeleteObjects request removes at most (S3's limit). */
#define S3_DELETE_BATCH 1000

static bool bit_get(const uint64_t *w, uint64_t b)
{
	return w[b / 64] >> (b % 64) & 1;
}

static void bit_put(uint64_t *w, uint64_t b, bool v)
{
	if (v)
		w[b / 64] |= 1ULL << (b % 64);
	else
		w[b / 64] &= ~(1ULL << (b % 64));
}

/* Whether the tier's allocator has SLOT in use (read without its help:
 * the bitmap is lock-free). */
static bool slot_used(const struct tier *t, uint64_t slot)
{
	uint64_t w = __atomic_load_n(&t->slots.words[slot / 64], __ATOMIC_ACQUIRE);
	return w >> (slot % 64) & 1;
}

static struct s3_req *req_get(struct s3_tier *s)
{
	struct s3_req *r = s->free_reqs;
	if (r) {
		s->free_reqs = r->next;
	} else {
		r = calloc(1, sizeof(*r));
		if (!r)
			return NULL;
		if (!(r->easy = curl_easy_init())) {
			free(r);
			return NULL;
		}
	}
	CURL *e = r->easy;
	char *resp = r->resp;
	size_t cap = r->resp_cap;
	memset(r, 0, sizeof(*r));
	r->easy = e;
	r->resp = resp;
	r->resp_cap = cap;
	return r;
}

static void req_put(struct s3_tier *s, struct s3_req *r)
{
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
	r->next = s->free_reqs;
	s->free_reqs = r;
}

static void wake(struct s3_tier *s)
{
	if (s->multi)
		curl_multi_wakeup(s->multi);
}

int s3_io_submit(struct tier *t, struct tier_io *io)
{
	struct s3_tier *s = t->be_priv;
	pthread_mutex_lock(&s->lock);
	if (io->op == TIER_OP_WRITE && bit_get(s->del_pending, io->slot))
		bit_put(s->del_pending, io->slot, false);
	sched_push(&s->sched, io);
	pthread_mutex_unlock(&s->lock);
	wake(s);
	return 0;
}

int s3_io_set_max_bandwidth(struct tier *t)
{
	struct s3_tier *s = t->be_priv;
	uint64_t caps[2] = {__atomic_load_n(&t->max_bandwidth[TIER_OP_READ], __ATOMIC_RELAXED),
			    __atomic_load_n(&t->max_bandwidth[TIER_OP_WRITE], __ATOMIC_RELAXED)};
	pthread_mutex_lock(&s->lock);
	int rc = sched_set_caps(&s->sched, caps);
	pthread_mutex_unlock(&s->lock);
	/* A raised cap lets waiting requests go now rather than at the timer. */
	wake(s);
	return rc;
}

static int del_enqueue(struct s3_tier *s, uint64_t slot)
{
	if (bit_get(s->del_pending, slot))
		return 0;
	if (s->del_count == s->del_cap) {
		size_t nc = s->del_cap ? s->del_cap * 2 : 1024;
		uint64_t *nq = malloc(nc * sizeof(*nq));
		if (!nq)
			return -ENOMEM; /* the object stays: the next mount's sweep takes it */
		for (size_t i = 0; i < s->del_count; i++)
			nq[i] = s->del_queue[(s->del_head + i) % s->del_cap];
		free(s->del_queue);
		s->del_queue = nq;
		s->del_cap = nc;
		s->del_head = 0;
	}
	s->del_queue[(s->del_head + s->del_count++) % s->del_cap] = slot;
	bit_put(s->del_pending, slot, true);
	return 0;
}

void s3_io_free_slot(struct tier *t, uint64_t slot)
{
	struct s3_tier *s = t->be_priv;
	if (!slot_used(t, slot))
		return; /* not allocated: tier_free logs it */
	pthread_mutex_lock(&s->lock);
	del_enqueue(s, slot);
	pthread_mutex_unlock(&s->lock);
	wake(s);
}

void s3_io_delete_orphan(struct s3_tier *s, uint64_t slot)
{
	pthread_mutex_lock(&s->lock);
	/* Under lock: an allocation of the slot either came first (the bit is
	 * set) or clears the pending DELETE in prepare_slot after this. */
	if (slot < s->t->slots_total && !slot_used(s->t, slot))
		del_enqueue(s, slot);
	pthread_mutex_unlock(&s->lock);
	wake(s);
}

int s3_io_prepare_slot(struct tier *t, uint64_t slot, bool need_space)
{
	(void)need_space;
	struct s3_tier *s = t->be_priv;
	pthread_mutex_lock(&s->lock);
	bit_put(s->del_pending, slot, false);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* A new request for a block I/O; NULL without memory. Under lock. */
static struct s3_req *io_req(struct s3_tier *s, struct tier_io *io)
{
	struct s3_req *r = req_get(s);
	if (!r)
		return NULL;
	r->io = io;
	r->slot = io->slot;
	r->method = io->op == TIER_OP_WRITE ? S3_PUT : S3_GET;
	r->body = io->buf;
	r->len = io->len;
	r->range = true;
	s3_object_key(s, io->slot, r->key, sizeof(r->key));
	return r;
}

static void complete_io(struct s3_tier *s, struct s3_req *r, enum s3_class c)
{
	struct tier_io *io = r->io;
	int result = c == S3_OK ? 0 : -EIO;
	if (c != S3_OK) {
		char msg[1600];
		s3_req_describe(r, msg, sizeof(msg));
		tier_log_io_error(s->t, "slot %" PRIu64 ": %s", io->slot, msg);
	}
	pthread_mutex_lock(&s->lock);
	sched_done(&s->sched);
	req_put(s, r);
	pthread_mutex_unlock(&s->lock);
	tier_io_complete(io, result);
}

/* Up to S3_DELETE_BATCH queued slots still to delete, as one request: a
 * DELETE for one, a DeleteObjects POST for more. NULL when none can go
 * now, or without memory (the objects stay for the next mount's sweep).
 * Under lock.
 *
 * A slot whose DELETE is still on the wire stays queued until that one is
 * answered (it was freed, allocated and freed again meanwhile): with two
 * DELETEs of a slot on the wire, the first answer would let a parked PUT
 * of the slot go while the second DELETE could still land after it and
 * remove acknowledged data. One DELETE per slot on the wire keeps
 * del_inflight exact, so a PUT never runs while its slot's DELETE may
 * still land. */
static struct s3_req *del_batch(struct s3_tier *s)
{
	size_t cap = s->del_count < S3_DELETE_BATCH ? s->del_count : S3_DELETE_BATCH;
	uint64_t *slots = malloc(cap * sizeof(*slots));
	struct s3_req *r = slots ? req_get(s) : NULL;
	if (!r) {
		free(slots);
		return NULL;
	}
	size_t n = 0;
	for (size_t seen = s->del_count; seen && n < cap; seen--) {
		uint64_t slot = s->del_queue[s->del_head];
		s->del_head = (s->del_head + 1) % s->del_cap;
		s->del_count--;
		if (!bit_get(s->del_pending, slot))
			continue; /* allocated again since */
		if (bit_get(s->del_inflight, slot)) {
			/* Back to the tail (the slot just taken left room). */
			s->del_queue[(s->del_head + s->del_count++) % s->del_cap] = slot;
			continue;
		}
		bit_put(s->del_pending, slot, false);
		bit_put(s->del_inflight, slot, true);
		slots[n++] = slot;
	}
	if (!n) {
		free(slots);
		req_put(s, r);
		return NULL;
	}
	s->del_running++;
	r->slots = slots;
	r->nslots = n;
	r->slot = slots[0];
	r->method = n == 1 ? S3_DELETE : S3_POST;
	if (n == 1)
		s3_object_key(s, slots[0], r->key, sizeof(r->key));
	return r;
}

/* KEY with XML's special characters escaped, appended at P; returns the end. */
static char *xml_escape(char *p, const char *key)
{
	for (; *key; key++) {
		const char *e = *key == '&'   ? "&amp;"
				: *key == '<' ? "&lt;"
				: *key == '>' ? "&gt;"
					      : NULL;
		if (e) {
			p = stpcpy(p, e);
		} else {
			*p++ = *key;
		}
	}
	return p;
}

/* The DeleteObjects body of batch R (quiet: the answer lists failures
 * only), its MD5 and SHA-256. 0 or -errno. */
static int del_body(struct s3_tier *s, struct s3_req *r)
{
	size_t per = 5 * strlen(s->p.prefix) + 64;
	char *b = malloc(r->nslots * per + 128);
	if (!b)
		return -ENOMEM;
	char *p = stpcpy(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
			    "<Delete><Quiet>true</Quiet>");
	for (size_t i = 0; i < r->nslots; i++) {
		char key[1024];
		s3_object_key(s, r->slots[i], key, sizeof(key));
		p = stpcpy(p, "<Object><Key>");
		p = xml_escape(p, key);
		p = stpcpy(p, "</Key></Object>");
	}
	p = stpcpy(p, "</Delete>");
	r->body = b;
	r->len = (size_t)(p - b);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (!EVP_Digest(b, r->len, md, &mdlen, EVP_md5(), NULL) ||
	    sigv4_sha256_hex(b, r->len, r->payload))
		return -EIO;
	EVP_EncodeBlock((unsigned char *)r->md5, md, (int)mdlen);
	r->query[0] = (struct sigv4_pair){"delete", ""};
	r->nquery = 1;
	snprintf(r->key, sizeof(r->key), "%s", "");
	return 0;
}

static void complete_delete(struct s3_tier *s, struct s3_req *r, enum s3_class c)
{
	if (c != S3_OK) {
		char msg[1600];
		s3_req_describe(r, msg, sizeof(msg));
		tier_log_io_error(s->t, "deleting %zu freed slots: %s (left for the next sweep)",
				  r->nslots, msg);
	} else if (r->method == S3_POST && r->resp && strstr(r->resp, "<Error>")) {
		char code[64];
		const char *e = strstr(r->resp, "<Error>");
		struct s3_req tmp = {.resp = (char *)e};
		s3_error_code(&tmp, code, sizeof(code));
		tier_log_io_error(s->t,
				  "deleting %zu freed slots: some were refused (%s); left for the "
				  "next sweep",
				  r->nslots, code[0] ? code : "no code");
	}
	if (r->method == S3_POST)
		free(r->body);
	r->body = NULL;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < r->nslots; i++) {
		uint64_t slot = r->slots[i];
		bit_put(s->del_inflight, slot, false);
		/* PUTs that waited for this DELETE go back to their queue. */
		struct tier_io **pp = &s->parked;
		while (*pp) {
			struct tier_io *io = *pp;
			if (io->slot == slot) {
				*pp = io->next;
				sched_push(&s->sched, io);
			} else {
				pp = &io->next;
			}
		}
	}
	s->del_running--;
	free(r->slots);
	r->slots = NULL;
	req_put(s, r);
	pthread_mutex_unlock(&s->lock);
}

static void finish(struct s3_tier *s, struct s3_req *r, enum s3_class c)
{
	if (r->io)
		complete_io(s, r, c);
	else
		complete_delete(s, r, c);
}

/* Hand R to the multi handle for its next attempt. */
static void start(struct s3_tier *s, struct s3_req *r)
{
	if (r->method == S3_POST && !r->body && del_body(s, r)) {
		r->curl_rc = CURLE_OUT_OF_MEMORY;
		snprintf(r->curl_err, sizeof(r->curl_err), "cannot build the delete request");
		finish(s, r, S3_FAIL_OTHER);
		return;
	}
	if (r->method == S3_PUT && !s->https && !r->payload[0] &&
	    sigv4_sha256_hex(r->body, r->len, r->payload)) {
		r->curl_rc = CURLE_OUT_OF_MEMORY;
		snprintf(r->curl_err, sizeof(r->curl_err), "cannot hash the payload");
		finish(s, r, S3_FAIL_OTHER);
		return;
	}
	int rc = s3_req_setup(s, r);
	if (!rc && curl_multi_add_handle(s->multi, r->easy) != CURLM_OK)
		rc = -ENOMEM;
	if (rc) {
		r->curl_rc = CURLE_OUT_OF_MEMORY;
		snprintf(r->curl_err, sizeof(r->curl_err), "cannot start the request: %s",
			 strerror(-rc));
		finish(s, r, S3_FAIL_OTHER);
	}
}

static bool idle_locked(const struct s3_tier *s)
{
	return !sched_queued(&s->sched) && !sched_inflight(&s->sched) && !s->retry &&
	       !s->del_running && !s->parked;
}

static void *io_main(void *arg)
{
	struct s3_tier *s = arg;
	for (;;) {
		struct s3_req *go = NULL, **tail = &go;
		uint64_t now = tier_now_ns(), wait_ns = 0;
		pthread_mutex_lock(&s->lock);
		/* At close, queued DELETEs still go out (a few requests), each
		 * tried once: a store that is down leaves them to the next
		 * mount's sweep rather than hold up the unmount. */
		if (s->stop && idle_locked(s) && !s->del_count) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		/* Retries whose back-off is over. */
		for (struct s3_req **pp = &s->retry; *pp;) {
			struct s3_req *r = *pp;
			if (r->due_ns <= now) {
				*pp = r->next;
				r->next = NULL;
				*tail = r;
				tail = &r->next;
			} else {
				if (!wait_ns || r->due_ns - now < wait_ns)
					wait_ns = r->due_ns - now;
				pp = &r->next;
			}
		}
		struct tier_io *io;
		uint64_t cap_wait = 0;
		struct tier_io *failed = NULL;
		while ((io = sched_pop(&s->sched, now, &cap_wait))) {
			if (io->op == TIER_OP_WRITE && bit_get(s->del_inflight, io->slot)) {
				sched_done(&s->sched);
				io->next = s->parked;
				s->parked = io;
				continue;
			}
			struct s3_req *r = io_req(s, io);
			if (!r) {
				sched_done(&s->sched);
				io->next = failed;
				failed = io;
				continue;
			}
			*tail = r;
			tail = &r->next;
		}
		if (cap_wait && (!wait_ns || cap_wait < wait_ns))
			wait_ns = cap_wait;
		while (s->del_running < s->del_limit && s->del_count) {
			struct s3_req *r = del_batch(s);
			if (!r)
				break;
			*tail = r;
			tail = &r->next;
		}
		pthread_mutex_unlock(&s->lock);

		while (failed) {
			io = failed;
			failed = io->next;
			tier_log_io_error(s->t, "slot %" PRIu64 ": no memory for a request",
					  io->slot);
			tier_io_complete(io, -ENOMEM);
		}
		while (go) {
			struct s3_req *r = go;
			go = r->next;
			r->next = NULL;
			start(s, r);
		}

		int timeout_ms = 1000;
		if (wait_ns && wait_ns / 1000000 < (uint64_t)timeout_ms)
			timeout_ms = (int)(wait_ns / 1000000) + 1;
		curl_multi_poll(s->multi, NULL, 0, timeout_ms, NULL);
		int running;
		curl_multi_perform(s->multi, &running);
		CURLMsg *m;
		int left;
		while ((m = curl_multi_info_read(s->multi, &left))) {
			if (m->msg != CURLMSG_DONE)
				continue;
			CURL *e = m->easy_handle;
			CURLcode rc = m->data.result;
			struct s3_req *r = NULL;
			curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r);
			curl_multi_remove_handle(s->multi, e);
			enum s3_class c = s3_req_finish(s, r, rc);
			pthread_mutex_lock(&s->lock);
			bool stopping = s->stop;
			pthread_mutex_unlock(&s->lock);
			if (c != S3_OK && c != S3_FAIL_4XX && c != S3_FAIL_OTHER &&
			    (r->io || !stopping)) {
				uint64_t d = s3_retry_delay(s, r);
				if (d) {
					__atomic_add_fetch(&s->st.retries, 1, __ATOMIC_RELAXED);
					r->due_ns = tier_now_ns() + d;
					pthread_mutex_lock(&s->lock);
					r->next = s->retry;
					s->retry = r;
					pthread_mutex_unlock(&s->lock);
					continue;
				}
			}
			finish(s, r, c);
		}
	}
	return NULL;
}

int s3_io_start(struct s3_tier *s)
{
	struct tier *t = s->t;
	struct sched_params sp = {
	    .limit = t->queue_depth,
	    .max_bandwidth = {t->max_bandwidth[0], t->max_bandwidth[1]},
	    .io_bytes = t->block_size,
	};
	int rc = sched_init(&s->sched, &sp);
	if (rc)
		return rc;
	size_t nw = (t->slots_total + 63) / 64;
	s->del_pending = calloc(nw, sizeof(uint64_t));
	s->del_inflight = calloc(nw, sizeof(uint64_t));
	if (!s->del_pending || !s->del_inflight)
		return -ENOMEM;
	s->del_limit = t->queue_depth / 4 ? t->queue_depth / 4 : 1;
	if (!(s->multi = curl_multi_init()))
		return -ENOMEM;
	long conns = (long)(t->queue_depth + s->del_limit);
	curl_multi_setopt(s->multi, CURLMOPT_MAX_HOST_CONNECTIONS, conns);
	curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, conns + 4);
	if ((rc = pthread_create(&s->thread, NULL, io_main, s)))
		return -rc;
	s->thread_up = true;
	return 0;
}

void s3_io_stop(struct s3_tier *s)
{
	if (s->thread_up) {
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		pthread_mutex_unlock(&s->lock);
		wake(s);
		pthread_join(s->thread, NULL);
		s->thread_up = false;
	}
	while (s->free_reqs) {
		struct s3_req *r = s->free_reqs;
		s->free_reqs = r->next;
		s3_req_release(r);
		curl_easy_cleanup(r->easy);
		free(r);
	}
	if (s->multi)
		curl_multi_cleanup(s->multi);
	s->multi = NULL;
	free(s->del_pending);
	free(s->del_inflight);
	free(s->del_queue);
	s->del_pending = s->del_inflight = s->del_queue = NULL;
}
