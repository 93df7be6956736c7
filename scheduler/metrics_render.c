/*
 * Snapshot -> Prometheus text exposition format 0.0.4. Runs on the HTTP
 * thread; touches nothing but the snapshot and the NVML samples it is given.
 *
 * Conventions: base units (seconds, bytes, ratios 0..1), counters end in
 * _total, every family is written in one block (HELP, TYPE, samples). A
 * GPU's series carry gpu (index) and uuid. Client series carry gpu and the
 * tenant (pod + namespace, else pod_uid, else uid: metrics_tenant.c), or,
 * with NVSHARE_METRICS_PROCESS_LABELS, one series per process with pid (its
 * own namespace), host_pid, uid, and pod / namespace when known.
 */
#include "metrics_snap.h"
#include "nvs_version.h" /* generated: scripts/gen-version.sh */

#include "protocol.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void mbuf_reserve(struct mbuf *b, size_t more)
{
	if (b->failed || b->len + more + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 16384;
	while (cap < b->len + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->failed = 1;
		return;
	}
	b->p = p;
	b->cap = cap;
}

void mbuf_printf(struct mbuf *b, const char *fmt, ...)
{
	if (b->failed)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = 1;
		return;
	}
	if (!b->p || (size_t)n >= b->cap - b->len) {
		mbuf_reserve(b, (size_t)n);
		if (b->failed)
			return;
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

static void mbuf_putc(struct mbuf *b, char c)
{
	mbuf_reserve(b, 1);
	if (b->failed)
		return;
	b->p[b->len++] = c;
	b->p[b->len] = '\0';
}

void mbuf_label_value(struct mbuf *b, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '\\':
			mbuf_putc(b, '\\');
			mbuf_putc(b, '\\');
			break;
		case '"':
			mbuf_putc(b, '\\');
			mbuf_putc(b, '"');
			break;
		case '\n':
			mbuf_putc(b, '\\');
			mbuf_putc(b, 'n');
			break;
		default:
			mbuf_putc(b, *s);
		}
	}
}

static void family(struct mbuf *b, const char *name, const char *type, const char *help)
{
	mbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A family of one unlabelled sample. */
static void single(struct mbuf *b, const char *name, const char *type, const char *help,
		   unsigned long long v)
{
	family(b, name, type, help);
	mbuf_printf(b, "%s %llu\n", name, v);
}

static void ns_seconds(struct mbuf *b, uint64_t ns)
{
	mbuf_printf(b, "%llu.%09llu", (unsigned long long)(ns / 1000000000ull),
		    (unsigned long long)(ns % 1000000000ull));
}

/* A family of one unlabelled sample in seconds, from ns. */
static void single_seconds(struct mbuf *b, const char *name, const char *type, const char *help,
			   uint64_t ns)
{
	family(b, name, type, help);
	mbuf_printf(b, "%s ", name);
	ns_seconds(b, ns);
	mbuf_putc(b, '\n');
}

/* ---- label sets ---- */

static void gpu_labels(struct mbuf *b, const struct msnap_gpu *g)
{
	mbuf_printf(b, "gpu=\"%d\",uuid=\"", g->index);
	mbuf_label_value(b, g->uuid);
	mbuf_putc(b, '"');
}

/* Identity of a client, without gpu (for nvshare_client_info). */
static void client_id_labels(struct mbuf *b, const struct msnap_client *c)
{
	mbuf_printf(b, "pid=\"%u\",host_pid=\"%d\",uid=\"%u\"", c->pid, (int)c->host_pid, c->uid);
	if (c->pod[0]) {
		mbuf_printf(b, ",pod=\"");
		mbuf_label_value(b, c->pod);
		mbuf_putc(b, '"');
	}
	if (c->pod_namespace[0]) {
		mbuf_printf(b, ",namespace=\"");
		mbuf_label_value(b, c->pod_namespace);
		mbuf_putc(b, '"');
	}
}

static void entry_labels(struct mbuf *b, const struct msnap *s, const struct msnap_entry *e)
{
	mbuf_printf(b, "gpu=\"%d\",", e->gpu);
	client_id_labels(b, &s->clients[e->client]);
}

/* A tenant: verified Pod, else its UID, else the uid; never a pid. */
static void tenant_labels(struct mbuf *b, const struct msnap_tenant *t)
{
	mbuf_printf(b, "gpu=\"%d\"", t->gpu);
	if (t->pod[0]) {
		mbuf_printf(b, ",pod=\"");
		mbuf_label_value(b, t->pod);
		mbuf_printf(b, "\",namespace=\"");
		mbuf_label_value(b, t->pod_namespace);
		mbuf_putc(b, '"');
	} else if (t->pod_uid[0]) {
		mbuf_printf(b, ",pod_uid=\"");
		mbuf_label_value(b, t->pod_uid);
		mbuf_putc(b, '"');
	} else {
		mbuf_printf(b, ",uid=\"%u\"", t->uid);
	}
}

/* ---- client series: one per process, or one per tenant and GPU ---- */

static unsigned nseries(const struct msnap *s)
{
	return s->process_labels ? s->nentries : s->ntenants;
}

static void series_labels(struct mbuf *b, const struct msnap *s, unsigned i)
{
	if (s->process_labels)
		entry_labels(b, s, &s->entries[i]);
	else
		tenant_labels(b, &s->tenants[i]);
}

static const struct mcounters *series_counters(const struct msnap *s, unsigned i)
{
	return s->process_labels ? &s->entries[i].c : &s->tenants[i].c;
}

static uint64_t series_mem_limit(const struct msnap *s, unsigned i)
{
	return s->process_labels ? s->entries[i].mem_limit : s->tenants[i].mem_limit;
}

static uint32_t series_core_limit(const struct msnap *s, unsigned i)
{
	return s->process_labels ? s->entries[i].core_limit : s->tenants[i].core_limit;
}

static uint64_t series_allocated(const struct msnap *s, unsigned i)
{
	return s->process_labels ? s->entries[i].allocated : s->tenants[i].allocated;
}

/* Clients of the series in state k (one-hot for a process). */
static uint64_t series_state(const struct msnap *s, unsigned i, unsigned k)
{
	if (s->process_labels)
		return s->entries[i].state == k;
	return s->tenants[i].state[k];
}

/* ---- families over GPUs and over client entries ---- */

enum vkind {
	V_INT = 0,     /* uint64_t as is */
	V_SECONDS = 1, /* uint64_t nanoseconds */
};

static void v_put(struct mbuf *b, enum vkind k, uint64_t v)
{
	if (k == V_SECONDS)
		ns_seconds(b, v);
	else
		mbuf_printf(b, "%llu", (unsigned long long)v);
}

#define U64_AT(base, off) (*(const uint64_t *)((const char *)(base) + (off)))

static void gpu_family(struct mbuf *b, const struct msnap *s, const char *name, const char *type,
		       const char *help, size_t off, enum vkind k)
{
	family(b, name, type, help);
	for (unsigned i = 0; i < s->ngpus; i++) {
		const struct msnap_gpu *g = &s->gpus[i];
		mbuf_printf(b, "%s{", name);
		gpu_labels(b, g);
		mbuf_printf(b, "} ");
		v_put(b, k, U64_AT(g, off));
		mbuf_putc(b, '\n');
	}
}

static void counter_family(struct mbuf *b, const struct msnap *s, const char *name,
			   const char *help, size_t off, enum vkind k)
{
	family(b, name, "counter", help);
	for (unsigned i = 0; i < nseries(s); i++) {
		mbuf_printf(b, "%s{", name);
		series_labels(b, s, i);
		mbuf_printf(b, "} ");
		v_put(b, k, U64_AT(series_counters(s, i), off));
		mbuf_putc(b, '\n');
	}
}

#define GOFF(field) offsetof(struct msnap_gpu, field)
#define COFF(field) offsetof(struct mcounters, field)

static const char *const mode_names[] = {"off", "on", "auto"};
static const char *const state_names[] = {"idle", "waiting", "holding"};

static void render_gpus(struct mbuf *b, const struct msnap *s, const struct msample *samples)
{
	family(b, "nvshare_gpu_info", "gauge",
	       "GPU known to the scheduler (value 1), with its name.");
	for (unsigned i = 0; i < s->ngpus; i++) {
		const struct msnap_gpu *g = &s->gpus[i];
		mbuf_printf(b, "nvshare_gpu_info{");
		gpu_labels(b, g);
		mbuf_printf(b, ",name=\"");
		mbuf_label_value(b, g->name);
		mbuf_printf(b, "\",source=\"%s\"} 1\n", g->from_nvml ? "nvml" : "client");
	}

	if (samples) {
		family(b, "nvshare_gpu_utilization_ratio", "gauge",
		       "Fraction of the last NVML sample period in which a kernel ran (0-1).");
		for (unsigned i = 0; i < s->ngpus; i++) {
			if (!samples[i].have_util)
				continue;
			mbuf_printf(b, "nvshare_gpu_utilization_ratio{");
			gpu_labels(b, &s->gpus[i]);
			mbuf_printf(b, "} %u.%02u\n", samples[i].util_gpu / 100,
				    samples[i].util_gpu % 100);
		}
		family(b, "nvshare_gpu_memory_used_bytes", "gauge",
		       "GPU memory in use by all processes, from NVML.");
		for (unsigned i = 0; i < s->ngpus; i++) {
			if (!samples[i].have_mem)
				continue;
			mbuf_printf(b, "nvshare_gpu_memory_used_bytes{");
			gpu_labels(b, &s->gpus[i]);
			mbuf_printf(b, "} %llu\n", (unsigned long long)samples[i].mem_used);
		}
	}
	family(b, "nvshare_gpu_memory_total_bytes", "gauge",
	       "GPU memory size (NVML; for GPUs learned from clients, what they report).");
	for (unsigned i = 0; i < s->ngpus; i++) {
		const struct msnap_gpu *g = &s->gpus[i];
		uint64_t total =
		    samples && samples[i].have_mem ? samples[i].mem_total : g->total_mem;
		if (!total)
			continue;
		mbuf_printf(b, "nvshare_gpu_memory_total_bytes{");
		gpu_labels(b, g);
		mbuf_printf(b, "} %llu\n", (unsigned long long)total);
	}

	family(b, "nvshare_gpu_capacity_bytes", "gauge",
	       "Managed memory the scheduler lets clients allocate together before serializing "
	       "(mode auto). Absent when the GPU's memory is unknown.");
	for (unsigned i = 0; i < s->ngpus; i++) {
		const struct msnap_gpu *g = &s->gpus[i];
		if (g->capacity == UINT64_MAX)
			continue;
		mbuf_printf(b, "nvshare_gpu_capacity_bytes{");
		gpu_labels(b, g);
		mbuf_printf(b, "} %llu\n", (unsigned long long)g->capacity);
	}
	gpu_family(b, s, "nvshare_gpu_allocated_bytes", "gauge",
		   "Managed memory allocated by the GPU's clients together, as they report it.",
		   GOFF(allocated_sum), V_INT);

	family(b, "nvshare_gpu_mode", "gauge",
	       "Scheduling mode setting of the GPU: 1 for the current mode, 0 for the others.");
	for (unsigned i = 0; i < s->ngpus; i++) {
		for (unsigned m = 0; m < 3; m++) {
			mbuf_printf(b, "nvshare_gpu_mode{");
			gpu_labels(b, &s->gpus[i]);
			mbuf_printf(b, ",mode=\"%s\"} %d\n", mode_names[m], s->gpus[i].mode == m);
		}
	}
	family(b, "nvshare_gpu_serialized", "gauge",
	       "1 while clients must hold the GPU's lock to run (mode on, or auto when "
	       "oversubscribed), else 0.");
	for (unsigned i = 0; i < s->ngpus; i++) {
		mbuf_printf(b, "nvshare_gpu_serialized{");
		gpu_labels(b, &s->gpus[i]);
		mbuf_printf(b, "} %d\n", s->gpus[i].serialized ? 1 : 0);
	}
	gpu_family(b, s, "nvshare_unmanaged_processes", "gauge",
		   "Processes with a context on the GPU and no nvshare connection: neither gated "
		   "nor limited (NVSHARE_UNMANAGED).",
		   GOFF(unmanaged), V_INT);
	gpu_family(b, s, "nvshare_gpu_time_quantum_seconds", "gauge",
		   "Time quantum: a holder is asked to release after this long if others wait.",
		   GOFF(tq_ns), V_SECONDS);
	gpu_family(b, s, "nvshare_gpu_attached_clients", "gauge",
		   "Clients using the GPU (connected and attached).", GOFF(nattached), V_INT);
	gpu_family(b, s, "nvshare_gpu_queue_length", "gauge", "Clients waiting for the GPU's lock.",
		   GOFF(qlen), V_INT);
	gpu_family(b, s, "nvshare_scheduler_running_clients", "gauge",
		   "Clients allowed to run on the GPU now: the running set (lock holder and the "
		   "clients co-scheduled beside it) when serialized, every attached client when "
		   "not.",
		   GOFF(running), V_INT);
	family(b, "nvshare_gpu_preemptions_total", "counter",
	       "Members of the running set asked to drop by the co-scheduler, by reason "
	       "(interactive, batch_floor, tq_expired, overcommit).");
	static const char *const preason[4] = {"interactive", "batch_floor", "tq_expired",
					       "overcommit"};
	for (unsigned i = 0; i < s->ngpus; i++)
		for (unsigned r = 0; r < 4; r++) {
			mbuf_printf(b, "nvshare_gpu_preemptions_total{");
			gpu_labels(b, &s->gpus[i]);
			mbuf_printf(b, ",reason=\"%s\"} %llu\n", preason[r],
				    (unsigned long long)s->gpus[i].preempt[r]);
		}
	gpu_family(b, s, "nvshare_gpu_handoffs_total", "counter",
		   "Lock passed straight from a holder to a waiting client.", GOFF(handoffs),
		   V_INT);
	gpu_family(b, s, "nvshare_gpu_revocations_total", "counter",
		   "Locks taken back from holders that did not release within the grace period.",
		   GOFF(st.revocations), V_INT);
	gpu_family(b, s, "nvshare_gpu_lock_grants_total", "counter", "Locks granted.",
		   GOFF(st.grants), V_INT);
	gpu_family(b, s, "nvshare_gpu_lock_drop_requests_total", "counter",
		   "DROP_LOCK requests sent to holders (time quantum expiry or quota).",
		   GOFF(st.drops), V_INT);
	gpu_family(b, s, "nvshare_gpu_lock_idle_releases_total", "counter",
		   "Locks given back by idle holders without being asked.", GOFF(st.idle_releases),
		   V_INT);
	gpu_family(b, s, "nvshare_gpu_mode_switches_total", "counter",
		   "Switches between serialized and concurrent.", GOFF(mode_switches), V_INT);
	gpu_family(b, s, "nvshare_gpu_mode_switches_deferred_total", "counter",
		   "Automatic mode switches that waited for the mode-switch budget.",
		   GOFF(switches_deferred), V_INT);
	gpu_family(b, s, "nvshare_gpu_claims_clamped_total", "counter",
		   "Allocation reports counted below what the client claimed (memory limit, "
		   "capacity x oversubscription factor).",
		   GOFF(claims_clamped), V_INT);
	gpu_family(b, s, "nvshare_gpu_reports_coalesced_total", "counter",
		   "MEM_UPDATE / SWAP_STATS reports beyond a connection's rate, kept as its latest "
		   "and applied later (or replaced).",
		   GOFF(reports_coalesced), V_INT);
	gpu_family(b, s, "nvshare_gpu_revoke_penalties_total", "counter",
		   "Revoked holders made to wait one quantum before their next grant.",
		   GOFF(revoke_penalties), V_INT);
	gpu_family(b, s, "nvshare_gpu_swap_in_bytes_total", "counter",
		   "Managed memory the GPU's clients prefetched to it at hand-offs.",
		   GOFF(swap_bytes_in), V_INT);
	gpu_family(b, s, "nvshare_gpu_swap_out_bytes_total", "counter",
		   "Managed memory the GPU's clients moved to the host at hand-offs.",
		   GOFF(swap_bytes_out), V_INT);
	gpu_family(b, s, "nvshare_gpu_swap_in_seconds_total", "counter",
		   "Time the GPU's clients spent prefetching at hand-offs.", GOFF(swap_ns_in),
		   V_SECONDS);
	gpu_family(b, s, "nvshare_gpu_swap_out_seconds_total", "counter",
		   "Time the GPU's clients spent moving memory to the host at hand-offs.",
		   GOFF(swap_ns_out), V_SECONDS);
	gpu_family(b, s, "nvshare_gpu_swap_fast_bytes", "gauge",
		   "Memory of the GPU's clients that hand-offs move at link speed (converted "
		   "allocations, VMM handles), as the clients report it.",
		   GOFF(swap_fast), V_INT);
	gpu_family(b, s, "nvshare_gpu_swap_prefetch_bytes", "gauge",
		   "Memory of the GPU's clients that hand-offs move by Unified Memory prefetch "
		   "(the applications' own managed memory).",
		   GOFF(swap_prefetch), V_INT);
	gpu_family(b, s, "nvshare_gpu_swap_pinned_bytes", "gauge",
		   "Memory of the GPU's clients that never leaves the GPU (pools, arrays, device "
		   "memory, exported VMM handles).",
		   GOFF(swap_pinned), V_INT);
	gpu_family(b, s, "nvshare_gpu_swap_staging_bytes", "gauge",
		   "Pinned host memory the GPU's clients hold as swap staging.", GOFF(swap_staging),
		   V_INT);
	gpu_family(b, s, "nvshare_gpu_time_quantum_effective_seconds", "gauge",
		   "Quantum in force: the TQ, stretched to a multiple of the last swap time "
		   "while memory does not fit.",
		   GOFF(tq_effective_ns), V_SECONDS);
	gpu_family(b, s, "nvshare_gpu_lock_held_seconds_total", "counter",
		   "Time the GPU's lock was held, the current hold included.", GOFF(held_ns),
		   V_SECONDS);
	gpu_family(b, s, "nvshare_gpu_lock_drain_seconds_total", "counter",
		   "Time holders took from DROP_LOCK to release.", GOFF(st.drain_ns), V_SECONDS);

	family(b, "nvshare_lock_wait_seconds", "histogram",
	       "Time clients waited in the GPU's queue before they got the lock.");
	for (unsigned i = 0; i < s->ngpus; i++) {
		const struct msnap_gpu *g = &s->gpus[i];
		uint64_t cum = 0;
		for (unsigned k = 0; k < NVS_WAIT_BUCKETS; k++) {
			cum += g->st.wait_hist[k];
			mbuf_printf(b, "nvshare_lock_wait_seconds_bucket{");
			gpu_labels(b, g);
			if (k < NVS_WAIT_BUCKETS - 1) {
				uint64_t us = nvs_wait_bucket_le_us[k];
				/* Shortest decimal: 0.0001, 0.001, 5, 120. */
				char le[32];
				snprintf(le, sizeof le, "%llu.%06llu",
					 (unsigned long long)(us / 1000000),
					 (unsigned long long)(us % 1000000));
				char *e = le + strlen(le) - 1;
				while (*e == '0')
					*e-- = '\0';
				if (*e == '.')
					*e = '\0';
				mbuf_printf(b, ",le=\"%s\"} %llu\n", le, (unsigned long long)cum);
			} else {
				mbuf_printf(b, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
			}
		}
		mbuf_printf(b, "nvshare_lock_wait_seconds_sum{");
		gpu_labels(b, g);
		mbuf_printf(b, "} ");
		ns_seconds(b, g->st.wait_ns);
		mbuf_printf(b, "\nnvshare_lock_wait_seconds_count{");
		gpu_labels(b, g);
		mbuf_printf(b, "} %llu\n", (unsigned long long)cum);
	}
}

static void render_clients(struct mbuf *b, const struct msnap *s)
{
	if (s->process_labels) {
		family(b, "nvshare_client_info", "gauge",
		       "Connected client process (value 1), with its program name as it "
		       "claims it (NVSHARE_METRICS_PROCESS_LABELS=1).");
		for (unsigned i = 0; i < s->nclients; i++) {
			const struct msnap_client *c = &s->clients[i];
			mbuf_printf(b, "nvshare_client_info{");
			client_id_labels(b, c);
			mbuf_printf(b, ",client_id=\"%u\",name=\"", c->id);
			mbuf_label_value(b, c->name);
			mbuf_printf(b, "\"} 1\n");
		}
	}
	family(b, "nvshare_client_processes", "gauge",
	       "Client processes of the tenant attached to the GPU (1 per series with "
	       "NVSHARE_METRICS_PROCESS_LABELS=1).");
	for (unsigned i = 0; i < nseries(s); i++) {
		mbuf_printf(b, "nvshare_client_processes{");
		series_labels(b, s, i);
		mbuf_printf(b, "} %llu\n",
			    (unsigned long long)(s->process_labels ? 1 : s->tenants[i].nclients));
	}
	family(b, "nvshare_client_state", "gauge",
	       "Clients of the tenant in each lock state on the GPU (one-hot per process with "
	       "NVSHARE_METRICS_PROCESS_LABELS=1).");
	for (unsigned i = 0; i < nseries(s); i++) {
		for (unsigned k = 0; k < 3; k++) {
			mbuf_printf(b, "nvshare_client_state{");
			series_labels(b, s, i);
			mbuf_printf(b, ",state=\"%s\"} %llu\n", state_names[k],
				    (unsigned long long)series_state(s, i, k));
		}
	}
	family(b, "nvshare_client_managed_allocated_bytes", "gauge",
	       "Managed memory the tenant's clients have allocated on the GPU, as they report "
	       "it.");
	for (unsigned i = 0; i < nseries(s); i++) {
		mbuf_printf(b, "nvshare_client_managed_allocated_bytes{");
		series_labels(b, s, i);
		mbuf_printf(b, "} %llu\n", (unsigned long long)series_allocated(s, i));
	}
	family(b, "nvshare_client_memory_limit_bytes", "gauge",
	       "Memory limit on the GPU (per process; the highest of the tenant's processes). "
	       "Absent when one has none.");
	for (unsigned i = 0; i < nseries(s); i++) {
		if (series_mem_limit(s, i) == NVS_NO_LIMIT)
			continue;
		mbuf_printf(b, "nvshare_client_memory_limit_bytes{");
		series_labels(b, s, i);
		mbuf_printf(b, "} %llu\n", (unsigned long long)series_mem_limit(s, i));
	}
	family(b, "nvshare_client_core_limit_ratio", "gauge",
	       "Compute limit on the GPU as a fraction of its time (per process; the highest of "
	       "the tenant's processes; 1: none).");
	for (unsigned i = 0; i < nseries(s); i++) {
		uint32_t c = series_core_limit(s, i);
		mbuf_printf(b, "nvshare_client_core_limit_ratio{");
		series_labels(b, s, i);
		mbuf_printf(b, "} %u.%02u\n", c / 100, c % 100);
	}
	counter_family(b, s, "nvshare_client_lock_held_seconds_total",
		       "Time the tenant's clients held the GPU's lock, the current hold included.",
		       COFF(held_ns), V_SECONDS);
	counter_family(b, s, "nvshare_client_throttled_seconds_total",
		       "Time a compute quota kept the tenant's clients from the GPU's lock.",
		       COFF(throttled_ns), V_SECONDS);
	counter_family(b, s, "nvshare_client_lock_wait_seconds_total",
		       "Time the tenant's clients waited for the GPU's lock (completed waits).",
		       COFF(wait_ns), V_SECONDS);
	counter_family(b, s, "nvshare_client_lock_grants_total",
		       "Locks granted to the tenant's clients.", COFF(grants), V_INT);
	counter_family(b, s, "nvshare_client_lock_revocations_total",
		       "Locks taken back from the tenant's clients after the grace period.",
		       COFF(revocations), V_INT);
	counter_family(b, s, "nvshare_client_swap_in_bytes_total",
		       "Managed memory the tenant's clients moved to the GPU when they got the "
		       "lock.",
		       COFF(swap_bytes_in), V_INT);
	counter_family(b, s, "nvshare_client_swap_out_bytes_total",
		       "Managed memory the tenant's clients moved to host memory when they "
		       "released the lock.",
		       COFF(swap_bytes_out), V_INT);
	counter_family(b, s, "nvshare_client_swap_in_seconds_total",
		       "Time the tenant's clients spent moving memory to the GPU.",
		       COFF(swap_ns_in), V_SECONDS);
	counter_family(b, s, "nvshare_client_swap_out_seconds_total",
		       "Time the tenant's clients spent moving memory to the host.",
		       COFF(swap_ns_out), V_SECONDS);
}

void nvs_metrics_render(struct mbuf *b, const struct msnap *s, const struct msample *samples,
			uint64_t now)
{
	family(b, "nvshare_build_info", "gauge",
	       "The scheduler's version (label version); always 1.");
	mbuf_printf(b, "nvshare_build_info{version=\"%s\"} 1\n", NVS_VERSION_FULL);
	family(b, "nvshare_scheduler_start_time_seconds", "gauge",
	       "Start time of the scheduler since the Unix epoch.");
	mbuf_printf(b, "nvshare_scheduler_start_time_seconds %.3f\n", s->start_time_s);
	single(b, "nvshare_scheduler_gpus", "gauge", "GPUs known to the scheduler.", s->ngpus);
	single(b, "nvshare_scheduler_clients", "gauge", "Connected client processes.", s->nclients);
	single(b, "nvshare_scheduler_connections_accepted_total", "counter",
	       "Connections accepted (clients and nvsharectl).", s->conns_accepted);
	family(b, "nvshare_scheduler_connections_dropped_total", "counter",
	       "Connections the scheduler closed: protocol errors, or peers that did not read.");
	mbuf_printf(b, "nvshare_scheduler_connections_dropped_total{reason=\"protocol\"} %llu\n",
		    (unsigned long long)s->conns_closed_bad);
	mbuf_printf(b, "nvshare_scheduler_connections_dropped_total{reason=\"slow\"} %llu\n",
		    (unsigned long long)s->conns_closed_slow);
	mbuf_printf(b,
		    "nvshare_scheduler_connections_dropped_total{reason=\"handshake_timeout\"} "
		    "%llu\n",
		    (unsigned long long)s->handshake_timeouts);
	mbuf_printf(b,
		    "nvshare_scheduler_connections_dropped_total{reason=\"buffer_budget\"} %llu\n",
		    (unsigned long long)s->budget_cuts);
	mbuf_printf(b, "nvshare_scheduler_connections_dropped_total{reason=\"idle_limit\"} %llu\n",
		    (unsigned long long)s->idle_cuts);
	mbuf_printf(b, "nvshare_scheduler_connections_dropped_total{reason=\"fd_pressure\"} %llu\n",
		    (unsigned long long)s->fd_evictions);
	family(b, "nvshare_scheduler_connections_refused_total", "counter",
	       "Connections refused at accept: the tenant had NVSHARE_MAX_CONNS_PER_TENANT, or "
	       "its uid connected faster than NVSHARE_ACCEPT_RATE with its queue full.");
	mbuf_printf(b,
		    "nvshare_scheduler_connections_refused_total{reason=\"tenant_limit\"} %llu\n",
		    (unsigned long long)s->refused_tenant);
	mbuf_printf(b, "nvshare_scheduler_connections_refused_total{reason=\"accept_rate\"} %llu\n",
		    (unsigned long long)s->refused_rate);
	single(b, "nvshare_scheduler_pod_sockets", "gauge",
	       "Pod sockets listening (one per binding file, docs/security.md).", s->pod_sockets);
	family(b, "nvshare_clients_ungated_runs_total", "counter",
	       "Runs clients made without the scheduler's gate, as they reported once connected "
	       "again, by reason.");
	for (unsigned r = 1; r <= NVS_UNGATED_REASONS; r++)
		mbuf_printf(b, "nvshare_clients_ungated_runs_total{reason=\"%s\"} %llu\n",
			    nvs_ungated_reason_name(r), (unsigned long long)s->ungated_runs[r]);
	family(b, "nvshare_clients_ungated_seconds_total", "counter",
	       "How long those runs without the gate lasted, by reason.");
	for (unsigned r = 1; r <= NVS_UNGATED_REASONS; r++) {
		mbuf_printf(b, "nvshare_clients_ungated_seconds_total{reason=\"%s\"} ",
			    nvs_ungated_reason_name(r));
		ns_seconds(b, s->ungated_ns[r]);
		mbuf_putc(b, '\n');
	}
	single(b, "nvshare_scheduler_connection_buffer_bytes", "gauge",
	       "Input and output buffered for client-socket connections "
	       "(bounded by NVSHARE_CONN_BUFFER_BUDGET).",
	       s->buffered);
	single(b, "nvshare_log_lines_suppressed_total", "counter",
	       "Scheduler log lines held back by the per-tenant, per-kind rate limit.",
	       s->log_suppressed);
	single(b, "nvshare_log_lines_dropped_total", "counter",
	       "Scheduler log lines dropped because stderr was not drained fast enough.",
	       s->log_dropped);
	single(b, "nvshare_scheduler_loop_stalls_total", "counter",
	       "Gaps between two event-loop turns longer than NVSHARE_HEALTH_STALL_MS: "
	       "the scheduler was blocked or not run, and scheduled nothing meanwhile.",
	       s->loop_stalls);
	single_seconds(
	    b, "nvshare_scheduler_loop_stalled_seconds_total", "counter",
	    "Time in event-loop stalls (gaps between turns over NVSHARE_HEALTH_STALL_MS).",
	    s->loop_stalled_ns);
	single_seconds(b, "nvshare_metrics_snapshot_age_seconds", "gauge",
		       "Age of the scheduler state snapshot this scrape was rendered from.",
		       now > s->taken_ns ? now - s->taken_ns : 0);
	single(b, "nvshare_metrics_snapshots_total", "counter",
	       "Snapshots the scheduler loop published for the exporter.", s->seq);

	render_gpus(b, s, samples);
	render_clients(b, s);
}
