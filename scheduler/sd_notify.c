/* systemd notifications and watchdog (sd_notify.h). */
#include "sd_notify.h"

#include "log.h"
#include "loop.h"
#include "core/state.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un addr;
static socklen_t addr_len; /* 0: not under systemd's notify */
static uint64_t wd_every_ns, wd_next;

/* One datagram to NOTIFY_SOCKET. A failure is logged once: systemd then
 * times the start out or the watchdog fires, which says the rest. */
static void notify(const char *msg)
{
	static int warned;
	if (!addr_len)
		return;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ssize_t n = -1;
	if (fd >= 0) {
		n = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&addr, addr_len);
		close(fd);
	}
	if (n < 0 && !warned) {
		warned = 1;
		NVS_WARN("cannot notify systemd (NOTIFY_SOCKET): %s", strerror(errno));
	}
}

/* The loop's first phase: fed only while the loop turns (a turn comes at
 * least every 60 s and at each deadline, and this deadline is one). */
static void wd_tick(uint64_t now)
{
	if (now >= wd_next) {
		notify("WATCHDOG=1");
		wd_next = now + wd_every_ns;
	}
}

static uint64_t wd_deadline(uint64_t now)
{
	(void)now;
	return wd_next;
}

void nvs_sd_start(void)
{
	const char *s = getenv("NOTIFY_SOCKET");
	size_t len = s ? strlen(s) : 0;
	if (len >= 2 && len < sizeof addr.sun_path && (s[0] == '/' || s[0] == '@')) {
		addr.sun_family = AF_UNIX;
		memcpy(addr.sun_path, s, len);
		if (s[0] == '@')
			addr.sun_path[0] = '\0'; /* abstract namespace */
		addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	} else if (s && *s) {
		NVS_WARN("NOTIFY_SOCKET=\"%s\" is not a socket path: systemd is not told when the "
			 "scheduler is ready",
			 s);
	}
	/* Not inherited by the children we never start, but a variable set
	 * for another process (WATCHDOG_PID) is not ours to feed. */
	unsetenv("NOTIFY_SOCKET");
	const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long usec = us ? strtoull(us, NULL, 10) : 0;
	if (addr_len && usec && (!pid || strtol(pid, NULL, 10) == (long)getpid())) {
		/* Half the interval, as sd_watchdog_enabled(3) advises. */
		wd_every_ns = usec * 1000ull / 2;
		nvs_loop_timer(NVS_LOOP_START, wd_tick, wd_deadline);
		NVS_INFO(
		    "systemd watchdog: the event loop reports every %llu ms (WatchdogSec %llu ms)",
		    (unsigned long long)(wd_every_ns / 1000000ull), usec / 1000ull);
	}
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

void nvs_sd_ready(void)
{
	char msg[sizeof S.sock_path + 64];
	snprintf(msg, sizeof msg, "READY=1\nSTATUS=listening on %s\nMAINPID=%d", S.sock_path,
		 (int)getpid());
	notify(msg);
}

void nvs_sd_stopping(void)
{
	notify("STOPPING=1");
}
