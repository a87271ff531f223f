/* An epoll event loop for lws: libev as lws's "foreign" loop (LWS_SERVER_OPTION_LIBEV with
 * info.foreign_loops), run by the caller one iteration at a time.
 *
 * lws's default loop is poll(): every wakeup scans every fd in the kernel and in lws, which at
 * thousands of connections costs more than the work (measured: 46% of the load generator's CPU
 * in poll() at 1,000 connections). As a foreign loop the caller keeps its signals and decides
 * when to stop. libev rather than libuv: Debian's 4.1.6 is built with _DEBUG, where a WebSocket
 * closed from a callback on the libuv loop is closed a second time at once ("uv repeat test" in
 * lws_service_fd) and its close frame never goes out. libev headers stay here, so Swift sees
 * only these calls. */
#ifndef C_LIBWEBSOCKETS_CLWS_EVENT_LOOP_H
#define C_LIBWEBSOCKETS_CLWS_EVENT_LOOP_H

#include <libwebsockets.h>
#include <ev.h>

/* A new libev loop on epoll, or NULL. */
static inline void *clws_ev_loop_create(void)
{
    return ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV);
}

/* Points info at the loop (lws copies it while creating the context) and selects libev.
 * `slot` must stay valid until lws_create_context returns. */
static inline void clws_ev_use_loop(struct lws_context_creation_info *info, void **slot, void *loop)
{
    slot[0] = loop;
    info->foreign_loops = slot;
    info->options |= LWS_SERVER_OPTION_LIBEV;
}

/* One loop iteration: waits for at least one event (or timer), services what is ready. */
static inline void clws_ev_run_once(void *loop) { ev_run((struct ev_loop *)loop, EVRUN_ONCE); }

/* After lws_context_destroy (which stops lws's watchers): frees the loop. */
static inline void clws_ev_loop_destroy(void *loop) { ev_loop_destroy((struct ev_loop *)loop); }

#endif
