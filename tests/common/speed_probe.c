/*
 * speed_probe: how fast this machine runs our code right now, for the few
 * tests that must judge wall-clock time (docs/testing.md, "Judge what the
 * code controls"). It times a fixed piece of work (hashing over a 256 KiB
 * buffer: arithmetic and cache traffic, like the scheduler's loop) five
 * times and prints the median wall time in microseconds.
 *
 * tests/lib.sh divides that by the same figure measured on an idle 2-CPU
 * CI machine with the plain build: the quotient is the factor by which a
 * wall-clock bound is stretched. Beside two CPU burners the work gets
 * about half a CPU and takes twice as long; under ASan it runs its
 * instrumented loads and stores, as our daemons do.
 *
 * Wall time, not CPU time: what the bounds suffer from is both a slower
 * CPU and a share of it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BUF_WORDS (256 * 1024 / 8)
#define ROUNDS 5

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(void)
{
	static uint64_t buf[BUF_WORDS];
	uint64_t t[ROUNDS], h = 0x9e3779b97f4a7c15ull;
	for (unsigned r = 0; r < ROUNDS; r++) {
		uint64_t t0 = now_us();
		for (unsigned pass = 0; pass < 256; pass++)
			for (unsigned i = 0; i < BUF_WORDS; i++) {
				/* Each word depends on the previous hash: no
				 * vectorising the work away. */
				h = (h ^ buf[i]) * 0xff51afd7ed558ccdull;
				buf[i] = h >> 7;
			}
		t[r] = now_us() - t0;
	}
	qsort(t, ROUNDS, sizeof t[0], cmp_u64);
	/* h printed to stderr only so the work cannot be optimised out. */
	fprintf(stderr, "speed_probe: hash %016llx\n", (unsigned long long)h);
	printf("%llu\n", (unsigned long long)t[ROUNDS / 2]);
	return 0;
}
