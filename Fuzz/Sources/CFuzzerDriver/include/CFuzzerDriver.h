#ifndef TABSYNC_CFUZZERDRIVER_H
#define TABSYNC_CFUZZERDRIVER_H

#include <stddef.h>
#include <stdint.h>

/// Runs libFuzzer's driver (flags, corpus, mutation loop) over `one`, the target's
/// LLVMFuzzerTestOneInput. SwiftPM links an executable's entry point as `<module>_main`, so the
/// targets call this from there instead of linking libFuzzer's own `main`.
int tabsync_fuzz_run(int argc, char **argv, int (*one)(const uint8_t *data, size_t size));

#endif
