/* libFuzzer target: the size, percent, bool, duration and cgroup parsers on
 * arbitrary strings. Results must be self-consistent. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[512];
	if (size >= sizeof s)
		size = sizeof s - 1;
	memcpy(s, data, size);
	s[size] = '\0';

	uint64_t v;
	if (nvs_parse_size(s, 1u << 20, &v) == 0) {
		char buf[64];
		nvs_format_size(v, buf, sizeof buf);
	}
	unsigned p;
	if (nvs_parse_percent(s, 1, 100, &p) == 0 && (p < 1 || p > 100))
		abort();
	int b;
	if (nvs_parse_bool(s, &b) == 0 && b != 0 && b != 1)
		abort();
	nvs_parse_duration_ms(s, &v);
	char uid[37];
	if (nvs_parse_cgroup_pod_uid(s, uid, sizeof uid) == 0 && strlen(uid) != 36)
		abort();
	return 0;
}
