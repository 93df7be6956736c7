/*
 * systemd's service notifications (sd_notify(3)'s protocol, without
 * libsystemd): with the unit's Type=notify the scheduler says READY=1 once
 * both sockets listen, so `systemctl start` returns when clients can
 * connect and units ordered after it find the socket; WATCHDOG=1 from the
 * event loop itself (WatchdogSec=), so a loop that stops turning (a
 * handler blocked in a system call) is killed and restarted by systemd
 * instead of holding every client's GPU. Nothing happens without
 * NOTIFY_SOCKET (outside systemd, in Kubernetes).
 */
#ifndef NVSHARE_SCHEDULER_SD_NOTIFY_H
#define NVSHARE_SCHEDULER_SD_NOTIFY_H

/* Reads NOTIFY_SOCKET and WATCHDOG_USEC/WATCHDOG_PID, registers the
 * watchdog's loop timer (after nvs_loop_init). */
void nvs_sd_start(void);
/* READY=1 with a STATUS= line (the sockets listen). */
void nvs_sd_ready(void);
/* STOPPING=1 (SIGTERM received, shutting down). */
void nvs_sd_stopping(void);

#endif
