/*
 * Snapshot -> Prometheus text exposition format 0.0.4. Runs on the HTTP
 * thread; touches nothing but the snapshot and the NVML samples it is given.
 *
 * The families are the rows of metrics.def, written in its order by one
 * loop: HELP and TYPE from the row, then the samples from where the row
 * says they come from (a field, a function computing a value, or a writer
 * of their own for labelled sets, one-hot families and the histogram).
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

static void ns_seconds(struct mbuf *b, uint64_t ns)
{
	mbuf_printf(b, "%llu.%09llu", (unsigned long long)(ns / 1000000000ull),
		    (unsigned long long)(ns % 1000000000ull));
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

/* ---- values ---- */

/* What a scrape renders from. */
struct rctx {
	const struct msnap *s;
	const struct msample *samples; /* one per GPU, or NULL: no NVML sample */
	uint64_t now;
};

enum fmt {
	FMT_INT = 0,	 /* as is */
	FMT_SECONDS = 1, /* from nanoseconds */
	FMT_RATIO = 2,	 /* from hundredths: 0.00 .. 1.00 */
};

static void v_put(struct mbuf *b, enum fmt f, uint64_t v)
{
	if (f == FMT_SECONDS)
		ns_seconds(b, v);
	else if (f == FMT_RATIO)
		mbuf_printf(b, "%llu.%02llu", (unsigned long long)(v / 100),
			    (unsigned long long)(v % 100));
	else
		mbuf_printf(b, "%llu", (unsigned long long)v);
}

/* ---- computed values (the rows' *_GET): i is the GPU or the series;
 * 0 leaves it out ---- */

static int get_snapshot_age(const struct rctx *c, unsigned i, uint64_t *v)
{
	*v = c->now > c->s->taken_ns ? c->now - c->s->taken_ns : 0;
	return 1;
}

static int get_util(const struct rctx *c, unsigned i, uint64_t *v)
{
	*v = c->samples[i].util_gpu;
	return c->samples[i].have_util;
}

static int get_mem_used(const struct rctx *c, unsigned i, uint64_t *v)
{
	*v = c->samples[i].mem_used;
	return c->samples[i].have_mem;
}

static int get_mem_total(const struct rctx *c, unsigned i, uint64_t *v)
{
	const struct msample *m = c->samples ? &c->samples[i] : NULL;
	*v = m && m->have_mem ? m->mem_total : c->s->gpus[i].total_mem;
	return *v != 0;
}

static int get_capacity(const struct rctx *c, unsigned i, uint64_t *v)
{
	*v = c->s->gpus[i].capacity;
	return *v != UINT64_MAX;
}

static int get_serialized(const struct rctx *c, unsigned i, uint64_t *v)
{
	*v = c->s->gpus[i].serialized ? 1 : 0;
	return 1;
}

static int get_processes(const struct rctx *c, unsigned i, uint64_t *v)
{
	*v = c->s->process_labels ? 1 : c->s->tenants[i].nclients;
	return 1;
}

static int get_allocated(const struct rctx *c, unsigned i, uint64_t *v)
{
	*v = series_allocated(c->s, i);
	return 1;
}

static int get_mem_limit(const struct rctx *c, unsigned i, uint64_t *v)
{
	*v = series_mem_limit(c->s, i);
	return *v != NVS_NO_LIMIT;
}

static int get_core_limit(const struct rctx *c, unsigned i, uint64_t *v)
{
	*v = series_core_limit(c->s, i);
	return 1;
}

/* ---- writers of their own samples (the rows' WRITE) ---- */

static void w_build_info(struct mbuf *b, const struct rctx *c, const char *name)
{
	mbuf_printf(b, "%s{version=\"%s\"} 1\n", name, NVS_VERSION_FULL);
}

static void w_start_time(struct mbuf *b, const struct rctx *c, const char *name)
{
	mbuf_printf(b, "%s %.3f\n", name, c->s->start_time_s);
}

/* One sample per reason, each from its own field of the snapshot. */
struct reason_at {
	const char *reason;
	size_t off; /* of a uint64_t in struct msnap */
};

#define U64_AT(base, off) (*(const uint64_t *)((const char *)(base) + (off)))

static void by_reason(struct mbuf *b, const struct rctx *c, const char *name,
		      const struct reason_at *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		mbuf_printf(b, "%s{reason=\"%s\"} %llu\n", name, r[i].reason,
			    (unsigned long long)U64_AT(c->s, r[i].off));
}

#define SOFF(field) offsetof(struct msnap, field)

static void w_dropped(struct mbuf *b, const struct rctx *c, const char *name)
{
	static const struct reason_at r[] = {
	    {"protocol", SOFF(conns_closed_bad)},
	    {"slow", SOFF(conns_closed_slow)},
	    {"handshake_timeout", SOFF(handshake_timeouts)},
	    {"buffer_budget", SOFF(budget_cuts)},
	    {"idle_limit", SOFF(idle_cuts)},
	    {"fd_pressure", SOFF(fd_evictions)},
	};
	by_reason(b, c, name, r, sizeof r / sizeof r[0]);
}

static void w_refused(struct mbuf *b, const struct rctx *c, const char *name)
{
	static const struct reason_at r[] = {
	    {"tenant_limit", SOFF(refused_tenant)},
	    {"accept_rate", SOFF(refused_rate)},
	};
	by_reason(b, c, name, r, sizeof r / sizeof r[0]);
}

/* Clients' runs without the gate, by their reason (protocol.h). */
static void ungated(struct mbuf *b, const char *name, const uint64_t *v, enum fmt f)
{
	for (unsigned r = 1; r <= NVS_UNGATED_REASONS; r++) {
		mbuf_printf(b, "%s{reason=\"%s\"} ", name, nvs_ungated_reason_name(r));
		v_put(b, f, v[r]);
		mbuf_putc(b, '\n');
	}
}

static void w_ungated_runs(struct mbuf *b, const struct rctx *c, const char *name)
{
	ungated(b, name, c->s->ungated_runs, FMT_INT);
}

static void w_ungated_seconds(struct mbuf *b, const struct rctx *c, const char *name)
{
	ungated(b, name, c->s->ungated_ns, FMT_SECONDS);
}

static void w_gpu_info(struct mbuf *b, const struct rctx *c, const char *name)
{
	for (unsigned i = 0; i < c->s->ngpus; i++) {
		const struct msnap_gpu *g = &c->s->gpus[i];
		mbuf_printf(b, "%s{", name);
		gpu_labels(b, g);
		mbuf_printf(b, ",name=\"");
		mbuf_label_value(b, g->name);
		mbuf_printf(b, "\",source=\"%s\"} 1\n", g->from_nvml ? "nvml" : "client");
	}
}

/* Per GPU, one sample per value of one more label: get(g, k) for the k-th
 * of vals. */
static void gpu_by_label(struct mbuf *b, const struct rctx *c, const char *name, const char *label,
			 const char *const *vals, unsigned n,
			 uint64_t (*get)(const struct msnap_gpu *g, unsigned k))
{
	for (unsigned i = 0; i < c->s->ngpus; i++)
		for (unsigned k = 0; k < n; k++) {
			const struct msnap_gpu *g = &c->s->gpus[i];
			mbuf_printf(b, "%s{", name);
			gpu_labels(b, g);
			mbuf_printf(b, ",%s=\"%s\"} %llu\n", label, vals[k],
				    (unsigned long long)get(g, k));
		}
}

static uint64_t mode_is(const struct msnap_gpu *g, unsigned k)
{
	return g->mode == k;
}

static void w_gpu_mode(struct mbuf *b, const struct rctx *c, const char *name)
{
	static const char *const modes[] = {"off", "on", "auto"};
	gpu_by_label(b, c, name, "mode", modes, 3, mode_is);
}

static uint64_t preempted(const struct msnap_gpu *g, unsigned k)
{
	return g->preempt[k];
}

static void w_preemptions(struct mbuf *b, const struct rctx *c, const char *name)
{
	static const char *const reasons[4] = {"interactive", "batch_floor", "tq_expired",
					       "overcommit"};
	gpu_by_label(b, c, name, "reason", reasons, 4, preempted);
}

/* The lock-wait histogram: cumulative buckets, _sum, _count. */
static void w_lock_wait(struct mbuf *b, const struct rctx *c, const char *name)
{
	for (unsigned i = 0; i < c->s->ngpus; i++) {
		const struct msnap_gpu *g = &c->s->gpus[i];
		uint64_t cum = 0;
		for (unsigned k = 0; k < NVS_WAIT_BUCKETS; k++) {
			cum += g->st.wait_hist[k];
			mbuf_printf(b, "%s_bucket{", name);
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
		mbuf_printf(b, "%s_sum{", name);
		gpu_labels(b, g);
		mbuf_printf(b, "} ");
		ns_seconds(b, g->st.wait_ns);
		mbuf_printf(b, "\n%s_count{", name);
		gpu_labels(b, g);
		mbuf_printf(b, "} %llu\n", (unsigned long long)cum);
	}
}

static void w_client_info(struct mbuf *b, const struct rctx *c, const char *name)
{
	for (unsigned i = 0; i < c->s->nclients; i++) {
		const struct msnap_client *cl = &c->s->clients[i];
		mbuf_printf(b, "%s{", name);
		client_id_labels(b, cl);
		mbuf_printf(b, ",client_id=\"%u\",name=\"", cl->id);
		mbuf_label_value(b, cl->name);
		mbuf_printf(b, "\"} 1\n");
	}
}

static void w_client_state(struct mbuf *b, const struct rctx *c, const char *name)
{
	static const char *const states[] = {"idle", "waiting", "holding"};
	const struct msnap *s = c->s;
	for (unsigned i = 0; i < nseries(s); i++) {
		for (unsigned k = 0; k < 3; k++) {
			mbuf_printf(b, "%s{", name);
			series_labels(b, s, i);
			mbuf_printf(b, ",state=\"%s\"} %llu\n", states[k],
				    (unsigned long long)series_state(s, i, k));
		}
	}
}

/* ---- the table (metrics.def) ---- */

enum src {
	SRC_SCALAR,	 /* off: a uint64_t of struct msnap */
	SRC_SCALAR_UINT, /* off: an unsigned of struct msnap */
	SRC_SCALAR_GET,	 /* get(c, 0, &v) */
	SRC_GPU,	 /* off: of struct msnap_gpu, per GPU */
	SRC_GPU_GET,	 /* get(c, GPU, &v) */
	SRC_SERIES,	 /* off: of struct mcounters, per client series */
	SRC_SERIES_GET,	 /* get(c, series, &v) */
	SRC_WRITE,	 /* write() writes the samples */
};

enum when {
	WHEN_ALWAYS,
	WHEN_NVML,    /* NVML was sampled for this scrape */
	WHEN_PROCESS, /* NVSHARE_METRICS_PROCESS_LABELS=1 */
};

struct family {
	const char *name, *type, *help;
	enum when when;
	enum src src;
	enum fmt fmt;
	size_t off;
	int (*get)(const struct rctx *c, unsigned i, uint64_t *v);
	void (*write)(struct mbuf *b, const struct rctx *c, const char *name);
};

#define SCALAR(f, fmt) SRC_SCALAR, FMT_##fmt, offsetof(struct msnap, f), NULL, NULL
#define SCALAR_UINT(f, fmt) SRC_SCALAR_UINT, FMT_##fmt, offsetof(struct msnap, f), NULL, NULL
#define SCALAR_GET(fn, fmt) SRC_SCALAR_GET, FMT_##fmt, 0, fn, NULL
#define GPU(f, fmt) SRC_GPU, FMT_##fmt, offsetof(struct msnap_gpu, f), NULL, NULL
#define GPU_GET(fn, fmt) SRC_GPU_GET, FMT_##fmt, 0, fn, NULL
#define SERIES(f, fmt) SRC_SERIES, FMT_##fmt, offsetof(struct mcounters, f), NULL, NULL
#define SERIES_GET(fn, fmt) SRC_SERIES_GET, FMT_##fmt, 0, fn, NULL
#define WRITE(fn) SRC_WRITE, FMT_INT, 0, NULL, fn

static const struct family families[] = {
#define NVS_METRIC(name, type, scope, labels, when, src, help, doc)                                \
	{name, #type, help, WHEN_##when, src},
#include "metrics.def"
#undef NVS_METRIC
};

/* The value of f for GPU or series i (0: left out). */
static int value(const struct family *f, const struct rctx *c, unsigned i, uint64_t *v)
{
	const struct msnap *s = c->s;
	switch (f->src) {
	case SRC_SCALAR:
		*v = U64_AT(s, f->off);
		return 1;
	case SRC_SCALAR_UINT:
		*v = *(const unsigned *)((const char *)s + f->off);
		return 1;
	case SRC_GPU:
		*v = U64_AT(&s->gpus[i], f->off);
		return 1;
	case SRC_SERIES:
		*v = U64_AT(series_counters(s, i), f->off);
		return 1;
	default:
		return f->get(c, i, v);
	}
}

/* One sample of f: name{the GPU's or the series' labels} value. */
static void sample(struct mbuf *b, const struct family *f, const struct rctx *c, unsigned i)
{
	uint64_t v;
	if (!value(f, c, i, &v))
		return;
	mbuf_printf(b, "%s", f->name);
	if (f->src == SRC_GPU || f->src == SRC_GPU_GET) {
		mbuf_putc(b, '{');
		gpu_labels(b, &c->s->gpus[i]);
		mbuf_putc(b, '}');
	} else if (f->src == SRC_SERIES || f->src == SRC_SERIES_GET) {
		mbuf_putc(b, '{');
		series_labels(b, c->s, i);
		mbuf_putc(b, '}');
	}
	mbuf_putc(b, ' ');
	v_put(b, f->fmt, v);
	mbuf_putc(b, '\n');
}

void nvs_metrics_render(struct mbuf *b, const struct msnap *s, const struct msample *samples,
			uint64_t now)
{
	const struct rctx c = {s, samples, now};
	for (size_t k = 0; k < sizeof families / sizeof families[0]; k++) {
		const struct family *f = &families[k];
		if ((f->when == WHEN_NVML && !samples) ||
		    (f->when == WHEN_PROCESS && !s->process_labels))
			continue;
		mbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, f->type);
		switch (f->src) {
		case SRC_WRITE:
			f->write(b, &c, f->name);
			break;
		case SRC_SCALAR:
		case SRC_SCALAR_UINT:
		case SRC_SCALAR_GET:
			sample(b, f, &c, 0);
			break;
		case SRC_GPU:
		case SRC_GPU_GET:
			for (unsigned i = 0; i < s->ngpus; i++)
				sample(b, f, &c, i);
			break;
		case SRC_SERIES:
		case SRC_SERIES_GET:
			for (unsigned i = 0; i < nseries(s); i++)
				sample(b, f, &c, i);
			break;
		}
	}
}
