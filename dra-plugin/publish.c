/* Publishing the ResourceSlice (publish.h). */
#include "publish.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define SLICES "/apis/resource.k8s.io/v1/resourceslices"
#define BACKOFF_MIN_MS 1000u
#define BACKOFF_MAX_MS 30000u

void nvs_dra_publish_init(struct nvs_dra_publisher *p, const char *driver, const char *node,
			  struct nvs_kube *kube, struct nvs_dra_gpus *gpus, uint64_t resync_ms)
{
	memset(p, 0, sizeof *p);
	p->driver = driver;
	p->node = node;
	p->kube = kube;
	p->gpus = gpus;
	p->resync_ms = resync_ms;
	nvs_dra_slice_name(node, driver, p->name, sizeof p->name);
}

void nvs_dra_publish_fini(struct nvs_dra_publisher *p)
{
	cJSON_Delete(p->sent);
	p->sent = NULL;
}

/* Logs err once until another comes or things work; schedules a retry. */
static void fail(struct nvs_dra_publisher *p, uint64_t now, const char *err)
{
	if (strcmp(p->last_err, err)) {
		NVS_WARN("ResourceSlice %s: %s (retrying)", p->name, err);
		snprintf(p->last_err, sizeof p->last_err, "%s", err);
	}
	p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (p->backoff_ms > BACKOFF_MAX_MS)
		p->backoff_ms = BACKOFF_MAX_MS;
	p->next_ms = now + p->backoff_ms;
}

static void answer_err(const struct nvs_kube_resp *r, const char *what, char *out, size_t cap)
{
	if (!r->status) {
		snprintf(out, cap, "%s: %s", what, r->err);
		return;
	}
	char m[200];
	nvs_kube_status_message(r, m, sizeof m);
	snprintf(out, cap, "%s: the API server answered %ld%s%s", what, r->status, m[0] ? ": " : "",
		 m);
}

/* rv and pool generation of a slice object. */
static int read_meta(const char *body, char *rv, size_t cap, uint64_t *gen)
{
	cJSON *j = cJSON_Parse(body);
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "metadata");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, "resourceVersion");
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "spec"), "pool"),
	    "generation");
	int rc = -1;
	if (cJSON_IsString(v) && strlen(v->valuestring) < cap) {
		snprintf(rv, cap, "%s", v->valuestring);
		*gen = cJSON_IsNumber(g) && g->valuedouble >= 0 ? (uint64_t)g->valuedouble : 0;
		rc = 0;
	}
	cJSON_Delete(j);
	return rc;
}

/* GET our slice: known = 1 with rv and generation, or none there. */
static int look(struct nvs_dra_publisher *p, char *err, size_t cap)
{
	char path[512];
	snprintf(path, sizeof path, SLICES "/%s", p->name);
	struct nvs_kube_resp r;
	int rc = -1;
	if (nvs_kube_request(p->kube, "GET", path, NULL, &r) == 0 && r.status == 404) {
		p->rv[0] = '\0';
		p->known = 1;
		rc = 0;
	} else if (r.status == 200) {
		uint64_t gen = 0;
		char had[sizeof p->rv];
		memcpy(had, p->rv, sizeof had);
		if (read_meta(r.body, p->rv, sizeof p->rv, &gen) == 0) {
			/* Changed by someone else since we wrote it: ours again. */
			if (strcmp(had, p->rv)) {
				cJSON_Delete(p->sent);
				p->sent = NULL;
			}
			if (gen > p->generation)
				p->generation = gen;
			p->known = 1;
			rc = 0;
		} else {
			snprintf(err, cap, "GET: the answer is not a ResourceSlice");
		}
	} else {
		answer_err(&r, "GET", err, cap);
	}
	nvs_kube_resp_free(&r);
	return rc;
}

/* Deletes other slices of this driver on this node (once). */
static int strays(struct nvs_dra_publisher *p, char *err, size_t cap)
{
	char path[1024];
	snprintf(path, sizeof path,
		 SLICES "?fieldSelector=spec.driver%%3D%s%%2Cspec.nodeName%%3D%s", p->driver,
		 p->node);
	struct nvs_kube_resp r;
	if (nvs_kube_request(p->kube, "GET", path, NULL, &r) || r.status != 200) {
		answer_err(&r, "LIST", err, cap);
		nvs_kube_resp_free(&r);
		return -1;
	}
	cJSON *j = cJSON_Parse(r.body);
	nvs_kube_resp_free(&r);
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items"), *it;
	int rc = 0;
	cJSON_ArrayForEach(it, items)
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(it, "metadata"), "name");
		const cJSON *spec = cJSON_GetObjectItemCaseSensitive(it, "spec");
		const cJSON *drv = cJSON_GetObjectItemCaseSensitive(spec, "driver");
		const cJSON *node = cJSON_GetObjectItemCaseSensitive(spec, "nodeName");
		/* The field selector did the choosing; checked again here, as
		 * a server that ignored it would list everything. */
		if (!cJSON_IsString(n) || !strcmp(n->valuestring, p->name) ||
		    !cJSON_IsString(drv) || strcmp(drv->valuestring, p->driver) ||
		    !cJSON_IsString(node) || strcmp(node->valuestring, p->node))
			continue;
		snprintf(path, sizeof path, SLICES "/%s", n->valuestring);
		struct nvs_kube_resp d;
		if (nvs_kube_request(p->kube, "DELETE", path, NULL, &d) == 0 &&
		    (d.status == 200 || d.status == 202 || d.status == 404)) {
			NVS_INFO("deleted ResourceSlice %s (of this driver and node, another name)",
				 n->valuestring);
		} else {
			answer_err(&d, "DELETE", err, cap);
			rc = -1;
		}
		nvs_kube_resp_free(&d);
	}
	cJSON_Delete(j);
	return rc;
}

/* Creates or replaces the slice with spec (taken over). */
static int send(struct nvs_dra_publisher *p, cJSON *spec, uint64_t gen, char *err, size_t cap)
{
	int create = p->rv[0] == '\0';
	cJSON *obj = nvs_dra_slice_object(p->name, create ? NULL : p->rv, cJSON_Duplicate(spec, 1));
	char *body = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	char path[512];
	snprintf(path, sizeof path, create ? SLICES : SLICES "/%s", p->name);
	struct nvs_kube_resp r;
	int rc = -1;
	if (!body) {
		snprintf(err, cap, "out of memory");
		cJSON_Delete(spec);
		return -1;
	}
	nvs_kube_request(p->kube, create ? "POST" : "PUT", path, body, &r);
	free(body);
	if (r.status == 200 || r.status == 201) {
		uint64_t g;
		if (read_meta(r.body, p->rv, sizeof p->rv, &g))
			p->rv[0] = '\0';
		p->generation = gen;
		cJSON_Delete(p->sent);
		p->sent = spec;
		spec = NULL;
		p->published++;
		p->ndevices = (unsigned)cJSON_GetArraySize(
		    cJSON_GetObjectItemCaseSensitive(p->sent, "devices"));
		NVS_INFO("ResourceSlice %s %s: %u device(s), pool %s generation %llu", p->name,
			 create ? "created" : "replaced", p->ndevices, p->node,
			 (unsigned long long)gen);
		rc = 0;
	} else {
		answer_err(&r, create ? "POST" : "PUT", err, cap);
		/* A conflict or a vanished slice: read it again first. */
		if (r.status == 409 || r.status == 404)
			p->known = 0;
	}
	nvs_kube_resp_free(&r);
	cJSON_Delete(spec);
	return rc;
}

uint64_t nvs_dra_publish_step(struct nvs_dra_publisher *p, uint64_t now)
{
	struct nvs_dra_gpu g[NVS_MAX_GPUS];
	uint64_t hgen = 0;
	unsigned n = nvs_dra_gpus_snapshot(p->gpus, g, &hgen);
	/* Due now, unless backing off after an error: a health change, or
	 * the resync (look again: deleted or changed by someone?). */
	if (!p->backoff_ms && hgen != p->health_gen)
		p->next_ms = now;
	if (p->sent && now >= p->resync_at_ms) {
		p->known = 0;
		p->resync_at_ms = now + p->resync_ms;
		if (!p->backoff_ms)
			p->next_ms = now;
	}
	if (now < p->next_ms)
		return p->next_ms;
	char err[400] = "";
	if (!p->known && look(p, err, sizeof err)) {
		fail(p, now, err);
		return p->next_ms;
	}
	if (!p->strays_done) {
		if (strays(p, err, sizeof err)) {
			fail(p, now, err);
			return p->next_ms;
		}
		p->strays_done = 1;
	}
	cJSON *want = nvs_dra_slice_spec(p->driver, p->node, p->generation + 1, g, n);
	if (p->sent && p->rv[0] && nvs_dra_slice_same(want, p->sent)) {
		/* The server has what we last sent, and it is still right. */
		cJSON_Delete(want);
	} else if (send(p, want, p->generation + 1, err, sizeof err)) {
		fail(p, now, err);
		return p->next_ms;
	}
	if (p->last_err[0])
		NVS_INFO("ResourceSlice %s: the API server works again", p->name);
	p->last_err[0] = '\0';
	p->health_gen = hgen;
	p->backoff_ms = 0;
	if (p->resync_at_ms <= now)
		p->resync_at_ms = now + p->resync_ms;
	p->next_ms = p->resync_at_ms;
	return p->next_ms;
}
