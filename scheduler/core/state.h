/*
 * The scheduler's whole state in plain structs: GPUs, clients, each
 * client's use of each GPU, and the counters kept for the status view and
 * (later) the Prometheus exporter. Everything is owned by the single event
 * loop thread; nothing here is locked.
 *
 * Ownership: a struct client lives as long as its connection; it owns its
 * struct client_gpu entries, which a struct gpu links into its attached list
 * and (while waiting) its FCFS queue. GPUs are never removed.
 *
 * Part of the decision core (port.h): no clock here; times are
 * CLOCK_MONOTONIC ns handed in by the shell.
 */
#ifndef NVSHARE_SCHEDULER_STATE_H
#define NVSHARE_SCHEDULER_STATE_H

#include "names.h"
#include "protocol.h"
#include "sockpath.h"
#include "tenant.h"

#include <stdint.h>
#include <sys/types.h>

/* Swap times kept per GPU and direction (bounds.h NVS_SWAP_SAMPLES). */
#define NVS_SWAP_RING 9
/* A peer that lets this much output pile up is not reading: disconnect it. */
#define NVS_SCHED_OUTBUF_MAX (4u << 20)

/* One direction's recent swaps (bounds.c): the times, and the speeds (ns
 * per GiB) of those that moved at least NVS_SWAP_RATE_MIN_BYTES; each n
 * counts every sample, its ring keeps the last NVS_SWAP_RING. */
struct swap_samples {
	uint64_t time[NVS_SWAP_RING];
	unsigned n;
	uint64_t per_gib[NVS_SWAP_RING];
	unsigned rate_n;
};

/* Lock-wait histogram: bucket i counts waits <= wait_bucket_le_us[i] (the
 * last bucket is +Inf). Fixed bounds so the exporter can emit them as a
 * Prometheus histogram without keeping samples. */
#define NVS_WAIT_BUCKETS 12
extern const uint64_t nvs_wait_bucket_le_us[NVS_WAIT_BUCKETS - 1];

enum cg_state {
	CG_IDLE = 0,	/* attached, neither holding nor waiting */
	CG_WAITING = 1, /* in the GPU's queue */
	CG_HOLDING = 2, /* the GPU's lock holder */
};

/* Lock accounting for one client on one GPU (also summed per GPU). */
struct lock_stats {
	uint64_t held_ns; /* completed holds; add the current one */
	uint64_t grants;
	uint64_t releases;	/* LOCK_RELEASED accepted */
	uint64_t idle_releases; /* ... of which flags=1 (client was idle) */
	uint64_t drops;		/* DROP_LOCK sent (first send per quantum) */
	uint64_t revocations;
	uint64_t waits;	  /* completed waits (grants after queueing) */
	uint64_t wait_ns; /* sum of completed waits */
	uint64_t wait_hist[NVS_WAIT_BUCKETS];
	uint64_t drain_ns; /* sum of DROP_LOCK -> LOCK_RELEASED */
	uint64_t drain_max_ns;
};

struct client;
struct gpu;

/* One client's use of one GPU. */
struct client_gpu {
	struct client *client;
	struct gpu *gpu;
	uint32_t local_gpu;	 /* the client's CUDA ordinal: key in messages */
	uint64_t allocated;	 /* bytes counted: the claim clamped (bounds.c) */
	uint64_t claimed;	 /* bytes the client reported (ATTACH_GPU / MEM_UPDATE) */
	uint64_t reported_total; /* the GPU's memory as it said (learned GPUs: gpus.c) */
	int clamp_logged;	 /* bounds.c: causes of clamps already logged */
	/* claims.c: reports kept while the connection's budget is spent
	 * (bit 1 MEM_UPDATE, bit 2 SWAP_STATS), the latest of each. */
	int pending;
	uint64_t pending_mem;
	struct nvs_swap_stats pending_swap;
	/* fairness.c: revoked: not granted before this; pick bookkeeping. */
	uint64_t penalty_until_ns;
	uint64_t fair_refused;
	uint64_t resident; /* swap: of those, believed on the GPU (policy.c) */
	enum cg_state state;
	int mode_sent;		/* last GPU_MODE value sent, -1 none */
	int mode_owed;		/* a newer mode waits for its output to drain */
	uint32_t waiters_sent;	/* last WAITERS count sent while holding */
	uint32_t hint_sent_mib; /* last SWAP_HINT sent while holding */
	uint64_t wait_since_ns; /* when it queued */
	uint64_t held_since_ns; /* when it got the lock */
	uint32_t core_limit;	/* limits in force on this GPU (nvs_client_update_limits) */
	uint64_t mem_limit;
	/* nvsharectl --set-client -g N: this GPU's own values, above the
	 * client-wide ones (limit_resolve.h). 0 / has_gpu_mem_override=0:
	 * none. */
	uint32_t gpu_core_override;
	int has_gpu_mem_override;
	uint64_t gpu_mem_override;
	/* LIMITS_IN_FORCE: what the client said it enforces (after a
	 * scheduler restart). A claim only tightens: the effective limits are
	 * the stricter of these and the configured ones; nvsharectl clears
	 * it. has_claim 0: none. */
	int has_claim;
	uint32_t claim_core; /* 1..100 */
	uint64_t claim_mem;  /* bytes or NVS_NO_LIMIT */
	struct lock_stats st;
	uint64_t swap_bytes_in, swap_bytes_out, swap_ns_in, swap_ns_out;
	/* SWAP_PATHS: the client's bytes per swap path and its host staging
	 * (a claim, for the status and metrics only; docs/swap.md). */
	struct nvs_swap_paths paths;
	/* Compute quota (scheduler/core/quota.c); all zero for unlimited clients. */
	struct cg_quota {
		uint32_t limit;	       /* core limit in force this window */
		uint64_t seen_ns;      /* last held or waited (0: never); active() */
		uint64_t used_ns;      /* billed in the current window (carry incl.) */
		uint64_t last_used_ns; /* billed in the previous window */
		uint64_t bill_from_ns; /* holding: billed up to here */
		uint64_t tail_adj_ns;  /* unbilled part of the last drop tail */
		uint64_t tail_est_ns;  /* expected billed DROP -> release tail */
		int throttled;	       /* quota used up until the window ends */
		uint64_t throttled_since_ns;
		uint64_t throttled_ns; /* waited while throttled (total) */
		/* Pacing (token bucket as a virtual clock, quota.c): all time
		 * ever billed, and the virtual time pace_vt_ns at which the
		 * fluid line pct * t had caught up with pace_billed_ns of it. */
		uint64_t total_ns;
		uint64_t pace_vt_ns, pace_billed_ns;
	} q;
	/* DROP_LOCK state of its hold, for any member of the GPU's running
	 * set (the primary g->holder or a guest: one state machine each):
	 * sent, resent at half the grace, when, the grace's end, the bytes it
	 * was asked to move out. Cleared at every grant and hold's end. */
	struct cg_drop {
		int sent, resent;
		uint64_t sent_ns, deadline_ns, swap_out_asked;
	} drop;
	/* Co-scheduling (scheduler/core/coschedule.c): a guest holds beside the
	 * primary holder g->holder, in the GPU's running set. */
	struct cg_co {
		int guest;
		const char *why;     /* why it runs: "first", "fits", "promoted" */
		int preempted;	     /* dropped for a burst: re-queues at the head */
		unsigned short_idle; /* streak of short holds ended idle */
		/* The last hold that ended idle and short: when it ended and how
		 * long it was; the next request says whether the pause that
		 * followed was longer than the hold (a burst) or not (a job
		 * that barely paused: coschedule.c nvs_cosched_queued). */
		uint64_t idle_end_ns, idle_hold_ns;
	} co;
	/* Evidence (unmanaged.c, claims.c; docs/security.md "Claims checked
	 * against NVML"): what NVML shows of the client's process on this GPU,
	 * read at every detection pass. */
	struct cg_ev {
		int checked;	    /* a pass (or a fresh look) covered it since it attached */
		int listed;	    /* ... and NVML lists its pid there: it has a context */
		uint64_t used, hwm; /* its memory there per NVML: last, highest */
		uint64_t cap;	    /* what the evidence allows: hwm + the GPU's unattributed */
		int unproven;	    /* its claim is above cap + slack */
		unsigned chances;   /* passes since, with a chance to run (not still queued) */
		uint64_t grants0;   /* its grants when the claim became unproven */
		int clamped;	    /* counted as cap (claims.c) */
		/* Gated activity: its grants and whether it held, at the last
		 * pass; consecutive passes it ran on a serialized GPU without
		 * the lock. */
		uint64_t grants_seen;
		int held_seen;
		unsigned ungated;
		/* Swap samples (claims.c): grants and releases at the last
		 * sample taken from it. */
		uint64_t swap_in_mark, swap_out_mark;
	} ev;
	struct client_gpu *qprev, *qnext; /* gpu queue (while CG_WAITING) */
	struct client_gpu *aprev, *anext; /* gpu attached list */
};

struct conn;

struct client {
	uint32_t id;
	/* Identity pinned at connect (peer.h), never from the client. */
	pid_t pid; /* SO_PEERCRED: host view */
	uid_t uid;
	enum nvs_tenant_kind tenant;
	enum nvs_id_source id_source;
	const char *unknown_why; /* tenant unknown: why (static text) */
	int id_pidfd;		 /* the cgroup read was confirmed through a pidfd */
	/* CLAIMS from HELLO: shown as claimed_pid / claimed_name, never used
	 * for authorization, limits or identity labels. */
	uint32_t reported_pid; /* the client's own namespace view */
	char name[256];
	uint32_t hello_core_limit; /* from HELLO (NVSHARE_GPU_CORE_LIMIT) */
	uint32_t hello_flags;	   /* NVS_HELLO_*: what the client understands */
	/* Its allocations are device memory (HELLO NVS_HELLO_DEVICE_MEMORY):
	 * they cannot be swapped, so policy.c counts them as pinned. */
	int device_memory;
	/* devmem.c: the Pod's nvshare.com/unified-memory is "false"; WELCOME
	 * went out; MEMORY_MODE was sent (or found useless). */
	int devmem_annot, welcomed, devmem_told;
	/* Declared class (coschedule.h NVS_PRIO_*): the Pod annotation
	 * nvshare.com/priority, else HELLO's flag; 0 none (observed). */
	unsigned annot_prio;
	uint64_t hello_mem_limit;
	/* Run-time overrides set with CTL_SET_CLIENT gpu=-1; also applied to
	 * GPUs the client attaches later. 0 / has_mem=0: none. */
	uint32_t core_override;
	int has_mem_override;
	uint64_t mem_override;
	/* From the Pod annotations (pod_identity.c): between the overrides
	 * and HELLO in precedence. 0 / has_annot_mem=0: none. */
	uint32_t annot_core;
	int has_annot_mem;
	uint64_t annot_mem;
	/* The Pod's nvshare.com/gpu-memory request in bytes, from its spec
	 * through the API watch (never from the client): the default memory
	 * limit (HELLO's may only lower it) and the size the client is
	 * expected to grow to on its GPU. 0: none. */
	uint64_t pod_mem_request;
	/* The ceiling of its Pod socket's binding (a DRA claim's consumed
	 * capacity, podsock.h): no source raises its limits above these.
	 * Pinned at connect. 0: none. */
	uint32_t ceil_core;
	uint64_t ceil_mem;
	/* Kubernetes Pod (pod_identity.c): UID from <proc-root>/<pid>/cgroup
	 * at connect (tenant unknown: the Pod its pid was last seen in, or
	 * ""), name and namespace from the API watch cache ("" unknown). */
	char pod_uid[NVS_POD_UID_LEN];
	char pod_name[NVS_K8S_NAME_LEN];
	char pod_namespace[NVS_K8S_NS_LEN];
	/* Identified by its Pod socket (source SOCKET): the Pod its cgroup
	 * named, when that read was sound ("" none): only compared, logged. */
	char cg_pod_uid[NVS_POD_UID_LEN];
	uint64_t connected_ns;
	/* The shell's connection (opaque to the core) and what the core must
	 * know of it: NVS_CLIENT_* (port.h), kept up to date by conn.c. */
	struct conn *conn;
	unsigned flags;
	struct client_gpu *gpus[NVS_MAX_GPUS];
	unsigned ngpus;
	/* fairness.c: its tenant's record (turns, revocations). */
	struct nvs_tenant *fair;
	/* claims.c: MEM_UPDATE / SWAP_STATS budget (GCRA) and the reports
	 * kept (coalesced) because it was spent. */
	uint64_t report_tat_ns;
	uint64_t reports_coalesced;
	/* The ping event (clients.c): when last written, PINGs since. */
	uint64_t ping_event_ns, pings_unreported;
	/* UNGATED reports (clients.c): its runs without the gate and their
	 * length, as it said; one report per reason per connection. */
	uint64_t ungated_runs, ungated_ns;
	unsigned ungated_reported; /* bit per reason */
	struct client *prev, *next;
};

struct nvs_policy_hook;

struct gpu {
	int index;
	char uuid[NVS_UUID_LEN];
	char name[96];
	uint64_t total_mem;
	int from_nvml;
	uint64_t unused_since_ns; /* learned: the last client detached (gpus.c) */
	/* settings */
	unsigned mode; /* enum nvs_mode */
	uint64_t tq_ms;
	uint64_t capacity_override; /* 0: total_mem - reserve */
	/* lock state */
	int serialized; /* effective: clients must hold the lock */
	struct client_gpu *holder;
	uint64_t grant_ns; /* when the current holder got it (its drop: holder->drop) */
	/* The current hold's quantum as priced so far (policy.c hold_quantum):
	 * kept while the hold, its head waiter and the settings it was priced
	 * with stay the same, so that it can grow but not shrink. */
	struct {
		uint64_t grant_ns, tq_ms, ns;
		const struct client_gpu *waiter;
		uint32_t factor;
	} hold_q;
	struct client_gpu *qhead, *qtail;
	unsigned qlen;
	struct client_gpu *ahead; /* attached clients */
	unsigned nattached;
	uint64_t allocated_sum;
	/* counters */
	struct lock_stats st;
	uint64_t handoffs; /* lock passed straight from a holder to a waiter */
	/* Swap (policy.c, docs/swap.md): totals of the clients' SWAP_STATS
	 * (departed clients included), the latest swap-in and swap-out times
	 * (for the adaptive quantum). */
	uint64_t swap_bytes_in, swap_bytes_out, swap_ns_in, swap_ns_out;
	uint64_t swap_last_in_ns, swap_last_out_ns;
	/* Recent swaps, each direction (claims.c: they price the hand-off
	 * that stretches the quantum). */
	struct swap_samples swap_in_samples, swap_out_samples;
	uint64_t mode_switches;
	/* Hostile load (claims.c, fairness.c): the mode-switch budget (GCRA)
	 * and whether a switch waits for it; counters. */
	uint64_t switch_tat_ns;
	int switch_pending;
	uint64_t switches_deferred; /* switches that waited for the budget */
	uint64_t claims_clamped;    /* reports counted below what they claimed */
	uint64_t reports_coalesced; /* reports kept, replaced or applied later */
	uint64_t revoke_penalties;  /* revoked holders made to wait a quantum */
	/* Per-GPU policy extension point (compute quotas, later). NULL: plain
	 * FCFS + TQ. See policy.h. */
	const struct nvs_policy_hook *hook;
	void *hook_data;
	/* Compute-quota window of this GPU (scheduler/core/quota.c). */
	uint64_t q_window_start_ns;
	uint32_t q_window; /* window number, from 1 */
	/* Processes on the GPU without an nvshare connection (unmanaged.c):
	 * how many; with NVSHARE_UNMANAGED=serialize, force serialization
	 * (mode auto) and the memory they use, kept out of the capacity. */
	unsigned unmanaged;
	int unmanaged_force;
	uint64_t unmanaged_pinned;
	/* NVML's last look (unmanaged.c): the process list was read; when;
	 * used memory no listed process accounts for (the driver's own, and
	 * managed memory where NVML does not count it per process), now and
	 * highest of the last passes; the mode at the pass; the utilization
	 * samples' last timestamp asked for (us); swap samples refused or cut
	 * (claims.c). */
	struct gpu_ev {
		int ok;
		uint64_t at_ns;
		uint64_t unattributed, unattributed_hwm;
		uint64_t unattr_ring[8];
		unsigned unattr_n;
		int serialized_seen;
		uint64_t switches_seen, util_seen_us;
		uint64_t swap_refused;
	} ev;
	/* Co-scheduling (coschedule.c): batch time accounting for the batch
	 * floor (decayed by half every window), preemptions by reason. */
	struct gpu_co {
		uint64_t batch_run_ns, batch_wait_ns, acct_ns, window_ns;
		uint64_t preempt_interactive, preempt_floor, preempt_tq, preempt_fit;
		unsigned guests;
	} co;
};

struct sched_config {
	unsigned mode; /* default for every GPU */
	uint64_t tq_ms;
	uint64_t reserve;		 /* bytes kept free: capacity = total - reserve */
	uint64_t capacity[NVS_MAX_GPUS]; /* per index override, 0 none */
	uint64_t capacity_all;		 /* override for every GPU, 0 none */
	uint32_t idle_release_ms;
	uint32_t drop_grace_ms;
	int use_nvml;
	char sock_dir[NVS_SOCK_PATH_LEN];	/* client socket (mounted into Pods) */
	char admin_sock_dir[NVS_SOCK_PATH_LEN]; /* admin socket (never mounted into Pods) */
	/* Unknown tenants (docs/security.md): a peer whose process was gone
	 * or whose cgroup could not be read at connect, and which was never
	 * seen in a Pod, gets these limits (annotation level). */
	uint32_t unknown_core_limit; /* NVSHARE_UNKNOWN_TENANT_CORE_LIMIT, 10 */
	uint64_t unknown_mem_limit;  /* NVSHARE_UNKNOWN_TENANT_MEMORY_LIMIT, 1Gi */
	/* compute quotas (scheduler/core/quota.c, docs/quotas.md) */
	uint32_t q_window_ms; /* NVSHARE_COMPUTE_WINDOW_MS, 2000 */
	uint32_t q_sample_ms; /* NVSHARE_QUOTA_SAMPLE_INTERVAL_MS, 50 */
	uint32_t q_carry_pct; /* NVSHARE_QUOTA_CARRYOVER_PERCENT, 25 */
	uint32_t q_tail_pct;  /* NVSHARE_DROP_TAIL_BILLING_PERCENT, 70 */
	uint32_t q_slice_ms;  /* NVSHARE_QUOTA_SLICE_MS, window / 20 */
	/* hostile load (scheduler/core/claims.c, docs/scheduler.md) */
	uint32_t oversub_factor;     /* NVSHARE_OVERSUBSCRIPTION_FACTOR, 4 */
	uint32_t mode_dwell_ms;	     /* NVSHARE_MODE_DWELL_MS, 1000 */
	uint32_t mode_switch_burst;  /* NVSHARE_MODE_SWITCH_BURST, 4 */
	uint32_t report_rate;	     /* NVSHARE_REPORT_RATE, 50 per s */
	uint32_t swap_tq_max_factor; /* NVSHARE_SWAP_TQ_MAX_FACTOR, 4 */
	/* swap (policy.c, docs/swap.md) */
	unsigned swap_out;	 /* NVSHARE_SWAP_OUT: needed, all, none */
	uint32_t swap_tq_factor; /* NVSHARE_SWAP_TQ_FACTOR, 50 */
	/* logs and events (main.c) */
	int debug, log_json;
	char events_path[500]; /* NVSHARE_EVENTS, "": off */
};

struct sched {
	struct sched_config cfg;
	struct gpu gpus[NVS_MAX_GPUS];
	unsigned ngpus;
	int nvml_ok;
	struct client *clients;
	unsigned nclients;
	uint32_t next_client_id;
	uint64_t start_ns;
	uid_t euid;
	char sock_path[NVS_SOCK_PATH_LEN];
	char admin_sock_path[NVS_SOCK_PATH_LEN];
	/* connection counters */
	/* UNGATED reports of all clients, by reason (clients.c). */
	uint64_t ungated_runs[NVS_UNGATED_REASONS + 1], ungated_ns[NVS_UNGATED_REASONS + 1];
	uint64_t conns_accepted, conns_closed_bad, conns_closed_slow;
	/* faults survived (docs/reliability.md) */
	uint64_t accept_refused; /* out of fds: refused through the spare fd */
	uint64_t accept_pauses;	 /* out of fds/memory: stopped accepting 100 ms */
	uint64_t sock_recreated; /* socket removed/replaced and re-created */
};

extern struct sched S;

/* Scheduling capacity in bytes: the override, else memory minus reserve,
 * less the memory pinned by unmanaged processes (NVSHARE_UNMANAGED=
 * serialize). UINT64_MAX when the memory is unknown (never serialize on
 * memory). */
uint64_t nvs_gpu_capacity(const struct gpu *g);

#endif
