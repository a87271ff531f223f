/* Thin shim over libwebsockets 4.1.x for Swift: only what does not import on its own. */
#ifndef C_LIBWEBSOCKETS_H
#define C_LIBWEBSOCKETS_H

#include <libwebsockets.h>
#include "client_shim.h"

/* LWS_PRE is a macro expression: the headroom lws_write needs before the payload. */
static inline size_t clws_pre(void) { return LWS_PRE; }

#endif
