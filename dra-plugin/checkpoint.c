/* The checkpoint of prepared claims (checkpoint.h). */
#include "checkpoint.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h" /* nvs_dra_write_atomic */

#define CHECKPOINT_MAX (16u << 20)

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static cJSON *claims_json(const struct nvs_dra_prepared *list)
{
	cJSON *a = cJSON_CreateArray();
	for (const struct nvs_dra_prepared *p = list; p; p = p->next) {
		cJSON *c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "uid", p->uid);
		cJSON_AddStringToObject(c, "namespace", p->ns);
		cJSON_AddStringToObject(c, "name", p->name);
		cJSON_AddStringToObject(c, "key", p->key);
		if (p->pod_name[0]) {
			cJSON *pod = cJSON_AddObjectToObject(c, "pod");
			cJSON_AddStringToObject(pod, "name", p->pod_name);
			cJSON_AddStringToObject(pod, "uid", p->pod_uid);
		} else {
			cJSON_AddNullToObject(c, "pod");
		}
		cJSON_AddNumberToObject(c, "core_limit", p->core_limit);
		cJSON_AddNumberToObject(c, "memory_limit", (double)p->mem_limit);
		cJSON *devs = cJSON_AddArrayToObject(c, "devices");
		for (unsigned i = 0; i < p->ndev; i++) {
			const struct nvs_dra_pdev *d = &p->dev[i];
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "request", d->request);
			cJSON_AddStringToObject(o, "pool", d->pool);
			cJSON_AddStringToObject(o, "device", d->device);
			cJSON_AddStringToObject(o, "share_id", d->share_id);
			cJSON_AddStringToObject(o, "uuid", d->uuid);
			cJSON_AddNumberToObject(o, "memory", (double)d->mem);
			cJSON_AddNumberToObject(o, "cores", (double)d->cores);
			cJSON_AddItemToArray(devs, o);
		}
		cJSON_AddItemToArray(a, c);
	}
	return a;
}

int nvs_dra_checkpoint_save(const char *path, const char *driver, const char *node,
			    const struct nvs_dra_prepared *list, char *err, size_t errcap)
{
	cJSON *claims = claims_json(list);
	char *flat = cJSON_PrintUnformatted(claims);
	if (!flat) {
		cJSON_Delete(claims);
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	char sum[20];
	snprintf(sum, sizeof sum, "%016llx", (unsigned long long)fnv(flat));
	free(flat);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "version", 1);
	cJSON_AddStringToObject(j, "driver", driver);
	cJSON_AddStringToObject(j, "node", node);
	cJSON_AddStringToObject(j, "checksum", sum);
	cJSON_AddItemToObject(j, "claims", claims);
	char *s = cJSON_Print(j);
	cJSON_Delete(j);
	if (!s) {
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	int rc = nvs_dra_write_atomic(path, s, 0600, err, errcap);
	free(s);
	return rc;
}

static int get_str(const cJSON *o, const char *k, char *dst, size_t cap, int empty_ok)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap || (!empty_ok && !*v->valuestring))
		return -1;
	memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
	return 0;
}

static int get_num(const cJSON *o, const char *k, uint64_t lo, uint64_t hi, uint64_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!cJSON_IsNumber(v) || v->valuedouble < (double)lo || v->valuedouble > (double)hi ||
	    v->valuedouble != (double)(uint64_t)v->valuedouble)
		return -1;
	*out = (uint64_t)v->valuedouble;
	return 0;
}

static int one_claim(const cJSON *c, struct nvs_dra_prepared *p)
{
	memset(p, 0, sizeof *p);
	uint64_t v;
	if (get_str(c, "uid", p->uid, sizeof p->uid, 0) ||
	    get_str(c, "namespace", p->ns, sizeof p->ns, 0) ||
	    get_str(c, "name", p->name, sizeof p->name, 0) ||
	    get_str(c, "key", p->key, sizeof p->key, 0) || strlen(p->key) != NVS_DRA_KEY_HEX)
		return -1;
	const cJSON *pod = cJSON_GetObjectItemCaseSensitive(c, "pod");
	if (cJSON_IsObject(pod) && (get_str(pod, "name", p->pod_name, sizeof p->pod_name, 0) ||
				    get_str(pod, "uid", p->pod_uid, sizeof p->pod_uid, 0)))
		return -1;
	if (get_num(c, "core_limit", 1, 100, &v))
		return -1;
	p->core_limit = (uint32_t)v;
	if (get_num(c, "memory_limit", 1, 1ull << 53, &p->mem_limit))
		return -1;
	const cJSON *devs = cJSON_GetObjectItemCaseSensitive(c, "devices"), *d;
	if (!cJSON_IsArray(devs) || cJSON_GetArraySize(devs) < 1 ||
	    cJSON_GetArraySize(devs) > NVS_DRA_MAX_RESULTS)
		return -1;
	cJSON_ArrayForEach(d, devs)
	{
		struct nvs_dra_pdev *x = &p->dev[p->ndev++];
		if (get_str(d, "request", x->request, sizeof x->request, 0) ||
		    get_str(d, "pool", x->pool, sizeof x->pool, 0) ||
		    get_str(d, "device", x->device, sizeof x->device, 0) ||
		    get_str(d, "share_id", x->share_id, sizeof x->share_id, 1) ||
		    get_str(d, "uuid", x->uuid, sizeof x->uuid, 0) ||
		    get_num(d, "memory", 0, 1ull << 53, &x->mem) ||
		    get_num(d, "cores", 0, 100, &x->cores))
			return -1;
	}
	return 0;
}

static void free_list(struct nvs_dra_prepared *l)
{
	while (l) {
		struct nvs_dra_prepared *n = l->next;
		free(l);
		l = n;
	}
}

int nvs_dra_checkpoint_load(const char *path, const char *driver, const char *node,
			    struct nvs_dra_prepared **list, char *err, size_t errcap)
{
	*list = NULL;
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errcap, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	char *buf = malloc(CHECKPOINT_MAX + 1);
	size_t n = buf ? fread(buf, 1, CHECKPOINT_MAX + 1, f) : 0;
	fclose(f);
	if (!buf || n > CHECKPOINT_MAX) {
		free(buf);
		snprintf(err, errcap, "%s is larger than 16 MiB", path);
		return -1;
	}
	buf[n] = '\0';
	cJSON *j = cJSON_Parse(buf);
	free(buf);
	int rc = -1, count = 0;
	const cJSON *claims = cJSON_GetObjectItemCaseSensitive(j, "claims"), *c;
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "version");
	const cJSON *sum = cJSON_GetObjectItemCaseSensitive(j, "checksum");
	const cJSON *drv = cJSON_GetObjectItemCaseSensitive(j, "driver");
	const cJSON *nd = cJSON_GetObjectItemCaseSensitive(j, "node");
	if (!cJSON_IsObject(j) || !cJSON_IsArray(claims) || !cJSON_IsString(sum)) {
		snprintf(err, errcap, "%s is not a checkpoint (not JSON, or no claims/checksum)",
			 path);
		goto out;
	}
	if (!cJSON_IsNumber(ver) || ver->valueint != 1) {
		snprintf(err, errcap, "%s: checkpoint version %d, this plugin reads 1", path,
			 cJSON_IsNumber(ver) ? ver->valueint : -1);
		goto out;
	}
	char *flat = cJSON_PrintUnformatted(claims);
	char want[20];
	snprintf(want, sizeof want, "%016llx", (unsigned long long)(flat ? fnv(flat) : 0));
	free(flat);
	if (strcmp(want, sum->valuestring)) {
		snprintf(err, errcap,
			 "%s: checksum %s does not match its claims (%s): edited or "
			 "cut short",
			 path, sum->valuestring, want);
		goto out;
	}
	if (!cJSON_IsString(drv) || strcmp(drv->valuestring, driver) || !cJSON_IsString(nd) ||
	    strcmp(nd->valuestring, node)) {
		snprintf(err, errcap, "%s is the checkpoint of driver %s on node %s, not %s on %s",
			 path, cJSON_IsString(drv) ? drv->valuestring : "?",
			 cJSON_IsString(nd) ? nd->valuestring : "?", driver, node);
		goto out;
	}
	struct nvs_dra_prepared **tail = list;
	cJSON_ArrayForEach(c, claims)
	{
		struct nvs_dra_prepared *p = malloc(sizeof *p);
		if (!p || one_claim(c, p)) {
			free(p);
			snprintf(err, errcap, "%s: claim %d is not a usable entry", path, count);
			free_list(*list);
			*list = NULL;
			goto out;
		}
		*tail = p;
		tail = &p->next;
		count++;
	}
	rc = count;
out:
	cJSON_Delete(j);
	return rc;
}
