/*
 * Log lines a peer can provoke, rate-limited per tenant and message kind
 * (issue 17): a Pod that connects, sends garbage and closes in a loop must
 * not fill the node's log nor slow the loop. Each (call site, kind,
 * tenant) may log NVSHARE_LOG_RATE lines a second; the rest are counted,
 * and the next line of that key, or a summary line within about two
 * seconds, says "N similar lines suppressed".
 *
 * Loop thread only.
 */
#ifndef NVSHARE_SCHEDULER_PLOG_H
#define NVSHARE_SCHEDULER_PLOG_H

#include <stddef.h>
#include <stdint.h>

struct nvs_peer;

/* Lines per second per key; 0: no limit. */
extern unsigned nvs_plog_rate; /* NVSHARE_LOG_RATE (settings.def) */

/* The tenant of a peer as a short key ("pod:<uid>", "uid:<n>",
 * "unknown") for logs and counting. */
const char *nvs_tenant_key(const struct nvs_peer *p, char *buf, size_t cap);

/* May a line of (site, kind, p's tenant) be logged now? 1: yes, with
 * *suppressed set to the lines suppressed since the last one (to append);
 * 0: counted as suppressed. site: any address unique to the call site;
 * kind: a string literal (a reason code). */
int nvs_plog_allow(const void *site, const char *kind, const struct nvs_peer *p,
		   unsigned *suppressed);
/* The same at a given time (CLOCK_MONOTONIC ns; tests). */
int nvs_plog_allow_at(const void *site, const char *kind, const struct nvs_peer *p, uint64_t now,
		      unsigned *suppressed);

/*
 * Every INFO or WARN line logged while a peer's message is being handled
 * (conn.c sets the peer around dispatch) is limited the same way, its
 * format string being its kind: a client that asks for the lock, attaches
 * or says HELLO in a loop cannot fill the log with the lines those
 * messages cause. nvs_plog_start installs the filter (common/log.h).
 */
void nvs_plog_start(void);
void nvs_plog_set_peer(const struct nvs_peer *p); /* NULL: none */

/* Logs summaries of keys that went quiet with lines suppressed. */
void nvs_plog_tick(uint64_t now);

/* Lines suppressed in all (metrics). */
extern uint64_t nvs_plog_suppressed_total;

#endif
