/* A scheduler entry for lws's sorted-usec list with a pointer back to its owner (TabsyncLoop's
 * LoopTimer). Only what does not import into Swift on its own. */
#ifndef C_LIBWEBSOCKETS_CLWS_TIMER_H
#define C_LIBWEBSOCKETS_CLWS_TIMER_H

#include <libwebsockets.h>

/* `sul` is the first member, so the pointer lws hands to the callback is the pointer to this
 * struct, and `owner` is found without pointer arithmetic in Swift. */
typedef struct clws_timer {
    lws_sorted_usec_list_t sul;
    void *owner;
} clws_timer;

static inline void *clws_timer_owner(lws_sorted_usec_list_t *sul) {
    return ((clws_timer *)sul)->owner;
}

/* LWS_SET_TIMER_USEC_CANCEL is a cast expression. */
static inline lws_usec_t clws_timer_cancel_usec(void) { return LWS_SET_TIMER_USEC_CANCEL; }

#endif
