/* The core's side of its port (port.h). */
#include "port.h"

#include <stdarg.h>
#include <stdio.h>

static struct nvs_core_port port;

void nvs_core_set_port(const struct nvs_core_port *p)
{
	port = *p;
}

void nvs_core_send(struct client *cl, const struct nvs_msg *m)
{
	if (port.send)
		port.send(port.ctx, cl, m);
}

void nvs_core_event(const char *name, const char *fields_fmt, ...)
{
	if (!port.event)
		return;
	char fields[1024];
	va_list ap;
	va_start(ap, fields_fmt);
	int n = vsnprintf(fields, sizeof fields, fields_fmt, ap);
	va_end(ap);
	/* A cut fragment would not be JSON: dropped, as events.c drops a
	 * line that does not fit. */
	if (n < 0 || (size_t)n >= sizeof fields)
		return;
	port.event(port.ctx, name, fields);
}

int nvs_core_context(struct client_gpu *cg)
{
	return port.context ? port.context(port.ctx, cg) : -1;
}
