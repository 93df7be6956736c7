/*
 * A lock holder killed with SIGKILL: the next waiter must get LOCK_OK at
 * once (the scheduler sees the socket close). Measures kill -> LOCK_OK.
 */
#include "harness.h"

#define ROUNDS 20

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	(void)argc;
	setvbuf(stdout, NULL, _IOLBF, 0);
	h_start(argv[0], "--mode", "on", (char *)NULL);
	uint64_t lat[ROUNDS];
	int got = 0;
	for (int i = 0; i < ROUNDS; i++) {
		int p[2];
		if (pipe(p))
			return 1;
		pid_t child = fork();
		if (child == 0) {
			/* The holder: takes the lock, says so, waits to be killed. */
			struct nvs_sconn a;
			char ok = 'x';
			if (h_client(&a, "GPU-kill", 0) == 1 &&
			    h_send_gpu(&a, NVS_MSG_REQ_LOCK, 0) == 0 &&
			    h_wait(&a, NVS_MSG_LOCK_OK, 5000, NULL) == 1) {
				ok = 'L';
				if (write(p[1], &ok, 1) != 1)
					_exit(1);
				/* Someone waits: ready to be killed. */
				struct nvs_msg m;
				while (h_wait(&a, NVS_MSG_WAITERS, 5000, &m) == 1 &&
				       m.u.gpu.value == 0) {
				}
				ok = 'W';
			}
			if (write(p[1], &ok, 1) != 1)
				_exit(1);
			pause();
			_exit(0);
		}
		close(p[1]);
		struct nvs_sconn b;
		char c1 = 0, c2 = 0;
		int mode = h_client(&b, "GPU-kill", 0);
		if (mode != 1 || read(p[0], &c1, 1) != 1 || c1 != 'L') {
			tap(0, "round %d: holder did not get the lock (mode %d, %c)", i, mode, c1);
			kill(child, SIGKILL);
			waitpid(child, NULL, 0);
			break;
		}
		h_send_gpu(&b, NVS_MSG_REQ_LOCK, 0);
		if (read(p[0], &c2, 1) != 1 || c2 != 'W') {
			tap(0, "round %d: holder never saw a waiter", i);
			kill(child, SIGKILL);
			waitpid(child, NULL, 0);
			break;
		}
		uint64_t t0 = mono_ns();
		kill(child, SIGKILL);
		int r = h_wait(&b, NVS_MSG_LOCK_OK, 2000, NULL);
		uint64_t t1 = mono_ns();
		waitpid(child, NULL, 0);
		close(p[0]);
		if (r != 1) {
			tap(0, "round %d: waiter got no LOCK_OK after the holder was killed", i);
			nvs_sconn_close(&b);
			break;
		}
		lat[got++] = t1 - t0;
		nvs_sconn_close(&b);
	}
	if (got == ROUNDS) {
		qsort(lat, ROUNDS, sizeof lat[0], cmp);
		double p50 = (double)lat[ROUNDS / 2] / 1e6, max = (double)lat[ROUNDS - 1] / 1e6;
		printf("# kill -> next LOCK_OK over %d rounds: p50 %.3f ms, max %.3f ms\n", ROUNDS,
		       p50, max);
		tap(1, "next waiter got LOCK_OK after every holder kill (%d rounds)", ROUNDS);
		/* The target is 10 ms (docs/reliability.md, measured by bench,
		 * the hand-off itself exact in tests/core/t_lock.c); here the
		 * bound only proves that the hand-off follows the socket close,
		 * not the end of the 5 s drop grace or of the 30 s quantum: a
		 * hang guard below the grace, not a timing target. */
		tap(max < 4000.0,
		    "every kill -> LOCK_OK before the drop grace could end: "
		    "p50 %.3f ms, max %.3f ms (target 10 ms: bench)",
		    p50, max);
	}
	return tap_failed ? 1 : 0;
}
