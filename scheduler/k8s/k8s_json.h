/*
 * Kubernetes API objects as the scheduler needs them: Pods reduced to
 * identity + nvshare annotations + their nvshare.com/gpu-memory request,
 * watch events, LIST pages, and the
 * newline splitter for a chunked watch stream. Pure functions (cJSON and
 * k8s_jstream.c only, no globals, no I/O): used by the watch thread
 * (k8s_watch.c) and the fuzz target (tests/fuzz/fuzz_k8s_event.c).
 */
#ifndef NVSHARE_SCHEDULER_K8S_JSON_H
#define NVSHARE_SCHEDULER_K8S_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "annotations.h" /* the nvshare annotations: annotations.def */
#include "names.h"

#define NVS_K8S_ANN_MIRROR "kubernetes.io/config.mirror"
/* The device plugin's memory resource (docs/kubernetes.md). */
#define NVS_K8S_RES_MEM "nvshare.com/gpu-memory"
/* More units than this in one Pod is not a request, it is a typo (the
 * device plugin advertises at most 32768 on a node; x 1 TiB stays in 64 bits). */
#define NVS_K8S_MAX_UNITS (1ull << 20)

/* Names: NVS_POD_UID_LEN, NVS_K8S_NAME_LEN, NVS_K8S_NS_LEN (names.h). */
#define NVS_K8S_RV_LEN 256 /* opaque; longer ones are refused */
#define NVS_K8S_RAW_LEN 48 /* annotation excerpt kept for logs */

enum nvs_k8s_ann_state {
	NVS_ANN_ABSENT = 0,
	NVS_ANN_VALID = 1,
	NVS_ANN_INVALID = 2, /* present but unusable: keep the previous value */
};

/* One annotation's value, already checked. */
struct nvs_k8s_limit {
	int state;		   /* enum nvs_k8s_ann_state */
	uint64_t v;		   /* in its row's lo..hi (annotations.def) */
	char raw[NVS_K8S_RAW_LEN]; /* printable excerpt of the value */
};

struct nvs_k8s_pod {
	char uid[NVS_POD_UID_LEN];    /* metadata.uid, lower case */
	char mirror[NVS_POD_UID_LEN]; /* static pods: config.mirror, "" none */
	char name[NVS_K8S_NAME_LEN];
	char ns[NVS_K8S_NS_LEN];
	char rv[NVS_K8S_RV_LEN];
	/* The annotations of annotations.def, by enum nvs_pod_ann: core
	 * percent, memory bytes, priority (1 interactive, 2 batch: NVS_PRIO_*),
	 * unified memory (1 "false": device memory, 2 "true"). */
	struct nvs_k8s_limit ann[NVS_POD_ANN_N];
	/* spec: units of nvshare.com/gpu-memory the Pod was given:
	 * max(sum over containers, max over initContainers) of each one's
	 * resources.limits (else requests). 0: none asked, or unusable. */
	uint64_t mem_units;
};

enum nvs_k8s_ev_type {
	NVS_K8S_ADDED = 1,
	NVS_K8S_MODIFIED,
	NVS_K8S_DELETED,
	NVS_K8S_BOOKMARK,
	NVS_K8S_ERROR,
};

struct nvs_k8s_event {
	int type;		 /* enum nvs_k8s_ev_type */
	char rv[NVS_K8S_RV_LEN]; /* the object's resourceVersion ("" none) */
	int code;		 /* ERROR: Status.code (410: re-list) */
	char message[160];	 /* ERROR: Status.message (printable) */
	struct nvs_k8s_pod pod;	 /* ADDED / MODIFIED / DELETED */
};

/* Annotation `id`'s string value s (annotations.def row) into l: VALID
 * and the value, or INVALID; s == NULL gives ABSENT. l->raw keeps a
 * printable excerpt of s for the warning. */
void nvs_k8s_annotation(enum nvs_pod_ann id, const char *s, struct nvs_k8s_limit *l);

/* A Kubernetes quantity of an extended resource (an integer: "2", "2k",
 * "1Ki"; a JSON number is accepted too) into *units (<= NVS_K8S_MAX_UNITS).
 * Returns 0, or -1 for anything else (fractions, "500m", junk). */
struct cJSON;
int nvs_k8s_units(const struct cJSON *q, uint64_t *units);

/* A Pod object (cJSON *) into p. Returns 0, or -1 without a usable
 * metadata.uid (36-char UUID). */
struct cJSON;
int nvs_k8s_pod_from_json(const struct cJSON *obj, struct nvs_k8s_pod *p);

/* One watch line ({"type":..,"object":..}). Returns 0, or -1 when the line
 * is not a well-formed event (it is then skipped). */
int nvs_k8s_parse_event(const char *json, size_t len, struct nvs_k8s_event *ev);
/* The same from a parsed event (what nvs_k8s_parse_event applies to the
 * skeleton it read; the fuzz target compares the two ways). */
int nvs_k8s_event_from_json(const struct cJSON *root, struct nvs_k8s_event *ev);
/* A PodList's own fields: metadata.resourceVersion and .continue copied,
 * items an array (or null, or absent). 0, or -1: not a PodList. */
int nvs_k8s_list_meta(const struct cJSON *root, char *rv, size_t rv_cap, char *cont,
		      size_t cont_cap);

/* Watch lines and LIST bodies are read incrementally (k8s_jstream.h):
 * only the fields above are kept, so memory does not grow with the size of
 * a Pod or of a page. */

/* A LIST response (PodList), as it arrives: nvs_k8s_list_new, then
 * nvs_k8s_list_feed for each piece of the body (cb is called for each
 * usable item as soon as it has come, others are counted in *skipped;
 * -1: the body is not JSON, stop), then nvs_k8s_list_end, which copies
 * metadata.resourceVersion and metadata.continue, frees the reader and
 * returns the number of items passed to cb, or -1 when the body was not a
 * PodList (the items already passed to cb must then be dropped). */
struct nvs_k8s_list;
struct nvs_k8s_list *nvs_k8s_list_new(void (*cb)(const struct nvs_k8s_pod *p, void *arg),
				      void *arg);
int nvs_k8s_list_feed(struct nvs_k8s_list *l, const char *data, size_t n);
int nvs_k8s_list_end(struct nvs_k8s_list *l, char *rv, size_t rv_cap, char *cont, size_t cont_cap,
		     unsigned *skipped);
/* The same in one call, for a whole body. */
int nvs_k8s_parse_list(const char *json, size_t len,
		       void (*cb)(const struct nvs_k8s_pod *p, void *arg), void *arg, char *rv,
		       size_t rv_cap, char *cont, size_t cont_cap, unsigned *skipped);

/* Newline-delimited stream: feed bytes as they come; cb gets each
 * complete line (without '\n', NUL-terminated, may be empty). A line
 * longer than max is dropped (counted in `dropped`). cb returning
 * non-zero stops the feed, which returns that value. */
struct nvs_k8s_lines {
	char *buf;
	size_t len, cap, max;
	int skipping; /* inside an over-long line */
	unsigned long dropped;
};
void nvs_k8s_lines_init(struct nvs_k8s_lines *lb, size_t max);
int nvs_k8s_lines_feed(struct nvs_k8s_lines *lb, const char *data, size_t n,
		       int (*cb)(const char *line, size_t len, void *arg), void *arg);
void nvs_k8s_lines_free(struct nvs_k8s_lines *lb);

/* Merges the annotation states of a new version of a Pod with the limit
 * in force (*cur_has, *cur_v): ABSENT clears it, VALID sets it, INVALID
 * keeps it. Returns 1 when the limit in force changed. */
int nvs_k8s_merge_limit(const struct nvs_k8s_limit *l, int *cur_has, uint64_t *cur_v);

#endif
