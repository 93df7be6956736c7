/*
 * nvshare-scheduler: command line, environment, signals; then the parts
 * start, each registering its own descriptors and timers with the event
 * loop (loop.h), and the loop runs. The settings (flags over NVSHARE_*
 * variables over defaults) are read by settings.c from its table.
 */
#include "clients.h"
#include "clock.h"
#include "config_check.h"
#include "conn.h"
#include "events.h"
#include "gpus.h"
#include "k8s/k8s_watch.h"
#include "peer_limits.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "peer.h"
#include "k8s/pod_identity.h"
#include "plog.h"
#include "core/coschedule.h"
#include "core/policy.h"
#include "core/quota.h"
#include "server.h"
#include "settings.h"
#include "sockpath.h"
#include "sd_notify.h"
#include "state_file.h"
#include "health.h"
#include "core/state.h"
#include "unmanaged.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvs_version.h" /* generated: scripts/gen-version.sh */

/* "a/b/" -> "a/b": for comparing directories as typed. */
static size_t dir_len(const char *d)
{
	size_t n = strlen(d);
	while (n > 1 && d[n - 1] == '/')
		n--;
	return n;
}

/* Both socket paths; the admin directory must be neither the client
 * directory nor inside it: that one is mounted into Pods. */
static int socket_paths(void)
{
	const char *c = S.cfg.sock_dir, *a = S.cfg.admin_sock_dir;
	size_t cn = dir_len(c), an = dir_len(a);
	if (an >= cn && !strncmp(a, c, cn) && (an == cn || a[cn] == '/')) {
		fprintf(stderr,
			"nvshare-scheduler: the admin socket directory %s is (inside) the client "
			"socket directory %s, which is mounted into Pods: choose another one "
			"(--admin-sock-dir, NVSHARE_ADMIN_SOCK_DIR)\n",
			a, c);
		return -1;
	}
	static const size_t max = NVS_SOCK_PATH_LEN;
	int n = snprintf(S.sock_path, sizeof S.sock_path, "%s/%s", c, NVS_SOCK_NAME);
	int m =
	    snprintf(S.admin_sock_path, sizeof S.admin_sock_path, "%s/%s", a, NVS_ADMIN_SOCK_NAME);
	if (n < 0 || (size_t)n >= max || m < 0 || (size_t)m >= max) {
		fprintf(stderr, "nvshare-scheduler: socket path %s/%s or %s/%s is too long\n", c,
			NVS_SOCK_NAME, a, NVS_ADMIN_SOCK_NAME);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	nvs_log_init("scheduler");
	/* Block before anything exists so a SIGTERM during start-up is read
	 * by the loop and still removes the socket. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* Large buffers (a 256 KiB frame, a status) always come from mmap and
	 * go back to the system when freed: RSS follows the buffer budget
	 * instead of its high-water mark. Two arenas: the helper threads must
	 * not reserve 64 MiB of address space each (prlimit --as). */
	mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	mallopt(M_ARENA_MAX, 2);

	/* Every setting, from its variable and its flag, through one table
	 * (settings.def): a bad value stops the start, it is never ignored
	 * or clamped (the message names it). */
	char version[96];
	snprintf(version, sizeof version, "%s (protocol %u)", NVS_VERSION_FULL, NVS_PROTO_VERSION);
	int rc = nvs_settings_load(argc, argv, version);
	if (rc >= 0)
		return rc;
	nvs_log_configure(S.cfg.debug, S.cfg.log_json);
	if (nvs_config_check_combinations())
		return 2;
	if (socket_paths())
		return 2;
	for (size_t n = strlen(nvs_proc_root); n > 1 && nvs_proc_root[n - 1] == '/';)
		nvs_proc_root[--n] = '\0'; /* "/proc/" is /proc */
	if (strcmp(nvs_proc_root, "/proc"))
		NVS_WARN("peer identities are read from %s, not /proc (--proc-root / "
			 "NVSHARE_PROC_ROOT): for tests only",
			 nvs_proc_root);
	S.start_ns = nvs_now_ns();
	S.euid = geteuid();
	/* From here on the loop never blocks on stderr (log.h). */
	if (nvs_log_queue_start(1ul << 20))
		NVS_WARN("cannot start the log writer: logging directly to stderr");
	else
		atexit(nvs_log_queue_stop); /* every exit path writes what is queued */
	nvs_plog_start();
	nvs_quota_start();   /* compute quotas layered on the lock (policy.h) */
	nvs_cosched_start(); /* co-scheduling: the running-set layer (policy.h) */
	nvs_config_snapshot();
	/* The stream opens first: the state file's outcome is an event. */
	if (S.cfg.events_path[0] && nvs_events_open(S.cfg.events_path))
		return 1;
	nvs_event("start", "\"pid\":%d", (int)getpid());
	nvs_state_file_load(); /* run-time settings over the configuration */

	NVS_INFO("nvshare-scheduler %s starting: mode %s, tq %llu ms, reserve %llu, idle release "
		 "%u ms, drop grace %u ms",
		 NVS_VERSION_FULL, nvs_mode_name(S.cfg.mode), (unsigned long long)S.cfg.tq_ms,
		 (unsigned long long)S.cfg.reserve, S.cfg.idle_release_ms, S.cfg.drop_grace_ms);
	/* The loop first: each part below registers its own descriptors and
	 * timers. When a timer ticks in a turn is its phase's business
	 * (loop.h), not the order of these calls; within a phase, policy
	 * before limits, as before (they do not depend on each other). */
	if (nvs_loop_init() < 0) {
		NVS_ERROR("event loop setup failed: %s", strerror(errno));
		return 1;
	}
	nvs_health_start();
	nvs_sd_start();	     /* systemd's NOTIFY_SOCKET and watchdog, if any */
	nvs_clients_start(); /* the decision core's port and timer (core/port.h) */
	nvs_limits_start();
	conn_start();
	if (nvs_server_open())
		return 1;
	if (S.cfg.use_nvml) {
		nvs_gpus_discover();
		if (nvs_config_check_gpus()) {
			nvs_server_close();
			nvs_loop_close();
			return 2;
		}
	} else
		NVS_INFO("NVML disabled: GPUs will be learned from clients");
	nvs_unmanaged_start(); /* needs the GPUs; without NVML it is off */
	nvs_metrics_start();   /* a failure is logged; scheduling goes on */
	nvs_k8s_on_change(nvs_pod_changed, nvs_pod_removed);
	if (nvs_k8s_start()) {
		nvs_server_close();
		nvs_loop_close();
		return 1;
	}
	nvs_sd_ready();	     /* both sockets listen: systemd may start what needs us */
	rc = nvs_loop_run(); /* until SIGTERM/SIGINT (server.c) */
	nvs_sd_stopping();
	nvs_k8s_stop();
	nvs_metrics_stop();
	nvs_server_close();
	nvs_loop_close();
	return rc;
}
