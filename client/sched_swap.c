/*
 * Swap on lock hand-off, and prefetch of fresh allocations while memory
 * fits. See client/sched_swap.h for who calls what, docs/swap.md for the
 * design and the measurements.
 *
 * Bookkeeping per device: `off` estimates how many of this process's managed
 * bytes are not on the GPU (fresh allocations never prefetched, plus what
 * swap-outs moved to the host). A swap-in counts `off` as the bytes it moved
 * (it prefetches every range: ranges already resident cost the driver a
 * page-table walk and move nothing) and clears it; a swap-out adds what it
 * moved. The counters therefore measure data moved, not ranges visited.
 */
#include "sched_swap.h"

#include "accounting.h"
#include "real.h"
#include "sched_client.h"
#include "swap_engine.h"
#include "swap_staging.h"

#include "log.h"
#include "parse.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SWAP_GRAIN (2ull << 20) /* UVM's large page: partial evictions round up */

struct swap_dev {
	/* Client thread only. */
	CUcontext ctx;	 /* context the private stream belongs to */
	CUstream stream; /* non-blocking, for swap-in and swap-out */
	/* Under mu (application threads add fresh bytes). */
	uint64_t off;	   /* bytes believed off the GPU */
	uint64_t out_hold; /* bytes this hold's swap-out moved */
	struct nvs_swap_totals tot;
	int dirty;			  /* totals changed since last reported */
	struct nvs_swap_paths paths_sent; /* last SWAP_PATHS content */
};

static struct swap_dev sd[NVS_MAX_GPUS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int swap_on = 1, alloc_prefetch_on = 1;

static void read_env(void)
{
	int b;
	if (nvs_env_bool("NVSHARE_SWAP", &b) == 1)
		swap_on = b;
	if (nvs_env_bool("NVSHARE_PREFETCH_ON_ALLOC", &b) == 1)
		alloc_prefetch_on = b;
	NVS_DEBUG("swap: prefetch on grant %s, prefetch of fresh allocations %s",
		  swap_on ? "on" : "off (NVSHARE_SWAP=0)",
		  alloc_prefetch_on ? "on" : "off (NVSHARE_PREFETCH_ON_ALLOC=0)");
}

int nvs_swap_enabled(void)
{
	pthread_once(&env_once, read_env);
	return swap_on;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int dev_ok(int dev)
{
	return dev >= 0 && dev < NVS_MAX_GPUS;
}

/* The private stream of dev in the context current on this (the client)
 * thread; NULL if none can be had (then the caller does nothing). */
static CUstream private_stream(int dev)
{
	struct swap_dev *s = &sd[dev];
	CUcontext cur = NULL;
	if (!nvs_real.cuCtxGetCurrent || nvs_real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur)
		return NULL;
	if (s->stream && s->ctx == cur)
		return s->stream;
	/* First use, or another context (the old one may be destroyed: its
	 * stream went with it, never touch it again). */
	CUstream st = NULL;
	if (!nvs_real.cuStreamCreate ||
	    nvs_real.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
		return NULL;
	s->ctx = cur;
	s->stream = st;
	return st;
}

struct walk {
	CUmemLocation loc;
	CUstream stream;
	uint64_t budget; /* bytes still to move (swap-out) */
	uint64_t issued; /* bytes asked for */
	unsigned calls, errors;
	CUresult first_err;
};

static void prefetch_one(struct walk *w, CUdeviceptr p, uint64_t n)
{
	CUresult r = nvs_real.cuMemPrefetchAsync_v2(p, (size_t)n, w->loc, 0, w->stream);
	w->calls++;
	if (r != CUDA_SUCCESS) {
		/* A range the application freed since the snapshot: harmless. */
		if (!w->errors++)
			w->first_err = r;
		return;
	}
	w->issued += n;
}

/* A swap-out's prefetch path moves the application's own managed ranges
 * (the engine moved its own, by copy or by prefetch). A swap-in's visits
 * every managed range but trap mode's VMM memory and the ranges the engine
 * just restored: the ones the engine sent out by prefetch come back, and
 * resident ones cost a page-table walk (ranges the driver evicted under
 * real memory pressure come back before the first kernel). */
static void in_cb(CUdeviceptr p, uint64_t n, void *ctx)
{
	if (!nvs_svmm_is_backing(p) && !nvs_fast_just_restored(p))
		prefetch_one(ctx, p, n);
}

static void out_cb(CUdeviceptr p, uint64_t n, void *ctx)
{
	struct walk *w = ctx;
	if (w->budget == 0 || nvs_fast_owns(p))
		return;
	uint64_t take = n;
	if (w->budget < n) {
		take = (w->budget + SWAP_GRAIN - 1) / SWAP_GRAIN * SWAP_GRAIN;
		if (take > n)
			take = n;
	}
	prefetch_one(w, p, take);
	w->budget = w->budget > take ? w->budget - take : 0;
}

int nvs_swap_must_restore(int dev)
{
	return nvs_fast_pending(dev);
}

void nvs_swap_prepare(int dev)
{
	CUcontext cur = NULL;
	if (!dev_ok(dev) || !nvs_fast_enabled() || !nvs_real.cuCtxGetCurrent ||
	    nvs_real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur)
		return;
	nvs_stage_want(dev, nvs_fast_bytes(dev), cur);
}

/* The engine's restore, counted as swap-in; returns the bytes. */
static uint64_t restore(int dev, CUdevice cudev, CUstream st)
{
	if (!nvs_fast_pending(dev))
		return 0;
	uint64_t t0 = now_ns();
	uint64_t b = nvs_fast_in(dev, cudev, st);
	uint64_t dt = now_ns() - t0;
	char a[32];
	NVS_DEBUG("GPU %d: fast path: %s copied back in %.3f ms (%.1f GB/s)", dev,
		  nvs_format_size(b, a, sizeof a), (double)dt / 1e6,
		  dt ? (double)b / (double)dt : 0.0);
	return b;
}

void nvs_swap_restore(int dev, CUdevice cudev)
{
	if (!dev_ok(dev) || !nvs_fast_pending(dev))
		return;
	CUstreamCaptureMode cm = nvs_capture_relax();
	CUstream st = private_stream(dev);
	uint64_t t0 = now_ns();
	uint64_t b = st ? restore(dev, cudev, st) : 0;
	uint64_t dt = now_ns() - t0;
	nvs_capture_restore(cm);
	if (!st)
		return;
	pthread_mutex_lock(&mu);
	struct swap_dev *s = &sd[dev];
	s->tot.bytes_in += b;
	s->tot.ns_in += dt;
	s->off = s->off > b ? s->off - b : 0;
	s->dirty = 1;
	pthread_mutex_unlock(&mu);
}

static void swap_in(int dev, CUdevice cudev);

void nvs_swap_in(int dev, CUdevice cudev)
{
	if (!dev_ok(dev) || !nvs_real.cuMemPrefetchAsync_v2 || !nvs_real.cuStreamSynchronize)
		return;
	CUstreamCaptureMode cm = nvs_capture_relax(); /* at the gate: maybe capturing */
	swap_in(dev, cudev);
	nvs_capture_restore(cm);
}

static void swap_in(int dev, CUdevice cudev)
{
	CUstream st = private_stream(dev);
	if (!st)
		return;
	nvs_swap_prepare(dev);
	uint64_t t0 = now_ns();
	/* What the engine took out must come back, whatever NVSHARE_SWAP says. */
	uint64_t fast = restore(dev, cudev, st);
	struct walk w = {.stream = st};
	w.loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
	w.loc.id = (int)cudev;
	CUresult r = CUDA_SUCCESS;
	if (nvs_swap_enabled()) {
		/* Largest first: the biggest tensors (weights, activations)
		 * are the ones a first kernel is most likely to read, and the
		 * fewest calls reach the most bytes if the hold is cut short. */
		nvs_acct_foreach_managed(dev, in_cb, &w);
		r = w.calls ? nvs_real.cuStreamSynchronize(st) : CUDA_SUCCESS;
	}
	uint64_t dt = now_ns() - t0;
	pthread_mutex_lock(&mu);
	struct swap_dev *s = &sd[dev];
	uint64_t off = s->off > fast ? s->off - fast : 0;
	uint64_t moved = off < w.issued ? off : w.issued;
	s->off = 0;
	s->out_hold = 0;
	if (w.calls || fast) {
		s->tot.bytes_in += moved + fast;
		s->tot.ns_in += dt;
		s->dirty = 1;
	}
	pthread_mutex_unlock(&mu);
	char a[32], b[32];
	NVS_DEBUG("GPU %d: swap-in: %s by the fast path, %u ranges prefetched (%s moved) in "
		  "%.3f ms%s",
		  dev, nvs_format_size(fast, b, sizeof b), w.calls,
		  nvs_format_size(moved, a, sizeof a), (double)dt / 1e6,
		  w.errors ? " (some ranges were freed meanwhile)" : "");
	if (r != CUDA_SUCCESS)
		NVS_WARN("GPU %d: swap-in: stream synchronize failed (%d)", dev, (int)r);
}

static uint64_t swap_out(int dev, uint64_t bytes);

uint64_t nvs_swap_out(int dev, uint64_t bytes)
{
	if (!dev_ok(dev) || bytes == 0 || !nvs_real.cuMemPrefetchAsync_v2 ||
	    !nvs_real.cuStreamSynchronize)
		return 0;
	CUstreamCaptureMode cm = nvs_capture_relax();
	uint64_t moved = swap_out(dev, bytes);
	nvs_capture_restore(cm);
	return moved;
}

static uint64_t swap_out(int dev, uint64_t bytes)
{
	CUstream st = private_stream(dev);
	if (!st)
		return 0;
	nvs_swap_prepare(dev);
	uint64_t t0 = now_ns();
	/* The fast path first (whole objects, at the link's speed), then the
	 * prefetch path for what is still asked. */
	struct nvs_fast_result fr;
	nvs_fast_out(dev, bytes, st, &fr);
	uint64_t fast = fr.fast + fr.pageable + fr.prefetched;
	uint64_t t1 = now_ns();
	struct walk w = {.stream = st,
			 .budget = bytes == UINT64_MAX ? UINT64_MAX
				   : bytes > fast      ? bytes - fast
						       : 0};
	w.loc.type = CU_MEM_LOCATION_TYPE_HOST;
	w.loc.id = 0;
	if (w.budget)
		nvs_acct_foreach_managed(dev, out_cb, &w);
	CUresult r = w.calls ? nvs_real.cuStreamSynchronize(st) : CUDA_SUCCESS;
	uint64_t dt = now_ns() - t0;
	uint64_t total = fast + w.issued;
	pthread_mutex_lock(&mu);
	struct swap_dev *s = &sd[dev];
	if (total) {
		s->off += total;
		s->out_hold += total;
		s->tot.bytes_out += total;
		s->tot.ns_out += dt;
		s->dirty = 1;
	}
	pthread_mutex_unlock(&mu);
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32];
	NVS_DEBUG(
	    "GPU %d: swap-out of %s asked, %s moved in %.3f ms: fast path %s in %u objects "
	    "(%s at %.1f GB/s, %s by prefetch for lack of staging, %s to pageable memory), "
	    "prefetch path %s in %u ranges",
	    dev, bytes == UINT64_MAX ? "all" : nvs_format_size(bytes, a, sizeof a),
	    nvs_format_size(total, b, sizeof b), (double)dt / 1e6,
	    nvs_format_size(fast, c, sizeof c), fr.objects, nvs_format_size(fr.fast, d, sizeof d),
	    t1 > t0 ? (double)fr.fast / (double)(t1 - t0) : 0.0,
	    nvs_format_size(fr.prefetched, e, sizeof e), nvs_format_size(fr.pageable, f, sizeof f),
	    nvs_format_size(w.issued, g, sizeof g), w.calls);
	if (r != CUDA_SUCCESS)
		NVS_WARN("GPU %d: swap-out: stream synchronize failed (%d)", dev, (int)r);
	return total;
}

void nvs_swap_released(int dev)
{
	if (!dev_ok(dev))
		return;
	/* The application ran with its memory during the hold (the swap-in
	 * brought it, or its kernels touched it): what is off the GPU now is
	 * what this release's swap-out moved, as far as we know. */
	pthread_mutex_lock(&mu);
	sd[dev].off = sd[dev].out_hold;
	sd[dev].out_hold = 0;
	pthread_mutex_unlock(&mu);
}

void nvs_swap_fresh(int dev, CUdeviceptr ptr, uint64_t bytes)
{
	if (!dev_ok(dev))
		return;
	pthread_once(&env_once, read_env);
	int fits = alloc_prefetch_on && nvs_sched_gpu_fits(dev);
	size_t fr = 0, tot = 0;
	if (fits && (!nvs_real.cuMemGetInfo_v2 || !nvs_real.cuMemPrefetchAsync_v2 ||
		     nvs_real.cuMemGetInfo_v2(&fr, &tot) != CUDA_SUCCESS || fr < bytes))
		fits = 0; /* the driver would have to evict: leave it to faults */
	CUresult r = CUDA_ERROR_NOT_SUPPORTED;
	if (fits) {
		/* On the allocating thread's per-thread default stream in its
		 * current context: no stream to create or to leak, and work on
		 * the legacy default stream is ordered after it. The
		 * allocation returns at once; kernels on other streams and
		 * host copies are correct while it runs (managed memory stays
		 * coherent; it only moves pages). */
		CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE};
		CUdevice d;
		if (nvs_real.cuCtxGetDevice && nvs_real.cuCtxGetDevice(&d) == CUDA_SUCCESS) {
			loc.id = (int)d;
			r = nvs_real.cuMemPrefetchAsync_v2(ptr, (size_t)bytes, loc, 0,
							   CU_STREAM_PER_THREAD);
		}
	}
	pthread_mutex_lock(&mu);
	if (r != CUDA_SUCCESS)
		sd[dev].off += bytes; /* on the host (or nowhere yet) until touched */
	pthread_mutex_unlock(&mu);
	char a[32];
	NVS_DEBUG("GPU %d: fresh allocation 0x%llx (%s) %s", dev, (unsigned long long)ptr,
		  nvs_format_size(bytes, a, sizeof a),
		  r == CUDA_SUCCESS ? "prefetched to the GPU" : "left to first touch");
}

int nvs_swap_totals(int dev, struct nvs_swap_totals *out)
{
	if (!dev_ok(dev))
		return 0;
	pthread_mutex_lock(&mu);
	*out = sd[dev].tot;
	int d = sd[dev].dirty;
	sd[dev].dirty = 0;
	pthread_mutex_unlock(&mu);
	return d;
}

int nvs_swap_report(int dev, struct nvs_swap_paths *out)
{
	if (!dev_ok(dev))
		return 0;
	struct nvs_path_bytes pb;
	nvs_fast_paths(dev, &pb);
	struct nvs_stage_stats ss;
	nvs_stage_stats(dev, &ss);
	memset(out, 0, sizeof *out);
	out->local_gpu = (uint32_t)dev;
	out->fast = pb.fast;
	out->prefetch = pb.prefetch;
	out->pinned = pb.pinned;
	out->staging = ss.pinned;
	out->staging_used = ss.used;
	out->flags = (ss.failed ? NVS_SWAP_PATHS_PIN_FAILED : 0) |
		     (nvs_swap_trap() ? NVS_SWAP_PATHS_TRAP : 0);
	pthread_mutex_lock(&mu);
	struct nvs_swap_paths *last = &sd[dev].paths_sent;
	int changed = memcmp(last, out, sizeof *out) != 0;
	if (changed)
		*last = *out;
	pthread_mutex_unlock(&mu);
	return changed;
}

void nvs_swap_report_again(int dev)
{
	if (!dev_ok(dev))
		return;
	pthread_mutex_lock(&mu);
	memset(&sd[dev].paths_sent, 0xff, sizeof sd[dev].paths_sent);
	pthread_mutex_unlock(&mu);
}

void nvs_swap_atfork_child(void)
{
	pthread_mutex_init(&mu, NULL);
	for (int i = 0; i < NVS_MAX_GPUS; i++)
		sd[i] = (struct swap_dev){0};
	nvs_fast_atfork_child();
	nvs_stage_atfork_child();
}
