/* Minimal TAP output for the simulator's test programs. */
#ifndef NVSHARE_TESTS_SIM_TAP_H
#define NVSHARE_TESTS_SIM_TAP_H
#include <stdio.h>
#include <stdlib.h>

static int tap_n, tap_failed;

#define OK(cond, ...)                                              \
	do {                                                       \
		int ok_ = !!(cond);                                \
		printf("%sok %d - ", ok_ ? "" : "not ", ++tap_n);  \
		printf(__VA_ARGS__);                               \
		printf("\n");                                      \
		if (!ok_) {                                        \
			tap_failed++;                              \
			printf("#   at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
		}                                                  \
		fflush(stdout);                                    \
	} while (0)
#define DIAG(...)                          \
	do {                               \
		printf("# ");              \
		printf(__VA_ARGS__);       \
		printf("\n");              \
		fflush(stdout);            \
	} while (0)
#define TAP_DONE() return tap_failed ? 1 : 0

/* A private state directory, so a test never shares the GPU by accident. */
static inline void tap_private_state(void)
{
	static char dir[] = "/tmp/nvs-sim-test.XXXXXX";
	if (mkdtemp(dir))
		setenv("NVSHARE_SIM_STATE_DIR", dir, 1);
}
#endif
