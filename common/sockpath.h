/*
 * Where the scheduler's socket lives: $NVSHARE_SOCK_DIR, else
 * /var/run/nvshare. Clients, the scheduler and nvsharectl all use this, so
 * one variable moves all of them (tests and demos run unprivileged).
 */
#ifndef NVSHARE_COMMON_SOCKPATH_H
#define NVSHARE_COMMON_SOCKPATH_H

#include <stddef.h>

#define NVS_DEFAULT_SOCK_DIR "/var/run/nvshare"
#define NVS_SOCK_NAME "scheduler.sock"

/* Writes the socket directory into buf. Returns -1 if it does not fit. */
int nvs_sock_dir(char *buf, size_t cap);
/* Writes the socket path into buf. Returns -1 if it does not fit in
 * sun_path. */
int nvs_sock_path(char *buf, size_t cap);

/* Connects a blocking UNIX stream socket to the scheduler (close-on-exec).
 * Returns the fd or -errno. */
int nvs_sock_connect(void);

#endif
