/*
 * rtt_probe: what a round trip between two processes costs on this machine
 * right now, for tests that bound a lock wait measured in wall time
 * (tests/security/hostile_lib.sh check_p99).
 *
 *   rtt_probe STOP_FILE [INTERVAL_US]
 *
 * A parent and a forked child bounce one byte over two pipes every
 * INTERVAL_US (default 5000, the pace of the tests' honest client) until
 * STOP_FILE exists, then the parent prints "n p50 p99 max" in
 * microseconds. A lock cycle is the same shape: the client writes, the
 * scheduler wakes and answers, the client wakes. What two wake-ups cost
 * beside CPU burners or an attacker's processes is the machine's, not the
 * scheduler's: the tests allow it on top of the scheduler's own bound.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES 200000

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: rtt_probe STOP_FILE [INTERVAL_US]\n");
		return 2;
	}
	long interval = argc > 2 ? atol(argv[2]) : 5000;
	int ping[2], pong[2];
	if (pipe(ping) || pipe(pong)) {
		perror("rtt_probe: pipe");
		return 1;
	}
	pid_t child = fork();
	if (child < 0) {
		perror("rtt_probe: fork");
		return 1;
	}
	char b = 0;
	if (child == 0) { /* echo until the parent closes its end */
		close(ping[1]);
		close(pong[0]);
		while (read(ping[0], &b, 1) == 1)
			if (write(pong[1], &b, 1) != 1)
				break;
		_exit(0);
	}
	close(ping[0]);
	close(pong[1]);
	static uint32_t rtt[MAX_SAMPLES];
	size_t n = 0;
	while (n < MAX_SAMPLES && access(argv[1], F_OK) != 0) {
		uint64_t t0 = now_us();
		if (write(ping[1], &b, 1) != 1 || read(pong[0], &b, 1) != 1)
			break;
		uint64_t d = now_us() - t0;
		rtt[n++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
		if (interval > 0)
			usleep((useconds_t)interval);
	}
	close(ping[1]);
	close(pong[0]);
	kill(child, SIGTERM);
	if (!n) {
		printf("0 0 0 0\n");
		return 1;
	}
	qsort(rtt, n, sizeof rtt[0], cmp_u32);
	size_t i99 = n * 99 / 100;
	printf("%zu %u %u %u\n", n, rtt[n / 2], rtt[i99 < n ? i99 : n - 1], rtt[n - 1]);
	return 0;
}
