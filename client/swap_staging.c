/*
 * Pinned host staging for the fast swap path. See client/swap_staging.h for
 * the model, docs/swap.md for sizing.
 *
 * Per GPU: a list of pinned chunks (anonymous memory registered with
 * cuMemHostRegister, portable to every context), seen as one offset space
 * [0, pinned); `top` is the bump pointer of the data swapped out now. One
 * mutex guards it all; the pinning thread never holds it while it pins.
 * Our own mmap backs every chunk, so the memory stays valid even if the
 * context it was registered in goes away (copies then run unpinned).
 */
#include "swap_staging.h"

#include "internal.h"
#include "real.h"

#include "log.h"
#include "parse.h"
#include "protocol.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CHUNK_MAX (256ull << 20)
#define CHUNK_MIN (2ull << 20)

struct chunk {
	char *p;
	uint64_t len;
};

struct stg {
	struct chunk *c;
	unsigned n, cap;
	uint64_t pinned, top, want;
	CUcontext ctx;
};

static pthread_mutex_t smu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t scv = PTHREAD_COND_INITIALIZER;
static struct stg st[NVS_MAX_GPUS];
static uint64_t limit, total; /* process-wide bound and pinned sum */
static int failed, started, configured;

/* Half of the memory this process may use: the cgroup's limit (v2, then
 * v1) when it has one below the machine's memory, else the machine's. */
static uint64_t default_limit(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t mem = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
	static const char *files[] = {"/sys/fs/cgroup/memory.max",
				      "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
	for (unsigned i = 0; i < 2; i++) {
		FILE *f = fopen(files[i], "re");
		if (!f)
			continue;
		unsigned long long v;
		int got = fscanf(f, "%llu", &v) == 1;
		fclose(f);
		if (got && v && (!mem || v < mem))
			mem = v;
		break;
	}
	return mem / 2;
}

static void configure_locked(void)
{
	if (configured)
		return;
	configured = 1;
	uint64_t v;
	int r = nvs_env_size("NVSHARE_SWAP_STAGING_MAX", 1ull << 20, &v);
	limit = r == 1 ? v : default_limit();
	char b[32];
	NVS_DEBUG("swap staging: at most %s of pinned host memory%s",
		  nvs_format_size(limit, b, sizeof b),
		  r == 1 ? " (NVSHARE_SWAP_STAGING_MAX)" : " (half of the memory limit)");
}

static int dev_ok(int dev)
{
	return dev >= 0 && dev < NVS_MAX_GPUS;
}

/* A GPU whose staging should grow, and by how much (0: none). smu held. */
static uint64_t next_job_locked(int *dev)
{
	if (failed || total >= limit)
		return 0;
	for (int d = 0; d < NVS_MAX_GPUS; d++) {
		struct stg *s = &st[d];
		if (s->want > s->pinned && s->ctx) {
			uint64_t n = s->want - s->pinned;
			n = (n + CHUNK_MIN - 1) / CHUNK_MIN * CHUNK_MIN;
			if (n > CHUNK_MAX)
				n = CHUNK_MAX;
			if (n > limit - total)
				n = (limit - total) / CHUNK_MIN * CHUNK_MIN;
			if (!n)
				return 0;
			*dev = d;
			return n;
		}
	}
	return 0;
}

static void pin_failed(uint64_t len, CUresult r)
{
	pthread_mutex_lock(&smu);
	int first = !failed;
	failed = 1;
	uint64_t have = total;
	pthread_mutex_unlock(&smu);
	char a[32], b[32];
	if (first)
		NVS_WARN("swap staging: pinning %s more host memory failed (CUDA error %d; %s "
			 "pinned so far): the memlock limit (ulimit -l) or the memory cgroup is "
			 "likely too small. Hand-offs keep working, the memory beyond the pinned "
			 "staging moves by the slower prefetch path (docs/swap.md)",
			 nvs_format_size(len, a, sizeof a), (int)r,
			 nvs_format_size(have, b, sizeof b));
}

CUstreamCaptureMode nvs_capture_relax(void)
{
	CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
	if (!nvs_real.cuThreadExchangeStreamCaptureMode ||
	    nvs_real.cuThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS)
		return CU_STREAM_CAPTURE_MODE_RELAXED; /* nothing to give back */
	return m;
}

void nvs_capture_restore(CUstreamCaptureMode m)
{
	if (m != CU_STREAM_CAPTURE_MODE_RELAXED && nvs_real.cuThreadExchangeStreamCaptureMode)
		(void)nvs_real.cuThreadExchangeStreamCaptureMode(&m);
}

static void *pin_main(void *arg)
{
	(void)arg;
	/* This thread's pinning must not meet an application's graph capture
	 * (swap_engine.h): relaxed for good, it never captures. */
	int relaxed = 0;
	for (;;) {
		int dev = -1;
		pthread_mutex_lock(&smu);
		uint64_t len;
		while (!(len = next_job_locked(&dev)))
			pthread_cond_wait(&scv, &smu);
		CUcontext ctx = st[dev].ctx;
		pthread_mutex_unlock(&smu);
		if (!relaxed) {
			(void)nvs_capture_relax();
			relaxed = 1;
		}
		void *p =
		    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
		if (p != MAP_FAILED) {
			(void)madvise(p, len, MADV_HUGEPAGE); /* fewer pages to pin */
			if (nvs_real.cuCtxSetCurrent && nvs_real.cuMemHostRegister_v2 &&
			    nvs_real.cuCtxSetCurrent(ctx) == CUDA_SUCCESS)
				r = nvs_real.cuMemHostRegister_v2(p, len,
								  CU_MEMHOSTREGISTER_PORTABLE);
		}
		if (r != CUDA_SUCCESS) {
			if (p != MAP_FAILED)
				munmap(p, len);
			pin_failed(len, r);
			continue;
		}
		pthread_mutex_lock(&smu);
		struct stg *s = &st[dev];
		if (s->n == s->cap) {
			unsigned cap = s->cap ? s->cap * 2 : 16;
			struct chunk *c = realloc(s->c, cap * sizeof *c);
			if (!c) {
				pthread_mutex_unlock(&smu);
				if (nvs_real.cuMemHostUnregister)
					(void)nvs_real.cuMemHostUnregister(p);
				munmap(p, len);
				pin_failed(len, CUDA_ERROR_OUT_OF_MEMORY);
				continue;
			}
			s->c = c;
			s->cap = cap;
		}
		s->c[s->n++] = (struct chunk){p, len};
		s->pinned += len;
		total += len;
		uint64_t pinned = s->pinned, want = s->want;
		pthread_mutex_unlock(&smu);
		char a[32], b[32];
		NVS_DEBUG("GPU %d: swap staging %s pinned (of %s wanted)", dev,
			  nvs_format_size(pinned, a, sizeof a), nvs_format_size(want, b, sizeof b));
		nvs_sched_kick(); /* the status shows it */
	}
	return NULL;
}

static void start_locked(void)
{
	if (started)
		return;
	started = 1;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&t, &a, pin_main, NULL);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		failed = 1;
		NVS_WARN("swap staging: cannot start its thread (%s); hand-offs use the "
			 "prefetch path",
			 strerror(rc));
		return;
	}
	pthread_setname_np(t, "nvshare-stage");
}

void nvs_stage_want(int dev, uint64_t bytes, CUcontext ctx)
{
	if (!dev_ok(dev))
		return;
	pthread_mutex_lock(&smu);
	configure_locked();
	struct stg *s = &st[dev];
	s->want = bytes > s->want ? bytes : s->want;
	if (ctx)
		s->ctx = ctx;
	if (s->ctx && s->want > s->pinned && !failed && total < limit) {
		start_locked();
		pthread_cond_signal(&scv);
	}
	pthread_mutex_unlock(&smu);
}

int nvs_stage_take(int dev, uint64_t bytes, uint64_t *off)
{
	if (!dev_ok(dev) || !bytes)
		return -1;
	pthread_mutex_lock(&smu);
	struct stg *s = &st[dev];
	int ok = s->top + bytes <= s->pinned;
	if (ok) {
		*off = s->top;
		s->top += bytes;
	}
	pthread_mutex_unlock(&smu);
	return ok ? 0 : -1;
}

void nvs_stage_reset(int dev)
{
	if (!dev_ok(dev))
		return;
	pthread_mutex_lock(&smu);
	st[dev].top = 0;
	pthread_mutex_unlock(&smu);
}

void nvs_stage_pieces(int dev, uint64_t off, uint64_t bytes,
		      void (*fn)(void *host, uint64_t at, uint64_t len, void *arg), void *arg)
{
	if (!dev_ok(dev))
		return;
	/* Chunks only ever get appended: a snapshot of the pieces is stable
	 * once taken (the swap that owns [off, off+bytes) took it). */
	pthread_mutex_lock(&smu);
	struct stg *s = &st[dev];
	uint64_t base = 0, at = 0;
	for (unsigned i = 0; i < s->n && at < bytes; i++) {
		struct chunk c = s->c[i];
		if (off + at < base + c.len) {
			uint64_t in = off + at - base, len = c.len - in;
			if (len > bytes - at)
				len = bytes - at;
			pthread_mutex_unlock(&smu);
			fn(c.p + in, at, len, arg);
			pthread_mutex_lock(&smu);
			at += len;
		}
		base += c.len;
	}
	pthread_mutex_unlock(&smu);
}

void nvs_stage_stats(int dev, struct nvs_stage_stats *out)
{
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&smu);
	configure_locked();
	if (dev_ok(dev)) {
		out->pinned = st[dev].pinned;
		out->used = st[dev].top;
	}
	out->limit = limit;
	out->failed = failed;
	pthread_mutex_unlock(&smu);
}

void nvs_stage_atfork_child(void)
{
	pthread_mutex_init(&smu, NULL);
	pthread_cond_init(&scv, NULL);
	/* The parent's chunks are copies here, not pinned: forget them (the
	 * memory is the child's to keep until it exits). */
	for (int d = 0; d < NVS_MAX_GPUS; d++)
		st[d] = (struct stg){0};
	total = 0;
	failed = started = 0;
}
