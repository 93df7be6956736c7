/* libFuzzer target: the Pod watch's input handling (scheduler/k8s/k8s_json.c,
 * k8s_jstream.c). The input is a watch stream fed to the line splitter in
 * chunks whose sizes come from the first bytes; every line goes through the
 * event parser and the annotation merge; the whole input also goes through
 * the LIST reader, once whole and once in those chunks. Results must be
 * self-consistent: printable names, UIDs of 36 chars, limits in range, the
 * same lines and the same Pods whatever the chunking; and where cJSON parses
 * the whole text too (and no string can have been cut), the incremental
 * reader's skeleton must give what cJSON's full tree gives. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_json.h"
#include "k8s_jstream.h"

static int printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

/* A value in its row's range (annotations.def). */
static void check_limit(const struct nvs_k8s_limit *l, const struct nvs_pod_annotation *a)
{
	if (l->state == NVS_ANN_VALID && (l->v < a->lo || l->v > a->hi))
		abort();
	if (l->state > NVS_ANN_INVALID || !printable(l->raw))
		abort();
}

static void check_pod(const struct nvs_k8s_pod *p)
{
	if (strlen(p->uid) != 36 || (p->mirror[0] && strlen(p->mirror) != 36))
		abort();
	if (!printable(p->name) || !printable(p->ns))
		abort();
	for (unsigned i = 0; i < NVS_POD_ANN_N; i++)
		check_limit(&p->ann[i], &nvs_pod_annotations[i]);
}

/* The Pod's limits in force across the stream, as the loop keeps them. */
static int has_core, has_mem;
static uint64_t core, mem;
static unsigned long lines_a, lines_b;
static uint64_t sum_a, sum_b;

static int on_line(const char *line, size_t len, void *arg)
{
	int second = arg != NULL;
	if (strlen(line) != len)
		return 0; /* an embedded NUL: the parser sees a shorter string */
	unsigned long *nl = second ? &lines_b : &lines_a;
	uint64_t *sum = second ? &sum_b : &sum_a;
	++*nl;
	for (size_t i = 0; i < len; i++)
		*sum += (unsigned char)line[i] * (i + 1);
	if (second)
		return 0;
	struct nvs_k8s_event ev;
	int rc = nvs_k8s_parse_event(line, len, &ev);
	/* The same line through cJSON's whole tree. */
	cJSON *full = len < NVS_JS_STRMAX ? cJSON_ParseWithLength(line, len) : NULL;
	if (full) {
		struct nvs_k8s_event ref;
		if (!nvs_k8s_event_from_json(full, &ref) && !rc && memcmp(&ref, &ev, sizeof ev))
			abort();
		cJSON_Delete(full);
	}
	if (rc)
		return 0;
	if (ev.type < NVS_K8S_ADDED || ev.type > NVS_K8S_ERROR || !printable(ev.message))
		abort();
	if (ev.type == NVS_K8S_BOOKMARK && !ev.rv[0])
		abort();
	if (ev.type == NVS_K8S_ADDED || ev.type == NVS_K8S_MODIFIED || ev.type == NVS_K8S_DELETED) {
		check_pod(&ev.pod);
		int hc = has_core;
		uint64_t c = core;
		const struct nvs_k8s_limit *pc = &ev.pod.ann[NVS_POD_ANN_CORE];
		int changed = nvs_k8s_merge_limit(pc, &has_core, &core);
		if (pc->state == NVS_ANN_INVALID && (changed || hc != has_core || c != core))
			abort(); /* an invalid value never changes the limit */
		nvs_k8s_merge_limit(&ev.pod.ann[NVS_POD_ANN_MEM], &has_mem, &mem);
		if ((has_core && (core < 1 || core > 100)) || (has_mem && !mem))
			abort();
	}
	return 0;
}

/* The Pods a LIST reading passed on, in order, as a checksum. */
struct seen {
	unsigned n;
	uint64_t sum;
};

static void list_cb(const struct nvs_k8s_pod *p, void *arg)
{
	struct seen *s = arg;
	check_pod(p);
	s->n++;
	const unsigned char *b = (const unsigned char *)p;
	for (size_t i = 0; i < sizeof *p; i++)
		s->sum = s->sum * 31 + b[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t step = (size_t)data[0] % 64 + 1; /* chunk size */
	size_t max = (size_t)data[1] * 64 + 16; /* line limit */
	data += 2;
	size -= 2;
	has_core = has_mem = 0;
	core = mem = 0;
	lines_a = lines_b = 0;
	sum_a = sum_b = 0;

	struct nvs_k8s_lines a, b;
	nvs_k8s_lines_init(&a, max);
	nvs_k8s_lines_init(&b, max);
	for (size_t off = 0; off < size; off += step)
		nvs_k8s_lines_feed(&a, (const char *)data + off,
				   size - off < step ? size - off : step, on_line, NULL);
	/* Same bytes in one piece: the same complete lines. */
	nvs_k8s_lines_feed(&b, (const char *)data, size, on_line, &b);
	if (lines_a != lines_b || sum_a != sum_b || a.dropped != b.dropped || a.len != b.len)
		abort();
	nvs_k8s_lines_free(&a);
	nvs_k8s_lines_free(&b);

	char rv[NVS_K8S_RV_LEN], cont[512], rv2[NVS_K8S_RV_LEN], cont2[512];
	struct seen one = {0, 0}, chunked = {0, 0};
	unsigned skipped = 0, skipped2 = 0;
	int n = nvs_k8s_parse_list((const char *)data, size, list_cb, &one, rv, sizeof rv, cont,
				   sizeof cont, &skipped);
	if (n >= 0 && (unsigned)n != one.n)
		abort();
	/* In chunks, as curl hands a body over: the same Pods, the same end. */
	struct nvs_k8s_list *l = nvs_k8s_list_new(list_cb, &chunked);
	if (!l)
		return 0;
	for (size_t off = 0; off < size; off += step)
		if (nvs_k8s_list_feed(l, (const char *)data + off,
				      size - off < step ? size - off : step))
			break;
	int n2 = nvs_k8s_list_end(l, rv2, sizeof rv2, cont2, sizeof cont2, &skipped2);
	if (n2 != n || chunked.n != one.n || chunked.sum != one.sum)
		abort();
	if (n >= 0 && (skipped2 != skipped || strcmp(rv, rv2) || strcmp(cont, cont2)))
		abort();
	/* The whole tree, where cJSON takes the text: the same Pods. */
	cJSON *full = size < NVS_JS_STRMAX ? cJSON_ParseWithLength((const char *)data, size) : NULL;
	if (full && n >= 0 && !nvs_k8s_list_meta(full, rv2, sizeof rv2, cont2, sizeof cont2)) {
		struct seen ref = {0, 0};
		struct nvs_k8s_pod p;
		const cJSON *it;
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(full, "items"))
		{
			if (!nvs_k8s_pod_from_json(it, &p))
				list_cb(&p, &ref);
		}
		if (ref.n != one.n || ref.sum != one.sum || strcmp(rv, rv2) || strcmp(cont, cont2))
			abort();
	}
	cJSON_Delete(full);
	return 0;
}
