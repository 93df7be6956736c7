/*
 * Bounds on what peers may cost the daemon (limits.h): per-tenant
 * connection counts, the handshake deadline, the global buffer budget and
 * the descriptor reserve.
 */
#include "clock.h"
#include "peer_limits.h"

#include "clients.h"
#include "conn.h"
#include "events.h"
#include "log.h"
#include "loop.h"
#include "parse.h"
#include "peer.h"
#include "plog.h"
#include "settings.h"
#include "core/state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Rows of settings.def: their defaults and ranges are the table's. */
struct nvs_limits_config nvs_limits_cfg;
struct nvs_limits_stats nvs_limits_stats;

/* ---- connections per tenant ---- */

/* Tenants with at least one connection, chained in a fixed hash table;
 * an entry is freed with its tenant's last connection. */
struct tenant_count {
	char key[128];
	unsigned n;
	unsigned idle; /* registered clients with no GPU attached */
	struct tenant_count *next;
};
#define TBUCKETS 256u
static struct tenant_count *tbucket[TBUCKETS];

static unsigned khash(const char *k)
{
	unsigned h = 2166136261u;
	for (; *k; k++)
		h = (h ^ (unsigned char)*k) * 16777619u;
	return h % TBUCKETS;
}

static struct tenant_count *tenant_get(const char *key, int create)
{
	unsigned b = khash(key);
	for (struct tenant_count *t = tbucket[b]; t; t = t->next)
		if (!strcmp(t->key, key))
			return t;
	if (!create)
		return NULL;
	struct tenant_count *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	snprintf(t->key, sizeof t->key, "%s", key);
	t->next = tbucket[b];
	tbucket[b] = t;
	return t;
}

/* One connection fewer; the entry goes with the tenant's last one. The
 * entry is the one counted at admission (the peer is not looked at
 * again). */
static void tenant_put(struct tenant_count *t)
{
	if (t->n && --t->n)
		return;
	for (struct tenant_count **pp = &tbucket[khash(t->key)]; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			free(t);
			return;
		}
}

/* Handshake FIFO: client-socket connections that have not sent HELLO, in
 * accept order (the deadline is the same for all, so the head expires
 * first). */
static struct conn *hs_head, *hs_tail;

static void hs_add(struct conn *c)
{
	c->lim.hs_listed = 1;
	c->lim.hs_prev = hs_tail;
	c->lim.hs_next = NULL;
	if (hs_tail)
		hs_tail->lim.hs_next = c;
	else
		hs_head = c;
	hs_tail = c;
}

static void hs_remove(struct conn *c)
{
	if (!c->lim.hs_listed)
		return;
	if (c->lim.hs_prev)
		c->lim.hs_prev->lim.hs_next = c->lim.hs_next;
	else
		hs_head = c->lim.hs_next;
	if (c->lim.hs_next)
		c->lim.hs_next->lim.hs_prev = c->lim.hs_prev;
	else
		hs_tail = c->lim.hs_prev;
	c->lim.hs_listed = 0;
	c->lim.hs_prev = c->lim.hs_next = NULL;
}

int nvs_limits_admit(struct conn *c)
{
	c->lim.accepted_ns = nvs_now_ns();
	if (c->role != CONN_ROLE_CLIENT)
		return 0;
	char key[128];
	nvs_tenant_key(&c->peer, key, sizeof key);
	unsigned cap = nvs_limits_cfg.max_conns_per_tenant;
	struct tenant_count *t = tenant_get(key, 1);
	if (cap && t && t->n >= cap) {
		nvs_limits_stats.refused_tenant++;
		static char site;
		unsigned quiet;
		if (nvs_plog_allow(&site, "tenant-limit", &c->peer, &quiet)) {
			nvs_log_n(NVS_LOG_WARN, quiet,
				  "refusing a connection from pid %d uid %d: tenant %s already has "
				  "%u connections (NVSHARE_MAX_CONNS_PER_TENANT=%u)",
				  (int)c->peer.pid, (int)c->peer.uid, key, t->n, cap);
			char k[2 * sizeof key + 8];
			nvs_event("conn_refused",
				  "\"reason\":\"tenant-limit\",\"pid\":%d,\"uid\":%d,\"tenant\":%s,"
				  "\"open\":%u,\"limit\":%u,\"quiet\":%u,\"refused\":%llu",
				  (int)c->peer.pid, (int)c->peer.uid,
				  nvs_json_str(key, k, sizeof k), t->n, cap, quiet,
				  (unsigned long long)nvs_limits_stats.refused_tenant);
		}
		return -1;
	}
	if (t) {
		t->n++;
		c->lim.tenant = t;
	}
	if (nvs_limits_cfg.handshake_ms)
		hs_add(c);
	return 0;
}

void nvs_limits_conn_gone(struct conn *c)
{
	hs_remove(c);
	nvs_limits_charge(c, -(long long)c->lim.charged);
	nvs_limits_client_idle(c, 0);
	if (c->lim.tenant) {
		tenant_put(c->lim.tenant);
		c->lim.tenant = NULL;
	}
}

/* ---- idle connections ---- */

/* Connections that cost a descriptor and do nothing: not yet HELLO (the
 * handshake deadline ends those anyway), a tenant status request, or a
 * client with no GPU attached, a second after it was accepted (time
 * enough for a real client's HELLO and first ATTACH_GPU). A client with a
 * GPU is never idle here, however quiet: a notebook between cells is what
 * nvshare is for. */
#define IDLE_MIN_AGE_NS 1000000000ull

static int conn_idle(const struct conn *c, uint64_t now)
{
	/* (now may be a little older than a connection accepted this turn) */
	if (c->doomed || c->role != CONN_ROLE_CLIENT || c->lim.accepted_ns + IDLE_MIN_AGE_NS > now)
		return 0;
	return c->kind != CONN_CLIENT || !c->client || c->client->ngpus == 0;
}

static void cut(struct conn *c, const char *code, const char *why, unsigned n)
{
	conn_reason(c, code);
	conn_doom(c, "%s (%u)", why, n);
	conn_release_buffers(c);
}

void nvs_limits_client_idle(struct conn *c, int idle)
{
	struct tenant_count *t = c->lim.tenant;
	if (!t || c->lim.idle_counted == idle)
		return;
	c->lim.idle_counted = idle;
	if (!idle) {
		t->idle--;
		return;
	}
	t->idle++;
	unsigned cap = nvs_limits_cfg.max_idle_per_tenant;
	if (!cap || t->idle <= cap)
		return;
	/* Over the cap: the tenant's oldest idle client goes (the one just
	 * registered is the newest: it stays). */
	struct conn *old = NULL;
	for (struct conn *o = conn_list(); o; o = o->next)
		if (o->lim.tenant == t && o->lim.idle_counted && !o->doomed &&
		    (!old || o->lim.accepted_ns < old->lim.accepted_ns))
			old = o;
	if (!old)
		return;
	nvs_limits_stats.idle_cuts++;
	static char site;
	unsigned quiet;
	if (nvs_plog_allow(&site, "idle-limit", &old->peer, &quiet))
		nvs_log_n(NVS_LOG_WARN, quiet,
			  "tenant %s has %u registered clients with no GPU, over "
			  "NVSHARE_MAX_IDLE_CLIENTS_PER_TENANT=%u: closing its oldest, conn %u "
			  "(pid %d)",
			  t->key, t->idle, cap, old->id, (int)old->peer.pid);
	nvs_limits_client_idle(old, 0);
	cut(old, "idle-limit", "over the tenant's idle clients", cap);
}

int nvs_limits_evict_idle(uint64_t now)
{
	/* The idle connection of the tenant holding the most connections,
	 * its oldest: whoever fills the descriptor table pays for it. */
	struct conn *victim = NULL;
	unsigned victim_n = 0;
	for (struct conn *c = conn_list(); c; c = c->next) {
		if (!conn_idle(c, now))
			continue;
		const struct tenant_count *t = c->lim.tenant;
		unsigned n = t ? t->n : 0;
		if (!victim || n > victim_n ||
		    (n == victim_n && c->lim.accepted_ns < victim->lim.accepted_ns)) {
			victim = c;
			victim_n = n;
		}
	}
	if (!victim)
		return 0;
	nvs_limits_stats.fd_evictions++;
	static char site;
	unsigned quiet;
	if (nvs_plog_allow(&site, "fd-pressure", &victim->peer, &quiet)) {
		char key[128];
		nvs_tenant_key(&victim->peer, key, sizeof key);
		nvs_log_n(NVS_LOG_WARN, quiet,
			  "out of file descriptors (%u connections): closing an idle connection "
			  "of tenant %s, which holds %u, so that new clients get in",
			  conn_count(), key, victim_n);
	}
	nvs_limits_client_idle(victim, 0);
	cut(victim, "fd-pressure", "idle, closed for descriptors; connections", conn_count());
	return 1;
}

/* ---- buffer budget ---- */

void nvs_limits_charge(struct conn *c, long long delta)
{
	if (c->role != CONN_ROLE_CLIENT || !delta)
		return;
	c->lim.charged = (size_t)((long long)c->lim.charged + delta);
	nvs_limits_stats.buffered = (uint64_t)((long long)nvs_limits_stats.buffered + delta);
	if (nvs_limits_stats.buffered > nvs_limits_stats.buffered_max)
		nvs_limits_stats.buffered_max = nvs_limits_stats.buffered;
}

void nvs_limits_enforce_budget(void)
{
	/* Doomed connections still hold their buffers until reaped: count
	 * only the live ones, and cut the largest first. Each pass is one
	 * scan; the number of passes is the number of connections cut. */
	while (nvs_limits_stats.buffered > nvs_limits_cfg.buffer_budget) {
		uint64_t live = 0;
		struct conn *big = NULL;
		for (struct conn *c = conn_list(); c; c = c->next) {
			if (c->doomed || c->role != CONN_ROLE_CLIENT)
				continue;
			live += c->lim.charged;
			if (!big || c->lim.charged > big->lim.charged)
				big = c;
		}
		if (live <= nvs_limits_cfg.buffer_budget || !big || !big->lim.charged)
			return;
		nvs_limits_stats.budget_cuts++;
		static char site;
		unsigned quiet;
		if (nvs_plog_allow(&site, "over-budget", &big->peer, &quiet))
			nvs_log_n(
			    NVS_LOG_WARN, quiet,
			    "buffered input and output of all connections is %llu bytes, over "
			    "the budget of %llu (NVSHARE_CONN_BUFFER_BUDGET): closing the "
			    "largest, conn %u (pid %d, uid %d, %zu bytes)",
			    (unsigned long long)live,
			    (unsigned long long)nvs_limits_cfg.buffer_budget, big->id,
			    (int)big->peer.pid, (int)big->peer.uid, big->lim.charged);
		conn_reason(big, "buffer-budget");
		conn_doom(big, "over the connection buffer budget (%zu bytes buffered)",
			  big->lim.charged);
		conn_release_buffers(big);
	}
}

/* ---- handshake deadline, periodic work ---- */

static uint64_t next_plog_tick_ns;
#define HS_BATCH 64u

static void limits_tick(uint64_t now)
{
	uint64_t dl = (uint64_t)nvs_limits_cfg.handshake_ms * 1000000ull;
	/* At most HS_BATCH closes per loop turn: a thousand connections that
	 * expire together are closed over a few turns, with the clients'
	 * events served in between (the next deadline is then "now"). */
	unsigned closed = 0;
	while (hs_head && dl && closed < HS_BATCH) {
		struct conn *c = hs_head;
		if (c->kind == CONN_CLIENT || c->doomed) {
			hs_remove(c);
			continue;
		}
		if (now - c->lim.accepted_ns < dl)
			break;
		hs_remove(c);
		nvs_limits_stats.handshake_timeouts++;
		closed++;
		conn_reason(c, "handshake-timeout");
		conn_doom(c, "no HELLO within %u ms", nvs_limits_cfg.handshake_ms);
		conn_release_buffers(c);
	}
	if (now >= next_plog_tick_ns) {
		nvs_plog_tick(now);
		next_plog_tick_ns = now + 1000000000ull;
	}
}

static uint64_t limits_next_deadline(uint64_t now)
{
	uint64_t d = next_plog_tick_ns;
	/* A head that already said HELLO is dropped at the next tick: wake
	 * for it no sooner than its own deadline would. */
	if (hs_head && nvs_limits_cfg.handshake_ms) {
		uint64_t h =
		    hs_head->lim.accepted_ns + (uint64_t)nvs_limits_cfg.handshake_ms * 1000000ull;
		if (h < d)
			d = h;
	}
	return d;
}

void nvs_limits_start(void)
{
	nvs_loop_timer(NVS_LOOP_DECIDE, limits_tick, limits_next_deadline);
}

/* ---- descriptor reserve ---- */

/* An admin accept needs one descriptor for the socket and two while its
 * peer is resolved (pidfd, cgroup file); one more for slack. */
#define NRESERVE NVS_FD_RESERVE
static int reserve[NRESERVE] = {-1, -1, -1, -1};

int nvs_fd_reserve_refill(void)
{
	int full = 1;
	for (int i = 0; i < NRESERVE; i++) {
		if (reserve[i] < 0)
			reserve[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (reserve[i] < 0)
			full = 0;
	}
	return full;
}

int nvs_fd_reserve_open(void)
{
	return nvs_fd_reserve_refill() ? 0 : -1;
}

void nvs_fd_reserve_release(int n)
{
	for (int i = 0; i < NRESERVE && i < n; i++) {
		if (reserve[i] >= 0)
			close(reserve[i]);
		reserve[i] = -1;
	}
}

void nvs_fd_reserve_close(void)
{
	nvs_fd_reserve_release(NRESERVE);
}
