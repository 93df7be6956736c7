/*
 * The Pod annotations the scheduler reads, from their table
 * (annotations.def): an index per annotation, and the one parser of
 * their values. Pure (parse.h only): the Pod reader (k8s_json.c), the
 * watch (k8s_watch.c), the docs' table (scheduler/table_doc.c) and the
 * unit test (tests/sched/t_annotations.c) share it.
 */
#ifndef NVSHARE_SCHEDULER_K8S_ANNOTATIONS_H
#define NVSHARE_SCHEDULER_K8S_ANNOTATIONS_H

#include <stdint.h>

/* NVS_POD_ANN_CORE, ...: a value's slot in a Pod. */
enum nvs_pod_ann {
#define NVS_ANNOTATION(id, ...) NVS_POD_ANN_##id,
#include "annotations.def"
#undef NVS_ANNOTATION
	NVS_POD_ANN_N
};

/* How a value is read (annotations.def says what each kind accepts). */
enum nvs_ann_kind {
	NVS_ANN_KIND_PERCENT,
	NVS_ANN_KIND_SIZE,
	NVS_ANN_KIND_WORDS,
	NVS_ANN_KIND_BOOL,
};

struct nvs_pod_annotation {
	const char *key;
	enum nvs_ann_kind kind;
	uint64_t lo, hi, unit;
	const char *words;    /* WORDS: "a|b" */
	const char *expected; /* for the warning about a bad value */
};

/* The rows, indexed by enum nvs_pod_ann. */
extern const struct nvs_pod_annotation nvs_pod_annotations[NVS_POD_ANN_N];

/* Reads the string value s of annotation `id` into *v. Returns 0, or -1
 * when the row does not accept it (*v is then left alone). */
int nvs_pod_annotation_parse(enum nvs_pod_ann id, const char *s, uint64_t *v);

#endif
