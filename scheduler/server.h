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

#endif
