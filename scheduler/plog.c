/*
 * Per-tenant, per-kind log rate limiting (plog.h; an unknown tenant's lines
 * are keyed by its uid). A fixed table, so its size does not grow with the
 * number of peers: a key lives in one of PROBE slots from its hash's, and
 * only the least recently used of those gives way to a new key, after
 * reporting what it suppressed. (It was direct mapped: two busy keys that
 * hashed to one slot pushed each other out, and each push restarted the
 * other's window, so neither was limited. Site addresses move with ASLR,
 * so one run in dozens met it: a churn wrote 1.23 MB of log a minute
 * where its bound is ~0.5.)
 */
#include "clock.h"
#include "plog.h"

#include "log.h"
#include "parse.h"
#include "peer.h"
#include "core/state.h"

#include <stdio.h>
#include <string.h>

unsigned nvs_plog_rate = 10; /* a row of settings.def sets it at start */
uint64_t nvs_plog_suppressed_total;

#define NSLOTS 512u
#define PROBE 16u
#define WINDOW_NS 1000000000ull
/* A key quiet this long after its window reports its suppressed lines. */
#define SUMMARY_AFTER_NS (2 * WINDOW_NS)

struct slot {
	uint64_t hash;
	const void *site;
	const char *kind;
	char tenant[48];
	uint64_t win_start_ns;
	uint64_t used_ns; /* the last line asked for (which slot gives way) */
	unsigned in_window;
	unsigned suppressed;
};
static struct slot slots[NSLOTS];
static unsigned pending; /* slots with suppressed > 0 */

const char *nvs_tenant_key(const struct nvs_peer *p, char *buf, size_t cap)
{
	if (p->kind == NVS_TENANT_POD && p->pod_uid[0])
		snprintf(buf, cap, "pod:%s", p->pod_uid);
	else if (p->kind == NVS_TENANT_POD) /* a Pod socket's, not yet named */
		snprintf(buf, cap, "pod:%s/%s", p->pod_ns, p->pod_name);
	else if (p->kind == NVS_TENANT_UID)
		snprintf(buf, cap, "uid:%u", (unsigned)p->uid);
	else
		snprintf(buf, cap, "unknown");
	return buf;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

static void summary(struct slot *s)
{
	if (!s->suppressed)
		return;
	nvs_log_n(NVS_LOG_WARN, s->suppressed, "tenant %s: lines of kind \"%.60s\" rate-limited",
		  s->tenant, s->kind);
	s->suppressed = 0;
	pending--;
}

/* The slot of key (h, site, kind, t): its own if it has one among the
 * PROBE slots from h, else a free one there, else the least recently used
 * there (emptied, after its summary). */
static struct slot *slot_for(uint64_t h, const void *site, const char *kind, const char *t)
{
	struct slot *victim = NULL;
	for (unsigned i = 0; i < PROBE; i++) {
		struct slot *s = &slots[(h + i) % NSLOTS];
		if (s->kind && s->hash == h && s->site == site && !strcmp(s->tenant, t) &&
		    !strcmp(s->kind, kind))
			return s;
		if (!victim || (victim->kind && (!s->kind || s->used_ns < victim->used_ns)))
			victim = s;
	}
	if (victim->kind)
		summary(victim); /* pushed out: say what it held back */
	memset(victim, 0, sizeof *victim);
	victim->hash = h;
	victim->site = site;
	victim->kind = kind;
	snprintf(victim->tenant, sizeof victim->tenant, "%s", t);
	return victim;
}

int nvs_plog_allow(const void *site, const char *kind, const struct nvs_peer *p,
		   unsigned *suppressed)
{
	return nvs_plog_allow_at(site, kind, p, nvs_now_ns(), suppressed);
}

int nvs_plog_allow_at(const void *site, const char *kind, const struct nvs_peer *p, uint64_t now,
		      unsigned *suppressed)
{
	*suppressed = 0;
	if (!nvs_plog_rate)
		return 1;
	char t[48];
	/* Lines from an unknown tenant count against its uid's budget: one
	 * uid whose peers exit before they are accepted (common for a churn
	 * on a slow machine) would otherwise write under two keys, its uid's
	 * and "unknown", doubling its worst case (a soak round: 1.06 MB of
	 * log a minute from one churning uid). SO_PEERCRED's uid is known
	 * even then. The tenant itself stays unknown (limits, fairness). */
	if (p->kind == NVS_TENANT_UNKNOWN)
		snprintf(t, sizeof t, "uid:%u", (unsigned)p->uid);
	else
		nvs_tenant_key(p, t, sizeof t);
	uint64_t h = fnv(14695981039346656037ull, &site, sizeof site);
	h = fnv(h, kind, strlen(kind));
	h = fnv(h, t, strlen(t));
	struct slot *s = slot_for(h, site, kind, t);
	s->used_ns = now;
	if (now - s->win_start_ns >= WINDOW_NS) {
		s->win_start_ns = now;
		s->in_window = 0;
	}
	if (s->in_window >= nvs_plog_rate) {
		if (!s->suppressed)
			pending++;
		s->suppressed++;
		nvs_plog_suppressed_total++;
		return 0;
	}
	s->in_window++;
	if (s->suppressed) {
		*suppressed = s->suppressed;
		s->suppressed = 0;
		pending--;
	}
	return 1;
}

void nvs_plog_tick(uint64_t now)
{
	if (!pending)
		return;
	for (unsigned i = 0; i < NSLOTS && pending; i++) {
		struct slot *s = &slots[i];
		if (s->suppressed && now - s->win_start_ns >= SUMMARY_AFTER_NS)
			summary(s);
	}
}

/* The loop thread's current peer (other threads log freely). */
static __thread const struct nvs_peer *cur_peer;

void nvs_plog_set_peer(const struct nvs_peer *p)
{
	cur_peer = p;
}

static int filter(const char *fmt, enum nvs_log_level level, unsigned *suppressed)
{
	(void)level;
	if (!cur_peer)
		return 1;
	return nvs_plog_allow(fmt, fmt, cur_peer, suppressed);
}

void nvs_plog_start(void)
{
	nvs_log_set_filter(filter);
}
