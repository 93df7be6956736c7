/*
 * Unit tests for the per-tenant log rate limiter (scheduler/plog.c) at
 * fixed times (nvs_plog_allow_at): no clock, no load sensitivity. The
 * sites are fixed pseudo-random addresses (a seeded LCG, like code
 * addresses under ASLR; sequential ones hash to distinct slots), so the
 * table's hashing is the same every run: 100 of them put 12 pairs in one
 * slot of a 512-slot direct-mapped table.
 */
#include "harness.h"
#include "scheduler/peer.h"
#include "scheduler/plog.h"

#include <stdint.h>

#define SEC 1000000000ull
#define T0 (100 * SEC)

static uintptr_t sites[2000];

static void make_sites(void)
{
	uint64_t x = 12345;
	for (unsigned k = 0; k < sizeof sites / sizeof sites[0]; k++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		sites[k] = (uintptr_t)(0x550000000000ull + ((x >> 20) & 0xffffffffull) * 8);
	}
}

static const void *site(unsigned k)
{
	return (const void *)sites[k];
}

/* Asks for `tries` lines of each of keys [0, nkeys) of peer p, round robin,
 * at time now; counts the allowed ones per key in allowed[] and the
 * suppressed counts handed back in back[]. */
static void hammer(const struct nvs_peer *p, unsigned nkeys, unsigned tries, uint64_t now,
		   unsigned *allowed, unsigned *back)
{
	for (unsigned k = 0; k < nkeys; k++)
		allowed[k] = back[k] = 0;
	for (unsigned r = 0; r < tries; r++)
		for (unsigned k = 0; k < nkeys; k++) {
			unsigned sup = 0;
			if (nvs_plog_allow_at(site(k), "kind", p, now, &sup))
				allowed[k]++;
			back[k] += sup;
		}
}

int main(void)
{
	struct nvs_peer hostile = {.pid = 4242, .uid = 65534, .kind = NVS_TENANT_UID};
	struct nvs_peer unknown = {.pid = 4243, .uid = 65534, .kind = NVS_TENANT_UNKNOWN};
	struct nvs_peer other = {.pid = 1, .uid = 0, .kind = NVS_TENANT_UID};
	enum { KEYS = 100, TRIES = 30 };
	unsigned allowed[KEYS], back[KEYS], bad;
	make_sites();

	/* 100 keys a tenant: in a 512-slot direct-mapped table some pairs
	 * share a slot and push each other out, restarting each other's
	 * window; then they are not limited at all. */
	hammer(&hostile, KEYS, TRIES, T0, allowed, back);
	bad = 0;
	for (unsigned k = 0; k < KEYS; k++)
		bad += allowed[k] != nvs_plog_rate;
	tap(bad == 0, "%u keys, %u lines each in one second: each allowed exactly %u (%u keys not)",
	    KEYS, TRIES, nvs_plog_rate, bad);
	tap(nvs_plog_suppressed_total == (uint64_t)KEYS * (TRIES - nvs_plog_rate),
	    "... the rest counted as suppressed (%llu)",
	    (unsigned long long)nvs_plog_suppressed_total);

	/* The next window: each key allowed again, and its first line carries
	 * the count held back in the last one. */
	hammer(&hostile, KEYS, 1, T0 + SEC, allowed, back);
	bad = 0;
	for (unsigned k = 0; k < KEYS; k++)
		bad += allowed[k] != 1 || back[k] != TRIES - nvs_plog_rate;
	tap(bad == 0,
	    "a second later each key's first line is allowed and says %u suppressed (%u keys not)",
	    TRIES - nvs_plog_rate, bad);

	/* An unknown tenant's lines count against its uid. */
	hammer(&unknown, 1, TRIES, T0 + 2 * SEC, allowed, back);
	unsigned a_unknown = allowed[0];
	hammer(&hostile, 1, TRIES, T0 + 2 * SEC, allowed, back);
	tap(a_unknown + allowed[0] == nvs_plog_rate,
	    "an unknown tenant shares its uid's budget (%u + %u lines allowed of %u)", a_unknown,
	    allowed[0], nvs_plog_rate);

	/* Another tenant's keys are its own. */
	hammer(&other, 1, TRIES, T0 + 2 * SEC, allowed, back);
	tap(allowed[0] == nvs_plog_rate, "another tenant has its own budget (%u allowed)",
	    allowed[0]);

	/* More keys than the table holds: it does not grow; keys pushed out
	 * come back with a fresh window (bounded memory before exact limits
	 * under a flood of distinct keys). */
	enum { MANY = 2000 };
	static unsigned am[MANY], bm[MANY];
	hammer(&hostile, MANY, 2, T0 + 10 * SEC, am, bm);
	bad = 0;
	for (unsigned k = 0; k < MANY; k++)
		bad += am[k] != 2;
	tap(bad == 0, "%u keys (more than the table holds): every line within the rate allowed",
	    MANY);

	/* No limit. */
	nvs_plog_rate = 0;
	hammer(&hostile, 1, TRIES, T0 + 20 * SEC, allowed, back);
	tap(allowed[0] == TRIES, "rate 0: no limit (%u of %u allowed)", allowed[0], TRIES);
	return tap_failed ? 1 : 0;
}
