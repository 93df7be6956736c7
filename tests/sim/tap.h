/* Minimal TAP output for the simulator's test programs. */
#ifndef NVSHARE_TESTS_SIM_TAP_H
#define NVSHARE_TESTS_SIM_TAP_H
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int tap_n, tap_failed;

#define OK(cond, ...)                                                                              \
	do {                                                                                       \
		int ok_ = !!(cond);                                                                \
		printf("%sok %d - ", ok_ ? "" : "not ", ++tap_n);                                  \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		if (!ok_) {                                                                        \
			tap_failed++;                                                              \
			printf("#   at %s:%d: %s\n", __FILE__, __LINE__, #cond);                   \
		}                                                                                  \
		fflush(stdout);                                                                    \
	} while (0)
#define DIAG(...)                                                                                  \
	do {                                                                                       \
		printf("# ");                                                                      \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		fflush(stdout);                                                                    \
	} while (0)
#define TAP_DONE() return tap_failed ? 1 : 0

/* The simulator's kernels and transfers take real time. A wall-clock
 * measurement proves a wait from below (a busy machine only lengthens it:
 * lower bounds stay exact); from above it only guards against a hang (a
 * wait for unrelated work or a timeout), so no test here asserts a wall
 * time tighter than this guard (docs/testing.md). What the model itself
 * decides (a kernel's duration, a transfer's time, the order of events) is
 * checked exactly on its counters (nvshareSimGetProcStats) and events. */
#define HANG_GUARD_MS 10000.0

static char tap_dir[] = "/tmp/nvs-sim-test.XXXXXX";
static pid_t tap_owner;

static void tap_cleanup(void)
{
	char f[64];
	if (getpid() != tap_owner)
		return;
	snprintf(f, sizeof(f), "%s/gpu-state", tap_dir);
	unlink(f);
	rmdir(tap_dir);
}

/* A private state directory, so a test never shares the GPU by accident;
 * removed at exit. */
static inline void tap_private_state(void)
{
	if (mkdtemp(tap_dir)) {
		setenv("NVSHARE_SIM_STATE_DIR", tap_dir, 1);
		tap_owner = getpid();
		atexit(tap_cleanup);
	}
}
#endif
