/* The ResourceClaim as the driver reads it, and quantities (claim.h). */
#include "claim.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

/* ---- quantities ---- */

typedef unsigned __int128 u128;

static int suffix(const char *s, int *e10, int *e2)
{
	static const struct {
		const char *s;
		int e10, e2;
	} t[] = {
	    {"", 0, 0},	   {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30},
	    {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60}, {"n", -9, 0},
	    {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},	 {"M", 6, 0},
	    {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},	 {"E", 18, 0},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(s, t[i].s)) {
			*e10 = t[i].e10;
			*e2 = t[i].e2;
			return 0;
		}
	/* A decimal exponent: e or E, an optional sign, digits. */
	if (s[0] != 'e' && s[0] != 'E')
		return -1;
	s++;
	int neg = *s == '-';
	if (*s == '-' || *s == '+')
		s++;
	if (!*s)
		return -1;
	int v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > 1000)
			return -1;
		v = v * 10 + (*s - '0');
	}
	*e10 = neg ? -v : v;
	*e2 = 0;
	return 0;
}

int nvs_dra_quantity(const char *s, uint64_t *out)
{
	if (!s)
		return -1;
	if (*s == '+')
		s++;
	u128 m = 0;
	int digits = 0, frac = 0, seen_dot = 0, sig = 0;
	for (;; s++) {
		if (*s == '.' && !seen_dot) {
			seen_dot = 1;
			continue;
		}
		if (*s < '0' || *s > '9')
			break;
		digits++;
		if (seen_dot)
			frac++;
		if (m == 0 && *s == '0')
			continue; /* leading zeros: no significant digit yet */
		if (++sig > 36)
			return -1; /* more precision than any capacity needs */
		m = m * 10 + (u128)(*s - '0');
	}
	if (!digits)
		return -1;
	int e10, e2;
	if (suffix(s, &e10, &e2))
		return -1;
	int e = e10 - frac;
	const u128 max = (u128)UINT64_MAX;
	if (m == 0) {
		*out = 0;
		return 0;
	}
	if (e >= 0) {
		for (int i = 0; i < e; i++) {
			if (m > max)
				return -1;
			m *= 10;
		}
		if (m > max || (e2 && m > (max >> e2)))
			return -1;
		*out = (uint64_t)(m << e2);
		return 0;
	}
	/* A fraction: ceil(m x 2^e2 / 10^-e), as (q + r / den) x 2^e2 with
	 * the remainder's share found by long division one bit at a time (r <
	 * den <= 10^38 < 2^127: nothing overflows). */
	if (-e > 38) {
		*out = 1; /* smaller than one, and not zero */
		return 0;
	}
	u128 den = 1;
	for (int i = 0; i < -e; i++)
		den *= 10;
	u128 q = m / den, r = m % den;
	if (q > (max >> e2))
		return -1;
	u128 part = 0;
	for (int i = 0; i < e2; i++) {
		r <<= 1;
		part <<= 1;
		if (r >= den) {
			r -= den;
			part |= 1;
		}
	}
	u128 v = (q << e2) + part + (r != 0);
	if (v > max)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

/* ---- the claim ---- */

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Copies s into dst (cap bytes); -1 when it is missing, empty or does not
 * fit. */
static int put(char *dst, size_t cap, const char *s)
{
	if (!s || !*s || strlen(s) >= cap)
		return -1;
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

/* consumedCapacity entry k of a result: its quantity, checked. */
static int capacity(const cJSON *cc, const char *k, int *has, uint64_t *v, unsigned i, char *err,
		    size_t errcap)
{
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(cc, k);
	if (!q)
		return 0;
	/* The API server writes quantities as strings; a number is what a
	 * hand-made object might hold. */
	char num[64];
	const char *s = cJSON_IsString(q) ? q->valuestring : NULL;
	if (!s && cJSON_IsNumber(q) && q->valuedouble >= 0 && q->valuedouble < 1.8e19) {
		snprintf(num, sizeof num, "%.0f", q->valuedouble);
		s = num;
	}
	if (!s || nvs_dra_quantity(s, v)) {
		snprintf(err, errcap,
			 "status.allocation.devices.results[%u].consumedCapacity.%s is not a "
			 "quantity (%.40s)",
			 i, k, s ? s : "not a string");
		return -1;
	}
	*has = 1;
	return 0;
}

static int result(const cJSON *r, unsigned i, struct nvs_dra_result *o, char *err, size_t errcap)
{
	memset(o, 0, sizeof *o);
	const char *req = str(r, "request"), *pool = str(r, "pool"), *dev = str(r, "device");
	const char *bad = put(o->request, sizeof o->request, req) ? "request"
			  : put(o->pool, sizeof o->pool, pool)	  ? "pool"
			  : put(o->device, sizeof o->device, dev) ? "device"
								  : NULL;
	if (bad) {
		snprintf(err, errcap,
			 "status.allocation.devices.results[%u].%s is missing or too long", i, bad);
		return -1;
	}
	const char *share = str(r, "shareID");
	if (share && put(o->share_id, sizeof o->share_id, share)) {
		snprintf(err, errcap, "status.allocation.devices.results[%u].shareID is too long",
			 i);
		return -1;
	}
	const cJSON *cc = cJSON_GetObjectItemCaseSensitive(r, "consumedCapacity");
	if (cc && !cJSON_IsObject(cc)) {
		snprintf(err, errcap,
			 "status.allocation.devices.results[%u].consumedCapacity is not an object",
			 i);
		return -1;
	}
	if (cc && (capacity(cc, NVS_DRA_CAP_MEMORY, &o->has_mem, &o->mem, i, err, errcap) ||
		   capacity(cc, NVS_DRA_CAP_CORES, &o->has_cores, &o->cores, i, err, errcap)))
		return -1;
	if (o->has_cores && o->cores > 100) {
		snprintf(err, errcap,
			 "status.allocation.devices.results[%u].consumedCapacity.cores is %llu: "
			 "more than 100 %% of a GPU",
			 i, (unsigned long long)o->cores);
		return -1;
	}
	return 0;
}

static void reserved_for(const cJSON *st, struct nvs_dra_claim *c)
{
	const cJSON *rf = cJSON_GetObjectItemCaseSensitive(st, "reservedFor"), *e;
	cJSON_ArrayForEach(e, rf)
	{
		const char *group = str(e, "apiGroup"), *res = str(e, "resource");
		const char *name = str(e, "name"), *uid = str(e, "uid");
		if ((group && *group) || !res || strcmp(res, "pods") || !name || !uid) {
			c->nnonpods++;
			continue;
		}
		c->npods_total++;
		if (c->npods < NVS_DRA_MAX_PODS &&
		    !put(c->pod[c->npods].name, sizeof c->pod[0].name, name) &&
		    !put(c->pod[c->npods].uid, sizeof c->pod[0].uid, uid))
			c->npods++;
	}
}

static void owner(const cJSON *meta, struct nvs_dra_claim *c)
{
	const cJSON *refs = cJSON_GetObjectItemCaseSensitive(meta, "ownerReferences"), *e;
	cJSON_ArrayForEach(e, refs)
	{
		const char *kind = str(e, "kind"), *api = str(e, "apiVersion"),
			   *uid = str(e, "uid");
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "controller")) && kind &&
		    !strcmp(kind, "Pod") && api && !strcmp(api, "v1") && uid)
			put(c->owner_pod_uid, sizeof c->owner_pod_uid, uid);
	}
}

int nvs_dra_claim_parse(const char *json, size_t len, const char *driver, struct nvs_dra_claim *c,
			char *err, size_t errcap)
{
	memset(c, 0, sizeof *c);
	cJSON *j = cJSON_ParseWithLength(json, len);
	int rc = -1;
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(j, "metadata");
	const char *kind = str(j, "kind");
	if (!cJSON_IsObject(j) || !cJSON_IsObject(meta) ||
	    (kind && strcmp(kind, "ResourceClaim"))) {
		snprintf(err, errcap, "the API server's answer is not a ResourceClaim");
		goto out;
	}
	if (put(c->ns, sizeof c->ns, str(meta, "namespace")) ||
	    put(c->name, sizeof c->name, str(meta, "name")) ||
	    put(c->uid, sizeof c->uid, str(meta, "uid"))) {
		snprintf(err, errcap, "metadata.namespace, .name or .uid missing or too long");
		goto out;
	}
	owner(meta, c);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
	reserved_for(st, c);
	const cJSON *alloc = cJSON_GetObjectItemCaseSensitive(st, "allocation");
	if (!cJSON_IsObject(alloc)) {
		rc = 0; /* not allocated: the caller says so */
		goto out;
	}
	c->allocated = 1;
	const cJSON *devs = cJSON_GetObjectItemCaseSensitive(alloc, "devices");
	const cJSON *results = cJSON_GetObjectItemCaseSensitive(devs, "results"), *r;
	if (results && !cJSON_IsArray(results)) {
		snprintf(err, errcap, "status.allocation.devices.results is not a list");
		goto out;
	}
	unsigned i = 0;
	cJSON_ArrayForEach(r, results)
	{
		const char *d = str(r, "driver");
		if (!d || strcmp(d, driver)) {
			c->nother++;
			i++;
			continue;
		}
		if (c->nres >= NVS_DRA_MAX_RESULTS) {
			snprintf(err, errcap, "more than %d devices of %s in one claim",
				 NVS_DRA_MAX_RESULTS, driver);
			goto out;
		}
		if (result(r, i, &c->res[c->nres], err, errcap))
			goto out;
		c->nres++;
		i++;
	}
	rc = 0;
out:
	cJSON_Delete(j);
	return rc;
}

int nvs_dra_claim_single_pod(const struct nvs_dra_claim *c)
{
	if (c->npods_total != 1 || c->npods != 1 || c->nnonpods || !c->owner_pod_uid[0])
		return -1;
	return strcmp(c->owner_pod_uid, c->pod[0].uid) ? -1 : 0;
}

const char *nvs_dra_format_bytes(uint64_t v, char *out, size_t cap)
{
	static const char *units[] = {"Ki", "Mi", "Gi", "Ti", "Pi"};
	int u = -1;
	while (v && u < 4 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	snprintf(out, cap, "%llu%s", (unsigned long long)v, u < 0 ? "" : units[u]);
	return out;
}
