/*
 * tests/fuzz/common.c — what every harness links, under libFuzzer or the
 * replay driver alike.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/fuzz/fuzz.h"

void fuzz_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "fuzz: %s:%d: check failed: %s\n", file, line, what);
	abort();
}
