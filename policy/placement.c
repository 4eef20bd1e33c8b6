/*
 * policy/placement.c — which tier a block goes to (see placement.h).
 *
 * Striping uses a smooth weighted round-robin (the nginx upstream
 * algorithm): one "round" of the pattern has sum(weights) positions, each
 * tier appears exactly weight times, and the heavy tiers are spread out
 * instead of bunched, so consecutive blocks of a file hit different devices
 * and their bandwidths add up. Each inode starts at its own offset in the
 * round so that many small files do not all begin on the same tier.
 *
 * Rules: the glob is matched with fnmatch(3), flags 0 (so '*' also matches
 * '/'), against the path inside the mount ("/dir/file"). A glob without '/'
 * is also matched against the basename, so "*_gradient_*.tensor.swp" or
 * "exp_avg-*" match at any depth. The first matching rule wins.
 *
 * Everything here is pure computation on immutable inputs: no locks.
 */
#include "policy/placement.h"
#include "policy/mix.h"

#include <errno.h>
#include <fnmatch.h>
#include <string.h>

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* Scale W[0..N) (sum TOTAL > STRIPE_SEQ_MAX) to STRIPE_SEQ_MAX positions in
 * proportion (largest remainder), giving every tier at least one. */
static void scale_down(int n, uint64_t *w, unsigned __int128 total)
{
	uint64_t a[CONF_MAX_TIERS];
	unsigned __int128 rem[CONF_MAX_TIERS];
	bool bonus[CONF_MAX_TIERS] = {false};
	uint64_t used = 0;

	for (int i = 0; i < n; i++) {
		unsigned __int128 q = (unsigned __int128)w[i] * STRIPE_SEQ_MAX;
		a[i] = (uint64_t)(q / total);
		rem[i] = q % total;
		if (a[i] == 0) {
			a[i] = 1; /* already more than its share */
			rem[i] = 0;
			bonus[i] = true;
		}
		used += a[i];
	}
	/* The minimum of one may overshoot: take from the largest. */
	while (used > STRIPE_SEQ_MAX) {
		int big = 0;
		for (int i = 1; i < n; i++)
			if (a[i] > a[big])
				big = i;
		a[big]--;
		used--;
	}
	/* Hand out what is left to the largest remainders. */
	while (used < STRIPE_SEQ_MAX) {
		int best = -1;
		for (int i = 0; i < n; i++)
			if (!bonus[i] && (best < 0 || rem[i] > rem[best]))
				best = i;
		if (best < 0)
			break;
		a[best]++;
		bonus[best] = true;
		used++;
	}
	for (int i = 0; i < n; i++)
		w[i] = a[i];
}

int stripe_init(struct stripe *s, int n, const int *tiers, const uint64_t *weights)
{
	uint64_t w[CONF_MAX_TIERS];
	unsigned __int128 total = 0;
	uint64_t g = 0;

	if (!s || !tiers || !weights || n <= 0 || n > CONF_MAX_TIERS)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if (weights[i] == 0 || tiers[i] < 0)
			return -EINVAL;
		for (int j = 0; j < i; j++)
			if (tiers[j] == tiers[i])
				return -EINVAL;
		w[i] = weights[i];
		g = gcd64(g, w[i]);
	}
	for (int i = 0; i < n; i++) {
		w[i] /= g;
		total += w[i];
	}
	if (total > STRIPE_SEQ_MAX) {
		scale_down(n, w, total);
		g = 0;
		for (int i = 0; i < n; i++)
			g = gcd64(g, w[i]);
		total = 0;
		for (int i = 0; i < n; i++) {
			w[i] /= g;
			total += w[i];
		}
	}

	memset(s, 0, sizeof(*s));
	s->n = n;
	for (int i = 0; i < n; i++) {
		s->tier[i] = tiers[i];
		s->weight[i] = w[i];
	}
	s->seqlen = (int)total;

	/* Smooth WRR: every step each tier gains its weight, the richest is
	 * picked and pays the total. Ties go to the earlier tier. */
	int64_t cur[CONF_MAX_TIERS] = {0};
	for (int pos = 0; pos < s->seqlen; pos++) {
		int best = 0;
		for (int i = 0; i < n; i++) {
			cur[i] += (int64_t)w[i];
			if (cur[i] > cur[best])
				best = i;
		}
		cur[best] -= (int64_t)total;
		s->seq[pos] = tiers[best];
	}
	return 0;
}

int stripe_init_config(struct stripe *s, const struct config *c)
{
	uint64_t w[CONF_MAX_TIERS];

	if (!c || c->nstripe <= 0)
		return -ENOENT;
	for (int i = 0; i < c->nstripe; i++)
		w[i] = c->tiers[c->stripe[i]].weight;
	return stripe_init(s, c->nstripe, c->stripe, w);
}

int stripe_tier(const struct stripe *s, uint64_t ino, uint64_t block)
{
	if (!s || s->seqlen <= 0)
		return -1;
	uint64_t len = (uint64_t)s->seqlen;
	uint64_t off = mix64(ino) % len;
	/* block % len first: block + off must not wrap around 2^64. */
	return s->seq[(block % len + off) % len];
}

int placement_rule_for(const struct config *c, const char *path)
{
	const char *base;

	if (!c || !path)
		return -1;
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	for (int i = 0; i < c->nrules; i++) {
		const char *m = c->rules[i].match;
		if (fnmatch(m, path, 0) == 0)
			return i;
		if (!strchr(m, '/') && fnmatch(m, base, 0) == 0)
			return i;
	}
	return -1;
}

int placement_spill(const struct config *c, const struct stripe *s, int preferred, const bool *full)
{
	int start = 0;

	if (!c || !full)
		return -EINVAL;
	if (preferred >= 0 && preferred < c->ntiers && !full[preferred])
		return preferred;
	if (!s || s->n <= 0)
		return -ENOSPC;
	for (int i = 0; i < s->n; i++) {
		if (s->tier[i] == preferred) {
			start = i + 1;
			break;
		}
	}
	for (int k = 0; k < s->n; k++) {
		int t = s->tier[(start + k) % s->n];
		if (t >= 0 && t < c->ntiers && !full[t])
			return t;
	}
	return -ENOSPC;
}
