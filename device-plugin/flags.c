/* Command-line parts both Kubernetes daemons share (flags.h). */
#include "flags.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "health.h"
#include "nvs_version.h" /* generated: scripts/gen-version.sh */
#include "parse.h"

int nvs_dp_bad_flag(const char *flag, const char *want, const char *got)
{
	fprintf(stderr, "%s: expected %s, got \"%s\"\n", flag, want, got);
	return -1;
}

int nvs_dp_flag_other(int opt, const char *program, void (*usage)(FILE *out))
{
	if (opt == 'V') {
		printf("%s %s\n", program, NVS_VERSION_FULL);
		exit(0);
	}
	if (opt == 'h') {
		usage(stdout);
		exit(0);
	}
	usage(stderr);
	return -1;
}

int nvs_dp_cdi_kind_flag(const char *arg, const char **kind)
{
	if (!strcmp(arg, "none")) {
		*kind = "";
		return 0;
	}
	const char *slash = strchr(arg, '/');
	if (!slash || strchr(slash + 1, '/') || strchr(arg, '=') || strchr(arg, ','))
		return nvs_dp_bad_flag("--cdi-driver-kind",
				       "a CDI kind such as nvidia.com/gpu, or none", arg);
	*kind = arg;
	return 0;
}

int nvs_dp_probe_flag(struct nvs_dp_probe_opts *p, int which, const char *arg)
{
	switch (which) {
	case 0:
		if (!*arg)
			return nvs_dp_bad_flag("--health-file", "a path", arg);
		p->health_file = arg;
		return 0;
	case 1:
		if (strcmp(arg, "live") && strcmp(arg, "ready"))
			return nvs_dp_bad_flag("--probe", "live or ready", arg);
		p->probe = arg[0] == 'r' ? 2 : 1;
		return 0;
	default:
		if (nvs_parse_duration_ms(arg, &p->max_age_ms) || p->max_age_ms < 1000 ||
		    p->max_age_ms > 3600000)
			return nvs_dp_bad_flag("--probe-max-age", "1s .. 1h such as 30s", arg);
		return 0;
	}
}

int nvs_dp_probe_run(const struct nvs_dp_probe_opts *p)
{
	if (!p->probe)
		return -1;
	if (!p->health_file) {
		fprintf(stderr, "--probe needs --health-file\n");
		return 2;
	}
	return nvs_dp_health_probe(p->health_file, p->probe == 2, p->max_age_ms);
}

int nvs_dp_flags_end(int argc, char **argv, const char *const *paths, size_t n)
{
	if (optind < argc) {
		fprintf(stderr, "unexpected argument \"%s\"\n", argv[optind]);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (paths[i] && paths[i][0] != '/') {
			fprintf(stderr, "paths must be absolute: \"%s\"\n", paths[i]);
			return -1;
		}
	return 0;
}
