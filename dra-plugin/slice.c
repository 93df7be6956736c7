/* DRA devices and the ResourceSlice (slice.h). */
#include "slice.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

static int label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

void nvs_dra_device_name(const char *uuid, int index, char *out, size_t cap)
{
	const char *u = strncmp(uuid, "GPU-", 4) ? uuid : uuid + 4;
	size_t n = strlen(u);
	int ok = n > 0 && n + 4 <= 63 && cap > n + 4;
	char buf[NVS_DRA_LABEL_LEN] = "gpu-";
	for (size_t i = 0; ok && i < n; i++) {
		char c = u[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		ok = label_char(c);
		buf[4 + i] = c;
	}
	if (ok && buf[3 + n] != '-') {
		buf[4 + n] = '\0';
		snprintf(out, cap, "%s", buf);
	} else {
		snprintf(out, cap, "gpu-%d", index);
	}
}

uint64_t nvs_dra_mem_capacity(uint64_t physical, double factor)
{
	long double b = (long double)physical * factor;
	if (b >= 1.8e19L)
		b = 1.8e19L;
	uint64_t mib = (uint64_t)(b / (long double)NVS_DRA_MIB);
	return mib * NVS_DRA_MIB;
}

/* FNV-1a, for a name that would be too long. */
static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h;
}

void nvs_dra_slice_name(const char *node, const char *driver, char *out, size_t cap)
{
	if (strlen(node) + 1 + strlen(driver) <= 253 && cap > 253) {
		snprintf(out, cap, "%s-%s", node, driver);
		return;
	}
	/* A node name near 253: keep its start, make it unique by a hash. */
	char both[600];
	snprintf(both, sizeof both, "%s/%s", node, driver);
	snprintf(out, cap, "%.200s-%016llx", node, (unsigned long long)fnv(both));
}

static void add_string_attr(cJSON *attrs, const char *k, const char *v)
{
	cJSON *a = cJSON_AddObjectToObject(attrs, k);
	cJSON_AddStringToObject(a, "string", v);
}

static void add_int_attr(cJSON *attrs, const char *k, uint64_t v)
{
	/* An int64 in JSON: cJSON numbers are doubles, exact to 2^53 (GPU
	 * memory is far below). */
	cJSON *a = cJSON_AddObjectToObject(attrs, k);
	cJSON_AddNumberToObject(a, "int", (double)v);
}

/* "580.65.06" -> "580.65.6": a semantic version (no leading zeros), as a
 * DRA version attribute must be. "" when it is not three numbers. */
static void semver(const char *in, char *out, size_t cap)
{
	unsigned long a, b, c = 0;
	int n = 0, got = sscanf(in, "%lu.%lu%n.%lu%n", &a, &b, &n, &c, &n);
	if (got < 2 || in[n] != '\0')
		out[0] = '\0';
	else
		snprintf(out, cap, "%lu.%lu.%lu", a, b, got == 3 ? c : 0);
}

static void add_capacity(cJSON *caps, const char *k, const char *value, const char *min,
			 const char *step)
{
	cJSON *c = cJSON_AddObjectToObject(caps, k);
	cJSON_AddStringToObject(c, "value", value);
	cJSON *p = cJSON_AddObjectToObject(c, "requestPolicy");
	cJSON_AddStringToObject(p, "default", value);
	cJSON *r = cJSON_AddObjectToObject(p, "validRange");
	cJSON_AddStringToObject(r, "min", min);
	cJSON_AddStringToObject(r, "max", value);
	cJSON_AddStringToObject(r, "step", step);
}

static cJSON *device(const struct nvs_dra_gpu *g)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "name", g->name);
	cJSON *attrs = cJSON_AddObjectToObject(d, "attributes");
	add_string_attr(attrs, "uuid", g->uuid);
	add_string_attr(attrs, "productName", g->product);
	add_int_attr(attrs, "index", (uint64_t)g->index);
	add_int_attr(attrs, "physicalMemory", g->mem_physical);
	char v[40];
	semver(g->driver_version, v, sizeof v);
	if (v[0]) {
		cJSON *a = cJSON_AddObjectToObject(attrs, "driverVersion");
		cJSON_AddStringToObject(a, "version", v);
	}
	cJSON *caps = cJSON_AddObjectToObject(d, "capacity");
	char mem[32];
	snprintf(mem, sizeof mem, "%lluMi", (unsigned long long)(g->mem_capacity / NVS_DRA_MIB));
	add_capacity(caps, NVS_DRA_CAP_MEMORY, mem, "1Mi", "1Mi");
	add_capacity(caps, NVS_DRA_CAP_CORES, "100", "1", "1");
	cJSON_AddBoolToObject(d, "allowMultipleAllocations", 1);
	return d;
}

cJSON *nvs_dra_slice_spec(const char *driver, const char *node, uint64_t generation,
			  const struct nvs_dra_gpu *g, unsigned n)
{
	cJSON *s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "driver", driver);
	cJSON_AddStringToObject(s, "nodeName", node);
	cJSON *pool = cJSON_AddObjectToObject(s, "pool");
	cJSON_AddStringToObject(pool, "name", node);
	cJSON_AddNumberToObject(pool, "generation", (double)generation);
	cJSON_AddNumberToObject(pool, "resourceSliceCount", 1);
	cJSON *devs = cJSON_AddArrayToObject(s, "devices");
	for (unsigned i = 0; i < n; i++)
		if (g[i].healthy && g[i].mem_capacity >= NVS_DRA_MIB)
			cJSON_AddItemToArray(devs, device(&g[i]));
	return s;
}

cJSON *nvs_dra_slice_object(const char *name, const char *rv, cJSON *spec)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "apiVersion", "resource.k8s.io/v1");
	cJSON_AddStringToObject(o, "kind", "ResourceSlice");
	cJSON *m = cJSON_AddObjectToObject(o, "metadata");
	cJSON_AddStringToObject(m, "name", name);
	if (rv)
		cJSON_AddStringToObject(m, "resourceVersion", rv);
	cJSON_AddItemToObject(o, "spec", spec);
	return o;
}

int nvs_dra_slice_same(const cJSON *a, const cJSON *b)
{
	static const char *const keys[] = {"driver", "nodeName", "devices"};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, keys[i]);
		const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, keys[i]);
		if (!x || !y || !cJSON_Compare(x, y, 1))
			return 0;
	}
	const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "pool");
	const cJSON *pb = cJSON_GetObjectItemCaseSensitive(b, "pool");
	const cJSON *na = cJSON_GetObjectItemCaseSensitive(pa, "name");
	const cJSON *nb = cJSON_GetObjectItemCaseSensitive(pb, "name");
	return na && nb && cJSON_Compare(na, nb, 1);
}
