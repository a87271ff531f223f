/* The earlier `ctsc_` names of clws_timer.h and the context option shims, kept only for
 * Sources/TabsyncBench/LoadGenerator.swift until it moves onto TabsyncLoop; delete this file then. */
#ifndef C_LIBWEBSOCKETS_CLWS_COMPAT_H
#define C_LIBWEBSOCKETS_CLWS_COMPAT_H

#include "clws_timer.h"

typedef clws_timer ctsc_timer;

static inline void *ctsc_timer_owner(lws_sorted_usec_list_t *sul) { return clws_timer_owner(sul); }
static inline int ctsc_port_no_listen(void) { return CONTEXT_PORT_NO_LISTEN; }

#endif
