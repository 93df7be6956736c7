/*
 * Helpers for the C scheduler tests: TAP output, a private scheduler
 * started from the same build directory as the test, and a protocol client
 * on top of ctl/sched_conn.
 */
#ifndef NVSHARE_TESTS_SCHED_HARNESS_H
#define NVSHARE_TESTS_SCHED_HARNESS_H

#include "ctl/sched_conn.h"

#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int tap_n, tap_failed;

static inline void tap(int ok, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%sok %d - ", ok ? "" : "not ", ++tap_n);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	if (!ok)
		tap_failed++;
}

static inline uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static pid_t h_sched_pid;
static char h_dir[256];

static inline void h_stop(void)
{
	if (h_sched_pid > 0) {
		kill(h_sched_pid, SIGTERM);
		waitpid(h_sched_pid, NULL, 0);
		h_sched_pid = 0;
	}
	if (h_dir[0] && !getenv("NVS_KEEP_TMP")) {
		char cmd[300];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", h_dir);
		if (system(cmd)) {
		}
	}
}

/* Starts build/nvshare-scheduler (found next to argv0's build dir) on a
 * private socket dir with extra args (NULL-terminated). Logs go to
 * <dir>/scheduler.log. Exits the test on failure. */
static inline void h_start(const char *argv0, ...)
{
	char self[512], bin[600];
	snprintf(self, sizeof self, "%s", argv0);
	/* argv0 = <build>/tests/sched/t_x: the scheduler is <build>/. */
	snprintf(bin, sizeof bin, "%s/../../nvshare-scheduler", dirname(self));
	snprintf(h_dir, sizeof h_dir, "%s/nvs-ctest.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(h_dir)) {
		perror("mkdtemp");
		exit(1);
	}
	char sock[300], admin[300], path[400], log[300];
	snprintf(sock, sizeof sock, "%s/sock", h_dir);
	snprintf(admin, sizeof admin, "%s/admin", h_dir);
	/* The admin socket is bound first (scheduler/server.c): once the
	 * client socket exists, both do. Waiting for the admin socket raced
	 * with the client socket's bind (seen under ASan beside burners). */
	snprintf(path, sizeof path, "%s/scheduler.sock", sock);
	snprintf(log, sizeof log, "%s/scheduler.log", h_dir);
	setenv("NVSHARE_SOCK_DIR", sock, 1);
	setenv("NVSHARE_ADMIN_SOCK_DIR", admin, 1);
	const char *args[32] = {bin, "--no-nvml"};
	int n = 2;
	va_list ap;
	va_start(ap, argv0);
	const char *a;
	while ((a = va_arg(ap, const char *)) && n < 30)
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	h_sched_pid = fork();
	if (h_sched_pid == 0) {
		FILE *f = freopen(log, "a", stderr);
		(void)f;
		execv(bin, (char *const *)args);
		perror("execv");
		_exit(127);
	}
	atexit(h_stop);
	for (int i = 0; i < 500; i++) {
		struct stat st;
		if (stat(path, &st) == 0)
			return;
		usleep(10000);
	}
	printf("not ok 1 - scheduler did not start (%s)\n", bin);
	exit(1);
}

/* Connects to the admin socket (control and the full status). */
static inline int h_admin_open(struct nvs_sconn *c)
{
	char path[400];
	snprintf(path, sizeof path, "%s/admin/admin.sock", h_dir);
	return nvs_sconn_open_path(c, path);
}

/* Connects, sends HELLO and ATTACH_GPU(0, uuid), waits for GPU_MODE. */
static inline int h_client(struct nvs_sconn *c, const char *uuid, uint64_t alloc)
{
	if (nvs_sconn_open(c))
		return -1;
	struct nvs_msg m;
	nvs_msg_hello(&m, "ctest", 100, NVS_NO_LIMIT);
	if (nvs_sconn_send(c, &m))
		return -1;
	nvs_msg_attach(&m, 0, uuid, 16ull << 30, alloc);
	if (nvs_sconn_send(c, &m))
		return -1;
	for (;;) {
		if (nvs_sconn_recv(c, &m, 5000) != 1)
			return -1;
		if (m.type == NVS_MSG_GPU_MODE)
			return (int)m.u.gpu.value;
	}
}

static inline int h_send_gpu(struct nvs_sconn *c, uint16_t type, uint32_t v)
{
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = type;
	m.u.gpu.value = v;
	if (type == NVS_MSG_LOCK_RELEASED) {
		m.u.released.local_gpu = 0;
		m.u.released.flags = v;
	}
	return nvs_sconn_send(c, &m);
}

/* Waits for a message of `type`; returns 1, or <= 0 on timeout / error. */
static inline int h_wait(struct nvs_sconn *c, uint16_t type, int timeout_ms, struct nvs_msg *out)
{
	uint64_t end = mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		uint64_t now = mono_ns();
		if (now >= end)
			return 0;
		struct nvs_msg m;
		int r = nvs_sconn_recv(c, &m, (int)((end - now) / 1000000ull) + 1);
		if (r <= 0)
			return r;
		if (m.type == type) {
			if (out)
				*out = m;
			return 1;
		}
	}
}

#endif
