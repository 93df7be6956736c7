/*
 * The scheduler's event stream: one JSON object per line, with field names
 * and order that are an interface (docs/events.md), so that tests and tools
 * follow lock hand-offs, mode changes and limits without parsing the human
 * log. Off unless NVSHARE_EVENTS (or --events) names a file.
 *
 * The file reveals every tenant's activity: it is created 0600 and meant
 * for the node's administrator and the test suite.
 */
#ifndef NVSHARE_SCHEDULER_EVENTS_H
#define NVSHARE_SCHEDULER_EVENTS_H

#include <stddef.h>

/* Opens (appends to, creating 0600) the stream. 0, or -1 logged. */
int nvs_events_open(const char *path);
void nvs_events_close(void);

/* Writes {"ts":..., "mono_ns":..., "event":NAME, FIELDS} where FIELDS is
 * the formatted fragment ("\"gpu\":%d,..." without braces; empty for
 * none). Strings that a client chose go through nvs_json_str first. */
void nvs_event(const char *name, const char *fields_fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes S as a JSON string literal (quotes included, escaped, cut to
 * fit) into BUF; returns BUF. */
const char *nvs_json_str(const char *s, char *buf, size_t size);

#endif
