/* The earlier `ctsc_` names of clws_timer.h and the context option shims, kept only for the code
 * not yet on TabsyncLoop (the client library, Sources/TabsyncBench/LoadGenerator.swift); delete
 * this file once both moved. */
#ifndef C_LIBWEBSOCKETS_CLWS_COMPAT_H
#define C_LIBWEBSOCKETS_CLWS_COMPAT_H

#include "clws_timer.h"

typedef clws_timer ctsc_timer;

static inline void *ctsc_timer_owner(lws_sorted_usec_list_t *sul) { return clws_timer_owner(sul); }
static inline lws_usec_t ctsc_timer_cancel_usec(void) { return LWS_SET_TIMER_USEC_CANCEL; }
static inline uint64_t ctsc_option_ssl_global_init(void) { return (uint64_t)LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT; }
static inline int ctsc_port_no_listen(void) { return CONTEXT_PORT_NO_LISTEN; }

#endif
