/*
 * The scheduler client's lock work, on the client thread (see
 * client/sched_client_internal.h for how the scheduler client is split, and
 * docs/client-lock.md): the scheduler's messages (GPU_MODE, LOCK_OK,
 * DROP_LOCK, WAITERS, SET_LIMITS), the drain and release of a lock, with the
 * swap-in on a grant and the swap-out on a drop, and the idle release.
 * It never holds nvs_sc.mu while it calls into the driver.
 */
#include "sched_client_internal.h"

#include "accounting.h"

#include "sched_quota.h"
#include "sched_swap.h"

#include "log.h"
#include "parse.h"
#include "protocol.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* An idle check whose drain took longer than this found the GPU still busy
 * (work queued before the last gated call): the job is not idle. */
#define NVS_BUSY_DRAIN_MIN_NS 2000000ull

/* NVSHARE_IDLE_RELEASE_MS given: WELCOME does not change idle_ms. */
static int idle_env_set;
static uint32_t idle_ms = NVS_DEFAULT_IDLE_RELEASE_MS; /* thread only */
static uint32_t client_id;
static int watching;	     /* idle watch active */
static uint64_t act_seen_ns; /* last time activity was observed */

static const char *lock_name(enum lock_state s)
{
	switch (s) {
	case L_NONE:
		return "none";
	case L_REQUESTED:
		return "requested";
	case L_HELD:
		return "held";
	case L_DROPPING:
		return "dropping";
	case L_IDLE_CHECK:
		return "idle-check";
	}
	return "?";
}

void nvs_sc_lock_configure(void)
{
	const char *v = getenv("NVSHARE_IDLE_RELEASE_MS");
	if (v && *v) {
		uint64_t ms;
		if (nvs_parse_duration_ms(v, &ms) == 0 && ms <= 3600000) {
			idle_ms = (uint32_t)ms;
			idle_env_set = 1;
		} else {
			NVS_WARN(
			    "NVSHARE_IDLE_RELEASE_MS=%s is not a duration; using the scheduler's",
			    v);
		}
	}
}

/* ---------------------------------------------------------------------- */
/* Draining and releasing                                                  */

/* Makes a context of dev current on the client thread: the application's
 * (unless it is `failed`, which just did not work), else the retained
 * primary one. Returns 0 if none could be made current. */
static int use_ctx(int dev, CUcontext failed)
{
	if (!nvs_real.cuCtxSetCurrent)
		return 0;
	pthread_mutex_lock(&nvs_sc.mu);
	CUcontext ctx = nvs_sc.gpus[dev].ctx;
	CUdevice cudev = nvs_sc.gpus[dev].cudev;
	pthread_mutex_unlock(&nvs_sc.mu);
	struct sc_gpu *g = &nvs_sc.gpus[dev];
	if (ctx && ctx != failed && nvs_real.cuCtxSetCurrent(ctx) == CUDA_SUCCESS)
		return 1;
	if (ctx) {
		/* The context we saw is gone (destroyed): fall back to the
		 * primary one from now on. */
		pthread_mutex_lock(&nvs_sc.mu);
		if (g->ctx == ctx)
			g->ctx = NULL;
		pthread_mutex_unlock(&nvs_sc.mu);
	}
	if (!g->primary && nvs_real.cuDevicePrimaryCtxRetain &&
	    nvs_real.cuDevicePrimaryCtxRetain(&g->primary, cudev) != CUDA_SUCCESS)
		g->primary = NULL;
	return g->primary && nvs_real.cuCtxSetCurrent(g->primary) == CUDA_SUCCESS;
}

/* Waits for the work already submitted on dev's context. Never while a stream
 * capture is active (captured work does not execute, and a synchronize would
 * invalidate the capture). */
static void sync_gpu(int dev)
{
	if (nvs_sc_capturing()) {
		NVS_DEBUG("GPU %d: stream capture active, not synchronizing", dev);
		return;
	}
	if (nvs_sc_stopping() || !nvs_real.cuCtxSetCurrent || !nvs_real.cuCtxSynchronize)
		return;
	pthread_mutex_lock(&nvs_sc.mu);
	CUcontext ctx = nvs_sc.gpus[dev].ctx;
	pthread_mutex_unlock(&nvs_sc.mu);
	if (ctx && nvs_real.cuCtxSetCurrent(ctx) == CUDA_SUCCESS &&
	    nvs_real.cuCtxSynchronize() == CUDA_SUCCESS)
		return;
	if (use_ctx(dev, ctx))
		(void)nvs_real.cuCtxSynchronize();
}

/* Swapping needs the application's context current and no capture. */
static int swap_possible(int dev)
{
	if (nvs_sc_capturing() || nvs_sc_stopping()) {
		NVS_DEBUG("GPU %d: stream capture active or exiting: no swap", dev);
		return 0;
	}
	return use_ctx(dev, NULL);
}

/* Restoring swapped-out memory needs the application's context current; a
 * capture does not stop it (nothing is synchronized but our own stream). */
static int restore_possible(int dev)
{
	return !nvs_sc_stopping() && use_ctx(dev, NULL);
}

/* Memory may be short on dev: the swap staging grows in the background
 * (in the application's context; none known yet: later). */
static void prepare_staging(int dev)
{
	pthread_mutex_lock(&nvs_sc.mu);
	CUcontext ctx = nvs_sc.gpus[dev].ctx;
	pthread_mutex_unlock(&nvs_sc.mu);
	if (ctx && !nvs_sc_stopping() && nvs_real.cuCtxSetCurrent &&
	    nvs_real.cuCtxSetCurrent(ctx) == CUDA_SUCCESS)
		nvs_swap_prepare(dev);
}

/* After a gate closed: waits until every gated call that passed it before
 * has returned from the driver, so that the drain covers their work and no
 * work reaches the GPU while memory is swapped out (client/sched_client.h).
 * Bounded (a call blocked in the driver that long is not a launch racing
 * the gate): 0, or -1 after NVS_INFLIGHT_WAIT_NS. */
#define NVS_INFLIGHT_WAIT_NS 10000000000ull
static int wait_inflight(int dev)
{
	if (!atomic_load_explicit(&nvs_gate_inflight, memory_order_seq_cst))
		return 0;
	uint64_t t0 = nvs_sc_now_ns();
	long ns = 20000;
	while (atomic_load_explicit(&nvs_gate_inflight, memory_order_seq_cst)) {
		if (nvs_sc_now_ns() - t0 > NVS_INFLIGHT_WAIT_NS) {
			NVS_WARN("GPU %d: a gated call stayed in the driver for %.0f s after the "
				 "gate closed; this release swaps nothing by the fast path",
				 dev, (double)NVS_INFLIGHT_WAIT_NS / 1e9);
			return -1;
		}
		struct timespec ts = {0, ns};
		nanosleep(&ts, NULL);
		if (ns < 1000000)
			ns *= 2;
	}
	return 0;
}

static uint64_t busy_threshold_ns(void)
{
	uint64_t tick = (uint64_t)(idle_ms / 4 ? idle_ms / 4 : 1) * 1000000ull;
	return tick > NVS_BUSY_DRAIN_MIN_NS ? tick : NVS_BUSY_DRAIN_MIN_NS;
}

/*
 * Gives dev's lock back: closes the gate, drains, answers LOCK_RELEASED.
 * `idle`: an idle release (flags 1) that is abandoned, gate re-opened and
 * lock kept, if the job turns out not to be idle (a gated call since the last
 * tick, an application thread waiting at the gate, or work still running).
 */
static void release_lock(int dev, uint32_t drop_flags, int idle)
{
	struct sc_gpu *g = &nvs_sc.gpus[dev];
	pthread_mutex_lock(&nvs_sc.mu);
	if (g->lock != L_HELD) {
		pthread_mutex_unlock(&nvs_sc.mu);
		return;
	}
	g->lock = idle ? L_IDLE_CHECK : L_DROPPING;
	nvs_sc_recompute_gate();
	pthread_mutex_unlock(&nvs_sc.mu);

	uint64_t t0 = nvs_sc_now_ns();
	int calm = wait_inflight(dev) == 0; /* nothing can reach the GPU from now on */
	sync_gpu(dev);
	if (!idle && (drop_flags & NVS_LOCK_SWAP_OUT) && calm && swap_possible(dev)) {
		/* The amount the scheduler computed (MiB in the flags' upper
		 * bits; 0 = all): just what the next holder needs. */
		uint64_t mib = drop_flags >> NVS_DROP_SWAP_MIB_SHIFT;
		nvs_swap_out(dev, mib ? mib << 20 : UINT64_MAX);
	}
	uint64_t drain = nvs_sc_now_ns() - t0;

	pthread_mutex_lock(&nvs_sc.mu);
	uint32_t moved_mib = 0;
	if (idle) {
		int act = atomic_exchange(&nvs_gate_activity, 0);
		if (act || g->blocked > 0 || drain > busy_threshold_ns() || !g->serialized) {
			NVS_DEBUG(
			    "GPU %d: not idle after all (activity %d, waiting %d, drain %.2f ms)",
			    dev, act, g->blocked, (double)drain / 1e6);
			if (g->lock == L_IDLE_CHECK)
				g->lock = L_HELD;
			act_seen_ns = nvs_sc_now_ns();
			nvs_sc_recompute_gate();
			pthread_cond_broadcast(&nvs_sc.cv);
			pthread_mutex_unlock(&nvs_sc.mu);
			return;
		}
		/* Idle for sure: free the room the next holder needs (SWAP_HINT),
		 * as a DROP_LOCK with SWAP_OUT would have asked. Only now, so a
		 * job that was not idle after all moves nothing; the gate stays
		 * closed meanwhile, and the time counts as drain. */
		uint32_t mib = g->idle_swap_mib;
		if (mib && calm && g->lock == L_IDLE_CHECK) {
			pthread_mutex_unlock(&nvs_sc.mu);
			if (swap_possible(dev)) {
				moved_mib = nvs_swap_mib(nvs_swap_out(dev, (uint64_t)mib << 20));
			}
			drain = nvs_sc_now_ns() - t0;
			pthread_mutex_lock(&nvs_sc.mu);
		}
	}
	if (g->lock == L_DROPPING || g->lock == L_IDLE_CHECK) {
		nvs_swap_released(dev);
		nvs_sc_queue_swap_stats(dev);
		nvs_sc_queue_released(
		    dev, idle ? NVS_RELEASED_IDLE | (moved_mib << NVS_DROP_SWAP_MIB_SHIFT) : 0u,
		    drain);
		g->lock = L_NONE;
		/* Threads that queued at the closed gate ask again at once, after
		 * the release, so the scheduler sees them behind the waiters. */
		if (g->blocked > 0 && g->serialized) {
			g->lock = L_REQUESTED;
			nvs_sc_queue_gpu_msg(NVS_MSG_REQ_LOCK, dev, 0);
		}
		NVS_DEBUG("GPU %d: released (%s, drain %.3f ms)", dev, idle ? "idle" : "asked",
			  (double)drain / 1e6);
	}
	nvs_sc_recompute_gate();
	pthread_cond_broadcast(&nvs_sc.cv);
	pthread_mutex_unlock(&nvs_sc.mu);
}

/* ---------------------------------------------------------------------- */
/* Incoming messages                                                       */

static struct sc_gpu *msg_gpu(uint32_t local_gpu, const char *what)
{
	if (local_gpu >= NVS_MAX_GPUS || !nvs_sc.gpus[local_gpu].attached) {
		NVS_DEBUG("%s for unknown GPU %u ignored", what, local_gpu);
		return NULL;
	}
	return &nvs_sc.gpus[local_gpu];
}

void nvs_sc_handle_msg(const struct nvs_msg *m)
{
	struct sc_gpu *g;
	NVS_DEBUG("<- %s", nvs_msg_type_name(m->type));
	switch (m->type) {
	case NVS_MSG_WELCOME:
		client_id = m->u.welcome.client_id;
		if (!idle_env_set)
			idle_ms = m->u.welcome.idle_release_ms ? m->u.welcome.idle_release_ms
							       : NVS_DEFAULT_IDLE_RELEASE_MS;
		NVS_DEBUG("registered as client %u (idle release %u ms)", client_id, idle_ms);
		break;
	case NVS_MSG_GPU_MODE: {
		int dev = (int)m->u.gpu.local_gpu;
		if (!(g = msg_gpu(m->u.gpu.local_gpu, "GPU_MODE")))
			break;
		int ser = m->u.gpu.value != 0;
		pthread_mutex_lock(&nvs_sc.mu);
		/* A waiter let in by the switch to concurrent (another client
		 * freed memory: everything fits now) is admitted like a grant:
		 * its memory comes in before the gate opens. Otherwise its
		 * first kernels fault in what it lacks (memory swapped out, or
		 * allocated while serialized and left to first touch) page by
		 * page: on an H200, 676 MiB by faults cost ~40 ms against 15 ms
		 * by prefetch, 3 % of a 1.3 s job (issue 32's pressure target). */
		if (!ser && g->serialized && g->lock == L_REQUESTED) {
			CUdevice cudev = g->cudev;
			pthread_mutex_unlock(&nvs_sc.mu);
			if (swap_possible(dev)) {
				nvs_swap_in(dev, cudev);
				nvs_sc_queue_swap_stats(dev);
			}
			pthread_mutex_lock(&nvs_sc.mu);
		}
		if (!ser && g->lock != L_DROPPING && g->lock != L_IDLE_CHECK) {
			/* Concurrent: there is no lock any more. */
			g->lock = L_NONE;
			g->req_pending = 0;
		}
		int became = ser && !g->serialized;
		if (ser != g->serialized)
			NVS_DEBUG("GPU %d: %s", dev, ser ? "serialized" : "concurrent");
		g->serialized = ser;
		g->mode_known = 1;
		nvs_qclient_set_gpu_quota(dev, m->u.gpu.value == NVS_GPU_MODE_SERIALIZED_QUOTA);
		nvs_sc_recompute_gate();
		pthread_cond_broadcast(&nvs_sc.cv);
		pthread_mutex_unlock(&nvs_sc.mu);
		/* Serialized (in auto: the memory does not fit): hand-offs will
		 * swap, so the staging starts pinning now, off the critical
		 * path (docs/swap.md "Host staging"). */
		if (became)
			prepare_staging(dev);
		break;
	}
	case NVS_MSG_LOCK_OK: {
		int dev = (int)m->u.lock_ok.local_gpu;
		if (!(g = msg_gpu(m->u.lock_ok.local_gpu, "LOCK_OK")))
			break;
		pthread_mutex_lock(&nvs_sc.mu);
		int regrant = g->lock == L_HELD;
		CUdevice cudev = g->cudev;
		pthread_mutex_unlock(&nvs_sc.mu);
		/* Before the gate opens: what the swap engine took out comes
		 * back in any case; with SWAP_IN everything else is prefetched
		 * too, so the first kernel finds its data on the GPU instead of
		 * faulting it in page by page. */
		if ((m->u.lock_ok.flags & NVS_LOCK_SWAP_IN) && !regrant && swap_possible(dev)) {
			nvs_swap_in(dev, cudev);
			nvs_sc_queue_swap_stats(dev);
		} else if (nvs_swap_must_restore(dev) && restore_possible(dev)) {
			nvs_swap_restore(dev, cudev);
			nvs_sc_queue_swap_stats(dev);
		}
		pthread_mutex_lock(&nvs_sc.mu);
		if (g->lock != L_HELD) {      /* not a repeated LOCK_OK */
			g->waiters = 0;	      /* as the scheduler: 0 until WAITERS says more */
			g->idle_swap_mib = 0; /* and until SWAP_HINT says more */
		}
		g->lock = L_HELD;
		g->req_pending = 0;
		g->quantum_ms = m->u.lock_ok.quantum_ms;
		/* A fresh grant: the job has idle_ms to use it. */
		atomic_store(&nvs_gate_activity, 0);
		act_seen_ns = nvs_sc_now_ns();
		nvs_sc_recompute_gate();
		pthread_cond_broadcast(&nvs_sc.cv);
		pthread_mutex_unlock(&nvs_sc.mu);
		NVS_DEBUG("GPU %d: lock granted (quantum %u ms)", dev, m->u.lock_ok.quantum_ms);
		break;
	}
	case NVS_MSG_DROP_LOCK: {
		if (!(g = msg_gpu(m->u.drop.local_gpu, "DROP_LOCK")))
			break;
		pthread_mutex_lock(&nvs_sc.mu);
		enum lock_state s = g->lock;
		pthread_mutex_unlock(&nvs_sc.mu);
		if (s != L_HELD) {
			/* Our LOCK_RELEASED (idle) crossed this DROP_LOCK. */
			NVS_DEBUG("GPU %u: DROP_LOCK while %s ignored", m->u.drop.local_gpu,
				  lock_name(s));
			break;
		}
		if (m->u.drop.grace_ms == 0) {
			/* Revoked: the scheduler already gave the lock away and
			 * would ignore a LOCK_RELEASED. Stop submitting now. */
			pthread_mutex_lock(&nvs_sc.mu);
			g->lock = L_NONE;
			if (g->blocked > 0 && g->serialized) {
				g->lock = L_REQUESTED;
				nvs_sc_queue_gpu_msg(NVS_MSG_REQ_LOCK, (int)m->u.drop.local_gpu, 0);
			}
			nvs_sc_recompute_gate();
			pthread_cond_broadcast(&nvs_sc.cv);
			pthread_mutex_unlock(&nvs_sc.mu);
			NVS_WARN("GPU %u: lock revoked by the scheduler (did not drain in time)",
				 m->u.drop.local_gpu);
			break;
		}
		release_lock((int)m->u.drop.local_gpu, m->u.drop.flags, 0);
		break;
	}
	case NVS_MSG_WAITERS:
	case NVS_MSG_SWAP_HINT:
		if (!(g = msg_gpu(m->u.gpu.local_gpu, nvs_msg_type_name(m->type))))
			break;
		pthread_mutex_lock(&nvs_sc.mu);
		*(m->type == NVS_MSG_WAITERS ? &g->waiters : &g->idle_swap_mib) = m->u.gpu.value;
		pthread_mutex_unlock(&nvs_sc.mu);
		/* Memory is short: the swap staging starts pinning now, in the
		 * background, before any swap-out needs it. */
		if (m->type == NVS_MSG_SWAP_HINT && m->u.gpu.value)
			prepare_staging((int)m->u.gpu.local_gpu);
		break;
	case NVS_MSG_SET_LIMITS:
		if (!(g = msg_gpu(m->u.limits.local_gpu, "SET_LIMITS")))
			break;
		nvs_acct_set_runtime_limit((int)m->u.limits.local_gpu, m->u.limits.mem_limit);
		pthread_mutex_lock(&nvs_sc.mu);
		g->core_limit = m->u.limits.core_limit;
		g->mem_limit = m->u.limits.mem_limit;
		g->limits_set = 1;
		if (nvs_qclient_set_limit((int)m->u.limits.local_gpu, g->core_limit))
			nvs_sc_recompute_gate();
		pthread_mutex_unlock(&nvs_sc.mu);
		break;
	default:
		NVS_DEBUG("unexpected %s from scheduler ignored", nvs_msg_type_name(m->type));
		break;
	}
}

/* ---------------------------------------------------------------------- */
/* Restoring swapped-out memory                                            */

void nvs_sc_restore_tick(void)
{
	int cand[NVS_MAX_GPUS], nc = 0;
	CUdevice cudev[NVS_MAX_GPUS];
	pthread_mutex_lock(&nvs_sc.mu);
	for (int i = 0; i < nvs_sc.ndev; i++) {
		const struct sc_gpu *g = &nvs_sc.gpus[i];
		/* Open but for the swapped-out memory: concurrent, no
		 * scheduler, or held (a grant whose restore could not run). */
		if (g->attached && nvs_swap_must_restore(i) &&
		    (!nvs_sc.connected || !g->serialized || g->lock == L_HELD)) {
			cudev[nc] = g->cudev;
			cand[nc++] = i;
		}
	}
	pthread_mutex_unlock(&nvs_sc.mu);
	for (int k = 0; k < nc; k++) {
		if (!restore_possible(cand[k]))
			continue;
		nvs_swap_restore(cand[k], cudev[k]);
		nvs_sc_queue_swap_stats(cand[k]);
		NVS_DEBUG("GPU %d: swapped-out memory restored (its gate may open)", cand[k]);
	}
	if (nc) {
		pthread_mutex_lock(&nvs_sc.mu);
		nvs_sc_recompute_gate();
		pthread_cond_broadcast(&nvs_sc.cv);
		pthread_mutex_unlock(&nvs_sc.mu);
	}
}

/* ---------------------------------------------------------------------- */
/* Idle release                                                            */

/* Returns the poll timeout contribution (ms, -1 = none) of the idle watch and
 * releases idle locks whose time has come. */
int nvs_sc_idle_tick(void)
{
	if (idle_ms == 0)
		return -1;
	int cand[NVS_MAX_GPUS], nc = 0;
	pthread_mutex_lock(&nvs_sc.mu);
	for (int i = 0; i < nvs_sc.ndev; i++) {
		const struct sc_gpu *g = &nvs_sc.gpus[i];
		/* A limited client releases when idle even if nobody waits:
		 * its quota is billed by hold time. */
		if (g->attached && g->serialized && g->lock == L_HELD &&
		    (g->waiters > 0 || nvs_qclient_limited(i)))
			cand[nc++] = i;
	}
	pthread_mutex_unlock(&nvs_sc.mu);
	if (nc == 0) {
		watching = 0;
		return -1;
	}
	uint64_t now = nvs_sc_now_ns();
	if (!watching) {
		/* act_seen_ns holds the last observation: if nothing happened
		 * since, the job may already have been idle long enough. */
		watching = 1;
	}
	if (atomic_exchange(&nvs_gate_activity, 0))
		act_seen_ns = now;
	uint64_t idle_ns = (uint64_t)idle_ms * 1000000ull;
	if (now - act_seen_ns >= idle_ns) {
		for (int k = 0; k < nc; k++)
			release_lock(cand[k], 0, 1);
		return 0; /* re-evaluate at once */
	}
	int tick = (int)(idle_ms / 4 ? idle_ms / 4 : 1);
	uint64_t left_ms = (idle_ns - (now - act_seen_ns) + 999999) / 1000000;
	return left_ms < (uint64_t)tick ? (int)left_ms : tick;
}

void nvs_sc_idle_watch_stop(void)
{
	watching = 0;
}

void nvs_sc_lock_atfork_child(void)
{
	watching = 0;
	client_id = 0;
}
