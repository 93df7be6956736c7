/*
 * Prometheus exporter: settings, the snapshot the loop publishes, the HTTP
 * server (libmicrohttpd, one internal polling thread) and the NVML queries
 * made on that thread. Rendering is in metrics_render.c.
 *
 * Threads: nvs_metrics_{start,loop,next_deadline,stop} run on the loop
 * thread, which alone reads the scheduler state (S). The HTTP thread sees
 * only published snapshots. `mu` guards `cur` and the snapshots' refs and is
 * held for a pointer swap or a reference count change, never longer.
 */
#include "clock.h"
#include "core/coschedule.h"
#include "metrics.h"

#include "events.h"
#include "peer_limits.h"
#include "log.h"
#include "loop.h"
#include "metrics_snap.h"
#include "nvml_api.h"
#include "parse.h"
#include "plog.h"
#include "podsock.h"
#include "core/policy.h"
#include "core/quota.h"
#include "gpus.h"
#include "health.h"
#include "http_front.h"
#include "core/state.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Pod identity (pod_identity.c): "" (not in a Pod, or not yet known to the
 * watch) omits the label. */
#define CLIENT_POD(cl) ((cl)->pod_name)
#define CLIENT_NAMESPACE(cl) ((cl)->pod_namespace)
/* Compute-quota throttling (quota.c): time kept from the lock. */
#define CG_THROTTLED_NS(cg) nvs_quota_throttled_ns((cg), nvs_now_ns())

/* Rows of settings.def: their defaults are the table's. */
struct nvs_metrics_config nvs_metrics_cfg;

static struct MHD_Daemon *daemon_;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct msnap *cur;	 /* latest published, NULL none */
static uint64_t last_publish_ns; /* loop thread only */
static uint64_t publish_seq;
static int pending;    /* state may have changed since the last publish */
static int any_holder; /* in the last snapshot */
static double start_time_s;

/* Accepts an IPv4 or IPv6 literal, the latter optionally in brackets. */
static int parse_addr(const char *s, unsigned port, struct sockaddr_storage *ss)
{
	char tmp[64];
	size_t n = strlen(s);
	if (n >= 2 && s[0] == '[' && s[n - 1] == ']' && n - 2 < sizeof tmp) {
		memcpy(tmp, s + 1, n - 2);
		tmp[n - 2] = '\0';
		s = tmp;
	}
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, s, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		return AF_INET;
	}
	if (inet_pton(AF_INET6, s, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		return AF_INET6;
	}
	return -1;
}

/* ---- snapshots (loop thread) ---- */

static struct msnap *snap_build(uint64_t now)
{
	unsigned nentries = 0;
	for (const struct client *cl = S.clients; cl; cl = cl->next)
		nentries += cl->ngpus;
	unsigned nclients = 0;
	for (struct client *cl = S.clients; cl; cl = cl->next)
		nclients++;
	/* Tenants: at most one per entry (only needed without process labels). */
	unsigned ntroom = nvs_metrics_cfg.process_labels ? 0 : nentries;
	size_t sz = sizeof(struct msnap) + S.ngpus * sizeof(struct msnap_gpu) +
		    nclients * sizeof(struct msnap_client) + nentries * sizeof(struct msnap_entry) +
		    ntroom * sizeof(struct msnap_tenant);
	struct msnap *s = malloc(sz);
	if (!s)
		return NULL;
	s->refs = 0;
	s->taken_ns = now;
	s->start_time_s = start_time_s;
	s->seq = ++publish_seq;
	s->nclients = nclients;
	s->conns_accepted = S.conns_accepted;
	s->conns_closed_bad = S.conns_closed_bad;
	s->conns_closed_slow = S.conns_closed_slow;
	s->refused_tenant = nvs_limits_stats.refused_tenant;
	s->handshake_timeouts = nvs_limits_stats.handshake_timeouts;
	s->budget_cuts = nvs_limits_stats.budget_cuts;
	s->buffered = nvs_limits_stats.buffered;
	s->log_suppressed = nvs_plog_suppressed_total;
	s->log_dropped = nvs_log_dropped();
	struct nvs_health_stalls hs;
	nvs_health_stalls(&hs);
	s->loop_stalls = hs.count;
	s->loop_stalled_ns = hs.stalled_ns;
	s->refused_rate = nvs_limits_stats.refused_rate;
	s->idle_cuts = nvs_limits_stats.idle_cuts;
	s->fd_evictions = nvs_limits_stats.fd_evictions;
	s->pod_sockets = nvs_podsock_count();
	memcpy(s->ungated_runs, S.ungated_runs, sizeof s->ungated_runs);
	memcpy(s->ungated_ns, S.ungated_ns, sizeof s->ungated_ns);
	s->ngpus = S.ngpus;
	s->nentries = nentries;
	s->gpus = (struct msnap_gpu *)(s + 1);
	s->clients = (struct msnap_client *)(s->gpus + S.ngpus);
	s->entries = (struct msnap_entry *)(s->clients + nclients);
	s->tenants = (struct msnap_tenant *)(s->entries + nentries);
	s->ntenants = 0;
	s->process_labels = nvs_metrics_cfg.process_labels;

	int holder = 0;
	for (unsigned i = 0; i < S.ngpus; i++) {
		const struct gpu *g = &S.gpus[i];
		struct msnap_gpu *o = &s->gpus[i];
		o->index = g->index;
		memcpy(o->uuid, g->uuid, sizeof o->uuid);
		memcpy(o->name, g->name, sizeof o->name);
		o->total_mem = g->total_mem;
		o->from_nvml = g->from_nvml;
		o->mode = g->mode;
		o->serialized = g->serialized;
		o->tq_ns = g->tq_ms * 1000000ull;
		o->capacity = nvs_gpu_capacity(g);
		o->qlen = g->qlen;
		o->nattached = g->nattached;
		o->running = g->serialized ? nvs_cosched_running(g) : g->nattached;
		o->preempt[0] = g->co.preempt_interactive;
		o->preempt[1] = g->co.preempt_floor;
		o->preempt[2] = g->co.preempt_tq;
		o->preempt[3] = g->co.preempt_fit;
		o->allocated_sum = g->allocated_sum;
		o->st = g->st;
		o->held_ns = g->st.held_ns + (g->holder ? now - g->holder->held_since_ns : 0);
		o->handoffs = g->handoffs;
		o->mode_switches = g->mode_switches;
		o->switches_deferred = g->switches_deferred;
		o->claims_clamped = g->claims_clamped;
		o->reports_coalesced = g->reports_coalesced;
		o->revoke_penalties = g->revoke_penalties;
		o->swap_bytes_in = g->swap_bytes_in;
		o->swap_bytes_out = g->swap_bytes_out;
		o->swap_ns_in = g->swap_ns_in;
		o->swap_ns_out = g->swap_ns_out;
		o->swap_fast = o->swap_prefetch = o->swap_pinned = o->swap_staging = 0;
		for (const struct client_gpu *cg = g->ahead; cg; cg = cg->anext) {
			o->swap_fast += cg->paths.fast;
			o->swap_prefetch += cg->paths.prefetch;
			o->swap_pinned += cg->paths.pinned;
			o->swap_staging += cg->paths.staging;
		}
		o->tq_effective_ns = nvs_policy_tq_ns(g);
		o->unmanaged = g->unmanaged;
		if (g->holder)
			holder = 1;
	}

	unsigned ci = 0, ei = 0;
	for (struct client *cl = S.clients; cl; cl = cl->next, ci++) {
		struct msnap_client *c = &s->clients[ci];
		c->id = cl->id;
		c->host_pid = (int32_t)cl->pid;
		c->uid = (uint32_t)cl->uid;
		c->pid = cl->reported_pid;
		snprintf(c->name, sizeof c->name, "%s", cl->name);
		snprintf(c->pod, sizeof c->pod, "%s", CLIENT_POD(cl));
		snprintf(c->pod_namespace, sizeof c->pod_namespace, "%s", CLIENT_NAMESPACE(cl));
		snprintf(c->pod_uid, sizeof c->pod_uid, "%s", cl->pod_uid);
		c->first_entry = ei;
		c->nentries = cl->ngpus;
		for (unsigned k = 0; k < cl->ngpus; k++, ei++) {
			const struct client_gpu *cg = cl->gpus[k];
			struct msnap_entry *e = &s->entries[ei];
			e->client = ci;
			e->gpu = cg->gpu->index;
			e->allocated = cg->allocated;
			e->state = (unsigned)cg->state;
			e->core_limit = cg->core_limit;
			e->mem_limit = cg->mem_limit;
			e->c.held_ns = nvs_policy_held_ns(cg, now);
			e->c.throttled_ns = CG_THROTTLED_NS(cg);
			e->c.grants = cg->st.grants;
			e->c.revocations = cg->st.revocations;
			e->c.waits = cg->st.waits;
			e->c.wait_ns = cg->st.wait_ns;
			e->c.swap_bytes_in = cg->swap_bytes_in;
			e->c.swap_bytes_out = cg->swap_bytes_out;
			e->c.swap_ns_in = cg->swap_ns_in;
			e->c.swap_ns_out = cg->swap_ns_out;
		}
	}
	any_holder = holder;
	if (!s->process_labels)
		nvs_metrics_tenants(s);
	return s;
}

static void snap_publish(uint64_t now)
{
	struct msnap *s = snap_build(now);
	if (!s)
		return; /* keep the old one; retried on the next iteration */
	pthread_mutex_lock(&mu);
	struct msnap *old = cur;
	cur = s;
	int free_old = old && old->refs == 0;
	pthread_mutex_unlock(&mu);
	if (free_old)
		free(old);
	last_publish_ns = now;
	pending = 0;
}

/* The loop's timer (NVS_LOOP_PUBLISH: after every other tick of the turn). */
static void metrics_tick(uint64_t now)
{
	if (!daemon_)
		return;
	/* Every iteration handled an event or a timer: assume a change. */
	pending = 1;
	if (now - last_publish_ns >= NVS_METRICS_PUBLISH_MS * 1000000ull)
		snap_publish(now);
}

static uint64_t metrics_next_deadline(uint64_t now)
{
	if (!daemon_)
		return 0;
	if (pending)
		return last_publish_ns + NVS_METRICS_PUBLISH_MS * 1000000ull;
	if (any_holder)
		return last_publish_ns + NVS_METRICS_REFRESH_MS * 1000000ull;
	(void)now;
	return 0;
}

/* HTTP thread: takes a reference to the latest snapshot. */
static struct msnap *snap_get(void)
{
	pthread_mutex_lock(&mu);
	struct msnap *s = cur;
	if (s)
		s->refs++;
	pthread_mutex_unlock(&mu);
	return s;
}

static void snap_put(struct msnap *s)
{
	pthread_mutex_lock(&mu);
	int dofree = --s->refs == 0 && s != cur;
	pthread_mutex_unlock(&mu);
	if (dofree)
		free(s);
}

/* ---- NVML (HTTP thread only) ---- */

static struct {
	int tried, ok;
	nvs_pfn_nvmlDeviceGetHandleByUUID by_uuid;
	nvs_pfn_nvmlDeviceGetUtilizationRates util;
	nvs_pfn_nvmlDeviceGetMemoryInfo mem;
	char uuid[NVS_MAX_GPUS][NVS_UUID_LEN]; /* handle cache key */
	nvmlDevice_t dev[NVS_MAX_GPUS];
} nv;

static int nvml_open(void)
{
	if (nv.tried)
		return nv.ok;
	nv.tried = 1;
	/* The loop thread dlopen()ed and initialized NVML at start; this
	 * takes its own references (both are counted). */
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		NVS_WARN("metrics: NVML not available (%s): no utilization or memory use",
			 dlerror());
		return 0;
	}
	nvs_pfn_nvmlInit_v2 init = (nvs_pfn_nvmlInit_v2)dlsym(h, "nvmlInit_v2");
	nv.by_uuid = (nvs_pfn_nvmlDeviceGetHandleByUUID)dlsym(h, "nvmlDeviceGetHandleByUUID");
	nv.util = (nvs_pfn_nvmlDeviceGetUtilizationRates)dlsym(h, "nvmlDeviceGetUtilizationRates");
	nv.mem = (nvs_pfn_nvmlDeviceGetMemoryInfo)dlsym(h, "nvmlDeviceGetMemoryInfo");
	if (!init || !nv.by_uuid || init() != NVML_SUCCESS) {
		NVS_WARN("metrics: NVML lacks nvmlInit_v2/nvmlDeviceGetHandleByUUID or does not "
			 "initialize: no utilization or memory use");
		return 0;
	}
	nv.ok = 1;
	return 1;
}

static void nvml_sample(const struct msnap *s, struct msample *out)
{
	for (unsigned i = 0; i < s->ngpus; i++) {
		const struct msnap_gpu *g = &s->gpus[i];
		struct msample *o = &out[i];
		memset(o, 0, sizeof *o);
		if (!g->from_nvml || (unsigned)g->index >= NVS_MAX_GPUS)
			continue;
		unsigned k = (unsigned)g->index;
		if (strcmp(nv.uuid[k], g->uuid)) {
			if (nv.by_uuid(g->uuid, &nv.dev[k]) != NVML_SUCCESS)
				continue;
			memcpy(nv.uuid[k], g->uuid, NVS_UUID_LEN);
		}
		nvmlUtilization_t u;
		if (nv.util && nv.util(nv.dev[k], &u) == NVML_SUCCESS) {
			o->have_util = 1;
			o->util_gpu = u.gpu > 100 ? 100 : u.gpu;
		}
		nvmlMemory_t m;
		if (nv.mem && nv.mem(nv.dev[k], &m) == NVML_SUCCESS) {
			o->have_mem = 1;
			o->mem_used = m.used;
			o->mem_total = m.total;
		}
	}
}

/* ---- HTTP (HTTP thread) ---- */

#define CT_METRICS "text/plain; version=0.0.4; charset=utf-8"

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned code, const char *text,
				  enum MHD_ResponseMemoryMode mm)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, mm);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_static(struct MHD_Connection *conn, unsigned code, const char *text)
{
	return reply_text(conn, code, text, MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result reply_metrics(struct MHD_Connection *conn)
{
	struct msnap *s = snap_get();
	if (!s)
		return reply_static(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "no snapshot yet\n");
	struct msample samples[NVS_MAX_GPUS];
	int sampled = 0;
	int want_nvml = 0;
	for (unsigned i = 0; i < s->ngpus; i++)
		want_nvml |= s->gpus[i].from_nvml;
	if (want_nvml && nvml_open()) {
		nvml_sample(s, samples);
		sampled = 1;
	}
	struct mbuf b = {NULL, 0, 0, 0};
	nvs_metrics_render(&b, s, sampled ? samples : NULL, nvs_now_ns());
	snap_put(s);
	if (b.failed || !b.p) {
		free(b.p);
		return reply_static(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(b.p);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CT_METRICS);
	enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	(void)cls;
	(void)version;
	(void)upload;
	(void)req_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_static(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (*upload_size) { /* a GET with a body: ignore it */
		*upload_size = 0;
		return MHD_YES;
	}
	if (!strcmp(url, "/metrics"))
		return reply_metrics(conn);
	if (!strcmp(url, "/healthz")) {
		/* Only on a connection libmicrohttpd already serves (a second
		 * request on it): new ones are answered by http_front.c. */
		char b[160];
		unsigned code = nvs_http_healthz(b, sizeof b);
		return reply_text(conn, code, b, MHD_RESPMEM_MUST_COPY);
	}
	if (!strcmp(url, "/"))
		return reply_static(conn, MHD_HTTP_OK,
				    "nvshare-scheduler metrics exporter: /metrics, /healthz\n");
	return reply_static(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n");
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char line[512];
	vsnprintf(line, sizeof line, fmt, ap);
	size_t n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	NVS_WARN("metrics: %s", line);
}

/* ---- start / stop (loop thread) ---- */

/* metrics_listening / metrics_failed: {"addr":..., "port":N[, "reason":...]}
 * (port: the bound one, so that --metrics-port 0 can be found). */
static void metrics_event(const char *name, const char *reason, unsigned port)
{
	char a[2 * sizeof nvs_metrics_cfg.addr + 8];
	nvs_json_str(nvs_metrics_cfg.addr, a, sizeof a);
	if (reason)
		nvs_event(name, "\"addr\":%s,\"port\":%u,\"reason\":\"%s\"", a, port, reason);
	else
		nvs_event(name, "\"addr\":%s,\"port\":%u", a, port);
}

int nvs_metrics_start(void)
{
	const struct nvs_metrics_config *mc = &nvs_metrics_cfg;
	if (!mc->enable) {
		NVS_DEBUG(
		    "metrics exporter off (NVSHARE_METRICS_ENABLE=1 or --metrics enables it)");
		return 0;
	}
	struct sockaddr_storage ss;
	int af = parse_addr(mc->addr, mc->port, &ss);
	if (af < 0) {
		NVS_ERROR("metrics: bad address \"%s\": exporter NOT started, scheduling goes on",
			  mc->addr);
		metrics_event("metrics_failed", "bad-address", mc->port);
		return -1;
	}
	{
		struct timespec rt;
		clock_gettime(CLOCK_REALTIME, &rt);
		uint64_t up = nvs_now_ns() - S.start_ns;
		start_time_s = (double)rt.tv_sec + (double)rt.tv_nsec / 1e9 - (double)up / 1e9;
	}
	/* A snapshot exists before the first request can arrive. */
	uint64_t now = nvs_now_ns();
	snap_publish(now);

	/* libmicrohttpd gets only connections whose request head has come
	 * (http_front.h), and never /healthz. */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
			 MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
	if (af == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* The HTTP thread must never take SIGTERM/SIGINT (the loop reads them
	 * from a signalfd): it starts with every signal blocked. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	daemon_ =
	    MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER,
			     mhd_log, NULL, MHD_OPTION_CONNECTION_LIMIT, (unsigned)32,
			     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	unsigned port = mc->port;
	socklen_t sl = af == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (daemon_ && nvs_http_front_start((struct sockaddr *)&ss, sl, daemon_, &port)) {
		int e = errno;
		MHD_stop_daemon(daemon_);
		daemon_ = NULL;
		errno = e;
	}
	if (!daemon_) {
		NVS_ERROR("metrics: cannot listen on %s port %u (%s): exporter NOT started, "
			  "scheduling goes on",
			  mc->addr, mc->port, strerror(errno));
		metrics_event("metrics_failed", "listen", mc->port);
		pthread_mutex_lock(&mu);
		struct msnap *s = cur;
		cur = NULL;
		pthread_mutex_unlock(&mu);
		free(s);
		return -1;
	}
	NVS_INFO("metrics: serving http://%s%s%s:%u/metrics", af == AF_INET6 ? "[" : "", mc->addr,
		 af == AF_INET6 ? "]" : "", port);
	metrics_event("metrics_listening", NULL, port);
	nvs_loop_timer(NVS_LOOP_PUBLISH, metrics_tick, metrics_next_deadline);
	return 0;
}

void nvs_metrics_stop(void)
{
	if (!daemon_)
		return;
	nvs_http_front_stop();
	MHD_stop_daemon(daemon_); /* joins the HTTP thread */
	daemon_ = NULL;
	pthread_mutex_lock(&mu);
	struct msnap *s = cur;
	cur = NULL;
	pthread_mutex_unlock(&mu);
	free(s);
}
