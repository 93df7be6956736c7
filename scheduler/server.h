/*
 * The server: the two listening sockets (client and admin), a signalfd for
 * SIGTERM/SIGINT/SIGHUP, and every accepted connection, watched through the
 * event loop (loop.h, which main.c creates first). Its one timer
 * (NVS_LOOP_ACCEPT) checks the sockets once a second (re-creating a lost
 * one) and ends accept pauses.
 */
#ifndef NVSHARE_SCHEDULER_SERVER_H
#define NVSHARE_SCHEDULER_SERVER_H

/* Binds the sockets in cfg.sock_dir and cfg.admin_sock_dir (taking each
 * directory's lock file) and watches them and the signals; or explains
 * why not and returns -1. SIGTERM/SIGINT stop the loop (nvs_loop_stop). */
int nvs_server_open(void);
/* Removes the sockets (if still ours) and closes every connection. */
void nvs_server_close(void);

/* A Pod socket (podsock.h): listens on dir/scheduler.sock (dir created
 * 0755 when missing, and checked: ours, writable by nobody else), with the
 * client socket's modes; whoever connects there is b's Pod (b stays valid
 * until nvs_server_unlisten_pod). Re-created when removed, like the
 * others. NULL on failure (logged). */
#include <sys/types.h>
struct nvs_listener;
struct nvs_binding;
struct nvs_listener *nvs_server_listen_pod(const char *dir, const struct nvs_binding *b);
/* Stops listening, removes the socket (if still ours), frees l. */
void nvs_server_unlisten_pod(struct nvs_listener *l);

/* A directory the scheduler creates files in must be a directory of its
 * own uid (not a symlink); a mode other than `mode` is set to it (with a
 * warning when it kept clients out). 0, or -1 logged (what names it). */
int nvs_server_own_dir(const char *dir, mode_t mode, const char *what);

#endif
