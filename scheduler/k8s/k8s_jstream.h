/*
 * An incremental JSON reader that keeps only what a schema names: bytes go
 * in as they arrive (any chunking), and the document comes out as a small
 * cJSON skeleton holding the schema's paths and nothing else, except that
 * the elements of one chosen array ("units") are handed out one by one as
 * each ends, and then forgotten. Everything else is checked for syntax and
 * skipped without being kept, so memory does not depend on the size of the
 * document or of its values: a LIST of 5,000 Pods of 1.5 MiB each is read
 * with the fixed state below and one Pod's skeleton at a time
 * (docs/kubernetes.md "Pod watch"). Pure (no globals, no I/O); fuzzed
 * through k8s_json.c (tests/fuzz/fuzz_k8s_event.c).
 *
 * Bounds: nesting NVS_JS_DEPTH; a kept string NVS_JS_STRMAX bytes (a longer
 * one is kept cut, ending in NVS_JS_CUT, which no value parser accepts); a
 * member name compared on NVS_JS_KEYMAX bytes; a kept number
 * NVS_JS_NUMMAX characters (longer: kept as null); NVS_JS_NODES skeleton
 * nodes per unit and for the rest (more: marked overflowed, the rest not
 * kept).
 *
 * Why not a library: cJSON and json-c build the whole tree; yajl streams,
 * but keeps each string whole before passing it on and is no longer
 * developed upstream.
 */
#ifndef NVSHARE_SCHEDULER_K8S_JSTREAM_H
#define NVSHARE_SCHEDULER_K8S_JSTREAM_H

#include <stddef.h>

#define NVS_JS_DEPTH 512
#define NVS_JS_STRMAX 4096
#define NVS_JS_KEYMAX 64
#define NVS_JS_NUMMAX 64
#define NVS_JS_NODES 4096
#define NVS_JS_CUT '\x01'

struct cJSON;

/* The schema: a tree of what to keep. KEEP keeps a value (an object or an
 * array as an empty one of its kind); OBJ keeps an object's named members
 * (`kids`, ended by an entry whose key is NULL); ARR keeps each element as
 * `kids[0]` describes, and with `unit` hands each one out instead. A value
 * of another kind than OBJ/ARR expect is kept as KEEP would, so the
 * skeleton has the document's types where it has anything. */
enum nvs_js_kind { NVS_JS_KEEP = 1, NVS_JS_OBJ, NVS_JS_ARR };

struct nvs_js_schema {
	const char *key;		  /* member name (in OBJ kids) */
	int kind;			  /* enum nvs_js_kind */
	const struct nvs_js_schema *kids; /* OBJ: members; ARR: the element */
	int unit;			  /* ARR: hand each element out */
};

struct nvs_js_frame {
	const struct nvs_js_schema *schema; /* OBJ/ARR kept; NULL: skipped */
	struct cJSON *node;		    /* its skeleton node, NULL: skipped */
	unsigned char arr, state;
};

struct nvs_js {
	const struct nvs_js_schema *root;
	/* A unit ended: its skeleton (the callee owns it and must
	 * cJSON_Delete it) and whether it overflowed NVS_JS_NODES. */
	void (*on_unit)(struct cJSON *skel, int overflowed, void *arg);
	void *arg;

	int error; /* not JSON: everything after is refused */
	int ended; /* the document's value is complete */
	struct cJSON *doc, *unit;
	unsigned depth, unit_depth;
	unsigned doc_nodes, unit_nodes;
	int doc_over, unit_over;
	struct nvs_js_frame st[NVS_JS_DEPTH];
	/* the token in progress */
	int tok, ts, keep, is_key;
	unsigned u, hi;
	size_t len;
	int cut;
	char buf[NVS_JS_STRMAX + 8];
	char key[NVS_JS_KEYMAX + 1];
	size_t klen;
	int key_long;
	const struct nvs_js_schema *vs; /* what the next value is */
	int vkeep;			/* it is kept */
};

/* Sets up: root describes the document's value; on_unit may be NULL when
 * no ARR of the schema is a unit. */
void nvs_js_init(struct nvs_js *js, const struct nvs_js_schema *root,
		 void (*on_unit)(struct cJSON *skel, int overflowed, void *arg), void *arg);
/* Feeds bytes; returns 0, or -1 once the input is not one JSON value
 * (then and later: nothing more is read). */
int nvs_js_feed(struct nvs_js *js, const char *p, size_t n);
/* The input ended: the document's skeleton (the caller deletes it), or
 * NULL when the input was not exactly one complete JSON value (trailing
 * whitespace allowed). *overflowed: the kept rest went over NVS_JS_NODES.
 * Frees whatever is left either way. */
struct cJSON *nvs_js_end(struct nvs_js *js, int *overflowed);

#endif
