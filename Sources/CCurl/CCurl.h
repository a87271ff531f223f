// One webhook POST through libcurl (docs/design.md, "Webhooks"): curl_easy_setopt is variadic and
// does not import into Swift, so the request is made here, with the one hook that matters: each
// resolved address goes through `check` just before its socket is opened, so a name that resolves
// to a refused address (DNS rebinding included) is never connected to.
#pragma once
#include <curl/curl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

/// Nonzero when a delivery may connect to this address (4 or 16 bytes, network order).
typedef int (*tsc_address_check)(const unsigned char *bytes, int length, void *context);

struct tsc_guard {
    tsc_address_check check;
    void *context;
    int refused;
};

static curl_socket_t tsc_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
    struct tsc_guard *guard = (struct tsc_guard *)clientp;
    const unsigned char *bytes = NULL;
    int length = 0;
    (void)purpose;
    if (address->family == AF_INET) {
        bytes = (const unsigned char *)&((struct sockaddr_in *)&address->addr)->sin_addr;
        length = 4;
    } else if (address->family == AF_INET6) {
        bytes = (const unsigned char *)&((struct sockaddr_in6 *)&address->addr)->sin6_addr;
        length = 16;
    }
    if (bytes == NULL || !guard->check(bytes, length, guard->context)) {
        guard->refused = 1;
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype, address->protocol);
}

static size_t tsc_discard(char *data, size_t size, size_t count, void *context) {
    (void)data;
    (void)context;
    return size * count;
}

/// POSTs `body` to `url` with `headers` (`count` "Name: value" lines), no proxy, no redirect, HTTPS
/// verified, within `timeout_ms`. Returns the CURLcode; `*status` is the HTTP status (0: none),
/// `*refused` nonzero when `check` refused every address tried; `error` (CURL_ERROR_SIZE bytes)
/// says why on failure.
static inline int tsc_post(const char *url, const char *const *headers, int count, const void *body, long length,
                           long timeout_ms, tsc_address_check check, void *context, long *status, int *refused,
                           char *error) {
    struct tsc_guard guard = {check, context, 0};
    struct curl_slist *list = NULL;
    CURL *curl = curl_easy_init();
    CURLcode code;
    *status = 0;
    *refused = 0;
    error[0] = 0;
    if (curl == NULL) {
        strcpy(error, "curl_easy_init failed");
        return CURLE_FAILED_INIT;
    }
    for (int i = 0; i < count; i++) list = curl_slist_append(list, headers[i]);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, length);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, tsc_open_socket);
    curl_easy_setopt(curl, CURLOPT_OPENSOCKETDATA, &guard);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, tsc_discard);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    code = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    *refused = guard.refused;
    curl_easy_cleanup(curl);
    curl_slist_free_all(list);
    return (int)code;
}
