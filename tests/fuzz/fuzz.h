// fuzz: what every fuzz target of tests/fuzz/ defines, and the helpers they
// share. A target is one file, fuzz_NAME.c, built two ways (see
// docs/security.md, "Fuzzing"): with clang's libFuzzer (CGQ_FUZZ=ON, make
// fuzz), and with driver.c's main() in the ordinary ASan build, where ctest
// runs it once over tests/fuzz/corpus/NAME/.
#ifndef CGQ_FUZZ_H
#define CGQ_FUZZ_H

#include <stddef.h>
#include <stdint.h>

// Called once before the first input; each target defines it (its fixtures,
// and a quiet logger: warnings about hostile input are the expected case).
int LLVMFuzzerInitialize (int *argc, char ***argv);
// Called once per input; returns 0. Anything it allocates it frees, so that
// the leak checker can tell a leak of the code under test.
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

// fuzz_str returns data as a new NUL-terminated string (caller frees); a NUL
// inside data stays, so the string may read shorter than size.
char *fuzz_str (const uint8_t *data, size_t size);

// fuzz_quiet turns the cgq logger down to errors only.
void fuzz_quiet (void);

#endif
