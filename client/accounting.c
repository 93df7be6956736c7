/*
 * Per-process, per-GPU memory accounting and limits.
 *
 * used[dev] is the only thing an allocation path touches before calling the
 * driver: a compare-exchange loop reserves the size against the effective
 * limit (no check-then-allocate race between threads), undone if the driver
 * fails. The allocation table (pointer -> size, device, kind) is a chained
 * hash map behind one mutex; launches never touch it.
 */
#include "client/accounting.h"
#include "client/internal.h"

#include "parse.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Atomic uint64_t used[NVS_MAX_GPUS];
/* Scheduler's run-time limit, stored +1 (0: none). */
static _Atomic uint64_t rt_limit_p1[NVS_MAX_GPUS];
static _Atomic uint64_t gpu_total[NVS_MAX_GPUS];

static void (*_Atomic observer)(int dev);

static int dev_ok(int dev)
{
	return dev >= 0 && dev < NVS_MAX_GPUS;
}

void nvs_acct_observe(void (*on_change)(int dev))
{
	atomic_store_explicit(&observer, on_change, memory_order_release);
}

static void changed(int dev)
{
	void (*cb)(int) = atomic_load_explicit(&observer, memory_order_acquire);
	if (cb)
		cb(dev);
}

uint64_t nvs_acct_gpu_total(int dev)
{
	if (!dev_ok(dev))
		return 0;
	uint64_t t = atomic_load_explicit(&gpu_total[dev], memory_order_relaxed);
	if (t)
		return t;
	CUdevice d;
	size_t bytes = 0;
	if (!nvs_real.cuDeviceGet || !nvs_real.cuDeviceTotalMem_v2 ||
	    nvs_real.cuDeviceGet(&d, dev) != CUDA_SUCCESS ||
	    nvs_real.cuDeviceTotalMem_v2(&bytes, d) != CUDA_SUCCESS)
		return 0;
	atomic_store_explicit(&gpu_total[dev], (uint64_t)bytes, memory_order_relaxed);
	return bytes;
}

uint64_t nvs_acct_configured_limit(int dev)
{
	nvs_config_load();
	uint64_t lim = nvs_cfg.mem_limit;
	if (dev_ok(dev)) {
		/* The scheduler's value is the effective limit (nvsharectl >
		 * annotation > this environment): it replaces ours, and
		 * UINT64_MAX stored as is means "no limit". */
		uint64_t r = atomic_load_explicit(&rt_limit_p1[dev], memory_order_relaxed);
		if (r)
			lim = r == UINT64_MAX ? UINT64_MAX : r - 1;
	}
	return lim;
}

uint64_t nvs_acct_limit(int dev)
{
	uint64_t lim = nvs_acct_configured_limit(dev);
	if (!nvs_cfg.single_oversub) {
		uint64_t t = nvs_acct_gpu_total(dev);
		if (t && t < lim)
			lim = t;
	}
	return lim;
}

void nvs_acct_set_runtime_limit(int dev, uint64_t bytes)
{
	if (!dev_ok(dev))
		return;
	atomic_store(&rt_limit_p1[dev], bytes >= UINT64_MAX - 1 ? UINT64_MAX : bytes + 1);
	char b[32];
	NVS_INFO("GPU %d: memory limit %s by the scheduler", dev,
		 bytes == UINT64_MAX ? "removed" : nvs_format_size(bytes, b, sizeof b));
}

uint64_t nvs_acct_used(int dev)
{
	return dev_ok(dev) ? atomic_load_explicit(&used[dev], memory_order_relaxed) : 0;
}

/* One WARN line per refusal, but at most one per second per device (a
 * framework retrying in a loop must not flood stderr); the rest go to DEBUG. */
static _Atomic int64_t last_warn_s[NVS_MAX_GPUS];

static void explain_refusal(int dev, uint64_t bytes, uint64_t cur, uint64_t lim)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t prev = atomic_load_explicit(&last_warn_s[dev], memory_order_relaxed);
	int loud = prev != (int64_t)ts.tv_sec + 1 &&
		   atomic_compare_exchange_strong(&last_warn_s[dev], &prev, (int64_t)ts.tv_sec + 1);
	if (!loud && !nvs_log_debug_enabled())
		return;
	char a[32], u[32], l[32];
	nvs_format_size(bytes, a, sizeof a);
	nvs_format_size(cur, u, sizeof u);
	nvs_format_size(lim, l, sizeof l);
	uint64_t rt = dev_ok(dev) ? atomic_load(&rt_limit_p1[dev]) : 0;
	const char *why, *how;
	if (nvs_cfg.mem_request == lim && (!rt || rt - 1 == lim)) {
		/* The scheduler's limit equal to the request is the request. */
		why = "the Pod's nvshare.com/gpu-memory (NVSHARE_GPU_MEMORY_REQUEST)";
		how = "request more units, or raise it with the nvshare.com/gpu-memory-limit "
		      "annotation";
	} else if (rt && rt - 1 == lim) {
		why = "the limit set by the nvshare scheduler";
		how = "change it with nvsharectl";
	} else if (nvs_cfg.mem_limit == lim) {
		why = "NVSHARE_GPU_MEMORY_LIMIT";
		how = "raise NVSHARE_GPU_MEMORY_LIMIT";
	} else {
		why = "the GPU's memory size";
		how = "set NVSHARE_ENABLE_SINGLE_OVERSUB=1 to let one process oversubscribe";
	}
	nvs_log(loud ? NVS_LOG_WARN : NVS_LOG_DEBUG,
		"GPU %d: allocation of %s refused (CUDA_ERROR_OUT_OF_MEMORY): %s in use, limit %s "
		"is %s; %s",
		dev, a, u, l, why, how);
}

int nvs_acct_reserve(int dev, uint64_t bytes)
{
	if (!dev_ok(dev))
		return -1;
	uint64_t lim = nvs_acct_limit(dev);
	uint64_t cur = atomic_load_explicit(&used[dev], memory_order_relaxed);
	do {
		if (bytes > lim || cur > lim - bytes) {
			explain_refusal(dev, bytes, cur, lim);
			return -1;
		}
	} while (!atomic_compare_exchange_weak_explicit(
	    &used[dev], &cur, cur + bytes, memory_order_acq_rel, memory_order_relaxed));
	char a[32], u[32];
	NVS_DEBUG("GPU %d: reserved %s, now %s", dev, nvs_format_size(bytes, a, sizeof a),
		  nvs_format_size(cur + bytes, u, sizeof u));
	changed(dev);
	return 0;
}

void nvs_acct_unreserve(int dev, uint64_t bytes)
{
	if (!dev_ok(dev))
		return;
	uint64_t cur = atomic_load_explicit(&used[dev], memory_order_relaxed), next;
	do
		next = cur > bytes ? cur - bytes : 0; /* never underflow */
	while (!atomic_compare_exchange_weak_explicit(&used[dev], &cur, next, memory_order_acq_rel,
						      memory_order_relaxed));
	changed(dev);
}

void nvs_acct_recount(int dev, uint64_t bytes)
{
	if (!dev_ok(dev))
		return;
	atomic_fetch_add_explicit(&used[dev], bytes, memory_order_acq_rel);
	changed(dev);
}

/* ---- allocation table ---- */

struct node {
	uint64_t key;
	uint64_t bytes;
	int dev;
	enum nvs_alloc_kind kind;
	struct node *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct node **buckets;
static size_t nbuckets, count;
static uint64_t kind_bytes[NVS_MAX_GPUS][NVS_ALLOC_KINDS]; /* under mu */

static void kind_add(const struct node *e, int sign)
{
	if (!dev_ok(e->dev) || (unsigned)e->kind >= NVS_ALLOC_KINDS)
		return;
	uint64_t *k = &kind_bytes[e->dev][e->kind];
	*k = sign > 0 ? *k + e->bytes : (*k >= e->bytes ? *k - e->bytes : 0);
}

uint64_t nvs_acct_kind_bytes(int dev, enum nvs_alloc_kind kind)
{
	if (!dev_ok(dev) || (unsigned)kind >= NVS_ALLOC_KINDS)
		return 0;
	pthread_mutex_lock(&mu);
	uint64_t v = kind_bytes[dev][kind];
	pthread_mutex_unlock(&mu);
	return v;
}

static size_t slot(uint64_t key, size_t n)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return (size_t)(key & (n - 1));
}

static void grow(void)
{
	size_t n = nbuckets ? nbuckets * 2 : 1024;
	struct node **nb = calloc(n, sizeof *nb);
	if (!nb)
		return; /* keep the old table: longer chains, still correct */
	for (size_t i = 0; i < nbuckets; i++) {
		struct node *e = buckets[i], *next;
		for (; e; e = next) {
			next = e->next;
			size_t s = slot(e->key, n);
			e->next = nb[s];
			nb[s] = e;
		}
	}
	free(buckets);
	buckets = nb;
	nbuckets = n;
}

void nvs_acct_track(int dev, CUdeviceptr ptr, uint64_t bytes, enum nvs_alloc_kind kind)
{
	struct node *e = malloc(sizeof *e);
	if (!e) {
		NVS_ERROR("out of host memory tracking an allocation; it will not be un-accounted");
		return;
	}
	*e = (struct node){.key = ptr, .bytes = bytes, .dev = dev, .kind = kind};
	pthread_mutex_lock(&mu);
	if (count >= nbuckets * 2)
		grow();
	if (!nbuckets) {
		pthread_mutex_unlock(&mu);
		free(e);
		return;
	}
	size_t s = slot(ptr, nbuckets);
	e->next = buckets[s];
	buckets[s] = e;
	count++;
	kind_add(e, 1);
	pthread_mutex_unlock(&mu);
}

static struct node **find_locked(uint64_t key)
{
	if (!nbuckets)
		return NULL;
	struct node **pp = &buckets[slot(key, nbuckets)];
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->key == key)
			return pp;
	return NULL;
}

uint64_t nvs_acct_untrack(CUdeviceptr ptr, int *dev)
{
	pthread_mutex_lock(&mu);
	struct node **pp = find_locked(ptr), *e = NULL;
	if (pp) {
		e = *pp;
		*pp = e->next;
		count--;
		kind_add(e, -1);
	}
	pthread_mutex_unlock(&mu);
	if (!e)
		return 0;
	uint64_t b = e->bytes;
	if (dev)
		*dev = e->dev;
	free(e);
	return b;
}

int nvs_acct_lookup(CUdeviceptr ptr, int *dev, uint64_t *bytes, enum nvs_alloc_kind *kind)
{
	int rc = -1;
	pthread_mutex_lock(&mu);
	struct node **pp = find_locked(ptr);
	if (pp) {
		if (dev)
			*dev = (*pp)->dev;
		if (bytes)
			*bytes = (*pp)->bytes;
		if (kind)
			*kind = (*pp)->kind;
		rc = 0;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

struct range {
	CUdeviceptr ptr;
	uint64_t bytes;
};

static int larger_first(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

void nvs_acct_foreach_managed(int dev, void (*cb)(CUdeviceptr, uint64_t, void *), void *ctx)
{
	/* Snapshot under the lock, call back without it (the callback may
	 * call the driver; frees must not wait for that). */
	pthread_mutex_lock(&mu);
	size_t n = 0, cap = count;
	struct range *v = cap ? malloc(cap * sizeof *v) : NULL;
	for (size_t i = 0; v && i < nbuckets; i++)
		for (struct node *e = buckets[i]; e; e = e->next)
			if (e->dev == dev && e->kind == NVS_ALLOC_MANAGED && n < cap)
				v[n++] = (struct range){e->key, e->bytes};
	pthread_mutex_unlock(&mu);
	if (!v)
		return;
	qsort(v, n, sizeof *v, larger_first);
	for (size_t i = 0; i < n; i++)
		cb(v[i].ptr, v[i].bytes, ctx);
	free(v);
}

void nvs_acct_atfork_child(void)
{
	pthread_mutex_init(&mu, NULL);
	for (size_t i = 0; i < nbuckets; i++) {
		struct node *e = buckets[i], *next;
		for (; e; e = next) {
			next = e->next;
			free(e);
		}
	}
	free(buckets);
	buckets = NULL;
	nbuckets = count = 0;
	memset(kind_bytes, 0, sizeof kind_bytes);
	for (int d = 0; d < NVS_MAX_GPUS; d++) {
		atomic_store(&used[d], 0);
		atomic_store(&rt_limit_p1[d], 0);
	}
}
