/* The Pod annotations' table (scheduler/k8s/annotations.def) through the
 * Pod reader (k8s_json.c): for every row, values it must accept (with the
 * value each gives) and values it must refuse, each inside a Pod object
 * as the API server sends it. A row without a good and a bad case here
 * fails the test: a new annotation comes with its cases. Also: absent is
 * ABSENT, a non-string value is INVALID, and a refused value is kept,
 * printable, for the warning that names it. */
#include "harness.h"
#include "scheduler/k8s/k8s_json.h"

#include <cjson/cJSON.h>

#define MIB (1ull << 20)

static const struct ann_case {
	enum nvs_pod_ann id;
	const char *value; /* the annotation's string (JSON-escaped) */
	int ok;
	uint64_t want; /* when ok */
} cases[] = {
    {NVS_POD_ANN_CORE, "50", 1, 50},
    {NVS_POD_ANN_CORE, "1", 1, 1},
    {NVS_POD_ANN_CORE, "100", 1, 100},
    {NVS_POD_ANN_CORE, "30%", 1, 30},
    {NVS_POD_ANN_CORE, "0", 0, 0},
    {NVS_POD_ANN_CORE, "101", 0, 0},
    {NVS_POD_ANN_CORE, "50.5", 0, 0},
    {NVS_POD_ANN_CORE, "-5", 0, 0},
    {NVS_POD_ANN_CORE, "half", 0, 0},
    {NVS_POD_ANN_CORE, "", 0, 0},
    {NVS_POD_ANN_MEM, "512", 1, 512 * MIB},
    {NVS_POD_ANN_MEM, "512Mi", 1, 512 * MIB},
    {NVS_POD_ANN_MEM, "4Gi", 1, 4096 * MIB},
    {NVS_POD_ANN_MEM, "4G", 1, 4096 * MIB},
    {NVS_POD_ANN_MEM, "0", 0, 0},
    {NVS_POD_ANN_MEM, "0Gi", 0, 0},
    {NVS_POD_ANN_MEM, "-1", 0, 0},
    {NVS_POD_ANN_MEM, "4 apples", 0, 0},
    {NVS_POD_ANN_MEM, "", 0, 0},
    {NVS_POD_ANN_PRIO, "interactive", 1, 1},
    {NVS_POD_ANN_PRIO, "batch", 1, 2},
    {NVS_POD_ANN_PRIO, "Batch", 0, 0},
    {NVS_POD_ANN_PRIO, "batch ", 0, 0},
    {NVS_POD_ANN_PRIO, "inter", 0, 0},
    {NVS_POD_ANN_PRIO, "interactive|batch", 0, 0},
    {NVS_POD_ANN_PRIO, "", 0, 0},
    {NVS_POD_ANN_UNIFIED, "false", 1, 1},
    {NVS_POD_ANN_UNIFIED, "0", 1, 1},
    {NVS_POD_ANN_UNIFIED, "OFF", 1, 1},
    {NVS_POD_ANN_UNIFIED, "true", 1, 2},
    {NVS_POD_ANN_UNIFIED, "yes", 1, 2},
    {NVS_POD_ANN_UNIFIED, "maybe", 0, 0},
    {NVS_POD_ANN_UNIFIED, "2", 0, 0},
    {NVS_POD_ANN_UNIFIED, "", 0, 0},
};

#define UID "\"uid\":\"0a1b2c3d-0000-4000-8000-000000000001\""

/* A Pod whose annotations are `ann` (JSON object members, may be ""). */
static int pod(const char *ann, struct nvs_k8s_pod *p)
{
	char buf[1024];
	snprintf(buf, sizeof buf, "{\"metadata\":{" UID ",\"annotations\":{%s}}}", ann);
	cJSON *o = cJSON_Parse(buf);
	int r = o ? nvs_k8s_pod_from_json(o, p) : -1;
	cJSON_Delete(o);
	return r;
}

static const char *state_name(int s)
{
	return s == NVS_ANN_VALID ? "valid" : s == NVS_ANN_INVALID ? "invalid" : "absent";
}

int main(void)
{
	unsigned good[NVS_POD_ANN_N] = {0}, bad[NVS_POD_ANN_N] = {0};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct ann_case *c = &cases[i];
		const char *key = nvs_pod_annotations[c->id].key;
		char ann[256];
		snprintf(ann, sizeof ann, "\"%s\":\"%s\"", key, c->value);
		struct nvs_k8s_pod p;
		int r = pod(ann, &p);
		const struct nvs_k8s_limit *l = &p.ann[c->id];
		/* The other annotations stay absent. */
		int others = 1;
		for (unsigned j = 0; j < NVS_POD_ANN_N; j++)
			if (j != (unsigned)c->id && p.ann[j].state != NVS_ANN_ABSENT)
				others = 0;
		if (c->ok) {
			good[c->id]++;
			tap(r == 0 && l->state == NVS_ANN_VALID && l->v == c->want && others,
			    "%s=\"%s\": accepted as %llu (got %s %llu)", key, c->value,
			    (unsigned long long)c->want, state_name(l->state),
			    (unsigned long long)l->v);
		} else {
			bad[c->id]++;
			/* Refused, and kept for the warning that names it. */
			tap(r == 0 && l->state == NVS_ANN_INVALID && !strcmp(l->raw, c->value) &&
				others,
			    "%s=\"%s\": refused, the value kept for the warning (got %s, \"%s\")",
			    key, c->value, state_name(l->state), l->raw);
		}
		uint64_t v = 12345;
		int pr = nvs_pod_annotation_parse(c->id, c->value, &v);
		tap(c->ok ? pr == 0 && v == c->want : pr != 0 && v == 12345,
		    "%s=\"%s\": nvs_pod_annotation_parse agrees", key, c->value);
	}
	for (unsigned j = 0; j < NVS_POD_ANN_N; j++) {
		const struct nvs_pod_annotation *a = &nvs_pod_annotations[j];
		tap(good[j] > 0 && bad[j] > 0, "%s: %u good and %u bad values tested", a->key,
		    good[j], bad[j]);
		tap(a->lo <= a->hi && a->expected && a->expected[0],
		    "%s: its row has a range and says what it expects", a->key);

		struct nvs_k8s_pod p;
		char ann[256];
		snprintf(ann, sizeof ann, "\"%s\":50", a->key);
		int r = pod(ann, &p);
		tap(r == 0 && p.ann[j].state == NVS_ANN_INVALID &&
			!strcmp(p.ann[j].raw, "(not a string)"),
		    "%s: a number, not a string, is refused", a->key);
		r = pod("\"example.com/other\":\"1\"", &p);
		tap(r == 0 && p.ann[j].state == NVS_ANN_ABSENT, "%s: absent", a->key);
	}
	/* What reaches the log is printable and has no quote. */
	struct nvs_k8s_pod p;
	char ann[256];
	snprintf(ann, sizeof ann, "\"%s\":\"a\\\"b\\nc\"", nvs_pod_annotations[0].key);
	int r = pod(ann, &p);
	tap(r == 0 && p.ann[0].state == NVS_ANN_INVALID && !strcmp(p.ann[0].raw, "a?b?c"),
	    "a bad value's excerpt is printable (got \"%s\")", p.ann[0].raw);
	/* Keys are exact: another case is another annotation. */
	r = pod("\"NVSHARE.COM/gpu-core-limit\":\"50\"", &p);
	tap(r == 0 && p.ann[NVS_POD_ANN_CORE].state == NVS_ANN_ABSENT, "keys are case-sensitive");
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
