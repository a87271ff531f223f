/* Thin shim over libwebsockets 4.1.x for Swift: only what does not import on its own.
 * Every shim name starts with `clws_`. */
#ifndef C_LIBWEBSOCKETS_H
#define C_LIBWEBSOCKETS_H

#include <libwebsockets.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include "clws_timer.h"
#include "clws_event_loop.h"
#include "tls_shim.h"

/* LWS_PRE is a macro expression: the headroom lws_write needs before the payload. */
static inline size_t clws_pre(void) { return LWS_PRE; }

/* Context / vhost option bits (64-bit macro expressions). */
static inline uint64_t clws_option_validate_utf8(void) { return LWS_SERVER_OPTION_VALIDATE_UTF8; }
static inline uint64_t clws_option_disable_ipv6(void) { return LWS_SERVER_OPTION_DISABLE_IPV6; }
static inline uint64_t clws_option_ssl_global_init(void) { return (uint64_t)LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT; }

/* info.port for a context that listens nowhere (clients only). */
static inline int clws_port_no_listen(void) { return CONTEXT_PORT_NO_LISTEN; }

/* ------------------------------------------------------------------ server shim */

/*
 * Writes a whole HTTP/1 response (status line, Content-Type, Content-Length, optional extra
 * header lines already formatted as "Name: value\r\n", then the body) in one lws_write, as
 * lws_return_http_status does for h1. lws buffers what the socket does not take at once.
 * Returns 0 on success, nonzero when the connection should be closed.
 */
static inline int clws_http_respond_with_headers(struct lws *wsi, unsigned int status,
                                                 const char *content_type, const char *headers,
                                                 const unsigned char *body, size_t body_len);

static inline int clws_http_respond(struct lws *wsi, unsigned int status, const char *content_type,
                                    const unsigned char *body, size_t body_len)
{
    return clws_http_respond_with_headers(wsi, status, content_type, "", body, body_len);
}

/*
 * As clws_http_respond, with extra header lines: `headers` holds "Name: value\r\n" lines, each added
 * with lws_add_http_header_by_name (so HTTP/2 gets them too). For the browser page's assets, whose
 * answers carry Cache-Control, ETag and Content-Security-Policy. Returns 0 on success.
 */
static inline int clws_http_respond_with_headers(struct lws *wsi, unsigned int status,
                                                 const char *content_type, const char *headers,
                                                 const unsigned char *body, size_t body_len)
{
    size_t head_room = 4096;
    size_t total = LWS_PRE + head_room + body_len;
    unsigned char *buf = (unsigned char *)malloc(total);
    unsigned char *start, *p, *end;
    char name[128], value[2048];
    const char *line = headers;
    int n;

    if (!buf)
        return 1;
    start = buf + LWS_PRE;
    p = start;
    end = start + head_room;
    if (lws_add_http_common_headers(wsi, status, content_type, (lws_filepos_t)body_len, &p, end))
        goto fail;
    while (line && *line) {
        const char *colon = strchr(line, ':');
        const char *eol = strstr(line, "\r\n");
        size_t name_len, value_len;
        if (!colon || !eol || colon > eol)
            goto fail;
        name_len = (size_t)(colon - line) + 1; /* lws wants the name with its colon */
        if (name_len >= sizeof(name))
            goto fail;
        memcpy(name, line, name_len);
        name[name_len] = '\0';
        colon++;
        while (*colon == ' ')
            colon++;
        value_len = (size_t)(eol - colon);
        if (value_len >= sizeof(value))
            goto fail;
        memcpy(value, colon, value_len);
        value[value_len] = '\0';
        if (lws_add_http_header_by_name(wsi, (const unsigned char *)name, (const unsigned char *)value,
                                        (int)value_len, &p, end))
            goto fail;
        line = eol + 2;
    }
    if (lws_finalize_http_header(wsi, &p, end))
        goto fail;
    if (body_len)
        memcpy(p, body, body_len);
    n = lws_write(wsi, start, (size_t)(p - start) + body_len, LWS_WRITE_HTTP_FINAL);
    free(buf);
    return n < 0 ? 1 : 0;
fail:
    free(buf);
    return 1;
}

/*
 * The head of an answer whose body is streamed for as long as the connection lives (the change
 * feed's Server-Sent Events): the status, the content type, no length, no caching, then lws is told
 * the stream is SSE (no HTTP timeouts apply to it). The body goes out in pieces with
 * clws_http_stream_write from HTTP_WRITEABLE; the stream ends when the connection is closed.
 * Returns 0 on success.
 */
static inline int clws_http_stream_start(struct lws *wsi, unsigned int status, const char *content_type)
{
    unsigned char buf[LWS_PRE + 1024];
    unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;
    static const char no_store[] = "no-store";
    static const char no_buffering[] = "no";

    if (lws_add_http_common_headers(wsi, status, content_type, LWS_ILLEGAL_HTTP_CONTENT_LEN, &p, end))
        return 1;
    if (lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
                                    (const unsigned char *)no_store, (int)strlen(no_store), &p, end))
        return 1;
    if (lws_add_http_header_by_name(wsi, (const unsigned char *)"x-accel-buffering:",
                                    (const unsigned char *)no_buffering, (int)strlen(no_buffering), &p, end))
        return 1;
    if (lws_finalize_write_http_header(wsi, start, &p, end))
        return 1;
    lws_http_mark_sse(wsi);
    return 0;
}

/* Writes one piece of a streamed body (at most a few KiB, from HTTP_WRITEABLE). 0 on success. */
static inline int clws_http_stream_write(struct lws *wsi, const unsigned char *bytes, size_t len)
{
    unsigned char *buf = (unsigned char *)malloc(LWS_PRE + len);
    int n;

    if (!buf)
        return 1;
    memcpy(buf + LWS_PRE, bytes, len);
    n = lws_write(wsi, buf + LWS_PRE, len, LWS_WRITE_HTTP);
    free(buf);
    return n < (int)len ? 1 : 0;
}

/* A request header into buf; returns its length, 0 when absent (buf then ""), -1 on overflow. */
static inline int clws_request_header(struct lws *wsi, enum lws_token_indexes token, char *buf, int len)
{
    if (!lws_hdr_total_length(wsi, token)) {
        if (len > 0)
            buf[0] = '\0';
        return 0;
    }
    return lws_hdr_copy(wsi, buf, len, token);
}

/* The If-None-Match request header into buf, as clws_request_header. */
static inline int clws_request_if_none_match(struct lws *wsi, char *buf, int len)
{
    return clws_request_header(wsi, WSI_TOKEN_HTTP_IF_NONE_MATCH, buf, len);
}

/*
 * Refuses a WebSocket upgrade with a whole HTTP/1.1 response (status line, Content-Type,
 * Content-Length, Connection: close, then the body) in one lws_write. lws' own header helpers
 * write "HTTP/1.0" while an upgrade is being confirmed, which common clients (Python's
 * websockets) refuse to read, so the refusal's reason would never reach the user.
 * Returns 0 on success, nonzero when the connection should be closed.
 */
static inline int clws_http_refuse_upgrade(struct lws *wsi, unsigned int status, const char *content_type,
                                           const unsigned char *body, size_t body_len)
{
    const char *reason;
    switch (status) {
    case 400: reason = "Bad Request"; break;
    case 401: reason = "Unauthorized"; break;
    case 403: reason = "Forbidden"; break;
    case 404: reason = "Not Found"; break;
    case 429: reason = "Too Many Requests"; break;
    case 503: reason = "Service Unavailable"; break;
    default: reason = "Refused"; break;
    }
    size_t head_room = 512;
    size_t total = LWS_PRE + head_room + body_len;
    unsigned char *buf = (unsigned char *)malloc(total);
    if (!buf)
        return 1;
    unsigned char *start = buf + LWS_PRE;
    int head = snprintf((char *)start, head_room,
                        "HTTP/1.1 %u %s\r\ncontent-type: %s\r\ncontent-length: %zu\r\nconnection: close\r\n\r\n",
                        status, reason, content_type, body_len);
    if (head < 0 || (size_t)head >= head_room) {
        free(buf);
        return 1;
    }
    if (body_len)
        memcpy(start + head, body, body_len);
    int n = lws_write(wsi, start, (size_t)head + body_len, LWS_WRITE_HTTP_FINAL);
    free(buf);
    return n < 0 ? 1 : 0;
}

/* The uri of the current HTTP request (or upgrade request) into buf; returns its length or -1. */
static inline int clws_request_uri(struct lws *wsi, char *buf, int len)
{
    return lws_hdr_copy(wsi, buf, len, WSI_TOKEN_GET_URI);
}

/* The Sec-WebSocket-Protocol header into buf, as clws_request_header. */
static inline int clws_request_subprotocols(struct lws *wsi, char *buf, int len)
{
    return clws_request_header(wsi, WSI_TOKEN_PROTOCOL, buf, len);
}

/* The name of the protocol the wsi is bound to ("" when none). */
static inline const char *clws_protocol_name(struct lws *wsi)
{
    const struct lws_protocols *p = lws_get_protocol(wsi);
    return (p && p->name) ? p->name : "";
}

#endif
