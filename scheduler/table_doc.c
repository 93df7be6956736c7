/*
 * Prints the docs' tables generated from the scheduler's tables (make gen
 * writes them between marker lines, make check-gen fails when they are
 * stale: scripts/gen-doc-table.sh):
 *
 *   table_doc annotations   docs/kubernetes.md: scheduler/k8s/annotations.def
 *   table_doc metrics SCOPE docs/metrics.md: scheduler/metrics.def, the rows
 *                           of one scope (sched, gpu, client)
 *
 * Only the rows' text columns are used: it links nothing of the scheduler.
 * (The settings' table is nvshare-scheduler --help-table=md.)
 */
#include <stdio.h>
#include <string.h>

static int annotations(void)
{
	printf("| Annotation | Values | Effect |\n|---|---|---|\n");
#define NVS_ANNOTATION(id, key, kind, lo, hi, unit, words, expected, values, effect)               \
	printf("| `%s` | %s | %s |\n", key, values, effect);
#include "k8s/annotations.def"
#undef NVS_ANNOTATION
	return 0;
}

enum scope { SCOPE_SCHED, SCOPE_GPU, SCOPE_CLIENT };

static int metrics(const char *which)
{
	static const char *const names[] = {"sched", "gpu", "client"};
	int want = -1;
	for (int i = 0; i < 3; i++)
		if (!strcmp(which, names[i]))
			want = i;
	if (want < 0)
		return 2;
	printf("| Metric | Type | Meaning |\n|---|---|---|\n");
#define NVS_METRIC(name, type, scope, labels, when, src, help, doc)                                \
	if (SCOPE_##scope == want)                                                                 \
		printf("| `%s%s%s%s` | %s | %s |\n", name, labels[0] ? "{" : "", labels,           \
		       labels[0] ? "}" : "", #type, doc);
#include "metrics.def"
#undef NVS_METRIC
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "annotations"))
		return annotations();
	if (argc == 3 && !strcmp(argv[1], "metrics") && !metrics(argv[2]))
		return 0;
	fprintf(stderr, "usage: table_doc annotations | metrics sched|gpu|client\n");
	return 2;
}
