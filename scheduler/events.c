#include "events.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int ev_fd = -1;

int nvs_events_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		NVS_ERROR("cannot open the event stream %s: %s", path, strerror(errno));
		return -1;
	}
	nvs_events_close();
	ev_fd = fd;
	return 0;
}

void nvs_events_close(void)
{
	if (ev_fd >= 0)
		close(ev_fd);
	ev_fd = -1;
}

const char *nvs_json_str(const char *s, char *buf, size_t size)
{
	size_t o = 0;
	if (size < 3) {
		if (size)
			buf[0] = '\0';
		return buf;
	}
	buf[o++] = '"';
	/* Room for the closing quote and NUL, and 6 bytes of one escape. */
	for (; s && *s && o + 8 < size; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(buf + o, size - o, "\\u%04x", ch);
		} else {
			buf[o++] = (char)ch;
		}
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

void nvs_event(const char *name, const char *fields_fmt, ...)
{
	if (ev_fd < 0)
		return;
	char line[1024];
	struct timespec rt, mt;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	struct tm tm;
	gmtime_r(&rt.tv_sec, &tm);
	int n =
	    snprintf(line, sizeof line,
		     "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ\",\"mono_ns\":%llu,"
		     "\"event\":\"%s\"",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     rt.tv_nsec / 1000,
		     (unsigned long long)mt.tv_sec * 1000000000ull + (uint64_t)mt.tv_nsec, name);
	if (n < 0 || (size_t)n >= sizeof line - 3)
		return;
	if (fields_fmt && *fields_fmt) {
		line[n++] = ',';
		va_list ap;
		va_start(ap, fields_fmt);
		int m = vsnprintf(line + n, sizeof line - (size_t)n - 2, fields_fmt, ap);
		va_end(ap);
		/* A cut line would not be JSON: drop it rather than write it. */
		if (m < 0 || (size_t)m >= sizeof line - (size_t)n - 2)
			return;
		n += m;
	}
	line[n++] = '}';
	line[n++] = '\n';
	/* One write(2) per line: a reader never sees half an event. */
	ssize_t w = write(ev_fd, line, (size_t)n);
	(void)w;
}
