/* TLS additions to the libwebsockets shim (the server's transport security): what Swift cannot
 * import on its own (OpenSSL's option bits) and one OpenSSL check. */
#ifndef C_LIBWEBSOCKETS_TLS_SHIM_H
#define C_LIBWEBSOCKETS_TLS_SHIM_H

#include <libwebsockets.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <stdio.h>

/* OpenSSL options (info.ssl_options_set) refusing every protocol older than TLS 1.2. */
static inline long clws_ssl_options_tls12_minimum(void)
{
    return (long)(SSL_OP_NO_SSLv2 | SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1);
}

/*
 * Loads a PEM certificate chain and a PEM private key into a scratch server SSL_CTX and checks
 * that the key belongs to the certificate. Returns 0 when they can be served together; otherwise
 * 1 (the certificate), 2 (the key) or 3 (they do not match), with OpenSSL's reason (a fixed text,
 * never file contents) in err.
 */
static inline int clws_tls_check_pair(const char *cert, const char *key, char *err, size_t errlen)
{
    SSL_CTX *ctx;
    unsigned long e;
    const char *reason;
    int rc = 0;

    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(err, errlen, "OpenSSL could not create a context");
        return 1;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
        rc = 1;
    else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
        rc = 2;
    else if (SSL_CTX_check_private_key(ctx) != 1)
        rc = 3;
    if (rc) {
        e = ERR_peek_last_error();
        reason = e ? ERR_reason_error_string(e) : NULL;
        snprintf(err, errlen, "%s", reason ? reason : "unusable");
    }
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return rc;
}

#endif
