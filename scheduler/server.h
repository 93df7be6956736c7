/*
 * The server: the two listening sockets (client and admin), a signalfd for
 * SIGTERM/SIGINT, and every accepted connection, watched through the event
 * loop (loop.h). nvs_server_open() also registers the loop's timers, in
 * the order they run each turn: policy (TQ expiry, DROP_LOCK grace), the
 * reaping of ended connections, the socket check, unmanaged processes,
 * metrics.
 */
#ifndef NVSHARE_SCHEDULER_SERVER_H
#define NVSHARE_SCHEDULER_SERVER_H

/* Binds the socket in cfg.sock_dir (taking the directory's lock file),
 * or explains why not and returns -1. */
int nvs_server_open(void);
/* Runs until SIGTERM/SIGINT. Returns the exit status. */
int nvs_server_run(void);
/* Removes the socket (if still ours) and closes everything. */
void nvs_server_close(void);

#endif
