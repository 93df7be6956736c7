#include "log.h"

#include "parse.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *component = "nvshare";
static int debug_enabled = -1; /* -1: not read yet */
static int json_format;	       /* NVSHARE_LOG_FORMAT=json */

void nvs_log_init(const char *name)
{
	component = name;
	nvs_log_reload_env();
}

void nvs_log_reload_env(void)
{
	const char *v = getenv("NVSHARE_DEBUG");
	int on = 0;
	/* Not nvs_env_bool: a bad value must not recurse into logging. */
	if (v && nvs_parse_bool(v, &on))
		on = 0;
	debug_enabled = on;
	/* Anything but "json" is the text format (the scheduler refuses a
	 * bad value at start; the library must not). */
	v = getenv("NVSHARE_LOG_FORMAT");
	json_format = v && !strcmp(v, "json");
}

/* NVSHARE_LOG_FORMAT=json: the text line's message as one JSON object per
 * line for log collectors, {"ts","level","component","msg"}. Control
 * characters, quotes and backslashes are escaped; other bytes pass. */
static size_t json_line(char *out, size_t cap, const char *ts, const char *level, const char *msg)
{
	int n =
	    snprintf(out, cap, "{\"ts\":\"%s\",\"level\":\"%s\",\"component\":\"%s\",\"msg\":\"",
		     ts, level, component);
	if (n < 0 || (size_t)n >= cap)
		return 0;
	size_t len = (size_t)n;
	for (const unsigned char *p = (const unsigned char *)msg; *p && len + 8 < cap; p++) {
		if (*p == '"' || *p == '\\') {
			out[len++] = '\\';
			out[len++] = (char)*p;
		} else if (*p < 0x20 || *p == 0x7f) {
			len += (size_t)snprintf(out + len, cap - len, "\\u%04x", *p);
		} else {
			out[len++] = (char)*p;
		}
	}
	memcpy(out + len, "\"}\n", 3);
	return len + 3;
}

int nvs_log_debug_enabled(void)
{
	if (debug_enabled < 0)
		nvs_log_reload_env();
	return debug_enabled;
}

static void vlog(enum nvs_log_level level, unsigned suppressed, const char *fmt, va_list ap)
{
	static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
	static const char *jnames[] = {"debug", "info", "warn", "error"};
	char line[1024];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm); /* ISO-8601 UTC: log collectors need no zone guess */
	char stamp[64];
	snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	int n = json_format ? 0
			    : snprintf(line, sizeof line, "[nvshare][%s] %s %s ", component, stamp,
				       names[level]);
	if (n < 0)
		return;
	int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (suppressed && len < sizeof line - 1) {
		int k =
		    snprintf(line + len, sizeof line - len - 1, " (%u similar line%s suppressed)",
			     suppressed, suppressed == 1 ? "" : "s");
		len += k < 0 ? 0 : (size_t)k;
	}
	if (len > sizeof line - 2)
		len = sizeof line - 2;
	line[len++] = '\n';
	char jl[2 * sizeof line + 128];
	const char *out = line;
	if (json_format) {
		line[len - 1] = '\0';
		len = json_line(jl, sizeof jl, stamp, jnames[level], line);
		out = jl;
	}
	/* One write(2) per line so concurrent lines do not interleave. */
	ssize_t w = write(STDERR_FILENO, out, len);
	(void)w;
}

void nvs_log(enum nvs_log_level level, const char *fmt, ...)
{
	if (level == NVS_LOG_DEBUG && !nvs_log_debug_enabled())
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog(level, 0, fmt, ap);
	va_end(ap);
}

static _Atomic unsigned long long warn_interval_ns;

void nvs_log_set_warn_interval(unsigned long long ns)
{
	atomic_store(&warn_interval_ns, ns);
}

void nvs_log_site(struct nvs_log_site *site, enum nvs_log_level level, const char *fmt, ...)
{
	unsigned long long iv = atomic_load(&warn_interval_ns);
	unsigned suppressed = 0;
	if (iv) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		unsigned long long now =
		    (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
		unsigned long long next = __atomic_load_n(&site->next_ns, __ATOMIC_RELAXED);
		/* One thread wins the slot; the others count themselves. */
		if (now < next ||
		    !__atomic_compare_exchange_n(&site->next_ns, &next, now + iv, 0,
						 __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			__atomic_fetch_add(&site->suppressed, 1, __ATOMIC_RELAXED);
			return;
		}
		suppressed = __atomic_exchange_n(&site->suppressed, 0, __ATOMIC_RELAXED);
	}
	va_list ap;
	va_start(ap, fmt);
	vlog(level, suppressed, fmt, ap);
	va_end(ap);
}
