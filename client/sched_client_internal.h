/*
 * Internals shared by the scheduler client's files (not an interface for the
 * rest of the library; that is client/sched_client.h):
 *
 *   sched_client.c  the public nvs_sched_* / nvs_gate_slow API, start-up,
 *                   fork, and the shared state below with its gate
 *   sched_conn.c    the client thread's loop and its connection: socket,
 *                   reconnect, outgoing queue and composition, flush, read
 *   sched_lock.c    the lock: draining, release, the scheduler's messages,
 *                   the idle release
 *
 * Everything here is named nvs_sc_* (scheduler client); the shared state is
 * nvs_sc. docs/client-lock.md has the states, messages and failure behaviour.
 */
#ifndef NVSHARE_CLIENT_SCHED_CLIENT_INTERNAL_H
#define NVSHARE_CLIENT_SCHED_CLIENT_INTERNAL_H

#include "sched_client.h"

#include "real.h"

#include "protocol.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

enum lock_state {
	L_NONE = 0,	  /* not held, not asked for */
	L_REQUESTED = 1,  /* REQ_LOCK queued or sent, waiting for LOCK_OK */
	L_HELD = 2,	  /* LOCK_OK received: gate open */
	L_DROPPING = 3,	  /* DROP_LOCK being served: gate closed, draining */
	L_IDLE_CHECK = 4, /* idle release in progress: gate closed, draining */
};

/* Per-GPU state of the scheduler client (the scheduler's own per-GPU
 * state is struct gpu, scheduler/core/state.h); guarded by nvs_sc.mu unless
 * noted. Index = CUDA ordinal. */
struct sc_gpu {
	int attached;	    /* the process uses this GPU */
	int announced;	    /* ATTACH_GPU queued on the current connection */
	int mode_known;	    /* GPU_MODE received on the current connection */
	int mode_wait_over; /* a limited GPU stopped waiting for GPU_MODE */
	int serialized;	    /* GPU_MODE 1 */
	enum lock_state lock;
	int req_pending;	/* REQ_LOCK to send */
	int blocked;		/* application threads waiting in nvs_gate_slow */
	uint32_t waiters;	/* other clients waiting for this GPU */
	uint32_t idle_swap_mib; /* SWAP_HINT: MiB to move out on an idle release */
	uint32_t core_limit;	/* from SET_LIMITS (for the quota work) */
	int limits_set;		/* a SET_LIMITS arrived: re-announced on reconnect */
	uint64_t mem_limit;	/* from SET_LIMITS (bytes, NVS_NO_LIMIT) */
	uint32_t quantum_ms;	/* from the last LOCK_OK */
	uint64_t total_mem;
	CUdevice cudev;
	CUcontext ctx;	   /* an application context seen on this GPU */
	CUcontext primary; /* retained primary context (fallback), thread only */
	uint64_t mem_sent; /* thread only: allocated bytes last sent */
	char uuid[NVS_UUID_LEN];
};

/* The state application threads and the client thread share (defined in
 * sched_client.c). */
struct nvs_sc_state {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC; broadcast on every change */
	struct sc_gpu gpus[NVS_MAX_GPUS];
	int ndev;	    /* highest attached ordinal + 1 (under mu) */
	int connected;	    /* under mu */
	int first_try_done; /* under mu: the thread tried to connect once */
	/* Runs without the gate for want of the scheduler (sched_conn.c
	 * "Ungated runs"), under mu: the current episode's cause (enum
	 * nvs_ungated_reason, 0 none) and start (0: no GPU attached yet),
	 * and the finished episodes still to report. */
	int ungated_cause;
	uint64_t ungated_since_ns;
	uint32_t ungated_runs[NVS_UNGATED_REASONS + 1];
	uint64_t ungated_ns[NVS_UNGATED_REASONS + 1];
};
extern struct nvs_sc_state nvs_sc;

static inline uint64_t nvs_sc_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- sched_client.c ---- */
/* After every change of the per-GPU state, with nvs_sc.mu held. */
void nvs_sc_recompute_gate(void);
/* dev's allocated bytes (accounting's count); *changed (if not NULL) says
 * whether accounting reported a change since the last call. */
uint64_t nvs_sc_take_mem(int dev, int *changed);
/* A stream capture is active somewhere in the process. */
int nvs_sc_capturing(void);
/* The process is exiting: no more driver calls. */
int nvs_sc_stopping(void);

/* ---- sched_conn.c ---- */
/* The gate is open for want of the scheduler, for reason (enum
 * nvs_ungated_reason); with mu held. The first cause of an episode wins. */
void nvs_sc_ungated_cause(int reason);
/* The client thread; `evfd` is the eventfd application threads kick. */
void *nvs_sc_thread_main(void *evfd);
/* At start-up: the socket path, HELLO's limits, the reconnect jitter. */
void nvs_sc_conn_configure(void);
/* NVSHARE_GPU_CORE_LIMIT (1..100, default 100) as sent in HELLO. */
unsigned nvs_sc_hello_core_limit(void);
/* Outgoing messages (client thread only; dropped while disconnected). */
void nvs_sc_queue_gpu_msg(uint16_t type, int dev, uint32_t value);
void nvs_sc_queue_released(int dev, uint32_t flags, uint64_t drain_ns);
/* Sends the swap counters of dev if they changed. */
void nvs_sc_queue_swap_stats(int dev);
/* Forked child: close the parent's socket (sending nothing), reset. */
void nvs_sc_conn_atfork_child(void);

/* ---- sched_lock.c ---- */
/* A message from the scheduler (client thread). */
void nvs_sc_handle_msg(const struct nvs_msg *m);
/* The idle release, once per loop of the client thread. */
int nvs_sc_idle_tick(void);
/* Once per loop: brings back swapped-out memory of every GPU whose gate
 * would be open but for it (the GPU went concurrent, the scheduler went
 * away, a grant whose swap-in could not run). */
void nvs_sc_restore_tick(void);
/* The connection was lost: the idle watch ends (client thread). */
void nvs_sc_idle_watch_stop(void);
/* At start-up: NVSHARE_IDLE_RELEASE_MS. */
void nvs_sc_lock_configure(void);
/* Forked child: forget the parent's registration and idle watch. */
void nvs_sc_lock_atfork_child(void);

/* What the process does while not connected, for the warnings:
 * "running ungated", or that its CUDA work fails (sched_require.c). */
const char *nvs_sc_ungated_words(void);
/* NVSHARE_REQUIRE_SCHEDULER=1: gated calls fail instead of running. */
int nvs_sc_fail_closed(void);

#endif
