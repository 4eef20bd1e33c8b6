/*
 * policy/config.c — lookups in the settings (struct config) that the
 * policy acts on. Reading them from the config file is fs/config/'s
 * business.
 */
#include "policy/config.h"

#include <string.h>

int config_tier_index(const struct config *c, const char *name)
{
	for (int i = 0; i < c->ntiers; i++)
		if (!strcmp(c->tiers[i].name, name))
			return i;
	return -1;
}
