/*
 * Where the scheduler's sockets live. Two sockets, two audiences
 * (docs/security.md):
 *  - the client socket, $NVSHARE_SOCK_DIR/scheduler.sock (default
 *    /var/run/nvshare): mounted into every Pod that gets nvshare.com/gpu;
 *    clients and a tenant-scoped status only;
 *  - the admin socket, $NVSHARE_ADMIN_SOCK_DIR/admin.sock (default
 *    /var/run/nvshare-admin): never mounted into Pods; every control
 *    message and the full status.
 * Clients, the scheduler and nvsharectl all use this, so one variable
 * moves each socket for all of them (tests and demos run unprivileged).
 */
#ifndef NVSHARE_COMMON_SOCKPATH_H
#define NVSHARE_COMMON_SOCKPATH_H

#include <stddef.h>
#include <sys/un.h>

#define NVS_DEFAULT_SOCK_DIR "/var/run/nvshare"
#define NVS_SOCK_NAME "scheduler.sock"
#define NVS_DEFAULT_ADMIN_SOCK_DIR "/var/run/nvshare-admin"
#define NVS_ADMIN_SOCK_NAME "admin.sock"

/* A UNIX socket path, NUL included: what sun_path holds (108 on Linux). */
#define NVS_SOCK_PATH_LEN sizeof(((struct sockaddr_un *)0)->sun_path)
/* Socket directories are shorter than this: "/scheduler.sock" (the longer
 * name) and the NUL must fit after them in a path (92 on Linux). */
#define NVS_SOCK_DIR_MAX (NVS_SOCK_PATH_LEN - sizeof("/" NVS_SOCK_NAME))

/* Writes the client socket directory into buf. Returns -1 if it does not
 * fit. */
int nvs_sock_dir(char *buf, size_t cap);
/* Writes the client socket path into buf. Returns -1 if it does not fit
 * in sun_path. */
int nvs_sock_path(char *buf, size_t cap);
/* The same for the admin socket ($NVSHARE_ADMIN_SOCK_DIR). */
int nvs_admin_sock_dir(char *buf, size_t cap);
int nvs_admin_sock_path(char *buf, size_t cap);

/* Connects a blocking UNIX stream socket to the client socket
 * (close-on-exec). Returns the fd or -errno. */
int nvs_sock_connect(void);
/* The same to any socket path. */
int nvs_sock_connect_path(const char *path);

#endif
