/*
 * tests/unit/test_config.c — config_load(): every key, the defaults, the
 * implicit ram tier, value parsers, the example configs in scripts/conf/,
 * the [expert] keys under their old names in [policy] (same effect, one
 * warning each), and bad files, each checked for the exact
 * "FILE:LINE: key 'x'" prefix.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs/config/config_load.h"

static char tdir[256]; /* scratch: tier directories a, b, c and configs */
static char cpath[PATH_MAX];
static char err[1024];
static struct config cfg;
/* The warnings of the last load, one line each. */
static char warns[8][PATH_MAX + 256];
static int nwarn;

static void warn_keep(void *arg, const char *msg)
{
	(void)arg;
	if (nwarn < (int)(sizeof(warns) / sizeof(warns[0])))
		snprintf(warns[nwarn], sizeof(warns[0]), "%s", msg);
	nwarn++;
}

static int load_file(const char *path)
{
	memset(err, 0, sizeof(err));
	nwarn = 0;
	return config_load_warn(path, &cfg, err, sizeof(err), warn_keep, NULL);
}

/* Write TEXT, with every "@D@" replaced by the scratch dir, to a config. */
static void write_conf(const char *text)
{
	FILE *f;

	snprintf(cpath, sizeof(cpath), "%s/test.conf", tdir);
	f = fopen(cpath, "w");
	assert_non_null(f);
	for (const char *s = text; *s; s++) {
		if (!strncmp(s, "@D@", 3)) {
			fputs(tdir, f);
			s += 2;
		} else {
			fputc(*s, f);
		}
	}
	assert_int_equal(fclose(f), 0);
}

static int load(const char *text)
{
	write_conf(text);
	return load_file(cpath);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int setup(void **state)
{
	char d[PATH_MAX];
	(void)state;
	snprintf(tdir, sizeof(tdir), "/tmp/tierfs-test-config.XXXXXX");
	if (!mkdtemp(tdir))
		return -1;
	for (const char *n = "abc"; *n; n++) {
		snprintf(d, sizeof(d), "%s/%c", tdir, *n);
		if (mkdir(d, 0755) < 0)
			return -1;
	}
	snprintf(d, sizeof(d), "%s/file", tdir);
	FILE *f = fopen(d, "w");
	if (!f)
		return -1;
	fclose(f);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return nftw(tdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- good files ------------------------------------------------------ */

/* A posix tier on lines 1-3, the ram tier implicit. */
#define POSIX_A "[tier a]\ntype = posix\npath = @D@/a\n"
#define S3_A	"[tier s]\ntype = s3\nendpoint = http://127.0.0.1:8333\nbucket = bk1\ncapacity = 1G\n"

/* An s3 tier's keys, and the defaults of those left out. */
static void test_s3_keys(void **state)
{
	(void)state;
	int rc = load("[mount]\nmetadata = /m\n" S3_A "prefix = node0/\nregion = eu-west-1\n"
		      "credentials_file = ~/.aws/credentials\nprofile = train\ntls_verify = no\n"
		      "ca_file = /etc/ssl/private-ca.pem\n"
		      "addressing = virtual\nretries = 3\nretry_time = 2.5\n"
		      "request_timeout = 30\nconnect_timeout = 0.5\nlease_timeout = 20\n"
		      "[tier t]\ntype = s3\nendpoint = https://s3.example.com\nbucket = bk2\n"
		      "capacity = 2G\n");
	if (rc)
		fail_msg("%s", err);
	const struct conf_tier *s = &cfg.tiers[0], *t = &cfg.tiers[1];
	assert_int_equal(s->kind, TIER_S3);
	assert_true(s->persistent);
	assert_string_equal(s->s3.endpoint, "http://127.0.0.1:8333");
	assert_string_equal(s->s3.bucket, "bk1");
	assert_string_equal(s->s3.prefix, "node0/");
	assert_string_equal(s->s3.region, "eu-west-1");
	assert_string_equal(s->s3.credentials_file, "~/.aws/credentials");
	assert_string_equal(s->s3.profile, "train");
	assert_false(s->s3.tls_verify);
	assert_string_equal(s->s3.ca_file, "/etc/ssl/private-ca.pem");
	assert_true(s->s3.virtual_host);
	assert_int_equal(s->s3.retries, 3);
	assert_int_equal(s->s3.retry_time_ms, 2500);
	assert_int_equal(s->s3.request_timeout_ms, 30000);
	assert_int_equal(s->s3.connect_timeout_ms, 500);
	assert_int_equal(s->s3.lease_timeout_ms, 20000);
	assert_string_equal(t->s3.region, "us-east-1");
	assert_string_equal(t->s3.profile, "default");
	assert_string_equal(t->s3.prefix, "");
	assert_int_equal(t->capacity, 2ULL << 30);
	assert_int_equal(s->capacity, 1ULL << 30);
	assert_true(t->s3.tls_verify);
	assert_false(t->s3.virtual_host);
	assert_true(t->s3.retries > 1);
	/* Both s3 tiers are striped over by default. */
	assert_int_equal(cfg.nstripe, 2);
	/* capacity may be left out. */
	rc = load(
	    "[mount]\nmetadata = /m\n[tier s]\ntype = s3\nendpoint = http://h\nbucket = bk1\n");
	if (rc)
		fail_msg("%s", err);
	assert_int_equal(cfg.tiers[0].capacity, 1ULL << 40);
}

static void test_all_keys(void **state)
{
	(void)state;
	int rc = load("; every key\n"
		      "[mount]\n"
		      "block_size = 4M\n"
		      "metadata = /var/lib/tierfs-meta/\n"
		      "sync_on_close = yes\n"
		      "allow_other = on\n"
		      "threads = 32\n"
		      "dirty_ratio = 40\n"
		      "flush_interval = 0.5\n"
		      "commit_interval = 0.25\n"
		      "writeback_timeout = 300\n"
		      "\n"
		      "[tier nvme0]\n"
		      "type = posix\n"
		      "path = @D@/a/\n"
		      "capacity = 1.5G\n"
		      "persistent = yes\n"
		      "weight = 3\n"
		      "direct = yes\n"
		      "queue_depth = 32\n"
		      "slab_size = 512M\n"
		      "bandwidth = 2G/s\n"
		      "bandwidth_write = 1G/s\n"
		      "max_bandwidth = 3GiB/s\n"
		      "[tier mem]\n"
		      "type = ram\n"
		      "capacity = 8g\n"
		      "persistent = no\n"
		      "[tier pfs]\n"
		      "type = posix\n"
		      "path = @D@/b\n"
		      "capacity = 1T\n"
		      "direct = no\n"
		      "bandwidth = auto\n"
		      "[tier scratch]\n"
		      "type = posix\n"
		      "path = @D@/c\n"
		      "capacity = 10G\n"
		      "persistent = yes\n"
		      "[policy]\n"
		      "stripe = pfs, nvme0\n"
		      "learn = no\n"
		      "[expert]\n"
		      "prefetch_depth = 0\n"
		      "learn_max_cycle = 2097152\n"
		      "keep_plan = no\n"
		      "gap_plan = yes\n"
		      "[rule gradients]\n"
		      "match = *_gradient_*.tensor.swp\n"
		      "tier = mem\n"
		      "persistent = no\n"
		      "[rule rest]\n"
		      "match = /zero_stage_3/*\n"
		      "tier = nvme0\n");
	assert_int_equal(rc, 0);
	assert_string_equal(err, "");
	assert_int_equal(nwarn, 0);
	assert_int_equal(cfg.block_size, 4 << 20);
	assert_string_equal(cfg.metadata, "/var/lib/tierfs-meta");
	assert_true(cfg.sync_on_close);
	assert_true(cfg.allow_other);
	assert_int_equal(cfg.threads, 32);
	assert_int_equal(cfg.dirty_ratio, 40);
	assert_int_equal(cfg.flush_interval_ms, 500);
	assert_int_equal(cfg.commit_interval_ms, 250);
	assert_int_equal(cfg.writeback_timeout_ms, 300000);

	assert_int_equal(cfg.ntiers, 4);
	assert_int_equal(cfg.ram_tier, 1);
	struct conf_tier *t = &cfg.tiers[0];
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "%s/a", tdir);
	assert_string_equal(t->name, "nvme0");
	assert_int_equal(t->kind, TIER_POSIX);
	assert_string_equal(t->path, want);
	assert_int_equal(t->capacity, 3ULL << 29);
	assert_true(t->persistent);
	assert_int_equal(t->weight, 3);
	assert_int_equal(t->direct, 1);
	assert_int_equal(t->queue_depth, 32);
	assert_int_equal(t->slab_size, 512ULL << 20);
	assert_int_equal(t->bandwidth_read, 2ULL << 30);
	assert_int_equal(t->bandwidth_write, 1ULL << 30);
	assert_int_equal(t->max_bandwidth_read, 3ULL << 30);
	assert_int_equal(t->max_bandwidth_write, 3ULL << 30);
	assert_false(t->implicit);
	assert_int_equal(t->line, 13);

	t = &cfg.tiers[1];
	assert_string_equal(t->name, "mem");
	assert_int_equal(t->kind, TIER_RAM);
	assert_int_equal(t->capacity, 8ULL << 30);
	assert_false(t->persistent);
	assert_false(t->implicit);

	t = &cfg.tiers[2];
	assert_int_equal(t->direct, 0);
	assert_int_equal(t->bandwidth_read, 0);
	assert_int_equal(t->bandwidth_write, 0);
	assert_int_equal(t->weight, 1);
	assert_int_equal(t->queue_depth, 8);
	/* Absent: 0, the tier adopts the slab size it was formatted with. */
	assert_int_equal(t->slab_size, 0);
	assert_true(cfg.tiers[3].persistent);

	assert_int_equal(cfg.nstripe, 2);
	assert_int_equal(cfg.stripe[0], 2);
	assert_int_equal(cfg.stripe[1], 0);
	assert_false(cfg.learn);
	assert_int_equal(cfg.prefetch_depth, 0);
	assert_int_equal(cfg.learn_max_cycle, 2097152);
	assert_false(cfg.keep_plan);
	assert_int_equal(cfg.gap_plan, CONF_GAP_YES);

	assert_int_equal(cfg.nrules, 2);
	assert_string_equal(cfg.rules[0].name, "gradients");
	assert_string_equal(cfg.rules[0].match, "*_gradient_*.tensor.swp");
	assert_int_equal(cfg.rules[0].tier, 1);
	assert_false(cfg.rules[0].persistent);
	assert_int_equal(cfg.rules[0].line, 48);
	assert_int_equal(cfg.rules[1].tier, 0);
	assert_true(cfg.rules[1].persistent);
}

/* A posix-only file: defaults everywhere, ram tier synthesized last. */
static void test_defaults_implicit_ram(void **state)
{
	(void)state;
	assert_int_equal(load("[tier disk]\ntype = posix\npath = @D@/a\n"), 0);
	assert_int_equal(cfg.block_size, 1 << 20);
	assert_false(cfg.sync_on_close);
	assert_false(cfg.allow_other);
	assert_int_equal(cfg.threads, 16);
	assert_int_equal(cfg.dirty_ratio, 25);
	assert_int_equal(cfg.flush_interval_ms, 1000);
	assert_int_equal(cfg.commit_interval_ms, 5000);
	assert_int_equal(cfg.writeback_timeout_ms, 5000);
	assert_true(cfg.learn);
	assert_int_equal(cfg.prefetch_depth, 64);
	assert_int_equal(cfg.learn_max_cycle, 0);
	assert_true(cfg.keep_plan);
	assert_int_equal(cfg.gap_plan, CONF_GAP_AUTO);
	assert_int_equal(cfg.nrules, 0);

	assert_int_equal(cfg.ntiers, 2);
	assert_int_equal(cfg.ram_tier, 1);
	struct conf_tier *r = &cfg.tiers[1];
	assert_string_equal(r->name, "ram");
	assert_int_equal(r->kind, TIER_RAM);
	assert_int_equal(r->capacity, 256ULL << 20);
	assert_true(r->implicit);
	assert_false(r->persistent);

	/* Metadata lives on the first posix tier. */
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "%s/a/.tierfs-meta", tdir);
	assert_string_equal(cfg.metadata, want);

	/* Capacity defaults to the free space where the tier lives. */
	struct statvfs v;
	assert_int_equal(statvfs(cfg.tiers[0].path, &v), 0);
	uint64_t freeb = (uint64_t)v.f_bavail * v.f_frsize;
	assert_true(cfg.tiers[0].capacity > 0);
	assert_true(cfg.tiers[0].capacity <= freeb + (64ULL << 20));
	assert_true(cfg.tiers[0].capacity + (64ULL << 20) >= freeb);
	assert_true(cfg.tiers[0].persistent);

	/* Default stripe: the posix tiers. */
	assert_int_equal(cfg.nstripe, 1);
	assert_int_equal(cfg.stripe[0], 0);
}

static void test_ram_only(void **state)
{
	(void)state;
	assert_int_equal(
	    load("[mount]\nmetadata = @D@/meta\n[tier m]\ntype = ram\ncapacity = 64M\n"), 0);
	assert_int_equal(cfg.ntiers, 1);
	assert_int_equal(cfg.ram_tier, 0);
	assert_int_equal(cfg.nstripe, 0);
	assert_false(cfg.tiers[0].implicit);
}

/* A RAM-only config whose SECTION sets KEY = VALUE (line 7), loaded. */
static int load_key(const char *section, const char *key, const char *value)
{
	char text[256];
	snprintf(text, sizeof(text),
		 "[mount]\nmetadata = @D@/meta\n[tier m]\ntype = ram\ncapacity = "
		 "64M\n[%s]\n%s = %s\n",
		 section, key, value);
	return load(text);
}

/* The sections an [expert] key loads from: its own, and its old place
 * (with a warning). */
static const char *const expert_homes[] = {"expert", "policy"};

/* gap_plan's three values, in any case. */
static void test_gap_plan_values(void **state)
{
	(void)state;
	static const struct {
		const char *v;
		enum conf_gap_plan want;
	} cases[] = {{"no", CONF_GAP_NO},
		     {"yes", CONF_GAP_YES},
		     {"auto", CONF_GAP_AUTO},
		     {"AUTO", CONF_GAP_AUTO},
		     {"off", CONF_GAP_NO}};
	for (size_t h = 0; h < 2; h++) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			assert_int_equal(load_key(expert_homes[h], "gap_plan", cases[i].v), 0);
			assert_int_equal(cfg.gap_plan, cases[i].want);
			assert_int_equal(nwarn, (int)h);
		}
	}
}

static void test_learn_max_cycle_values(void **state)
{
	(void)state;
	static const struct {
		const char *v;
		uint64_t want;
	} cases[] = {{"auto", 0}, {"AUTO", 0}, {"1024", 1024}, {"4194304", 4194304}};
	for (size_t h = 0; h < 2; h++) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			assert_int_equal(load_key(expert_homes[h], "learn_max_cycle", cases[i].v),
					 0);
			assert_int_equal(cfg.learn_max_cycle, cases[i].want);
			assert_int_equal(nwarn, (int)h);
		}
	}
}

/* The [expert] keys under their old names in [policy]: the same settings
 * as in [expert], and one warning each, in file order, naming the file,
 * the line, the key and its new place. */
static void test_moved_keys(void **state)
{
	(void)state;
	static const char *const keys = "prefetch_depth = 7\n"
					"learn_max_cycle = 4096\n"
					"keep_plan = no\n"
					"gap_plan = no\n";
	static const char *const names[] = {"prefetch_depth", "learn_max_cycle", "keep_plan",
					    "gap_plan"};
	char text[512];
	struct config want;

	snprintf(text, sizeof(text), POSIX_A "[policy]\nlearn = no\n[expert]\n%s", keys);
	assert_int_equal(load(text), 0);
	assert_int_equal(nwarn, 0);
	want = cfg;
	assert_int_equal(want.prefetch_depth, 7);
	assert_int_equal(want.learn_max_cycle, 4096);
	assert_false(want.keep_plan);
	assert_int_equal(want.gap_plan, CONF_GAP_NO);

	/* Old names, with [policy]'s own keys around them. */
	snprintf(text, sizeof(text), POSIX_A "[policy]\nlearn = no\n%sstripe = a\n", keys);
	assert_int_equal(load(text), 0);
	assert_int_equal(cfg.prefetch_depth, want.prefetch_depth);
	assert_int_equal(cfg.learn_max_cycle, want.learn_max_cycle);
	assert_int_equal(cfg.keep_plan, want.keep_plan);
	assert_int_equal(cfg.gap_plan, want.gap_plan);
	assert_int_equal(cfg.learn, want.learn);
	assert_int_equal(cfg.nstripe, 1);
	assert_int_equal(nwarn, 4);
	for (int i = 0; i < 4; i++) {
		char prefix[PATH_MAX + 64], place[64];
		snprintf(prefix, sizeof(prefix), "%s:%d: key '%s': ", cpath, 6 + i, names[i]);
		snprintf(place, sizeof(place), "[expert] %s", names[i]);
		if (strncmp(warns[i], prefix, strlen(prefix)) || !strstr(warns[i], "[policy]") ||
		    !strstr(warns[i], place) || strchr(warns[i], '\n'))
			fail_msg("warning '%s': want one line '%s...', naming [policy] and '%s'",
				 warns[i], prefix, place);
	}

	/* Mixed: the old name of one key beside [expert] with another. */
	assert_int_equal(load(POSIX_A "[expert]\ngap_plan = yes\n[policy]\nkeep_plan = no\n"), 0);
	assert_int_equal(cfg.gap_plan, CONF_GAP_YES);
	assert_false(cfg.keep_plan);
	assert_int_equal(nwarn, 1);
	assert_non_null(strstr(warns[0], ":7: key 'keep_plan': "));

	/* Keys are matched in any case, old names too. */
	assert_int_equal(load(POSIX_A "[policy]\nGap_Plan = yes\n"), 0);
	assert_int_equal(cfg.gap_plan, CONF_GAP_YES);
	assert_int_equal(nwarn, 1);

	/* A file that fails gets its error alone. */
	assert_int_equal(load(POSIX_A "[policy]\ngap_plan = yes\nthreads = 2\n"), -EINVAL);
	assert_int_equal(nwarn, 0);

	/* config_load() itself prints them (to stderr) and loads the same. */
	assert_int_equal(config_load(cpath, &cfg, err, sizeof(err)), -EINVAL);
	write_conf(POSIX_A "[policy]\ngap_plan = yes\n");
	assert_int_equal(config_load(cpath, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.gap_plan, CONF_GAP_YES);
}

/* Comments, indentation, CRLF, inline ';' comments, a long path line: the
 * lines after it must still be counted right. */
static void test_syntax_and_line_numbers(void **state)
{
	(void)state;
	char longdir[PATH_MAX], text[8192];
	char l150[151];
	memset(l150, 'L', 150);
	l150[150] = '\0';
	/* Two components: one may not exceed NAME_MAX. */
	snprintf(longdir, sizeof(longdir), "%s/%s", tdir, l150);
	if (mkdir(longdir, 0755) < 0)
		fail_msg("mkdir %s: %s", longdir, strerror(errno));
	strcat(longdir, "/");
	strcat(longdir, l150);
	if (mkdir(longdir, 0755) < 0)
		fail_msg("mkdir %s: %s", longdir, strerror(errno));
	snprintf(text, sizeof(text),
		 "# comment\r\n"
		 "; another\r\n"
		 "[tier d]\r\n"
		 "  type = posix   ; inline\r\n"
		 "\tpath = %s\r\n"
		 "[mount]\r\n"
		 "threads = 0\r\n",
		 longdir);
	assert_int_equal(load(text), -EINVAL);
	char want[PATH_MAX + 64];
	snprintf(want, sizeof(want), "%s:7: key 'threads': ", cpath);
	assert_memory_equal(err, want, strlen(want));
	assert_true(strlen(longdir) > 300);
	assert_int_equal(rmdir(longdir), 0);
	*strrchr(longdir, '/') = '\0';
	assert_int_equal(rmdir(longdir), 0);
}

static void test_cannot_read(void **state)
{
	(void)state;
	char p[PATH_MAX + 32];
	snprintf(p, sizeof(p), "%s/missing.conf", tdir);
	assert_int_equal(load_file(p), -ENOENT);
	char want[PATH_MAX + 64];
	snprintf(want, sizeof(want), "%s: cannot read: %s", p, strerror(ENOENT));
	assert_string_equal(err, want);
}

static void test_parse_size(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		uint64_t v;
	} good[] = {
	    {"4096", 4096},
	    {"0", 0},
	    {"4k", 4096},
	    {"4K", 4096},
	    {"64M", 64ULL << 20},
	    {"64MB", 64ULL << 20},
	    {"64MiB", 64ULL << 20},
	    {"64mib", 64ULL << 20},
	    {"1.5G", 3ULL << 29},
	    {"2 T", 2ULL << 40},
	    {"512B", 512},
	    {"0.5K", 512},
	    {"16777215T", 16777215ULL << 40},
	    {"18446744073709551615", UINT64_MAX},
	};
	static const char *const bad[] = {
	    "",
	    "-1",
	    "+1",
	    "M",
	    "1.5",
	    "1.",
	    ".5K",
	    "1X",
	    "1KX",
	    "1 K B",
	    "1iB",
	    "1Ki",
	    "16777216T",
	    "16384P",
	    "18446744073709551616",
	    "99999999999999999999999",
	    "1K ",
	    "0x10",
	    "1e3",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint64_t v = 12345;
		if (config_parse_size(good[i].s, &v) != 0 || v != good[i].v)
			fail_msg("size '%s': got %llu, want %llu", good[i].s, (unsigned long long)v,
				 (unsigned long long)good[i].v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v;
		if (config_parse_size(bad[i], &v) != -EINVAL)
			fail_msg("size '%s' accepted", bad[i]);
	}
}

static void test_parse_bandwidth_bool(void **state)
{
	(void)state;
	uint64_t v;
	assert_int_equal(config_parse_bandwidth("2G/s", &v), 0);
	assert_int_equal(v, 2ULL << 30);
	assert_int_equal(config_parse_bandwidth("500M/s", &v), 0);
	assert_int_equal(v, 500ULL << 20);
	assert_int_equal(config_parse_bandwidth("1.5 GiB/s", &v), 0);
	assert_int_equal(v, 3ULL << 29);
	assert_int_equal(config_parse_bandwidth("2GB/S", &v), 0);
	assert_int_equal(v, 2ULL << 30);
	static const char *const bad[] = {"2G", "/s", "2G/", "2G/m", "2G/s/s", "-1G/s", "auto", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (config_parse_bandwidth(bad[i], &v) != -EINVAL)
			fail_msg("bandwidth '%s' accepted", bad[i]);

	static const char *const yes[] = {"yes", "YES", "true", "on", "1", "True"};
	static const char *const no[] = {"no", "false", "OFF", "0"};
	static const char *const neither[] = {"", "y", "2", "yess", "enable"};
	bool b;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		b = false;
		assert_int_equal(config_parse_bool(yes[i], &b), 0);
		assert_true(b);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		b = true;
		assert_int_equal(config_parse_bool(no[i], &b), 0);
		assert_false(b);
	}
	for (size_t i = 0; i < sizeof(neither) / sizeof(neither[0]); i++)
		assert_int_equal(config_parse_bool(neither[i], &b), -EINVAL);
}

/* bandwidth_read/_write override bandwidth whatever the order, and
 * max_bandwidth_read/_write override max_bandwidth the same way. */
static void test_codec_keys(void **state)
{
	(void)state;
	assert_int_equal(load(POSIX_A "compress = lz4\nencrypt = aes-256-gcm\nkey_file = /etc/k\n"
				      "[tier b]\ntype = posix\npath = @D@/b\n"),
			 0);
	assert_int_equal(cfg.tiers[0].compress, CODEC_COMPRESS_LZ4);
	assert_int_equal(cfg.tiers[0].encrypt, CODEC_CIPHER_AES256GCM);
	assert_string_equal(cfg.tiers[0].key_file, "/etc/k");
	assert_int_equal(cfg.tiers[1].compress, CODEC_COMPRESS_NONE);
	assert_int_equal(cfg.tiers[1].encrypt, CODEC_CIPHER_NONE);
	assert_string_equal(cfg.tiers[1].key_file, "");
}

static void test_bandwidth_keys(void **state)
{
	(void)state;
	assert_int_equal(load("[tier d]\ntype = posix\npath = @D@/a\n"
			      "bandwidth_read = 3G/s\nbandwidth = 1G/s\n"
			      "max_bandwidth_write = 200M/s\nmax_bandwidth = 500M/s\n"
			      "[tier e]\ntype = posix\npath = @D@/b\nbandwidth = 1G/s\n"
			      "max_bandwidth = none\n"),
			 0);
	assert_int_equal(cfg.tiers[0].max_bandwidth_read, 500ULL << 20);
	assert_int_equal(cfg.tiers[0].max_bandwidth_write, 200ULL << 20);
	assert_int_equal(cfg.tiers[1].max_bandwidth_read, 0);
	assert_int_equal(cfg.tiers[1].max_bandwidth_write, 0);
	assert_int_equal(cfg.tiers[0].bandwidth_read, 3ULL << 30);
	assert_int_equal(cfg.tiers[0].bandwidth_write, 1ULL << 30);
	assert_int_equal(cfg.tiers[1].bandwidth_read, 1ULL << 30);
	assert_int_equal(cfg.tiers[1].bandwidth_write, 1ULL << 30);
	assert_int_equal(cfg.tiers[0].line, 1);
	assert_int_equal(cfg.tiers[1].line, 8);
}

/* ---- the example configs --------------------------------------------- */

static const char *src_dir(void)
{
	const char *s = getenv("TIERFS_SRC");
	if (!s || !*s) {
		/* The test runs from the repository root. */
		setenv("TIERFS_SRC", ".", 1);
		s = getenv("TIERFS_SRC");
	}
	return s;
}

/* Load scripts/conf/NAME with every path/metadata value moved into the
 * scratch directory (the real ones do not exist here). */
static void load_example(const char *name)
{
	char in[PATH_MAX], line[PATH_MAX + 256], dir[PATH_MAX + 32];
	static int seq;
	FILE *f, *o;

	snprintf(in, sizeof(in), "%s/scripts/conf/%s", src_dir(), name);
	f = fopen(in, "r");
	if (!f)
		fail_msg("%s: %s (set TIERFS_SRC to the source tree)", in, strerror(errno));
	snprintf(cpath, sizeof(cpath), "%s/%s", tdir, name);
	o = fopen(cpath, "w");
	assert_non_null(o);
	int rewritten = 0;
	while (fgets(line, sizeof(line), f)) {
		char key[64];
		if (sscanf(line, " %63[a-z_] =", key) == 1 &&
		    (!strcmp(key, "path") || !strcmp(key, "metadata"))) {
			snprintf(dir, sizeof(dir), "%s/ex%d", tdir, seq++);
			assert_int_equal(mkdir(dir, 0755), 0);
			fprintf(o, "%s = %s\n", key, dir);
			rewritten++;
		} else {
			fputs(line, o);
		}
	}
	fclose(f);
	assert_int_equal(fclose(o), 0);
	assert_true(rewritten > 0);
	if (load_file(cpath) != 0)
		fail_msg("%s: %s", name, err);
	/* The examples show each key in its place. */
	if (nwarn)
		fail_msg("%s: %d warnings, the first '%s'", name, nwarn, warns[0]);
}

static void test_example_deepspeed(void **state)
{
	(void)state;
	load_example("deepspeed.conf");
	assert_int_equal(cfg.ntiers, 3);
	assert_int_equal(cfg.tiers[cfg.ram_tier].capacity, 8ULL << 30);
	assert_int_equal(cfg.nstripe, 2);
	assert_int_equal(cfg.nrules, 1);
	assert_int_equal(cfg.rules[0].tier, cfg.ram_tier);
	assert_false(cfg.rules[0].persistent);
	assert_true(cfg.tiers[config_tier_index(&cfg, "nvme0")].weight >
		    cfg.tiers[config_tier_index(&cfg, "pfs")].weight);
}

static void test_example_local(void **state)
{
	(void)state;
	load_example("local.conf");
	assert_int_equal(cfg.ntiers, 2);
	assert_int_equal(cfg.nstripe, 1);
}

static void test_example_s3(void **state)
{
	(void)state;
	load_example("ram-nvme-s3.conf");
	assert_int_equal(cfg.ntiers, 3);
	assert_int_equal(cfg.nstripe, 2);
	const struct conf_tier *s = &cfg.tiers[config_tier_index(&cfg, "s3")];
	assert_int_equal(s->kind, TIER_S3);
	assert_string_equal(s->s3.prefix, "node0/");
	assert_int_equal(s->queue_depth, 32);
}

static void test_example_ram_only(void **state)
{
	(void)state;
	load_example("ram-only.conf");
	assert_int_equal(cfg.ntiers, 1);
	assert_int_equal(cfg.nstripe, 0);
}

/* ---- bad files ------------------------------------------------------- */

struct bad {
	const char *text;
	int line;
	const char *what;   /* "key 'x'" or "section [x]" or "" */
	const char *reason; /* substring of the message after the prefix */
};

static const struct bad bads[] = {
    {POSIX_A "compress = zstd\n", 4, "key 'compress'", "lz4 or none"},
    {POSIX_A "encrypt = aes\n", 4, "key 'encrypt'", "aes-256-gcm or none"},
    {POSIX_A "encrypt = aes-256-gcm\n", 4, "key 'encrypt'", "needs a key_file"},
    {POSIX_A "key_file = /k\n", 4, "key 'key_file'", "encrypt is not set"},
    {POSIX_A "key_file = k\nencrypt = aes-256-gcm\n", 4, "key 'key_file'", "absolute"},
    {POSIX_A "[tier r]\ntype = ram\ncapacity = 1G\ncompress = lz4\n", 7, "key 'compress'",
     "tier 'r' is a ram tier: blocks in RAM are never compressed or encrypted"},
    {POSIX_A "[tier r]\ntype = ram\ncapacity = 1G\nencrypt = none\n", 7, "key 'encrypt'",
     "is a ram tier"},
    {"[mount]\nblock_size = 1M\nbogus = 1\n", 3, "key 'bogus'", "unknown key"},
    {POSIX_A "[mounts]\nthreads = 2\n", 4, "section [mounts]", "unknown section"},
    {POSIX_A "[;x]\nthreads = 2\n", 4, "section [;x]", "unknown section"},
    {POSIX_A "weight = 2\nweight = 3\n", 5, "key 'weight'", "given twice"},
    {"[tier r]\ntype = ram\ncapacity = 12XB\n", 3, "key 'capacity'", "not a size"},
    {"[tier r]\ntype = ram\ncapacity = -1G\n", 3, "key 'capacity'", "not a size"},
    {POSIX_A "[mount]\nblock_size = 3000\n", 5, "key 'block_size'", "power of two"},
    {POSIX_A "[mount]\nblock_size = 128M\n", 5, "key 'block_size'", "power of two"},
    {"[tier s]\ntype = s3\n", 1, "section [tier s]", "missing required key 'endpoint'"},
    {"[tier d]\ntype = posix\npath = @D@/nope\n", 3, "key 'path'",
     "/nope: No such file or directory"},
    {"[tier d]\ntype = posix\npath = @D@/file\n", 3, "key 'path'", "/file: Not a directory"},
    {POSIX_A "[tier r]\ntype = ram\ncapacity = 1G\npersistent = yes\n", 7, "key 'persistent'",
     "a ram tier cannot be persistent"},
    {POSIX_A "\n[tier a]\ntype = posix\npath = @D@/b\n", 5, "section [tier a]",
     "duplicate tier name"},
    {"[tier r1]\ntype = ram\ncapacity = 1G\n[tier r2]\ntype = ram\ncapacity = 1G\n", 4,
     "section [tier r2]", "only one ram tier is supported"},
    {POSIX_A "[policy]\nlearn = yes\nstripe = a, b\n", 6, "key 'stripe'", "no tier named 'b'"},
    {POSIX_A "[tier r]\ntype = ram\ncapacity = 1G\n[policy]\nstripe = a r\n", 8, "key 'stripe'",
     "tier 'r'"},
    {"[policy]\nstripe = a\n" POSIX_A "persistent = no\n", 6, "key 'persistent'",
     "a posix tier is always persistent; for files that need not outlive the mount, use a "
     "[rule] with persistent = no"},
    {"[rule g]\nmatch = *.swp\ntier = fast\n" POSIX_A, 3, "key 'tier'",
     "rule 'g': no tier named 'fast'"},
    {POSIX_A "\n[rule g]\ntier = a\n", 5, "section [rule g]", "missing required key 'match'"},
    {"[tier r]\ntype = ram\ncapacity = 1G\n", 1, "key 'metadata'",
     "required when no posix tier is configured"},
    {"# ram only\n[mount]\nthreads = 4\n[tier r]\ntype = ram\ncapacity = 1G\n", 2, "key 'metadata'",
     "required when no posix tier is configured"},
    {POSIX_A "[mount]\nthreads = 257\n", 5, "key 'threads'", "1 to 256"},
    {POSIX_A "[mount]\nflush_interval = 0\n", 5, "key 'flush_interval'", "more than 0"},
    {POSIX_A "[mount]\nflush_interval = 3601\n", 5, "key 'flush_interval'", "3600"},
    {POSIX_A "[mount]\ncommit_interval = 0\n", 5, "key 'commit_interval'", "more than 0"},
    {POSIX_A "[mount]\ncommit_interval = soon\n", 5, "key 'commit_interval'", "seconds"},
    {POSIX_A "[mount]\nwriteback_timeout = 0\n", 5, "key 'writeback_timeout'", "more than 0"},
    {POSIX_A "[mount]\nwriteback_timeout = 1h\n", 5, "key 'writeback_timeout'", "seconds"},
    {POSIX_A "[mount]\ndirty_ratio = 0\n", 5, "key 'dirty_ratio'", "1 to 100"},
    {POSIX_A "[policy]\nprefetch_depth = 65537\n", 5, "key 'prefetch_depth'", "0 to 65536"},
    {POSIX_A "[policy]\nlearn_max_cycle = 1000\n", 5, "key 'learn_max_cycle'", "1024 to"},
    {POSIX_A "[policy]\nlearn_max_cycle = big\n", 5, "key 'learn_max_cycle'", "must be auto or"},
    {POSIX_A "[policy]\nkeep_plan = some\n", 5, "key 'keep_plan'", "'some' is not yes or no"},
    {POSIX_A "[policy]\ngap_plan = 2\n", 5, "key 'gap_plan'", "'2' is not yes, no or auto"},
    {POSIX_A "[expert]\nprefetch_depth = 65537\n", 5, "key 'prefetch_depth'", "0 to 65536"},
    {POSIX_A "[expert]\nlearn_max_cycle = 1000\n", 5, "key 'learn_max_cycle'", "1024 to"},
    {POSIX_A "[expert]\nlearn_max_cycle = big\n", 5, "key 'learn_max_cycle'", "must be auto or"},
    {POSIX_A "[expert]\nkeep_plan = some\n", 5, "key 'keep_plan'", "'some' is not yes or no"},
    {POSIX_A "[expert]\n\ngap_plan = 2\n", 6, "key 'gap_plan'", "'2' is not yes, no or auto"},
    {POSIX_A "[expert]\nstripe = a\n", 5, "key 'stripe'", "unknown key in section [expert]"},
    {POSIX_A "[expert]\nlearn = no\n", 5, "key 'learn'", "unknown key in section [expert]"},
    {POSIX_A "[expert]\ngap_plan = no\nGAP_PLAN = no\n", 6, "key 'GAP_PLAN'",
     "given twice in section [expert] (first on line 5)"},
    {POSIX_A "[policy]\ngap_plan = no\ngap_plan = no\n", 6, "key 'gap_plan'",
     "given twice in section [policy] (first on line 5)"},
    {POSIX_A "[policy]\nkeep_plan = no\n[expert]\nkeep_plan = no\n", 7, "key 'keep_plan'",
     "given twice (first on line 5, in [policy])"},
    {POSIX_A "[expert]\nkeep_plan = no\n[policy]\nkeep_plan = yes\n", 7, "key 'keep_plan'",
     "given twice (first on line 5, in [expert])"},
    {POSIX_A "[expert]\n[expert]\n", 5, "section [expert]", "given twice"},
    {POSIX_A "[expert x]\n", 4, "section [expert]", "takes no name"},
    {POSIX_A "[experts]\n", 4, "section [experts]", "[expert]"},
    {POSIX_A "just some words\n", 4, "", "syntax error"},
    {"type = posix\n", 1, "key 'type'", "outside any section"},
    {"[tier x]\npath = @D@/a\n", 1, "section [tier x]", "missing required key 'type'"},
    {"\n[tier x]\ntype = ram\n[mount]\nmetadata = /m\n", 2, "section [tier x]",
     "missing required key 'capacity'"},
    {"[tier x]\ntype = posix\ncapacity = 1G\n", 1, "section [tier x]",
     "missing required key 'path'"},
    {"[tier x]\ntype = posix\npath = a\n", 3, "key 'path'", "absolute"},
    {POSIX_A "slab_size = 1536K\n", 4, "key 'slab_size'", "multiple of block_size"},
    {POSIX_A "bandwidth = 2G\n", 4, "key 'bandwidth'", "not auto or a bandwidth"},
    {POSIX_A "direct = maybe\n", 4, "key 'direct'", "auto, yes or no"},
    {POSIX_A "weight = 0\n", 4, "key 'weight'", "at least 1"},
    {POSIX_A "queue_depth = 1025\n", 4, "key 'queue_depth'", "1 to 1024"},
    {"[tier bad/name]\ntype = ram\n", 1, "section [tier bad/name]", "tier name"},
    {"[tier abcdefghijabcdefghijabcdefghij12]\ntype = ram\n", 1, "section [tier", "tier name"},
    {POSIX_A "[mount]\n[mount]\n", 5, "section [mount]", "given twice"},
    {POSIX_A "[tier r]\ntype = ram\ncapacity = 1G\npath = @D@/b\n", 7, "key 'path'",
     "only posix tiers"},
    {POSIX_A "[mount]\nsync_on_close = maybe\n", 5, "key 'sync_on_close'", "yes or no"},
    {POSIX_A "[rule a]\nmatch = x\ntier = a\n[rule a]\n", 7, "section [rule a]", "duplicate"},
    {POSIX_A "[rule z]\nmatch = dir/*.swp\ntier = a\n", 5, "key 'match'", "'/'"},
    {POSIX_A "[tier b]\ntype = posix\npath = @D@/a/.\n", 6, "key 'path'", "same directory"},
    {"[tier s]\ntype = s3\nendpoint = ftp://h\n", 3, "key 'endpoint'", "http://"},
    {"[tier s]\ntype = s3\nendpoint = http://h\nbucket = No_Such\n", 4, "key 'bucket'",
     "not a bucket name"},
    {"[tier s]\ntype = s3\nendpoint = http://h\n", 1, "section [tier s]",
     "missing required key 'bucket'"},
    {S3_A "path = @D@/a\n", 6, "key 'path'", "only posix tiers have a path"},
    {POSIX_A "bucket = bk1\n", 4, "key 'bucket'", "only s3 tiers have a bucket"},
    {S3_A "retries = 0\n", 6, "key 'retries'", "1 to 100"},
    {S3_A "addressing = dns\n", 6, "key 'addressing'", "path or virtual"},
    {S3_A "prefix = /x/\n", 6, "key 'prefix'", "must not start with '/'"},
    {S3_A "credentials_file = creds\n", 6, "key 'credentials_file'", "absolute path"},
    {S3_A "ca_file = ca.pem\n", 6, "key 'ca_file'", "absolute path"},
    {S3_A "region = a\nregion = b\n", 7, "key 'region'", "given twice"},
    {S3_A "persistent = no\n", 6, "key 'persistent'", "always persistent"},
};

static void test_bad(void **state)
{
	const struct bad *b = *state;
	char want[PATH_MAX + 128];

	int rc = load(b->text);
	if (rc != -EINVAL)
		fail_msg("rc %d, want -EINVAL; config:\n%s", rc, b->text);
	snprintf(want, sizeof(want), "%s:%d: %s", cpath, b->line, b->what);
	if (strncmp(err, want, strlen(want)) != 0)
		fail_msg("message '%s' does not start with '%s'", err, want);
	if (!strstr(err + strlen(want), b->reason))
		fail_msg("message '%s' does not contain '%s'", err, b->reason);
	if (b->what[0] && (b->what[0] == 'k' || strchr(b->what, ']'))) {
		/* the full prefix is followed by ": " */
		if (strncmp(err + strlen(want), ": ", 2) != 0)
			fail_msg("message '%s': no ': ' after '%s'", err, want);
	}
}

int main(void)
{
	enum { NBAD = sizeof(bads) / sizeof(bads[0]) };
	static char names[NBAD][48];
	struct CMUnitTest tests[24 + NBAD];
	size_t n = 0;

#define T(f) tests[n++] = (struct CMUnitTest)cmocka_unit_test(f)
	T(test_all_keys);
	T(test_s3_keys);
	T(test_defaults_implicit_ram);
	T(test_ram_only);
	T(test_gap_plan_values);
	T(test_learn_max_cycle_values);
	T(test_moved_keys);
	T(test_syntax_and_line_numbers);
	T(test_cannot_read);
	T(test_parse_size);
	T(test_parse_bandwidth_bool);
	T(test_bandwidth_keys);
	T(test_codec_keys);
	T(test_example_deepspeed);
	T(test_example_local);
	T(test_example_ram_only);
	T(test_example_s3);
	for (size_t i = 0; i < NBAD; i++) {
		snprintf(names[i], sizeof(names[i]), "test_bad_%02zu_line%d", i, bads[i].line);
		tests[n] = (struct CMUnitTest){names[i], test_bad, NULL, NULL, (void *)&bads[i]};
		n++;
	}
	return _cmocka_run_group_tests("config", tests, n, setup, teardown);
}
