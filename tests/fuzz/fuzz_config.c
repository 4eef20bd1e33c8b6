/*
 * tests/fuzz/fuzz_config.c — the config file parser on arbitrary bytes.
 *
 * The config is the one file a user writes by hand, and the daemon reads
 * it before anything else: every input must either load into a config
 * that keeps the parser's promises or fail with one "FILE:LINE: ..."
 * message, never crash or loop. The size, bandwidth and boolean parsers
 * the tools share get each input as a string too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fs/config/config_load.h"
#include "tests/fuzz/fuzz.h"

static void ignore_warning(void *arg, const char *msg)
{
	size_t *n = arg;
	(*n)++;
	FUZZ_CHECK(msg && !strchr(msg, '\n'));
}

/* What a loaded config promises the daemon (policy/config.h). */
static void check_loaded(const struct config *c)
{
	FUZZ_CHECK(c->block_size >= 4096 && !(c->block_size & (c->block_size - 1)));
	FUZZ_CHECK(c->ntiers >= 1 && c->ntiers <= CONF_MAX_TIERS);
	FUZZ_CHECK(c->ram_tier >= 0 && c->ram_tier < c->ntiers);
	int rams = 0;
	for (int i = 0; i < c->ntiers; i++) {
		const struct conf_tier *t = &c->tiers[i];
		FUZZ_CHECK(memchr(t->name, '\0', sizeof(t->name)));
		FUZZ_CHECK(memchr(t->path, '\0', sizeof(t->path)));
		FUZZ_CHECK(t->queue_depth >= 1);
		rams += t->kind == TIER_RAM;
		for (int j = 0; j < i; j++)
			FUZZ_CHECK(strcmp(t->name, c->tiers[j].name));
	}
	FUZZ_CHECK(rams == 1 && c->tiers[c->ram_tier].kind == TIER_RAM);
	FUZZ_CHECK(c->nstripe >= 0 && c->nstripe <= c->ntiers);
	for (int i = 0; i < c->nstripe; i++)
		FUZZ_CHECK(c->stripe[i] >= 0 && c->stripe[i] < c->ntiers);
	FUZZ_CHECK(c->nrules >= 0 && c->nrules <= CONF_MAX_RULES);
	for (int i = 0; i < c->nrules; i++) {
		FUZZ_CHECK(c->rules[i].tier >= 0 && c->rules[i].tier < c->ntiers);
		FUZZ_CHECK(memchr(c->rules[i].match, '\0', sizeof(c->rules[i].match)));
	}
	FUZZ_CHECK(memchr(c->metadata, '\0', sizeof(c->metadata)));
}

static void fuzz_values(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return;
	memcpy(s, data, size);
	s[size] = '\0';
	uint64_t v;
	bool b;
	(void)config_parse_size(s, &v);
	(void)config_parse_bandwidth(s, &v);
	(void)config_parse_bool(s, &b);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_values(data, size);

	/* The parser reads a path, as the daemon does: a memfd gives it one
	 * with no file left behind. */
	int fd = memfd_create("fuzz.conf", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t off = 0;
	while (off < size) {
		ssize_t w = write(fd, data + off, size - off);
		if (w <= 0) {
			close(fd);
			return 0;
		}
		off += (size_t)w;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	static struct config c;
	char err[PATH_MAX + 512];
	err[0] = '\0';
	size_t warnings = 0;
	int rc = config_load_warn(path, &c, err, sizeof(err), ignore_warning, &warnings);
	if (rc == 0) {
		check_loaded(&c);
	} else {
		FUZZ_CHECK(rc < 0);
		/* Every refusal says where: "PATH:..." with the reason after. */
		FUZZ_CHECK(!strncmp(err, path, strlen(path)));
		FUZZ_CHECK(strlen(err) > strlen(path) + 1);
	}
	close(fd);
	return 0;
}
