/*
 * Client side of compute quotas: the in-flight cap of a limited client.
 * See client/sched_quota.h and docs/quotas.md ("Bounded revocation").
 */
#include "sched_quota.h"

#include "accounting.h" /* NVS_MAX_GPUS */
#include "real.h"
#include "sched_client.h" /* nvs_gate_activity */

#include "log.h"
#include "parse.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define QC_EVENTS_MAX 32u	/* ring size: M <= 31 */
#define QC_POLL_NS 50000L	/* cuEventQuery polling period while capped: */
#define QC_POLL_MAX_NS 1600000L /* 50 us doubling up to 1.6 ms */

struct qgpu {
	pthread_mutex_t mu;
	CUcontext ctx;		   /* events belong to this context */
	CUevent ev[QC_EVENTS_MAX]; /* created lazily, reused */
	unsigned head, count;	   /* outstanding events: ring */
	atomic_uint calls;	   /* gated calls (only every `every`th locks) */
};

static struct qgpu qg[NVS_MAX_GPUS];
static atomic_uint limit_of[NVS_MAX_GPUS]; /* 0: not set (none) */
static atomic_int quota_gpu[NVS_MAX_GPUS]; /* GPU_MODE 2: a quota runs there */
static atomic_int ncapped;		   /* GPUs whose in-flight work is capped */
static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned every = 8, max_out = 2;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static void read_cfg(void)
{
	uint64_t v;
	if (nvs_env_u64("NVSHARE_QUOTA_EVENT_EVERY", 1, 4096, &v) == 1)
		every = (unsigned)v;
	if (nvs_env_u64("NVSHARE_QUOTA_MAX_EVENTS", 1, QC_EVENTS_MAX - 1, &v) == 1)
		max_out = (unsigned)v;
	for (int i = 0; i < NVS_MAX_GPUS; i++)
		pthread_mutex_init(&qg[i].mu, NULL);
}

static int is_limited(unsigned l)
{
	return l >= 1 && l < 100;
}

static int capped_now(int dev)
{
	return is_limited(atomic_load_explicit(&limit_of[dev], memory_order_relaxed)) ||
	       atomic_load_explicit(&quota_gpu[dev], memory_order_relaxed);
}

/* Applies a change to dev's limit or quota flag; returns 1 if that changed
 * whether dev's in-flight work is capped (the caller recomputes its gate). */
static int cap_update(int dev, unsigned limit, int quota, int which)
{
	pthread_mutex_lock(&cap_mu);
	int was = capped_now(dev);
	if (which)
		atomic_store(&quota_gpu[dev], quota);
	else
		atomic_store(&limit_of[dev], limit);
	int now = capped_now(dev);
	if (was != now)
		atomic_fetch_add(&ncapped, now ? 1 : -1);
	pthread_mutex_unlock(&cap_mu);
	return was != now;
}

int nvs_qclient_set_limit(int dev, unsigned core_limit)
{
	if (dev < 0 || dev >= NVS_MAX_GPUS)
		return 0;
	pthread_once(&cfg_once, read_cfg);
	unsigned old = atomic_load(&limit_of[dev]);
	if (old != core_limit && (is_limited(old) || is_limited(core_limit)))
		NVS_INFO("GPU %d: compute limit %u%%%s", dev, core_limit,
			 is_limited(core_limit) ? " (in-flight work capped)" : " (no limit)");
	return cap_update(dev, core_limit, 0, 0);
}

int nvs_qclient_set_gpu_quota(int dev, int on)
{
	if (dev < 0 || dev >= NVS_MAX_GPUS)
		return 0;
	pthread_once(&cfg_once, read_cfg);
	on = !!on;
	if (atomic_load(&quota_gpu[dev]) != on)
		NVS_DEBUG("GPU %d: %s", dev,
			  on ? "a compute quota runs on this GPU: in-flight work capped"
			     : "no compute quota on this GPU any more");
	return cap_update(dev, 0, on, 1);
}

int nvs_qclient_limited(int dev)
{
	return dev >= 0 && dev < NVS_MAX_GPUS &&
	       is_limited(atomic_load_explicit(&limit_of[dev], memory_order_relaxed));
}

int nvs_qclient_capped(int dev)
{
	return dev >= 0 && dev < NVS_MAX_GPUS && capped_now(dev);
}

int nvs_qclient_any_capped(void)
{
	return atomic_load_explicit(&ncapped, memory_order_relaxed) > 0;
}

/* Forgets events of another context (destroyed, or a second one). */
static void reset_ring(struct qgpu *q, CUcontext ctx)
{
	if (q->ctx && nvs_real.cuEventDestroy_v2)
		for (unsigned i = 0; i < QC_EVENTS_MAX; i++)
			if (q->ev[i])
				(void)nvs_real.cuEventDestroy_v2(q->ev[i]);
	for (unsigned i = 0; i < QC_EVENTS_MAX; i++)
		q->ev[i] = NULL;
	q->ctx = ctx;
	q->head = q->count = 0;
}

void nvs_qclient_gate(int dev, int capturing)
{
	if (dev < 0 || dev >= NVS_MAX_GPUS || capturing)
		return;
	struct qgpu *q = &qg[dev];
	/* Only every `every`th call records an event and may wait; the others
	 * only count (no lock, no driver call). They need not wait: after a
	 * recording call at most max_out events are incomplete (it waited for
	 * that), and only recording calls add events. */
	if ((atomic_fetch_add_explicit(&q->calls, 1, memory_order_relaxed) + 1) % every)
		return;
	if (!nvs_real.cuEventCreate || !nvs_real.cuEventRecord || !nvs_real.cuEventQuery ||
	    !nvs_real.cuCtxGetCurrent)
		return;
	CUcontext cur = NULL;
	if (nvs_real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur)
		return;
	pthread_mutex_lock(&q->mu);
	if (q->ctx != cur)
		reset_ring(q, cur);
	unsigned slot = (q->head + q->count) % QC_EVENTS_MAX;
	if (!q->ev[slot] &&
	    nvs_real.cuEventCreate(&q->ev[slot], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
		q->ev[slot] = NULL;
	/* The legacy default stream: the event completes after the
	 * work queued before it on every blocking stream. */
	if (q->ev[slot] && nvs_real.cuEventRecord(q->ev[slot], NULL) == CUDA_SUCCESS)
		q->count++;
	/* Drop completed events from the front; wait while too many are not.
	 * The wait polls with a growing period: the events still queued
	 * behind the oldest keep the GPU busy meanwhile. */
	long poll_ns = QC_POLL_NS;
	while (q->count > 0) {
		CUresult r = nvs_real.cuEventQuery(q->ev[q->head]);
		if (r == CUDA_ERROR_NOT_READY && q->count > max_out) {
			/* Submitting, not idle: no idle release meanwhile. */
			atomic_store_explicit(&nvs_gate_activity, 1, memory_order_relaxed);
			struct timespec ts = {0, poll_ns};
			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
			if (poll_ns < QC_POLL_MAX_NS)
				poll_ns *= 2;
			continue;
		}
		if (r == CUDA_ERROR_NOT_READY)
			break;
		q->head = (q->head + 1) % QC_EVENTS_MAX;
		q->count--;
	}
	pthread_mutex_unlock(&q->mu);
}

void nvs_qclient_atfork_child(void)
{
	/* The child has no connection yet: the GPU's quota mode is unknown
	 * (its own limit, from the environment, stays). */
	pthread_mutex_init(&cap_mu, NULL);
	for (int i = 0; i < NVS_MAX_GPUS; i++)
		if (atomic_load(&quota_gpu[i]))
			cap_update(i, 0, 0, 1);
	for (int i = 0; i < NVS_MAX_GPUS; i++) {
		pthread_mutex_init(&qg[i].mu, NULL);
		/* The parent's events are not ours to destroy. */
		for (unsigned k = 0; k < QC_EVENTS_MAX; k++)
			qg[i].ev[k] = NULL;
		qg[i].ctx = NULL;
		qg[i].head = qg[i].count = 0;
		atomic_store(&qg[i].calls, 0);
	}
}
