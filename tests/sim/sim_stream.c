/*
 * Simulated GPU: streams, events, stream capture.
 *
 * A stream is its completion time ("tail"): work queued on it finishes at
 * its tail; synchronising sleeps until then. The legacy NULL stream waits
 * for every blocking stream of its context and they wait for it, as in
 * CUDA's legacy default-stream semantics. The per-thread default stream
 * (CU_STREAM_PER_THREAD, or NULL through a _ptsz/_ptds entry point) is one
 * ordinary non-synchronising stream per thread and context.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

static struct sim_stream **streams; /* every live stream of the process */
static size_t nstreams, capstreams;
static uint64_t capture_ids;

struct pt_entry {
	struct sim_ctx *ctx;
	struct sim_stream *s;
};
static __thread struct pt_entry pt_streams[8];

static int track_locked(struct sim_stream *s)
{
	if (nstreams == capstreams) {
		size_t n = capstreams ? capstreams * 2 : 32;
		struct sim_stream **x = realloc(streams, n * sizeof(*x));
		if (!x)
			return -1;
		streams = x;
		capstreams = n;
	}
	streams[nstreams++] = s;
	return 0;
}

static void untrack_locked(struct sim_stream *s)
{
	for (size_t i = 0; i < nstreams; i++)
		if (streams[i] == s) {
			streams[i] = streams[--nstreams];
			return;
		}
}

static struct sim_stream *stream_new_locked(struct sim_ctx *ctx, int kind, unsigned flags, int prio)
{
	struct sim_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->magic = SIM_STREAM_MAGIC;
	s->ctx = ctx;
	s->kind = kind;
	s->flags = flags;
	s->prio = prio;
	if (track_locked(s) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

struct sim_stream *sim_stream_get(CUstream h, int per_thread)
{
	if (!sim_initialized())
		return NULL;
	if (h == NULL)
		h = per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
	if (h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) {
		struct sim_stream *s = (struct sim_stream *)h;
		return s->magic == SIM_STREAM_MAGIC && s->ctx && s->ctx->active ? s : NULL;
	}
	struct sim_ctx *c = sim_ctx_current();
	if (!c)
		return NULL;
	struct sim_stream *s = NULL;
	pthread_mutex_lock(&sim_mu);
	if (h == CU_STREAM_LEGACY) {
		if (!c->legacy)
			c->legacy = stream_new_locked(c, 1, 0, 0);
		s = c->legacy;
	} else {
		int free_i = -1;
		for (int i = 0; i < 8 && !s; i++) {
			if (pt_streams[i].ctx == c && pt_streams[i].s &&
			    pt_streams[i].s->magic == SIM_STREAM_MAGIC)
				s = pt_streams[i].s;
			else if (free_i < 0 && (!pt_streams[i].ctx || !pt_streams[i].ctx->active))
				free_i = i;
		}
		if (!s) {
			s = stream_new_locked(c, 2, CU_STREAM_NON_BLOCKING, 0);
			pt_streams[free_i < 0 ? 0 : free_i] = (struct pt_entry){c, s};
		}
	}
	pthread_mutex_unlock(&sim_mu);
	return s;
}

uint64_t sim_stream_ready(struct sim_stream *s)
{
	uint64_t t = sim_now();
	pthread_mutex_lock(&sim_mu);
	if (s->tail > t)
		t = s->tail;
	if (s->kind == 1) {
		for (size_t i = 0; i < nstreams; i++)
			if (streams[i]->ctx == s->ctx &&
			    !(streams[i]->flags & CU_STREAM_NON_BLOCKING) && streams[i]->tail > t)
				t = streams[i]->tail;
	} else if (!(s->flags & CU_STREAM_NON_BLOCKING) && s->ctx->legacy &&
		   s->ctx->legacy->tail > t) {
		t = s->ctx->legacy->tail;
	}
	pthread_mutex_unlock(&sim_mu);
	return t;
}

/* ---- bounded queue ----
 * A real GPU takes about a thousand launches per stream into its push
 * buffer; the next launch blocks until one completes. `done` keeps the
 * completion times of the last max_pending launches, in order (each is the
 * stream's tail once it was queued, so they never decrease): fewer than
 * max_pending are incomplete exactly when the oldest of them has completed,
 * one comparison per launch. */

static uint64_t oldest_launch_locked(struct sim_stream *s)
{
	uint64_t n = sim_cfg.max_pending;
	return s->launches >= n ? s->done[s->launches % n] : 0;
}

static void record_launch_locked(struct sim_stream *s, uint64_t t)
{
	uint64_t n = sim_cfg.max_pending;
	size_t i = (size_t)(s->launches % n);
	if (i >= s->done_cap) { /* only while fewer than n were recorded */
		size_t c = s->done_cap ? s->done_cap * 2 : 16;
		if (c > n)
			c = (size_t)n;
		uint64_t *x = realloc(s->done, c * sizeof(*x));
		if (!x)
			return; /* not counted: unbounded rather than a failed launch */
		s->done = x;
		s->done_cap = c;
	}
	s->done[i] = t;
	s->launches++;
}

void sim_stream_admit(struct sim_stream *s)
{
	for (;;) {
		pthread_mutex_lock(&sim_mu);
		uint64_t t = oldest_launch_locked(s);
		pthread_mutex_unlock(&sim_mu);
		if (t <= sim_now())
			return;
		sim_sleep_until(t); /* then look again: other threads may launch too */
	}
}

void sim_stream_enqueue(struct sim_stream *s, uint64_t end, int launch)
{
	pthread_mutex_lock(&sim_mu);
	if (end > s->tail)
		s->tail = end;
	if (launch)
		record_launch_locked(s, s->tail);
	pthread_mutex_unlock(&sim_mu);
}

void sim_ctx_tail_all(struct sim_ctx *ctx, uint64_t *max_tail)
{
	pthread_mutex_lock(&sim_mu);
	uint64_t t = ctx->retired;
	for (size_t i = 0; i < nstreams; i++)
		if (streams[i]->ctx == ctx && streams[i]->tail > t)
			t = streams[i]->tail;
	pthread_mutex_unlock(&sim_mu);
	if (t > *max_tail)
		*max_tail = t;
}

void sim_streams_forget_ctx(struct sim_ctx *ctx)
{
	pthread_mutex_lock(&sim_mu);
	for (size_t i = 0; i < nstreams;) {
		if (streams[i]->ctx == ctx) {
			streams[i]->magic = 0; /* handles die with the context */
			struct sim_stream *dead = streams[i];
			streams[i] = streams[--nstreams];
			pthread_mutex_unlock(&sim_mu);
			sim_keep(dead);
			pthread_mutex_lock(&sim_mu);
		} else {
			i++;
		}
	}
	ctx->legacy = NULL;
	pthread_mutex_unlock(&sim_mu);
}

int sim_ctx_capture_violation(struct sim_ctx *ctx)
{
	int v = 0;
	pthread_mutex_lock(&sim_mu);
	for (size_t i = 0; i < nstreams; i++)
		if (streams[i]->ctx == ctx &&
		    streams[i]->capturing == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
			streams[i]->capturing = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
			v = 1;
		}
	pthread_mutex_unlock(&sim_mu);
	return v;
}

/* ---- stream API ---- */

static CUresult stream_create(CUstream *ph, unsigned flags, int prio)
{
	SIM_REQUIRE_INIT();
	if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_ctx *c = sim_ctx_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (prio > 0)
		prio = 0;
	if (prio < -5)
		prio = -5;
	pthread_mutex_lock(&sim_mu);
	struct sim_stream *s = stream_new_locked(c, 0, flags, prio);
	pthread_mutex_unlock(&sim_mu);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*ph = (CUstream)s;
	return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	return stream_create(phStream, Flags, 0);
}

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	return stream_create(phStream, flags, priority);
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
	SIM_REQUIRE_INIT();
	struct sim_stream *s = sim_stream_get(hStream, 0);
	if (!s || s->kind != 0)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_mu);
	if (s->tail > s->ctx->retired)
		s->ctx->retired = s->tail;
	untrack_locked(s);
	s->magic = 0; /* kept allocated: a stale handle fails cleanly */
	pthread_mutex_unlock(&sim_mu);
	sim_keep(s);
	return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream hStream)
{
	return cuStreamDestroy_v2(hStream);
}

static CUresult stream_sync(CUstream h, int pt)
{
	SIM_REQUIRE_INIT();
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	if (s->capturing)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	sim_sleep_until(sim_stream_ready(s));
	return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
	return stream_sync(hStream, 0);
}
CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	return stream_sync(hStream, 1);
}

static CUresult stream_query(CUstream h, int pt)
{
	SIM_REQUIRE_INIT();
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	return sim_stream_ready(s) <= sim_now() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuStreamQuery(CUstream hStream)
{
	return stream_query(hStream, 0);
}
CUresult cuStreamQuery_ptsz(CUstream hStream)
{
	return stream_query(hStream, 1);
}

#define STREAM_GETTER(name, T, expr)                                                               \
	static CUresult name##_impl(CUstream h, T *out, int pt)                                    \
	{                                                                                          \
		SIM_REQUIRE_INIT();                                                                \
		struct sim_stream *s = sim_stream_get(h, pt);                                      \
		if (!s)                                                                            \
			return CUDA_ERROR_INVALID_HANDLE;                                          \
		if (!out)                                                                          \
			return CUDA_ERROR_INVALID_VALUE;                                           \
		*out = (expr);                                                                     \
		return CUDA_SUCCESS;                                                               \
	}                                                                                          \
	CUresult name(CUstream h, T *out)                                                          \
	{                                                                                          \
		return name##_impl(h, out, 0);                                                     \
	}                                                                                          \
	CUresult name##_ptsz(CUstream h, T *out)                                                   \
	{                                                                                          \
		return name##_impl(h, out, 1);                                                     \
	}

STREAM_GETTER(cuStreamGetPriority, int, s->prio)
STREAM_GETTER(cuStreamGetFlags, unsigned int, s->flags)
STREAM_GETTER(cuStreamGetId, unsigned long long, (unsigned long long)(uintptr_t)s)
STREAM_GETTER(cuStreamGetCtx, CUcontext, (CUcontext)s->ctx)
STREAM_GETTER(cuStreamGetDevice, CUdevice, sim_ordinal(s->ctx->dev))

CUresult cuStreamGetCtx_v2(CUstream h, CUcontext *pctx, CUgreenCtx *pg)
{
	if (pg)
		*pg = NULL;
	return cuStreamGetCtx(h, pctx);
}

CUresult cuStreamGetCtx_v2_ptsz(CUstream h, CUcontext *pctx, CUgreenCtx *pg)
{
	if (pg)
		*pg = NULL;
	return cuStreamGetCtx_ptsz(h, pctx);
}

/* ---- events ---- */

struct sim_event {
	uint32_t magic;
	unsigned flags;
	int recorded;
	uint64_t t; /* completion time of the work it follows */
};
#define SIM_EVENT_MAGIC 0x544e5645u

static struct sim_event *event_check(CUevent h)
{
	struct sim_event *e = (struct sim_event *)h;
	return e && e->magic == SIM_EVENT_MAGIC ? e : NULL;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	SIM_REQUIRE_INIT();
	if (!phEvent)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_ctx_current())
		return CUDA_ERROR_INVALID_CONTEXT;
	struct sim_event *e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->magic = SIM_EVENT_MAGIC;
	e->flags = Flags;
	*phEvent = (CUevent)e;
	return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
	struct sim_event *e = event_check(hEvent);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	e->magic = 0;
	free(e);
	return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent hEvent)
{
	return cuEventDestroy_v2(hEvent);
}

static CUresult event_record(CUevent h, CUstream hs, int pt)
{
	SIM_REQUIRE_INIT();
	struct sim_event *e = event_check(h);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	struct sim_stream *s = sim_stream_get(hs, pt);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	e->t = sim_stream_ready(s);
	e->recorded = 1;
	return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream s)
{
	return event_record(e, s, 0);
}
CUresult cuEventRecord_ptsz(CUevent e, CUstream s)
{
	return event_record(e, s, 1);
}
CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned f)
{
	return event_record(e, s, 0);
}
CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned f)
{
	return event_record(e, s, 1);
}

CUresult cuEventQuery(CUevent hEvent)
{
	struct sim_event *e = event_check(hEvent);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	return !e->recorded || e->t <= sim_now() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
	struct sim_event *e = event_check(hEvent);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	if (e->recorded)
		sim_sleep_until(e->t);
	return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	struct sim_event *a = event_check(hStart), *b = event_check(hEnd);
	if (!a || !b || (a->flags & CU_EVENT_DISABLE_TIMING) ||
	    (b->flags & CU_EVENT_DISABLE_TIMING))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!pMilliseconds)
		return CUDA_ERROR_INVALID_VALUE;
	if (!a->recorded || !b->recorded)
		return CUDA_ERROR_INVALID_HANDLE;
	uint64_t now = sim_now();
	if (a->t > now || b->t > now)
		return CUDA_ERROR_NOT_READY;
	*pMilliseconds = (float)(((double)b->t - (double)a->t) / 1e6);
	return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

static CUresult wait_event(CUstream hs, CUevent he, int pt)
{
	SIM_REQUIRE_INIT();
	struct sim_stream *s = sim_stream_get(hs, pt);
	struct sim_event *e = event_check(he);
	if (!s || !e)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_mu);
	if (e->recorded && e->t > s->tail)
		s->tail = e->t;
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int f)
{
	return wait_event(s, e, 0);
}
CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int f)
{
	return wait_event(s, e, 1);
}

CUresult cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent)
{
	struct sim_ctx *c = sim_ctx_check(hCtx);
	struct sim_event *e = event_check(hEvent);
	if (!c || !e)
		return CUDA_ERROR_INVALID_HANDLE;
	uint64_t t = sim_now();
	sim_ctx_tail_all(c, &t);
	e->t = t;
	e->recorded = 1;
	return CUDA_SUCCESS;
}

CUresult cuCtxWaitEvent(CUcontext hCtx, CUevent hEvent)
{
	struct sim_ctx *c = sim_ctx_check(hCtx);
	struct sim_event *e = event_check(hEvent);
	if (!c || !e)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_mu);
	for (size_t i = 0; i < nstreams; i++)
		if (streams[i]->ctx == c && e->recorded && e->t > streams[i]->tail)
			streams[i]->tail = e->t;
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

/* ---- capture ---- */

static __thread CUstreamCaptureMode thread_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static CUresult begin_capture(CUstream h, int pt, CUstreamCaptureMode mode)
{
	SIM_REQUIRE_INIT();
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	if (s->kind == 1)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (s->capturing)
		return CUDA_ERROR_ILLEGAL_STATE;
	struct sim_graph *g = sim_graph_new();
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&sim_mu);
	s->capturing = CU_STREAM_CAPTURE_STATUS_ACTIVE;
	s->capture_mode = (int)mode;
	s->capture_thread = pthread_self();
	s->capture_graph = g;
	s->capture_id = ++capture_ids;
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture(CUstream h)
{
	return begin_capture(h, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
CUresult cuStreamBeginCapture_ptsz(CUstream h)
{
	return begin_capture(h, 1, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode m)
{
	return begin_capture(h, 0, m);
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode m)
{
	return begin_capture(h, 1, m);
}

static CUresult end_capture(CUstream h, CUgraph *pg, int pt)
{
	SIM_REQUIRE_INIT();
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s || !pg)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	int st = s->capturing;
	struct sim_graph *g = s->capture_graph;
	s->capturing = CU_STREAM_CAPTURE_STATUS_NONE;
	s->capture_graph = NULL;
	pthread_mutex_unlock(&sim_mu);
	if (st == CU_STREAM_CAPTURE_STATUS_NONE)
		return CUDA_ERROR_ILLEGAL_STATE;
	if (st == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
		sim_graph_free(g);
		*pg = NULL;
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	}
	*pg = (CUgraph)g;
	return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream h, CUgraph *g)
{
	return end_capture(h, g, 0);
}
CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph *g)
{
	return end_capture(h, g, 1);
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *st, int pt)
{
	SIM_REQUIRE_INIT();
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	*st = (CUstreamCaptureStatus)s->capturing;
	return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st)
{
	return is_capturing(h, st, 0);
}
CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *st)
{
	return is_capturing(h, st, 1);
}

static CUresult capture_info(CUstream h, int pt, CUstreamCaptureStatus *st, cuuint64_t *id,
			     CUgraph *graph, const CUgraphNode **deps,
			     const CUgraphEdgeData **edges, size_t *ndeps)
{
	SIM_REQUIRE_INIT();
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	*st = (CUstreamCaptureStatus)s->capturing;
	if (id)
		*id = s->capture_id;
	if (graph)
		*graph = s->capturing ? (CUgraph)s->capture_graph : NULL;
	if (deps)
		*deps = NULL;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = 0;
	return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id)
{
	return capture_info(h, 0, st, id, NULL, NULL, NULL, NULL);
}

CUresult cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id)
{
	return capture_info(h, 1, st, id, NULL, NULL, NULL, NULL);
}

CUresult cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
				   CUgraph *g, const CUgraphNode **d, size_t *n)
{
	return capture_info(h, 0, st, id, g, d, NULL, n);
}

CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
					CUgraph *g, const CUgraphNode **d, size_t *n)
{
	return capture_info(h, 1, st, id, g, d, NULL, n);
}

CUresult cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
				   CUgraph *g, const CUgraphNode **d, const CUgraphEdgeData **e,
				   size_t *n)
{
	return capture_info(h, 0, st, id, g, d, e, n);
}

CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
					CUgraph *g, const CUgraphNode **d,
					const CUgraphEdgeData **e, size_t *n)
{
	return capture_info(h, 1, st, id, g, d, e, n);
}

CUresult sim_capture_unsafe_call(const char *what)
{
	if (thread_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_SUCCESS;
	int v = 0;
	pthread_mutex_lock(&sim_mu);
	for (size_t i = 0; i < nstreams; i++) {
		struct sim_stream *s = streams[i];
		if (s->capturing != CU_STREAM_CAPTURE_STATUS_ACTIVE)
			continue;
		int own = pthread_equal(s->capture_thread, pthread_self());
		if (s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
		    (own && s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED)) {
			s->capturing = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
			v = 1;
		}
	}
	pthread_mutex_unlock(&sim_mu);
	if (!v)
		return CUDA_SUCCESS;
	sim_log("call %s during a stream capture: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, capture "
		"invalidated",
		what);
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	if (!mode)
		return CUDA_ERROR_INVALID_VALUE;
	CUstreamCaptureMode old = thread_capture_mode;
	thread_capture_mode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}

static CUresult stream_attr(CUstream h, int pt)
{
	SIM_REQUIRE_INIT();
	return sim_stream_get(h, pt) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuStreamGetAttribute(CUstream h, CUstreamAttrID attr, CUstreamAttrValue *v)
{
	if (v)
		memset(v, 0, sizeof(*v));
	return stream_attr(h, 0);
}

CUresult cuStreamGetAttribute_ptsz(CUstream h, CUstreamAttrID attr, CUstreamAttrValue *v)
{
	if (v)
		memset(v, 0, sizeof(*v));
	return stream_attr(h, 1);
}

CUresult cuStreamSetAttribute(CUstream h, CUstreamAttrID attr, const CUstreamAttrValue *v)
{
	return stream_attr(h, 0);
}

CUresult cuStreamSetAttribute_ptsz(CUstream h, CUstreamAttrID attr, const CUstreamAttrValue *v)
{
	return stream_attr(h, 1);
}

CUresult cuStreamAttachMemAsync(CUstream h, CUdeviceptr dptr, size_t length, unsigned int flags)
{
	return stream_attr(h, 0);
}

CUresult cuStreamAttachMemAsync_ptsz(CUstream h, CUdeviceptr dptr, size_t length,
				     unsigned int flags)
{
	return stream_attr(h, 1);
}
