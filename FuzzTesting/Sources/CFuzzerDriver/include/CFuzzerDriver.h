#ifndef SHADOW_KEYS_FUZZER_DRIVER_H
#define SHADOW_KEYS_FUZZER_DRIVER_H
#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (compiler-rt, LLVM 11 and later), linked by -sanitize=fuzzer: parses
/// libFuzzer's own flags from argv and runs `callback` on every input.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
