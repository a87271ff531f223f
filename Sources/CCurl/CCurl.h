// One webhook POST through libcurl (docs/design.md, "Webhooks"): curl_easy_setopt is variadic and
// does not import into Swift, so the request is made here, with the one hook that matters: each
// resolved address goes through `check` just before its socket is opened, so a name that resolves
// to a refused address (DNS rebinding included) is never connected to; and extra CAs (the server's
// `--webhook-ca-file`) are added to each HTTPS connection's trust store, beside the system's.
#pragma once
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/// Reads every certificate of the PEM file at `path` into a new stack (`*cas`, freed with
/// `tsc_free_cas`). Returns the number of certificates (at least 1); -1 when the file cannot be
/// read, holds a PEM block that is not a certificate or a broken one, or holds none, with OpenSSL's
/// reason (a fixed text, never the file's contents) in `error`.
static inline int tsc_load_cas(const char *path, void **cas, char *error, size_t length) {
    STACK_OF(X509) *stack;
    BIO *file;
    X509 *cert;
    unsigned long code;
    *cas = NULL;
    ERR_clear_error();
    file = BIO_new_file(path, "r");
    if (file == NULL) {
        snprintf(error, length, "cannot be read");
        return -1;
    }
    stack = sk_X509_new_null();
    while ((cert = PEM_read_bio_X509(file, NULL, NULL, NULL)) != NULL) sk_X509_push(stack, cert);
    BIO_free(file);
    code = ERR_peek_last_error();
    // The loop ends at the end of the file ("no start line"), or at a block it cannot read.
    if (code != 0 && !(ERR_GET_LIB(code) == ERR_LIB_PEM && ERR_GET_REASON(code) == PEM_R_NO_START_LINE)) {
        const char *reason = ERR_reason_error_string(code);
        snprintf(error, length, "not a PEM certificate bundle: %s", reason ? reason : "unreadable");
        sk_X509_pop_free(stack, X509_free);
        ERR_clear_error();
        return -1;
    }
    ERR_clear_error();
    if (sk_X509_num(stack) == 0) {
        snprintf(error, length, "holds no PEM certificate");
        sk_X509_free(stack);
        return -1;
    }
    *cas = stack;
    return sk_X509_num(stack);
}

static inline void tsc_free_cas(void *cas) {
    if (cas != NULL) sk_X509_pop_free((STACK_OF(X509) *)cas, X509_free);
}

/// libcurl's SSL_CTX hook: the extra CAs (`context`, a stack from `tsc_load_cas`) join the trust
/// store libcurl already filled with the system's CAs.
static CURLcode tsc_add_cas(CURL *curl, void *ssl_ctx, void *context) {
    STACK_OF(X509) *cas = (STACK_OF(X509) *)context;
    X509_STORE *store = SSL_CTX_get_cert_store((SSL_CTX *)ssl_ctx);
    (void)curl;
    for (int i = 0; i < sk_X509_num(cas); i++) {
        if (X509_STORE_add_cert(store, sk_X509_value(cas, i)) != 1) {
            // Already there (the same CA twice) is no failure.
            unsigned long code = ERR_peek_last_error();
            if (ERR_GET_REASON(code) != X509_R_CERT_ALREADY_IN_HASH_TABLE) {
                ERR_clear_error();
                return CURLE_SSL_CACERT_BADFILE;
            }
        }
        ERR_clear_error();
    }
    return CURLE_OK;
}

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
/// verified (against the system's CAs and `cas`, a stack from `tsc_load_cas`, when not NULL), within
/// `timeout_ms`. Returns the CURLcode; `*status` is the HTTP status (0: none),
/// `*refused` nonzero when `check` refused every address tried; `error` (CURL_ERROR_SIZE bytes)
/// says why on failure.
static inline int tsc_post(const char *url, const char *const *headers, int count, const void *body, long length,
                           long timeout_ms, const void *cas, tsc_address_check check, void *context, long *status,
                           int *refused, char *error) {
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
    if (cas != NULL) {
        // No cached store: each connection's store is filled anew, the extra CAs added once.
        curl_easy_setopt(curl, CURLOPT_CA_CACHE_TIMEOUT, 0L);
        curl_easy_setopt(curl, CURLOPT_SSL_CTX_DATA, (void *)cas);
        if (curl_easy_setopt(curl, CURLOPT_SSL_CTX_FUNCTION, tsc_add_cas) != CURLE_OK) {
            strcpy(error, "this libcurl cannot add CAs (--webhook-ca-file needs libcurl on OpenSSL)");
            curl_easy_cleanup(curl);
            curl_slist_free_all(list);
            return CURLE_NOT_BUILT_IN;
        }
    }
    code = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    *refused = guard.refused;
    curl_easy_cleanup(curl);
    curl_slist_free_all(list);
    return (int)code;
}
