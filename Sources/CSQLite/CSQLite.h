/* Thin shim over the system SQLite for Swift: only what does not import on its own. */
#ifndef C_SQLITE_H
#define C_SQLITE_H

#include <sqlite3.h>

/* SQLITE_TRANSIENT is a cast macro: tells sqlite3_bind_* to copy the bytes now. */
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }

#endif
