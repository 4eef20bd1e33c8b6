/*
 * tests/fuzz/fuzz.h — the face every fuzz harness shows.
 *
 * A harness is one fuzz_NAME.c defining LLVMFuzzerTestOneInput (and, if it
 * needs state built once, LLVMFuzzerInitialize). The same source links two
 * ways: with clang's libFuzzer (`make fuzz`, which searches for new inputs)
 * and with replay.c (every build, so `make test` runs each harness over its
 * seed corpus and the inputs that once crashed it, under ASan/UBSan in the
 * sanitizer build). Inputs are arbitrary bytes: a harness must give every
 * one of them to the code under test as the daemon would receive it, and
 * abort() on a wrong answer, never on bad input.
 */
#ifndef TIERFS_FUZZ_H
#define TIERFS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Abort with a message when COND is false: a wrong answer, which libFuzzer
 * and the replay both report as a crash with the input that caused it. */
#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fuzz_fail(__FILE__, __LINE__, #cond);                                      \
		}                                                                                  \
	} while (0)
void fuzz_fail(const char *file, int line, const char *what) __attribute__((noreturn));

#endif
