/*
 * The event loop: one epoll set with the listening socket, a signalfd for
 * SIGTERM/SIGINT, and every connection. Timers (TQ expiry, DROP_LOCK grace)
 * come from policy_next_deadline() as the epoll timeout, on
 * CLOCK_MONOTONIC.
 */
#ifndef NVSHARE_SCHEDULER_SERVER_H
#define NVSHARE_SCHEDULER_SERVER_H

extern int nvs_epfd;

/* Binds the socket in cfg.sock_dir (taking the directory's lock file),
 * or explains why not and returns -1. */
int nvs_server_open(void);
/* Runs until SIGTERM/SIGINT. Returns the exit status. */
int nvs_server_run(void);
/* Removes the socket (if still ours) and closes everything. */
void nvs_server_close(void);

#endif
