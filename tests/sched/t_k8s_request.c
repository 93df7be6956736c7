/* Unit tests for reading a Pod's nvshare.com/gpu-memory request from its
 * spec (scheduler/k8s/k8s_json.c): quantities, containers summed, init
 * containers by their maximum, limits before requests. */
#include "harness.h"
#include "scheduler/k8s/k8s_json.h"

#include <cjson/cJSON.h>

static void units(const char *json, int want_ok, uint64_t want)
{
	cJSON *q = cJSON_Parse(json);
	uint64_t v = 0;
	int r = q ? nvs_k8s_units(q, &v) : -1;
	if (want_ok)
		tap(r == 0 && v == want, "quantity %s = %llu units (got %llu)", json,
		    (unsigned long long)want, (unsigned long long)v);
	else
		tap(r != 0, "quantity %s rejected", json);
	cJSON_Delete(q);
}

#define UID "\"metadata\":{\"uid\":\"0a1b2c3d-0000-4000-8000-000000000001\"}"
/* A container whose resources are `res` (JSON). */
static const char *ctr(char *buf, size_t cap, const char *res)
{
	snprintf(buf, cap, "{\"name\":\"c\",\"resources\":%s}", res);
	return buf;
}

#define LIM(q) "{\"limits\":{\"nvshare.com/gpu-memory\":" q "}}"

static void pod(const char *spec, uint64_t want, const char *what)
{
	char buf[2048];
	snprintf(buf, sizeof buf, "{" UID ",\"spec\":%s}", spec);
	cJSON *o = cJSON_Parse(buf);
	struct nvs_k8s_pod p;
	int r = o ? nvs_k8s_pod_from_json(o, &p) : -1;
	tap(r == 0 && p.mem_units == want, "%s: %llu units (got %llu)", what,
	    (unsigned long long)want, (unsigned long long)(r == 0 ? p.mem_units : 0));
	cJSON_Delete(o);
}

int main(void)
{
	units("\"2\"", 1, 2);
	units("\"141\"", 1, 141);
	units("3", 1, 3);
	units("\"2k\"", 1, 2000);
	units("\"1Ki\"", 1, 1024);
	units("\"0\"", 1, 0);
	units("\"500m\"", 0, 0);
	units("\"1.5\"", 0, 0);
	units("2.5", 0, 0);
	units("-1", 0, 0);
	units("\"-1\"", 0, 0);
	units("\"\"", 0, 0);
	units("\"2 \"", 0, 0);
	units("\"1G\"", 0, 0); /* above NVS_K8S_MAX_UNITS */
	units("\"99999999999\"", 0, 0);
	units("null", 0, 0);
	units("{}", 0, 0);

	char a[256], b[256], c[256], spec[1024];
	snprintf(spec, sizeof spec, "{\"containers\":[%s]}", ctr(a, sizeof a, LIM("\"4\"")));
	pod(spec, 4, "one container's limit");
	snprintf(spec, sizeof spec, "{\"containers\":[%s]}",
		 ctr(a, sizeof a, "{\"requests\":{\"nvshare.com/gpu-memory\":\"4\"}}"));
	pod(spec, 4, "requests when no limit");
	snprintf(spec, sizeof spec, "{\"containers\":[%s]}",
		 ctr(a, sizeof a,
		     "{\"limits\":{\"nvshare.com/gpu-memory\":\"2\"},"
		     "\"requests\":{\"nvshare.com/gpu-memory\":\"9\"}}"));
	pod(spec, 2, "limits win over requests");
	snprintf(spec, sizeof spec, "{\"containers\":[%s,%s,%s]}", ctr(a, sizeof a, LIM("\"4\"")),
		 ctr(b, sizeof b, LIM("2")), ctr(c, sizeof c, "{}"));
	pod(spec, 6, "containers summed (string and number), one without");
	snprintf(spec, sizeof spec, "{\"containers\":[%s],\"initContainers\":[%s,%s]}",
		 ctr(a, sizeof a, LIM("\"2\"")), ctr(b, sizeof b, LIM("\"5\"")),
		 ctr(c, sizeof c, LIM("\"3\"")));
	pod(spec, 5, "an init container larger than the containers' sum counts");
	snprintf(spec, sizeof spec, "{\"containers\":[%s]}", ctr(a, sizeof a, LIM("\"2.5\"")));
	pod(spec, 0, "an unusable quantity counts as none");
	snprintf(spec, sizeof spec, "{\"containers\":[%s]}",
		 ctr(a, sizeof a, "{\"limits\":{\"nvshare.com/gpu\":\"1\"}}"));
	pod(spec, 0, "nvshare.com/gpu only: no request");
	pod("{\"containers\":\"junk\"}", 0, "containers not a list");
	pod("{}", 0, "no containers");
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
