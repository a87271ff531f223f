/* ThreadSanitizer's annotations for custom synchronization, callable from Swift in every build.
 * Header only: nothing is linked. Every shim name starts with `ctsan_`.
 *
 * The two runtime entry points are declared weak: in a build with -sanitize=thread the
 * ThreadSanitizer runtime defines them; in any other build they stay null and the shims do nothing
 * but test a pointer. (Swift cannot test for the sanitizer at compile time, and the Clang importer
 * is not given -fsanitize=thread, so __has_feature(thread_sanitizer) is false here in every build.)
 */
#ifndef C_THREAD_SANITIZER_H
#define C_THREAD_SANITIZER_H

/* From compiler-rt's <sanitizer/tsan_interface.h>, declared here so no sanitizer header is needed. */
void __tsan_acquire(void *addr) __attribute__((weak));
void __tsan_release(void *addr) __attribute__((weak));

/* Tells ThreadSanitizer this thread acquired the synchronization object `addr` (any address used
 * only as a name): everything released on `addr` before now happens before what follows. */
static inline void ctsan_acquire(void *addr) {
    if (__tsan_acquire) __tsan_acquire(addr);
}

/* Tells ThreadSanitizer this thread releases `addr`: what it did so far happens before the next
 * acquire of `addr` by any thread. */
static inline void ctsan_release(void *addr) {
    if (__tsan_release) __tsan_release(addr);
}

#endif
