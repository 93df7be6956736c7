#include "parse.h"

#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *skip_ws(const char *s)
{
	while (*s && isspace((unsigned char)*s))
		s++;
	return s;
}

static int only_ws(const char *s)
{
	return *skip_ws(s) == '\0';
}

int nvs_parse_tq_ms(const char *s, uint64_t *out)
{
	if (!s)
		return -1;
	while (isspace((unsigned char)*s))
		s++;
	const char *p = s;
	while (isdigit((unsigned char)*p) || *p == '.')
		p++;
	while (isspace((unsigned char)*p))
		p++;
	uint64_t ms;
	if (*p == '\0') {
		/* Bare number: seconds, as nvshare's -T always took. Parse
		 * the fraction exactly (up to ms) rather than via double. */
		uint64_t whole = 0, frac = 0;
		unsigned fd = 0;
		const char *q = s;
		if (!isdigit((unsigned char)*q) && *q != '.')
			return -1;
		for (; isdigit((unsigned char)*q); q++) {
			if (whole > NVS_MAX_TQ_MS)
				return -1;
			whole = whole * 10 + (uint64_t)(*q - '0');
		}
		if (*q == '.') {
			q++;
			if (!isdigit((unsigned char)*q))
				return -1;
			for (; isdigit((unsigned char)*q); q++, fd++)
				if (fd < 3)
					frac = frac * 10 + (uint64_t)(*q - '0');
			while (fd < 3) {
				frac *= 10;
				fd++;
			}
		}
		while (isspace((unsigned char)*q))
			q++;
		if (*q)
			return -1;
		if (whole > NVS_MAX_TQ_MS / 1000)
			return -1;
		ms = whole * 1000 + frac;
	} else if (nvs_parse_duration_ms(s, &ms)) {
		return -1;
	}
	if (ms < NVS_MIN_TQ_MS || ms > NVS_MAX_TQ_MS)
		return -1;
	*out = ms;
	return 0;
}

int nvs_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	if (!s)
		return -1;
	s = skip_ws(s);
	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || !only_ws(end) || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

struct unit {
	const char *name;
	uint64_t mult;
};

static const struct unit units[] = {
    {"", 0}, /* bare: replaced by bare_unit */
    {"b", 1},
    {"k", 1ull << 10},
    {"kb", 1ull << 10},
    {"ki", 1ull << 10},
    {"kib", 1ull << 10},
    {"m", 1ull << 20},
    {"mb", 1ull << 20},
    {"mi", 1ull << 20},
    {"mib", 1ull << 20},
    {"g", 1ull << 30},
    {"gb", 1ull << 30},
    {"gi", 1ull << 30},
    {"gib", 1ull << 30},
    {"t", 1ull << 40},
    {"tb", 1ull << 40},
    {"ti", 1ull << 40},
    {"tib", 1ull << 40},
};

int nvs_parse_size(const char *s, uint64_t bare_unit, uint64_t *out)
{
	if (!s)
		return -1;
	s = skip_ws(s);
	const char *p = s;
	uint64_t whole = 0;
	int digits = 0;
	while (isdigit((unsigned char)*p)) {
		unsigned d = (unsigned)(*p - '0');
		if (whole > (UINT64_MAX - d) / 10)
			return -1;
		whole = whole * 10 + d;
		p++;
		digits++;
	}
	if (!digits) /* ".5" is too easy to mistype for "5" */
		return -1;
	/* Fraction: up to 9 digits, kept as an exact numerator. */
	uint64_t frac = 0, frac_den = 1;
	if (*p == '.') {
		p++;
		int fd = 0;
		while (isdigit((unsigned char)*p)) {
			if (fd < 9) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				frac_den *= 10;
			}
			fd++;
			p++;
		}
		if (!fd)
			return -1;
		digits += fd;
	}
	if (!digits)
		return -1;
	/* Unit: letters, optionally separated by spaces, then only spaces. */
	p = skip_ws(p);
	char unit[8];
	size_t n = 0;
	while (isalpha((unsigned char)*p)) {
		if (n + 1 >= sizeof unit)
			return -1;
		unit[n++] = (char)tolower((unsigned char)*p++);
	}
	unit[n] = '\0';
	if (!only_ws(p))
		return -1;
	uint64_t mult = 0;
	int found = 0;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (!strcmp(unit, units[i].name)) {
			mult = units[i].mult ? units[i].mult : bare_unit;
			found = 1;
			break;
		}
	}
	if (!found || mult == 0)
		return -1;
	if (whole && mult > UINT64_MAX / whole)
		return -1;
	uint64_t v = whole * mult;
	if (frac) {
		/* frac/frac_den * mult, computed without overflow: mult is a
		 * power of two <= 2^40 and frac_den <= 10^9. */
		long double f = (long double)frac * (long double)mult / (long double)frac_den;
		uint64_t add = (uint64_t)f;
		if (v > UINT64_MAX - add)
			return -1;
		v += add;
	}
	*out = v;
	return 0;
}

int nvs_parse_percent(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	if (!s)
		return -1;
	char buf[32];
	size_t n = strlen(s);
	if (n >= sizeof buf)
		return -1;
	memcpy(buf, s, n + 1);
	while (n && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	if (n && buf[n - 1] == '%')
		buf[--n] = '\0';
	uint64_t v;
	if (nvs_parse_u64(buf, lo, hi, &v))
		return -1;
	*out = (unsigned)v;
	return 0;
}

int nvs_parse_bool(const char *s, int *out)
{
	if (!s)
		return -1;
	static const char *yes[] = {"1", "true", "yes", "on", "y"};
	static const char *no[] = {"0", "false", "no", "off", "n"};
	s = skip_ws(s);
	char buf[8];
	size_t n = 0;
	while (s[n] && !isspace((unsigned char)s[n])) {
		if (n + 1 >= sizeof buf)
			return -1;
		buf[n] = s[n];
		n++;
	}
	buf[n] = '\0';
	if (!only_ws(s + n))
		return -1;
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
		if (!strcasecmp(buf, yes[i])) {
			*out = 1;
			return 0;
		}
		if (!strcasecmp(buf, no[i])) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

int nvs_parse_duration_ms(const char *s, uint64_t *out)
{
	if (!s)
		return -1;
	s = skip_ws(s);
	char *end;
	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	end = (char *)skip_ws(end);
	uint64_t mult = 1;
	if (!strncasecmp(end, "ms", 2)) {
		end += 2;
	} else if (*end == 's' || *end == 'S') {
		mult = 1000;
		end++;
	} else if (*end == 'm' || *end == 'M') {
		mult = 60000;
		end++;
	}
	if (!only_ws(end) || v > UINT64_MAX / mult)
		return -1;
	*out = v * mult;
	return 0;
}

static int is_hex(char c)
{
	return isxdigit((unsigned char)c) != 0;
}

/* Copies a 36-char UUID starting at p, with '_' read as '-'. */
static int take_uuid(const char *p, char *out, size_t cap)
{
	static const int dash_at[] = {8, 13, 18, 23};
	if (cap < 37)
		return -1;
	for (int i = 0; i < 36; i++) {
		char c = p[i];
		int want_dash = 0;
		for (int d = 0; d < 4; d++)
			want_dash |= (i == dash_at[d]);
		if (want_dash) {
			if (c != '-' && c != '_')
				return -1;
			out[i] = '-';
		} else {
			if (!is_hex(c))
				return -1;
			out[i] = (char)tolower((unsigned char)c);
		}
	}
	/* The UUID must end there: '/', '.', end of line. */
	char e = p[36];
	if (e && e != '/' && e != '.' && e != '\n' && e != '\r')
		return -1;
	out[36] = '\0';
	return 0;
}

int nvs_parse_cgroup_pod_uid(const char *line, char *out, size_t cap)
{
	if (!line || cap < 37)
		return -1;
	/* The path is after the second ':' (v1 and v2 alike). */
	const char *c1 = strchr(line, ':');
	const char *path = c1 ? strchr(c1 + 1, ':') : NULL;
	if (!path)
		return -1;
	path++;
	if (!strstr(path, "kubepods"))
		return -1;
	/* The Pod is the kubepods-level component: the OUTERMOST "pod<uid>"
	 * after "kubepods". Anything deeper is below the Pod's own cgroup,
	 * where a container with a writable cgroupfs (cgroup v2 delegation)
	 * may create directories of any name, "pod<another Pod's uid>"
	 * included: taking the last match would let it claim that Pod. */
	for (const char *p = strstr(path, "kubepods"); (p = strstr(p, "pod")); p += 3) {
		/* cgroupfs: "/pod<uid>"; systemd: "-pod<uid>.slice" */
		if (p == path || (p[-1] != '/' && p[-1] != '-'))
			continue;
		char tmp[37];
		if (take_uuid(p + 3, tmp, sizeof tmp) == 0) {
			memcpy(out, tmp, 37);
			return 0;
		}
	}
	return -1;
}

int nvs_k8s_name_ok(const char *s, size_t max, int dots)
{
	size_t n = strlen(s);
	if (n == 0 || n >= max)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
		      (dots && c == '.')))
			return 0;
	}
	return 1;
}

int nvs_k8s_uid_ok(const char *s)
{
	if (strlen(s) != 36)
		return 0;
	for (int i = 0; i < 36; i++) {
		char c = s[i];
		int dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	return 1;
}

const char *nvs_format_size(uint64_t bytes, char *buf, size_t cap)
{
	static const char *names[] = {"Ki", "Mi", "Gi", "Ti"};
	int u = -1;
	for (int i = 3; i >= 0; i--) {
		uint64_t m = 1ull << (10 * (i + 1));
		if (bytes >= m) {
			u = i;
			break;
		}
	}
	if (u < 0) {
		snprintf(buf, cap, "%llu", (unsigned long long)bytes);
		return buf;
	}
	uint64_t m = 1ull << (10 * (u + 1));
	if (bytes % m == 0)
		snprintf(buf, cap, "%llu%s", (unsigned long long)(bytes / m), names[u]);
	else
		snprintf(buf, cap, "%.2f%s", (double)bytes / (double)m, names[u]);
	return buf;
}

static int env_report(const char *name, const char *v, const char *what)
{
	nvs_log(NVS_LOG_WARN, "ignoring %s=\"%s\": expected %s", name, v, what);
	return -1;
}

int nvs_env_size(const char *name, uint64_t bare_unit, uint64_t *out)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return 0;
	if (nvs_parse_size(v, bare_unit, out))
		return env_report(name, v, "a size such as 4096, 512Mi, 4Gi");
	return 1;
}

int nvs_env_bool(const char *name, int *out)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return 0;
	if (nvs_parse_bool(v, out))
		return env_report(name, v, "1 or 0");
	return 1;
}

int nvs_env_percent(const char *name, unsigned lo, unsigned hi, unsigned *out)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return 0;
	if (nvs_parse_percent(v, lo, hi, out)) {
		char what[64];
		snprintf(what, sizeof what, "an integer percentage from %u to %u", lo, hi);
		return env_report(name, v, what);
	}
	return 1;
}

int nvs_env_u64(const char *name, uint64_t lo, uint64_t hi, uint64_t *out)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return 0;
	if (nvs_parse_u64(v, lo, hi, out)) {
		char what[80];
		snprintf(what, sizeof what, "an integer from %llu to %llu", (unsigned long long)lo,
			 (unsigned long long)hi);
		return env_report(name, v, what);
	}
	return 1;
}

int nvs_parse_choice(const char *choices, const char *s, int icase)
{
	size_t n = strlen(s);
	for (int i = 0;; i++) {
		const char *bar = strchr(choices, '|');
		size_t len = bar ? (size_t)(bar - choices) : strlen(choices);
		if (len == n && !(icase ? strncasecmp(choices, s, n) : memcmp(choices, s, n)))
			return i;
		if (!bar)
			return -1;
		choices = bar + 1;
	}
}
