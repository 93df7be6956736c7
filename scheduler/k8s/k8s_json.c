#include "k8s_json.h"

#include "k8s_jstream.h"
#include "parse.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Printable excerpt of an untrusted string for logs. */
static void excerpt(const char *s, char *out, size_t cap)
{
	size_t i = 0;
	for (; s[i] && i + 1 < cap; i++) {
		unsigned char c = (unsigned char)s[i];
		out[i] = (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') ? '?' : (char)c;
	}
	out[i] = '\0';
}

void nvs_k8s_annotation(enum nvs_pod_ann id, const char *s, struct nvs_k8s_limit *l)
{
	memset(l, 0, sizeof *l);
	if (!s)
		return;
	excerpt(s, l->raw, sizeof l->raw);
	l->state = nvs_pod_annotation_parse(id, s, &l->v) ? NVS_ANN_INVALID : NVS_ANN_VALID;
}

int nvs_k8s_merge_limit(const struct nvs_k8s_limit *l, int *cur_has, uint64_t *cur_v)
{
	switch (l->state) {
	case NVS_ANN_ABSENT:
		if (!*cur_has)
			return 0;
		*cur_has = 0;
		*cur_v = 0;
		return 1;
	case NVS_ANN_VALID:
		if (*cur_has && *cur_v == l->v)
			return 0;
		*cur_has = 1;
		*cur_v = l->v;
		return 1;
	default:
		return 0;
	}
}

static const char *str_item(const cJSON *o, const char *k)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* Copies a string that must fit; returns -1 if it does not. */
static int copy(char *dst, size_t cap, const char *s)
{
	size_t n = strlen(s);
	if (n >= cap)
		return -1;
	memcpy(dst, s, n + 1);
	return 0;
}

/* A Pod UID: 8-4-4-4-12 hex. Stored lower case, as the cgroup parser
 * writes it. */
static int uid_copy(char *dst, const char *s)
{
	static const int dash[] = {8, 13, 18, 23};
	if (strlen(s) != 36)
		return -1;
	for (int i = 0, d = 0; i < 36; i++) {
		if (d < 4 && i == dash[d]) {
			if (s[i] != '-')
				return -1;
			d++;
			dst[i] = '-';
			continue;
		}
		if (!isxdigit((unsigned char)s[i]))
			return -1;
		dst[i] = (char)tolower((unsigned char)s[i]);
	}
	dst[36] = '\0';
	return 0;
}

int nvs_k8s_units(const struct cJSON *q, uint64_t *units)
{
	if (cJSON_IsNumber(q)) {
		double d = q->valuedouble;
		if (!(d >= 0 && d <= (double)NVS_K8S_MAX_UNITS) || d != (double)(uint64_t)d)
			return -1;
		*units = (uint64_t)d;
		return 0;
	}
	const char *s = cJSON_IsString(q) ? q->valuestring : NULL;
	if (!s)
		return -1;
	size_t nd = strspn(s, "0123456789");
	if (nd == 0 || nd > 10)
		return -1;
	static const struct {
		const char *sfx;
		uint64_t mul;
	} sfx[] = {{"", 1},	 {"k", 1000},	  {"M", 1000000},    {"G", 1000000000},
		   {"Ki", 1024}, {"Mi", 1048576}, {"Gi", 1073741824}};
	for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
		if (strcmp(s + nd, sfx[i].sfx))
			continue;
		uint64_t v = strtoull(s, NULL, 10);
		if (v > NVS_K8S_MAX_UNITS / sfx[i].mul)
			return -1;
		*units = v * sfx[i].mul;
		return 0;
	}
	return -1;
}

/* One container's nvshare.com/gpu-memory: limits, else requests (for an
 * extended resource the API server requires the limit and requests equal
 * to it). 0 when absent or unusable. */
static uint64_t container_units(const cJSON *c)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(c, "resources");
	if (!cJSON_IsObject(res))
		return 0;
	const char *which[] = {"limits", "requests"};
	for (int i = 0; i < 2; i++) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(res, which[i]);
		const cJSON *q =
		    cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, NVS_K8S_RES_MEM) : NULL;
		uint64_t u;
		if (q)
			return nvs_k8s_units(q, &u) ? 0 : u;
	}
	return 0;
}

/* The Pod's units: its containers run together, init containers one at a
 * time before them (the kubelet lets the app containers reuse their
 * devices). The scheduler cannot tell which container a process is in
 * (one Pod UID in the cgroup), so this is the Pod's whole request. */
static uint64_t pod_units(const cJSON *spec)
{
	uint64_t sum = 0, init = 0;
	const cJSON *c;
	const cJSON *cs = cJSON_GetObjectItemCaseSensitive(spec, "containers");
	const cJSON *is = cJSON_GetObjectItemCaseSensitive(spec, "initContainers");
	if (!cJSON_IsArray(cs))
		cs = NULL;
	if (!cJSON_IsArray(is))
		is = NULL;
	/* Arrays only (cJSON would walk an object's members as well). */
	cJSON_ArrayForEach(c, cs)
	{
		sum += container_units(c);
		if (sum > NVS_K8S_MAX_UNITS)
			return 0;
	}
	cJSON_ArrayForEach(c, is)
	{
		uint64_t u = container_units(c);
		if (u > init)
			init = u;
	}
	return sum > init ? sum : init;
}

int nvs_k8s_pod_from_json(const struct cJSON *obj, struct nvs_k8s_pod *p)
{
	memset(p, 0, sizeof *p);
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	if (!cJSON_IsObject(md))
		return -1;
	const char *uid = str_item(md, "uid");
	if (!uid || uid_copy(p->uid, uid))
		return -1;
	const char *s;
	if ((s = str_item(md, "name")) && copy(p->name, sizeof p->name, s))
		excerpt(s, p->name, sizeof p->name);
	if ((s = str_item(md, "namespace")) && copy(p->ns, sizeof p->ns, s))
		excerpt(s, p->ns, sizeof p->ns);
	if ((s = str_item(md, "resourceVersion")) && copy(p->rv, sizeof p->rv, s))
		p->rv[0] = '\0';
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(md, "annotations");
	if (cJSON_IsObject(ann)) {
		if ((s = str_item(ann, NVS_K8S_ANN_MIRROR)) && uid_copy(p->mirror, s))
			p->mirror[0] = '\0';
		for (unsigned i = 0; i < NVS_POD_ANN_N; i++) {
			const char *key = nvs_pod_annotations[i].key;
			struct nvs_k8s_limit *l = &p->ann[i];
			nvs_k8s_annotation(i, str_item(ann, key), l);
			/* A non-string value (a number where a string belongs)
			 * is as bad as an unparsable string. */
			if (!l->state && cJSON_GetObjectItemCaseSensitive(ann, key))
				l->state = NVS_ANN_INVALID,
				snprintf(l->raw, sizeof l->raw, "(not a string)");
		}
	}
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	if (cJSON_IsObject(spec))
		p->mem_units = pod_units(spec);
	/* Printable names only: they reach logs, JSON and metric labels. */
	excerpt(p->name, p->name, sizeof p->name);
	excerpt(p->ns, p->ns, sizeof p->ns);
	return 0;
}

/* ---- what is read of the API server's JSON (k8s_jstream.h) ---- */

/* A container's nvshare.com/gpu-memory (container_units). */
static const struct nvs_js_schema res_mem[] = {{NVS_K8S_RES_MEM, NVS_JS_KEEP, NULL, 0}, {NULL}};
static const struct nvs_js_schema resources[] = {
    {"limits", NVS_JS_OBJ, res_mem, 0}, {"requests", NVS_JS_OBJ, res_mem, 0}, {NULL}};
static const struct nvs_js_schema container_kids[] = {{"resources", NVS_JS_OBJ, resources, 0},
						      {NULL}};
static const struct nvs_js_schema container[] = {{NULL, NVS_JS_OBJ, container_kids, 0}};
static const struct nvs_js_schema spec[] = {
    {"containers", NVS_JS_ARR, container, 0}, {"initContainers", NVS_JS_ARR, container, 0}, {NULL}};
/* The annotations of the table, and a static Pod's mirror. */
static const struct nvs_js_schema annotations[] = {
#define NVS_ANNOTATION(id, key, ...) {key, NVS_JS_KEEP, NULL, 0},
#include "annotations.def"
#undef NVS_ANNOTATION
    {NVS_K8S_ANN_MIRROR, NVS_JS_KEEP, NULL, 0}, {NULL}};
static const struct nvs_js_schema metadata[] = {{"uid", NVS_JS_KEEP, NULL, 0},
						{"name", NVS_JS_KEEP, NULL, 0},
						{"namespace", NVS_JS_KEEP, NULL, 0},
						{"resourceVersion", NVS_JS_KEEP, NULL, 0},
						{"annotations", NVS_JS_OBJ, annotations, 0},
						{NULL}};
/* A Pod (nvs_k8s_pod_from_json), or an ERROR event's Status (code,
 * message). */
static const struct nvs_js_schema object_kids[] = {{"metadata", NVS_JS_OBJ, metadata, 0},
						   {"spec", NVS_JS_OBJ, spec, 0},
						   {"code", NVS_JS_KEEP, NULL, 0},
						   {"message", NVS_JS_KEEP, NULL, 0},
						   {NULL}};
static const struct nvs_js_schema pod[] = {{NULL, NVS_JS_OBJ, object_kids, 0}};
static const struct nvs_js_schema event_kids[] = {
    {"type", NVS_JS_KEEP, NULL, 0}, {"object", NVS_JS_OBJ, object_kids, 0}, {NULL}};
static const struct nvs_js_schema event[] = {{NULL, NVS_JS_OBJ, event_kids, 0}};
/* A PodList: its items handed out one by one. */
static const struct nvs_js_schema list_md[] = {
    {"resourceVersion", NVS_JS_KEEP, NULL, 0}, {"continue", NVS_JS_KEEP, NULL, 0}, {NULL}};
static const struct nvs_js_schema list_kids[] = {
    {"metadata", NVS_JS_OBJ, list_md, 0}, {"items", NVS_JS_ARR, pod, 1}, {NULL}};
static const struct nvs_js_schema list[] = {{NULL, NVS_JS_OBJ, list_kids, 0}};

int nvs_k8s_event_from_json(const struct cJSON *root, struct nvs_k8s_event *ev)
{
	memset(ev, 0, sizeof *ev);
	const char *type = str_item(root, "type");
	const cJSON *obj = cJSON_GetObjectItemCaseSensitive(root, "object");
	if (!type || !cJSON_IsObject(obj))
		return -1;
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const char *rv = cJSON_IsObject(md) ? str_item(md, "resourceVersion") : NULL;
	if (rv && copy(ev->rv, sizeof ev->rv, rv))
		return -1;
	if (!strcmp(type, "ERROR")) {
		ev->type = NVS_K8S_ERROR;
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
		if (cJSON_IsNumber(code) && code->valuedouble >= 0 && code->valuedouble < 1000)
			ev->code = (int)code->valuedouble;
		const char *m = str_item(obj, "message");
		excerpt(m ? m : "", ev->message, sizeof ev->message);
		return 0;
	}
	if (!strcmp(type, "BOOKMARK")) {
		ev->type = NVS_K8S_BOOKMARK;
		return ev->rv[0] ? 0 : -1;
	}
	if (!strcmp(type, "ADDED"))
		ev->type = NVS_K8S_ADDED;
	else if (!strcmp(type, "MODIFIED"))
		ev->type = NVS_K8S_MODIFIED;
	else if (!strcmp(type, "DELETED"))
		ev->type = NVS_K8S_DELETED;
	else
		return -1;
	return nvs_k8s_pod_from_json(obj, &ev->pod);
}

int nvs_k8s_parse_event(const char *json, size_t len, struct nvs_k8s_event *ev)
{
	memset(ev, 0, sizeof *ev);
	struct nvs_js *js = malloc(sizeof *js);
	if (!js)
		return -1;
	nvs_js_init(js, event, NULL, NULL);
	nvs_js_feed(js, json, len);
	int over = 0;
	cJSON *root = nvs_js_end(js, &over);
	free(js);
	int rc = root && !over ? nvs_k8s_event_from_json(root, ev) : -1;
	cJSON_Delete(root);
	return rc;
}

int nvs_k8s_list_meta(const struct cJSON *root, char *rv, size_t rv_cap, char *cont,
		      size_t cont_cap)
{
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items");
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(root, "metadata");
	const char *r = cJSON_IsObject(md) ? str_item(md, "resourceVersion") : NULL;
	const char *c = cJSON_IsObject(md) ? str_item(md, "continue") : NULL;
	if (!root || (!cJSON_IsArray(items) && !cJSON_IsNull(items) && items))
		return -1;
	if (!r || copy(rv, rv_cap, r))
		return -1;
	return copy(cont, cont_cap, c ? c : "");
}

struct nvs_k8s_list {
	struct nvs_js js;
	void (*cb)(const struct nvs_k8s_pod *p, void *arg);
	void *arg;
	struct nvs_k8s_pod pod;
	unsigned n, skipped;
};

static void list_unit(cJSON *skel, int over, void *arg)
{
	struct nvs_k8s_list *l = arg;
	if (over || nvs_k8s_pod_from_json(skel, &l->pod)) {
		l->skipped++;
	} else {
		l->cb(&l->pod, l->arg);
		l->n++;
	}
	cJSON_Delete(skel);
}

struct nvs_k8s_list *nvs_k8s_list_new(void (*cb)(const struct nvs_k8s_pod *p, void *arg), void *arg)
{
	struct nvs_k8s_list *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	l->cb = cb;
	l->arg = arg;
	nvs_js_init(&l->js, list, list_unit, l);
	return l;
}

int nvs_k8s_list_feed(struct nvs_k8s_list *l, const char *data, size_t n)
{
	return nvs_js_feed(&l->js, data, n);
}

int nvs_k8s_list_end(struct nvs_k8s_list *l, char *rv, size_t rv_cap, char *cont, size_t cont_cap,
		     unsigned *skipped)
{
	int over = 0;
	cJSON *root = nvs_js_end(&l->js, &over);
	int n = -1;
	if (root && !over && !nvs_k8s_list_meta(root, rv, rv_cap, cont, cont_cap)) {
		n = (int)l->n;
		if (skipped)
			*skipped += l->skipped;
	}
	cJSON_Delete(root);
	free(l);
	return n;
}

int nvs_k8s_parse_list(const char *json, size_t len,
		       void (*cb)(const struct nvs_k8s_pod *p, void *arg), void *arg, char *rv,
		       size_t rv_cap, char *cont, size_t cont_cap, unsigned *skipped)
{
	struct nvs_k8s_list *l = nvs_k8s_list_new(cb, arg);
	if (!l)
		return -1;
	nvs_k8s_list_feed(l, json, len);
	return nvs_k8s_list_end(l, rv, rv_cap, cont, cont_cap, skipped);
}

void nvs_k8s_lines_init(struct nvs_k8s_lines *lb, size_t max)
{
	memset(lb, 0, sizeof *lb);
	lb->max = max;
}

void nvs_k8s_lines_free(struct nvs_k8s_lines *lb)
{
	free(lb->buf);
	lb->buf = NULL;
	lb->len = lb->cap = 0;
}

/* Appends n bytes to the partial line; -1 when it would exceed max. */
static int append(struct nvs_k8s_lines *lb, const char *d, size_t n)
{
	if (lb->len + n + 1 > lb->max)
		return -1;
	if (lb->len + n + 1 > lb->cap) {
		size_t cap = lb->cap ? lb->cap : 4096;
		while (cap < lb->len + n + 1)
			cap *= 2;
		if (cap > lb->max)
			cap = lb->max;
		char *b = realloc(lb->buf, cap);
		if (!b)
			return -1;
		lb->buf = b;
		lb->cap = cap;
	}
	memcpy(lb->buf + lb->len, d, n);
	lb->len += n;
	lb->buf[lb->len] = '\0';
	return 0;
}

int nvs_k8s_lines_feed(struct nvs_k8s_lines *lb, const char *data, size_t n,
		       int (*cb)(const char *line, size_t len, void *arg), void *arg)
{
	while (n) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) : n;
		if (!lb->skipping && append(lb, data, take)) {
			lb->skipping = 1;
			lb->dropped++;
			lb->len = 0;
		}
		if (!nl)
			return 0;
		data += take + 1;
		n -= take + 1;
		if (lb->skipping) {
			lb->skipping = 0;
			lb->len = 0;
			continue;
		}
		int r;
		if (lb->len == 0) {
			r = cb("", 0, arg);
		} else {
			r = cb(lb->buf, lb->len, arg);
			lb->len = 0;
		}
		if (r)
			return r;
	}
	return 0;
}
