/* The table of Pod annotations (annotations.def) and the parser of their
 * values: one loop for every row, by its kind. */
#include "annotations.h"

#include "parse.h"

const struct nvs_pod_annotation nvs_pod_annotations[NVS_POD_ANN_N] = {
#define NVS_ANNOTATION(id, key, kind, lo, hi, unit, words, expected, values, effect)               \
	[NVS_POD_ANN_##id] = {key, NVS_ANN_KIND_##kind, lo, hi, unit, words, expected},
#include "annotations.def"
#undef NVS_ANNOTATION
};

int nvs_pod_annotation_parse(enum nvs_pod_ann id, const char *s, uint64_t *v)
{
	if ((unsigned)id >= NVS_POD_ANN_N || !s)
		return -1;
	const struct nvs_pod_annotation *a = &nvs_pod_annotations[id];
	uint64_t x = 0;
	switch (a->kind) {
	case NVS_ANN_KIND_PERCENT: {
		unsigned p;
		if (nvs_parse_percent(s, (unsigned)a->lo, (unsigned)a->hi, &p))
			return -1;
		x = p;
		break;
	}
	case NVS_ANN_KIND_SIZE:
		if (nvs_parse_size(s, a->unit, &x))
			return -1;
		break;
	case NVS_ANN_KIND_WORDS:
		x = (uint64_t)(nvs_parse_choice(a->words, s, 0) + 1);
		break;
	case NVS_ANN_KIND_BOOL: {
		int b;
		if (nvs_parse_bool(s, &b))
			return -1;
		x = b ? 2 : 1;
		break;
	}
	}
	if (x < a->lo || x > a->hi)
		return -1;
	*v = x;
	return 0;
}
