/* Thin shim over Debian's libpq (libpq-dev) for Swift: the client library of PostgreSQL. */
#ifndef C_LIBPQ_H
#define C_LIBPQ_H

#include <libpq-fe.h>

#endif
