/*
 * The exporter's snapshot: plain numbers copied from the scheduler state by
 * the loop thread (metrics.c), read-only once published, rendered into the
 * Prometheus text format by the HTTP thread (metrics_render.c). It holds no
 * pointers into live state, so rendering needs no lock on the scheduler.
 */
#ifndef NVSHARE_SCHEDULER_METRICS_SNAP_H
#define NVSHARE_SCHEDULER_METRICS_SNAP_H

#include "names.h"
#include "core/state.h"

#include <stddef.h>
#include <stdint.h>

struct msnap_gpu {
	int index;
	char uuid[NVS_UUID_LEN];
	char name[96];
	uint64_t total_mem; /* scheduler's view (NVML at start, or learned) */
	int from_nvml;
	unsigned mode; /* enum nvs_mode */
	int serialized;
	uint64_t tq_ns;
	uint64_t capacity; /* UINT64_MAX: unknown */
	uint64_t qlen;
	uint64_t nattached;
	uint64_t running; /* clients allowed to run now */
	uint64_t allocated_sum;
	uint64_t held_ns; /* completed holds + the current one */
	struct lock_stats st;
	uint64_t handoffs;
	uint64_t mode_switches;
	uint64_t switches_deferred, claims_clamped, reports_coalesced, revoke_penalties;
	uint64_t swap_bytes_in, swap_bytes_out, swap_ns_in, swap_ns_out;
	/* Sums of the clients' SWAP_PATHS: bytes per swap path, host staging. */
	uint64_t swap_fast, swap_prefetch, swap_pinned, swap_staging;
	uint64_t tq_effective_ns;
	uint64_t unmanaged; /* processes on it without nvshare (unmanaged.c) */
	/* Co-scheduling (coschedule.c): members asked to drop, by reason:
	 * interactive, batch-floor, tq-expired, overcommit. */
	uint64_t preempt[4];
};

struct msnap_client {
	uint32_t id;	  /* ids only grow: clients[] is newest (highest) first */
	int32_t host_pid; /* SO_PEERCRED */
	uint32_t uid;
	uint32_t pid; /* reported in HELLO (its own pid namespace) */
	char name[256];
	char pod[NVS_K8S_NAME_LEN]; /* "" unknown: label omitted */
	char pod_namespace[NVS_K8S_NS_LEN];
	char pod_uid[NVS_POD_UID_LEN];	/* "" not in a Pod */
	unsigned first_entry, nentries; /* its msnap_entry range */
};

/* Counters of one client on one GPU, summed per tenant (metrics_tenant.c
 * adds every one of the list): held_ns, completed holds + the current one;
 * throttled_ns, time a quota kept it from the lock; lock grants,
 * revocations, completed waits and their time; swap bytes and time, each
 * way. metrics.def's SERIES rows name them. */
#define NVS_MCOUNTERS(X)                                                                           \
	X(held_ns)                                                                                 \
	X(throttled_ns)                                                                            \
	X(grants)                                                                                  \
	X(revocations)                                                                             \
	X(waits)                                                                                   \
	X(wait_ns)                                                                                 \
	X(swap_bytes_in)                                                                           \
	X(swap_bytes_out)                                                                          \
	X(swap_ns_in)                                                                              \
	X(swap_ns_out)

struct mcounters {
#define NVS_MCOUNTER_FIELD(f) uint64_t f;
	NVS_MCOUNTERS(NVS_MCOUNTER_FIELD)
#undef NVS_MCOUNTER_FIELD
};

/* One client's use of one GPU. */
struct msnap_entry {
	unsigned client; /* index into clients[] */
	int gpu;	 /* GPU index */
	uint64_t allocated;
	unsigned state; /* enum cg_state */
	uint32_t core_limit;
	uint64_t mem_limit; /* NVS_NO_LIMIT: none */
	struct mcounters c;
};

/*
 * A tenant's use of one GPU: the sum over its clients there. The tenant is
 * the verified Pod (namespace + name from the cgroup and the API watch),
 * else the Pod UID (Pod not yet known to the watch), else the uid
 * (SO_PEERCRED) - never a pid or a name the client reports. Series keyed
 * so stay put while processes come and go, and their number is bounded by
 * tenants x GPUs.
 */
struct msnap_tenant {
	int gpu;
	/* both "" unless the Pod is known */
	char pod[NVS_K8S_NAME_LEN], pod_namespace[NVS_K8S_NS_LEN];
	char pod_uid[NVS_POD_UID_LEN]; /* set only when the Pod name is unknown */
	int has_uid;		       /* not in a Pod: by uid */
	uint32_t uid;
	uint64_t nclients;
	uint64_t state[3]; /* clients per enum cg_state */
	uint64_t allocated;
	uint32_t core_limit; /* the highest of its clients' */
	uint64_t mem_limit;  /* the highest (NVS_NO_LIMIT if one has none) */
	/* Live clients' counters plus those of its clients that left while
	 * others stayed: counters never go down while the series exists. */
	struct mcounters c;
};

struct msnap {
	unsigned refs;	     /* readers holding it (under the metrics mutex) */
	uint64_t taken_ns;   /* CLOCK_MONOTONIC */
	double start_time_s; /* scheduler start, Unix seconds */
	uint64_t seq;	     /* publish number */
	unsigned nclients;
	uint64_t conns_accepted, conns_closed_bad, conns_closed_slow;
	/* Bounds (peer_limits.h) and log rate limiting (plog.h). */
	uint64_t refused_tenant, handshake_timeouts, budget_cuts, buffered;
	uint64_t log_suppressed, log_dropped;
	uint64_t loop_stalls, loop_stalled_ns; /* health.c */
	/* Accept budgets and idle bounds (server.c, limits.c), Pod sockets. */
	uint64_t refused_rate, idle_cuts, fd_evictions;
	unsigned pod_sockets;
	/* Clients' reports of runs without the gate, by reason (protocol.h). */
	uint64_t ungated_runs[NVS_UNGATED_REASONS + 1], ungated_ns[NVS_UNGATED_REASONS + 1];
	unsigned ngpus, nentries;
	struct msnap_gpu *gpus;
	struct msnap_client *clients;
	struct msnap_entry *entries;
	/* NVSHARE_METRICS_PROCESS_LABELS: client series per process (pid,
	 * host_pid, name); else per tenant (tenants[], room for nentries). */
	int process_labels;
	unsigned ntenants;
	struct msnap_tenant *tenants;
};

/* What the HTTP thread measured through NVML for one GPU at scrape time. */
struct msample {
	int have_util, have_mem;
	unsigned util_gpu; /* percent */
	uint64_t mem_used, mem_total;
};

/* A growing text buffer. On allocation failure `failed` is set and
 * further appends are dropped. */
struct mbuf {
	char *p;
	size_t len, cap;
	int failed;
};

void mbuf_printf(struct mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a label value: backslash, double quote and newline escaped. */
void mbuf_label_value(struct mbuf *b, const char *s);

/* Fills s->tenants from s->clients and s->entries (metrics_tenant.c). It
 * keeps, between calls, the counters of clients that left a tenant that is
 * still there, so call it once per published snapshot, in order (the loop
 * thread; render_sample once). */
void nvs_metrics_tenants(struct msnap *s);

/* Renders the whole exposition. samples: one per snapshot GPU, or NULL.
 * now: CLOCK_MONOTONIC ns of the scrape. */
void nvs_metrics_render(struct mbuf *b, const struct msnap *s, const struct msample *samples,
			uint64_t now);

#endif
