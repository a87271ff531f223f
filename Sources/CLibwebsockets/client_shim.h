/* Client-side additions to the libwebsockets shim (owned by the client library).
 * Only what does not import into Swift on its own. */
#ifndef C_LIBWEBSOCKETS_CLIENT_SHIM_H
#define C_LIBWEBSOCKETS_CLIENT_SHIM_H

#include <libwebsockets.h>
#include <stdint.h>

/* A scheduler entry (lws_sul) with a pointer back to its owner. `sul` is the first
 * member, so the pointer lws hands to the callback is the pointer to this struct. */
typedef struct ctsc_timer {
    lws_sorted_usec_list_t sul;
    void *owner;
} ctsc_timer;

static inline void *ctsc_timer_owner(lws_sorted_usec_list_t *sul) {
    return ((ctsc_timer *)sul)->owner;
}

/* LWS_SET_TIMER_USEC_CANCEL is a cast expression. */
static inline lws_usec_t ctsc_timer_cancel_usec(void) { return LWS_SET_TIMER_USEC_CANCEL; }

/* Context option bits are `long long` shift expressions. */
static inline uint64_t ctsc_option_ssl_global_init(void) { return (uint64_t)LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT; }

static inline int ctsc_port_no_listen(void) { return CONTEXT_PORT_NO_LISTEN; }

#endif
