#include "CFuzzerDriver.h"

/* From libFuzzer (compiler-rt's libclang_rt.fuzzer, linked by -sanitize=fuzzer). */
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*UserCb)(const uint8_t *Data, size_t Size));

int tabsync_fuzz_run(int argc, char **argv, int (*one)(const uint8_t *data, size_t size)) {
    return LLVMFuzzerRunDriver(&argc, &argv, one);
}
