/*
 * Prints the docs' tables generated from the scheduler's tables (make gen
 * writes them between marker lines, make check-gen fails when they are
 * stale: scripts/gen-doc-table.sh):
 *
 *   table_doc annotations   docs/kubernetes.md: scheduler/k8s/annotations.def
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

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "annotations"))
		return annotations();
	fprintf(stderr, "usage: table_doc annotations\n");
	return 2;
}
