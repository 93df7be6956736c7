/*
 * The fast swap path (client/swap_engine.h; docs/swap.md "The swap
 * engine"): converted managed ranges, and the orchestration of a swap over
 * them and the VMM handles of swap_vmm.c.
 *
 * A swap-out picks whole objects (a range, a handle) until the asked bytes
 * are covered, gives each a place in the pinned staging (what does not fit
 * goes by prefetch, or for VMM memory to a pageable buffer), copies them
 * all out on the private stream (adjacent copies merged into one), waits,
 * then discards the ranges and unmaps and releases the handles. A swap-in
 * places the ranges on the GPU without moving anything
 * (cuMemDiscardAndPrefetchBatchAsync), re-creates and re-maps the handles,
 * copies everything back, waits, and only then may the gate open.
 */
#include "swap_engine.h"

#include "accounting.h"
#include "internal.h"
#include "real.h"
#include "sched_swap.h"
#include "swap_staging.h"

#include "log.h"
#include "parse.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NB 4096u
#define GRAIN (2ull << 20) /* UVM's large page: a range may go out in part, in these */
/* A handle that cannot be created again (the GPU really is full: a
 * process outside nvshare took the memory) is retried this long. */
#define RECREATE_TRIES 100
#define RECREATE_PAUSE_NS 100000000L

pthread_mutex_t nvs_swap_mu = PTHREAD_MUTEX_INITIALIZER;

enum { M_RES, M_STAGED, M_PREF };

struct mr {
	CUdeviceptr p;
	uint64_t bytes, off;
	uint64_t out; /* M_STAGED / M_PREF: bytes from p that went out */
	int dev, state;
	unsigned gen; /* the swap-in that last restored it */
	struct mr *next;
};

static struct mr *mb[NB];
static uint64_t conv_bytes[NVS_MAX_GPUS];
static unsigned staged[NVS_MAX_GPUS];
static int discard_broken; /* the driver refused a discard once */
static unsigned in_gen;	   /* swap-ins so far */

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int fast_on = 1, trap_on;

static void read_env(void)
{
	int b;
	if (nvs_env_bool("NVSHARE_SWAP_FAST", &b) == 1)
		fast_on = b;
	/* NVSHARE_SWAP=0 is the comparison with fault-driven swap-in: the
	 * prefetch path's swap-out, and pages faulted back. */
	if (!nvs_swap_enabled())
		fast_on = 0;
	if (nvs_env_bool("NVSHARE_SWAP_TRAP", &b) == 1)
		trap_on = b;
	if (!fast_on)
		trap_on = 0;
	NVS_DEBUG("swap engine: fast path %s%s", fast_on ? "on" : "off (NVSHARE_SWAP_FAST=0)",
		  trap_on ? ", trap mode (NVSHARE_SWAP_TRAP=1: converted allocations are VMM "
			    "memory, unmapped while out)"
			  : "");
}

int nvs_fast_enabled(void)
{
	pthread_once(&env_once, read_env);
	return fast_on;
}

int nvs_swap_trap(void)
{
	pthread_once(&env_once, read_env);
	return trap_on;
}

static int devok(int d)
{
	return d >= 0 && d < NVS_MAX_GPUS;
}

static unsigned mslot(CUdeviceptr p)
{
	return (unsigned)((p >> 12) * 0x9e3779b97f4a7c15ull >> 52) % NB;
}

static struct mr **mfind(CUdeviceptr p)
{
	struct mr **pp = &mb[mslot(p)];
	while (*pp && (*pp)->p != p)
		pp = &(*pp)->next;
	return pp;
}

static void mset(struct mr *e, int s)
{
	if ((e->state == M_STAGED) != (s == M_STAGED) && devok(e->dev)) {
		if (s == M_STAGED)
			__atomic_add_fetch(&staged[e->dev], 1, __ATOMIC_RELEASE);
		else if (staged[e->dev])
			__atomic_sub_fetch(&staged[e->dev], 1, __ATOMIC_RELEASE);
	}
	e->state = s;
}

void nvs_fast_track(int dev, CUdeviceptr p, uint64_t bytes)
{
	if (!nvs_fast_enabled() || !devok(dev))
		return;
	struct mr *e = calloc(1, sizeof *e);
	if (!e)
		return; /* it stays on the prefetch path */
	*e = (struct mr){.p = p, .bytes = bytes, .dev = dev};
	pthread_mutex_lock(&nvs_swap_mu);
	struct mr **pp = &mb[mslot(p)];
	e->next = *pp;
	*pp = e;
	conv_bytes[dev] += bytes;
	pthread_mutex_unlock(&nvs_swap_mu);
	nvs_stage_want(dev, nvs_fast_bytes(dev), NULL); /* grows with it, once started */
}

void nvs_fast_untrack(CUdeviceptr p)
{
	pthread_mutex_lock(&nvs_swap_mu);
	struct mr **pp = mfind(p), *e = *pp;
	if (e) {
		*pp = e->next;
		mset(e, M_RES);
		conv_bytes[e->dev] -=
		    conv_bytes[e->dev] >= e->bytes ? e->bytes : conv_bytes[e->dev];
	}
	pthread_mutex_unlock(&nvs_swap_mu);
	free(e);
}

int nvs_fast_just_restored(CUdeviceptr p)
{
	pthread_mutex_lock(&nvs_swap_mu);
	struct mr *e = *mfind(p);
	int r = e && e->state == M_RES && e->gen == in_gen && in_gen;
	pthread_mutex_unlock(&nvs_swap_mu);
	return r;
}

int nvs_fast_owns(CUdeviceptr p)
{
	pthread_mutex_lock(&nvs_swap_mu);
	int r = *mfind(p) != NULL;
	pthread_mutex_unlock(&nvs_swap_mu);
	return r || nvs_svmm_is_backing(p);
}

int nvs_fast_pending(int dev)
{
	return devok(dev) &&
	       (__atomic_load_n(&staged[dev], __ATOMIC_ACQUIRE) || nvs_svmm_out_count(dev));
}

/* ---- copies ---- */

struct op {
	char *host;
	CUdeviceptr dev;
	uint64_t len;
	uint64_t region; /* one copy never spans two allocations or reservations */
};

struct ops {
	struct op *v;
	size_t n, cap;
	int oom;
	CUdeviceptr base; /* device address of the object being planned */
	uint64_t region;  /* and its allocation or reservation */
};

static void op_add(struct ops *o, void *host, CUdeviceptr dev, uint64_t len)
{
	if (o->n) {
		struct op *l = &o->v[o->n - 1];
		if (l->region == o->region && l->host + l->len == (char *)host &&
		    l->dev + l->len == dev) {
			l->len += len; /* adjacent in both places, one region: one copy */
			return;
		}
	}
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 64;
		struct op *v = realloc(o->v, cap * sizeof *v);
		if (!v) {
			o->oom = 1;
			return;
		}
		o->v = v;
		o->cap = cap;
	}
	o->v[o->n++] = (struct op){host, dev, len, o->region};
}

static void piece(void *host, uint64_t at, uint64_t len, void *arg)
{
	struct ops *o = arg;
	op_add(o, host, o->base + at, len);
}

/* Plans the copy of [base, base+bytes) to/from staging at off (or host).
 * Copies merge within one VMM reservation (PyTorch's expandable segments:
 * many handles mapped side by side), never across allocations. */
static void plan(struct ops *o, int dev, CUdeviceptr base, uint64_t bytes, uint64_t off, void *host)
{
	CUdeviceptr r = nvs_svmm_region(base);
	o->region = r ? r : base;
	if (host) {
		op_add(o, host, base, bytes);
		return;
	}
	o->base = base;
	nvs_stage_pieces(dev, off, bytes, piece, o);
}

/* Issues the copies on st; out: device to host. */
static CUresult issue(const struct ops *o, int out, CUstream st)
{
	if (o->oom)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < o->n; i++) {
		const struct op *p = &o->v[i];
		CUresult r = out ? nvs_real.cuMemcpyDtoHAsync_v2(p->host, p->dev, p->len, st)
				 : nvs_real.cuMemcpyHtoDAsync_v2(p->dev, p->host, p->len, st);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

/* ---- selection ---- */

struct cand {
	int vmm; /* 0: managed range */
	uint64_t key, bytes;
	CUdeviceptr va;
	uint64_t off;
	void *host;
	int how; /* 0 staged, 1 host buffer (VMM), 2 prefetch (managed), -1 dropped */
};

static int by_size_desc(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return x->va < y->va ? -1 : x->va > y->va; /* neighbours stay neighbours */
}

static void cswap(struct cand *c, size_t i, size_t j)
{
	struct cand t = c[i];
	c[i] = c[j];
	c[j] = t;
}

/* Moves to the front the candidates that cover `budget`, largest first:
 * whole objects while they fit in what is left, then the first managed
 * range that is larger only in part (a prefix, in 2 MiB granules); a VMM
 * handle goes whole or not at all, so if only handles larger than what is
 * left remain, the smallest of them. Returns how many (their `bytes` are
 * what moves). */
static size_t select_budget(struct cand *c, size_t n, uint64_t budget)
{
	if (budget == UINT64_MAX || !n)
		return n;
	qsort(c, n, sizeof *c, by_size_desc);
	uint64_t left = budget;
	size_t k = 0;
	for (size_t i = 0; i < n && left; i++) {
		if (c[i].bytes <= left) {
			left -= c[i].bytes;
		} else if (!c[i].vmm) {
			uint64_t part = (left + GRAIN - 1) / GRAIN * GRAIN;
			c[i].bytes = part < c[i].bytes ? part : c[i].bytes;
			left = 0;
		} else {
			continue;
		}
		cswap(c, k++, i);
	}
	if (left && k < n) {
		/* Only handles larger than what is left remain. */
		size_t s = k;
		for (size_t i = k + 1; i < n; i++)
			if (c[i].bytes < c[s].bytes)
				s = i;
		cswap(c, k++, s);
	}
	return k;
}

/* Appends x to *c (*k of *cap); on failure frees *c and sets it NULL. */
static void cand_push(struct cand **c, size_t *k, size_t *cap, struct cand x)
{
	if (!*c)
		return;
	if (*k == *cap) {
		struct cand *v = realloc(*c, (*cap *= 2) * sizeof *v);
		if (!v) {
			free(*c);
			*c = NULL;
			return;
		}
		*c = v;
	}
	(*c)[(*k)++] = x;
}

/* dev's resident converted ranges and swappable handles (nvs_swap_mu held).
 * Returns a malloc()ed array, *n of them. */
static struct cand *candidates(int dev, size_t *n)
{
	struct nvs_vcand *vc = NULL;
	size_t nv = nvs_svmm_candidates(dev, &vc), cap = nv + 64, k = 0;
	struct cand *c = malloc(cap * sizeof *c);
	for (unsigned b = 0; c && b < NB; b++)
		for (struct mr *e = mb[b]; e; e = e->next)
			if (e->dev == dev && e->state == M_RES)
				cand_push(
				    &c, &k, &cap,
				    (struct cand){.key = e->p, .bytes = e->bytes, .va = e->p});
	for (size_t i = 0; i < nv; i++)
		cand_push(
		    &c, &k, &cap,
		    (struct cand){.vmm = 1, .key = vc[i].vh, .bytes = vc[i].bytes, .va = vc[i].va});
	free(vc);
	*n = c ? k : 0;
	return c;
}

/* Where each chosen object's bytes go, and the copies to get them there. */
static void place(int dev, struct cand *c, size_t k, struct ops *ops)
{
	for (size_t i = 0; i < k; i++) {
		struct cand *x = &c[i];
		if (!x->vmm && discard_broken)
			x->how = 2;
		else if (!nvs_stage_take(dev, x->bytes, &x->off))
			x->how = 0;
		else if (x->vmm)
			x->how = (x->host = malloc(x->bytes)) ? 1 : -1; /* no room: it stays */
		else
			x->how = 2;
		if (x->how == 0 || x->how == 1)
			plan(ops, dev, x->va, x->bytes, x->off, x->host);
	}
}

/* The copies are done: drops the GPU's copy of the staged ranges. Returns 1
 * if they are discarded. */
static int discard(int dev, const struct cand *c, size_t k, CUstream st)
{
	CUdeviceptr *dp = malloc(k * sizeof *dp);
	size_t *ds = malloc(k * sizeof *ds), nd = 0;
	for (size_t i = 0; dp && ds && i < k; i++)
		if (!c[i].vmm && c[i].how == 0) {
			dp[nd] = c[i].key;
			ds[nd++] = (size_t)c[i].bytes;
		}
	CUresult r = dp && ds ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	if (r == CUDA_SUCCESS && nd)
		r = nvs_real.cuMemDiscardBatchAsync
			? nvs_real.cuMemDiscardBatchAsync(dp, ds, nd, 0, st)
			: CUDA_ERROR_NOT_SUPPORTED;
	if (r == CUDA_SUCCESS && nd)
		r = nvs_real.cuStreamSynchronize(st);
	free(dp);
	free(ds);
	if (r != CUDA_SUCCESS && !discard_broken) {
		discard_broken = 1;
		NVS_WARN("GPU %d: discarding swapped-out managed memory failed (%d): managed "
			 "memory goes by the prefetch path from now on (the discard needs CUDA 13 "
			 "and concurrentManagedAccess)",
			 dev, (int)r);
	}
	return r == CUDA_SUCCESS;
}

void nvs_fast_out(int dev, uint64_t budget, CUstream st, struct nvs_fast_result *res)
{
	memset(res, 0, sizeof *res);
	if (!nvs_fast_enabled() || !devok(dev) || !budget || !nvs_real.cuMemcpyDtoHAsync_v2 ||
	    !nvs_real.cuStreamSynchronize)
		return;
	pthread_mutex_lock(&nvs_swap_mu);
	size_t n = 0;
	struct cand *c = candidates(dev, &n);
	size_t k = c ? select_budget(c, n, budget) : 0;
	/* Staging goes to the largest first (a big tensor never misses it for
	 * the sake of small ones); among equal sizes in address order, so
	 * neighbours in memory (a reservation's handles) are neighbours in
	 * staging and their copies merge. */
	if (k)
		qsort(c, k, sizeof *c, by_size_desc);
	struct ops ops = {0};
	place(dev, c, k, &ops);
	CUresult r = issue(&ops, 1, st);
	if (r == CUDA_SUCCESS && ops.n)
		r = nvs_real.cuStreamSynchronize(st);
	free(ops.v);
	if (r != CUDA_SUCCESS) {
		/* Nothing was dropped: everything stays where it is. */
		NVS_WARN("GPU %d: swap-out copy failed (%d); this hand-off moves nothing by the "
			 "fast path",
			 dev, (int)r);
		for (size_t i = 0; i < k; i++)
			free(c[i].host);
		k = 0;
	}
	int discarded = k ? discard(dev, c, k, st) : 0;
	CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST};
	size_t np = 0;
	for (size_t i = 0; i < k; i++) {
		struct cand *x = &c[i];
		if (x->vmm) {
			if (x->how < 0)
				continue;
			nvs_svmm_put_out(x->key, x->off, x->how == 1 ? x->host : NULL);
			*(x->how == 1 ? &res->pageable : &res->fast) += x->bytes;
			res->objects++;
			continue;
		}
		struct mr *e = *mfind(x->key);
		if (x->how == 0 && discarded) {
			if (e) {
				e->off = x->off;
				e->out = x->bytes;
				mset(e, M_STAGED);
			}
			res->fast += x->bytes;
			res->objects++;
		} else if (nvs_real.cuMemPrefetchAsync_v2 &&
			   nvs_real.cuMemPrefetchAsync_v2(x->key, (size_t)x->bytes, host, 0, st) ==
			       CUDA_SUCCESS) {
			/* No staging for it: today's path (its data stays valid). */
			if (e) {
				e->out = x->bytes;
				mset(e, M_PREF);
			}
			res->prefetched += x->bytes;
			res->objects++;
			np++;
		}
	}
	if (np)
		(void)nvs_real.cuStreamSynchronize(st);
	if (!staged[dev] && !nvs_svmm_out_count(dev))
		nvs_stage_reset(dev); /* nothing staged after all */
	pthread_mutex_unlock(&nvs_swap_mu);
	free(c);
}

/* ---- swap-in ---- */

static void pause_ns(long ns)
{
	struct timespec ts = {0, ns};
	nanosleep(&ts, NULL);
}

uint64_t nvs_fast_in(int dev, CUdevice cudev, CUstream st)
{
	if (!nvs_fast_pending(dev))
		return 0;
	pthread_mutex_lock(&nvs_swap_mu);
	in_gen++;
	uint64_t moved = 0;
	struct ops ops = {0};
	/* Converted ranges: placed on the GPU in one batch (nothing moves),
	 * then their data copied in. */
	size_t n = staged[dev], k = 0;
	CUdeviceptr *dp = n ? malloc(n * sizeof *dp) : NULL;
	size_t *ds = n ? malloc(n * sizeof *ds) : NULL;
	struct mr **es = n ? malloc(n * sizeof *es) : NULL;
	for (unsigned b = 0; b < NB && dp && ds && es; b++)
		for (struct mr *e = mb[b]; e; e = e->next)
			if (e->dev == dev && e->state == M_STAGED && k < n) {
				dp[k] = e->p;
				ds[k] = (size_t)e->out;
				es[k++] = e;
			}
	if (k && nvs_real.cuMemDiscardAndPrefetchBatchAsync) {
		CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)cudev};
		size_t idx0 = 0;
		CUresult r =
		    nvs_real.cuMemDiscardAndPrefetchBatchAsync(dp, ds, k, &loc, &idx0, 1, 0, st);
		if (r != CUDA_SUCCESS) /* the copies below place the pages all the same */
			NVS_DEBUG("GPU %d: cuMemDiscardAndPrefetchBatchAsync failed (%d)", dev,
				  (int)r);
	}
	for (size_t i = 0; i < k; i++) {
		plan(&ops, dev, es[i]->p, es[i]->out, es[i]->off, NULL);
		moved += es[i]->out;
	}
	/* Handles: created, mapped and given access again, then copied in. */
	struct nvs_vcand *vc = NULL;
	size_t nv = nvs_svmm_outs(dev, &vc);
	for (size_t i = 0; i < nv; i++) {
		uint64_t off = 0;
		void *host = NULL;
		CUresult r = CUDA_ERROR_UNKNOWN;
		for (int t = 0; t < RECREATE_TRIES; t++) {
			r = nvs_svmm_bring_in(vc[i].vh, &off, &host);
			if (r != CUDA_ERROR_OUT_OF_MEMORY)
				break;
			if (t == 0)
				NVS_WARN(
				    "GPU %d: the GPU has no room to bring a VMM allocation "
				    "back (a process outside nvshare?); retrying for %d s",
				    dev,
				    (int)(RECREATE_TRIES * (RECREATE_PAUSE_NS / 1000000) / 1000));
			pause_ns(RECREATE_PAUSE_NS);
		}
		if (r != CUDA_SUCCESS || !vc[i].va) {
			NVS_ERROR("GPU %d: VMM allocation 0x%llx (%llu bytes) could not be brought "
				  "back (%s %d): its data is lost%s",
				  dev, (unsigned long long)vc[i].vh,
				  (unsigned long long)vc[i].bytes,
				  r != CUDA_SUCCESS ? "CUDA error" : "no mapping covers it whole;",
				  (int)r, r != CUDA_SUCCESS ? " and its addresses unmapped" : "");
			nvs_svmm_settle(vc[i].vh, 1);
			vc[i].bytes = 0;
			continue;
		}
		plan(&ops, dev, vc[i].va, vc[i].bytes, off, host);
		moved += vc[i].bytes;
	}
	CUresult r = issue(&ops, 0, st);
	if (r == CUDA_SUCCESS)
		r = nvs_real.cuStreamSynchronize(st);
	if (r != CUDA_SUCCESS)
		NVS_ERROR("GPU %d: swap-in copy failed (%d): the data of swapped-out memory may "
			  "be lost",
			  dev, (int)r);
	for (size_t i = 0; i < k; i++) {
		mset(es[i], M_RES);
		es[i]->gen = in_gen;
	}
	for (size_t i = 0; i < nv; i++)
		if (vc[i].bytes)
			nvs_svmm_settle(vc[i].vh, 0);
	/* Ranges that went by prefetch come back by the prefetch walk. */
	for (unsigned b = 0; b < NB; b++)
		for (struct mr *e = mb[b]; e; e = e->next)
			if (e->dev == dev && e->state == M_PREF)
				mset(e, M_RES);
	if (!staged[dev] && !nvs_svmm_out_count(dev))
		nvs_stage_reset(dev);
	pthread_mutex_unlock(&nvs_swap_mu);
	free(ops.v);
	free(vc);
	free(dp);
	free(ds);
	free(es);
	return moved;
}

/* ---- what there is ---- */

uint64_t nvs_fast_bytes(int dev)
{
	if (!devok(dev))
		return 0;
	pthread_mutex_lock(&nvs_swap_mu);
	uint64_t f, p;
	nvs_svmm_paths(dev, &f, &p);
	f += conv_bytes[dev];
	pthread_mutex_unlock(&nvs_swap_mu);
	return f;
}

void nvs_fast_paths(int dev, struct nvs_path_bytes *out)
{
	memset(out, 0, sizeof *out);
	if (!devok(dev))
		return;
	uint64_t vf, vp, conv;
	pthread_mutex_lock(&nvs_swap_mu);
	nvs_svmm_paths(dev, &vf, &vp);
	conv = conv_bytes[dev];
	pthread_mutex_unlock(&nvs_swap_mu);
	uint64_t managed = nvs_acct_kind_bytes(dev, NVS_ALLOC_MANAGED);
	uint64_t vmm = nvs_acct_kind_bytes(dev, NVS_ALLOC_VMM);
	uint64_t pinned = nvs_acct_kind_bytes(dev, NVS_ALLOC_PINNED_DEVICE);
	/* Trap-mode backings are accounted as managed memory (the
	 * application's cuMemAlloc) but swapped as VMM handles. */
	uint64_t conv_all = conv + (vf + vp > vmm ? vf + vp - vmm : 0);
	out->fast = conv + vf;
	out->prefetch = managed > conv_all ? managed - conv_all : 0;
	/* Handles we do not virtualize (NVSHARE_SWAP_FAST=0) are pinned. */
	uint64_t plain = vmm > vf + vp ? vmm - (vf + vp) : 0;
	out->pinned = pinned + vp + plain;
}

void nvs_fast_atfork_child(void)
{
	pthread_mutex_init(&nvs_swap_mu, NULL);
	memset(mb, 0, sizeof mb);
	memset(conv_bytes, 0, sizeof conv_bytes);
	memset(staged, 0, sizeof staged);
	nvs_svmm_atfork_child();
}
