/*
 * fs/config/expert.c — the [expert] section: knobs of the mechanisms
 * behind the policy (the learner's size, the keep plan, gap mode, the
 * read-ahead depth) rather than of what the user wants. They were [policy]
 * keys; under those old names they still load, to the same effect, and
 * the mount says once per key where it now belongs.
 */
#include "fs/config/config_load.h"
#include "fs/config/parse_state.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *const config_expert_keys[XK_N] = {"prefetch_depth", "learn_max_cycle", "keep_plan",
					      "gap_plan"};

/* Common checks for a key of [expert], given there (MOVED false) or under
 * its old name in [policy]: the key may be given once, in either place.
 * Returns the key id or -1 (error already recorded). */
static int expert_begin(struct config_parse *p, const char *name, bool moved)
{
	int k = config_key_index(config_expert_keys, XK_N, name);

	if (k < 0) {
		config_key_error(p, p->line, name, "unknown key in section [%s]", p->sect_name);
		return -1;
	}
	if (p->xkline[k] && p->xmoved[k] == moved) {
		config_key_error(p, p->line, name, "given twice in section [%s] (first on line %d)",
				 p->sect_name, p->xkline[k]);
		return -1;
	}
	if (p->xkline[k]) {
		config_key_error(p, p->line, name, "given twice (first on line %d, in [%s])",
				 p->xkline[k], p->xmoved[k] ? "policy" : "expert");
		return -1;
	}
	p->xkline[k] = p->line;
	p->xmoved[k] = moved;
	return k;
}

static void expert_value(struct config_parse *p, int k, const char *name, const char *v)
{
	struct config *c = p->c;
	uint64_t x;

	switch (k) {
	case XK_PREFETCH:
		if (config_parse_uint(v, 0, 65536, &x) < 0)
			config_key_error(p, p->line, name,
					 "'%s' must be an integer from 0 to 65536", v);
		else
			c->prefetch_depth = (unsigned)x;
		break;
	case XK_KEEP_PLAN:
		if (config_parse_bool(v, &c->keep_plan) < 0)
			config_key_error(p, p->line, name, "'%s' is not yes or no", v);
		break;
	case XK_GAP_PLAN:
		if (!strcasecmp(v, "auto")) {
			c->gap_plan = CONF_GAP_AUTO;
		} else {
			bool on;
			if (config_parse_bool(v, &on) < 0)
				config_key_error(p, p->line, name, "'%s' is not yes, no or auto",
						 v);
			else
				c->gap_plan = on ? CONF_GAP_YES : CONF_GAP_NO;
		}
		break;
	case XK_MAX_CYCLE:
		if (!strcasecmp(v, "auto"))
			c->learn_max_cycle = 0;
		else if (config_parse_uint(v, 1024, 1u << 30, &x) < 0)
			config_key_error(p, p->line, name,
					 "'%s' must be auto or an integer from 1024 to 1073741824 "
					 "(block accesses)",
					 v);
		else
			c->learn_max_cycle = x;
		break;
	default:
		break;
	}
}

void config_key_expert(struct config_parse *p, const char *name, const char *v)
{
	int k = expert_begin(p, name, false);

	if (k >= 0)
		expert_value(p, k, name, v);
}

void config_key_moved(struct config_parse *p, const char *name, const char *v)
{
	int k = expert_begin(p, name, true);

	if (k < 0)
		return;
	p->moved[p->nmoved++] = k;
	expert_value(p, k, name, v);
}

void config_warn_moved(const struct config_parse *p, config_warn_fn *warn, void *arg)
{
	char msg[PATH_MAX + 256];

	for (int i = 0; i < p->nmoved; i++) {
		int k = p->moved[i];
		snprintf(msg, sizeof(msg),
			 "%s:%d: key '%s': deprecated in [policy], read as [expert] %s; "
			 "move it there",
			 p->c->path, p->xkline[k], config_expert_keys[k], config_expert_keys[k]);
		warn(arg, msg);
	}
}
