/*
 * Health file for the kubelet's exec probes (health.h). Written whole to a
 * temporary name and renamed, so the probe never reads half a line.
 */
#include "health.h"

#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void nvs_dp_health_stamp(const char *file, uint64_t now_ms, unsigned registered, unsigned endpoints)
{
	static uint64_t last_ms;
	static unsigned last_reg = ~0u;
	static int failed;
	if (!file || (registered == last_reg && last_ms && now_ms - last_ms < 1000))
		return;
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.tmp", file) >= (int)sizeof tmp)
		return;
	FILE *f = fopen(tmp, "we");
	int ok = f && fprintf(f, "registered %u of %u\n", registered, endpoints) > 0;
	if (f && fclose(f))
		ok = 0;
	if (ok && rename(tmp, file) < 0)
		ok = 0;
	if (!ok && !failed)
		NVS_ERROR("health file %s: %s: the kubelet's probes will fail", file,
			  strerror(errno));
	failed = !ok;
	last_ms = now_ms;
	last_reg = registered;
}

int nvs_dp_health_probe(const char *file, int ready, uint64_t max_age_ms)
{
	struct stat st;
	if (stat(file, &st) < 0) {
		printf("unhealthy: %s: %s (has the plugin started?)\n", file, strerror(errno));
		return 1;
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t age = ((int64_t)now.tv_sec - st.st_mtim.tv_sec) * 1000 +
		      ((int64_t)now.tv_nsec - st.st_mtim.tv_nsec) / 1000000;
	if (age > (int64_t)max_age_ms) {
		printf("unhealthy: the main loop has not run for %lld ms (limit %llu ms)\n",
		       (long long)age, (unsigned long long)max_age_ms);
		return 1;
	}
	unsigned r = 0, n = 0;
	FILE *f = fopen(file, "re");
	int got = f && fscanf(f, "registered %u of %u", &r, &n) == 2;
	if (f)
		fclose(f);
	if (ready && (!got || !n || r != n)) {
		printf("not ready: %u of %u endpoint(s) registered with the kubelet\n", r, n);
		return 1;
	}
	printf("ok: loop ran %lld ms ago; %u of %u endpoint(s) registered\n", (long long)age, r, n);
	return 0;
}
