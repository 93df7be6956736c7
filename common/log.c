#include "log.h"

#include "parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *component = "nvshare";
static int debug_enabled = -1; /* -1: not read yet */

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
}

int nvs_log_debug_enabled(void)
{
	if (debug_enabled < 0)
		nvs_log_reload_env();
	return debug_enabled;
}

void nvs_log(enum nvs_log_level level, const char *fmt, ...)
{
	static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
	if (level == NVS_LOG_DEBUG && !nvs_log_debug_enabled())
		return;
	char line[1024];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	localtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof line, "[nvshare][%s] %02d:%02d:%02d.%03ld %s ", component,
			 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, names[level]);
	if (n < 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof line - 2)
		len = sizeof line - 2;
	line[len++] = '\n';
	/* One write(2) per line so concurrent lines do not interleave. */
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}
