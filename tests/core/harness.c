/* The virtual-time harness of tests/core/ (harness.h). */
#include "harness.h"

#include "log.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

uint64_t h_now;
uint64_t h_steps;
uint64_t h_trace;
unsigned h_invariants = H_INV_AGREE;
uint64_t h_wait_bound;
uint64_t h_seed = 1;
static uint64_t rng = 1;

/* ---- clients, by id ---- */

#define MAX_BOTS 8192
static struct bot *bots[MAX_BOTS]; /* by client id */
static struct bot *all[MAX_BOTS];  /* every bot of the scenario (freed at setup) */
static unsigned nall;

/* ---- events ---- */

#define EV_NAMES 64
static struct {
	char name[32];
	unsigned n;
	char last[1024];
} evs[EV_NAMES];

static void port_event(void *ctx, const char *name, const char *fields)
{
	(void)ctx;
	for (unsigned i = 0; i < EV_NAMES; i++) {
		if (!evs[i].name[0])
			snprintf(evs[i].name, sizeof evs[i].name, "%s", name);
		if (!strcmp(evs[i].name, name)) {
			evs[i].n++;
			snprintf(evs[i].last, sizeof evs[i].last, "%s", fields);
			return;
		}
	}
}

unsigned h_events(const char *name)
{
	for (unsigned i = 0; i < EV_NAMES && evs[i].name[0]; i++)
		if (!strcmp(evs[i].name, name))
			return evs[i].n;
	return 0;
}

const char *h_event_fields(const char *name)
{
	for (unsigned i = 0; i < EV_NAMES && evs[i].name[0]; i++)
		if (!strcmp(evs[i].name, name))
			return evs[i].last;
	return NULL;
}

/* ---- the agenda: timed client actions (a binary heap on (t, seq)) ---- */

enum act { A_REQ, A_REL_IDLE, A_REL_DROP };
struct item {
	uint64_t t, seq;
	struct bot *b;
	unsigned gen;
	enum act what;
};
static struct item *heap;
static size_t nheap, capheap;
static uint64_t seq;

static int before(const struct item *a, const struct item *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void schedule(struct bot *b, uint64_t t, enum act what)
{
	if (nheap == capheap) {
		size_t cap = capheap ? capheap * 2 : 256;
		struct item *n = realloc(heap, cap * sizeof *n);
		assert_non_null(n);
		heap = n;
		capheap = cap;
	}
	size_t i = nheap++;
	heap[i] = (struct item){t, seq++, b, b->gen, what};
	while (i && before(&heap[i], &heap[(i - 1) / 2])) {
		struct item x = heap[i];
		heap[i] = heap[(i - 1) / 2];
		heap[(i - 1) / 2] = x;
		i = (i - 1) / 2;
	}
}

static struct item pop(void)
{
	struct item top = heap[0];
	heap[0] = heap[--nheap];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < nheap && before(&heap[l], &heap[m]))
			m = l;
		if (r < nheap && before(&heap[r], &heap[m]))
			m = r;
		if (m == i)
			break;
		struct item x = heap[i];
		heap[i] = heap[m];
		heap[m] = x;
		i = m;
	}
	return top;
}

/* ---- the fake port: record, and let bots react ---- */

static void end_hold(struct bot *b)
{
	if (!b->holding)
		return;
	b->holding = 0;
	b->run_ns += h_now - b->granted_at;
	b->drop_pending = 0;
	b->gen++;
}

static void react(struct bot *b, const struct nvs_msg *m, const struct h_msg *r)
{
	switch (m->type) {
	case NVS_MSG_LOCK_OK:
		b->waiting = 0;
		if (b->holding)
			break; /* repeated to a holder that asked again */
		b->holding = 1;
		b->granted_at = h_now;
		b->grants++;
		if (h_now - b->req_at > b->max_wait_ns)
			b->max_wait_ns = h_now - b->req_at;
		b->gen++;
		if (b->autopilot && b->work_ns)
			schedule(b, h_now + b->work_ns, A_REL_IDLE);
		break;
	case NVS_MSG_DROP_LOCK:
		if (r->value == 0) { /* revoked */
			if (b->holding)
				b->revokes++;
			end_hold(b);
			if (b->autopilot && b->think_ns != UINT64_MAX)
				schedule(b, h_now + b->think_ns, A_REQ);
			break;
		}
		b->drops++;
		if (b->autopilot && !b->ignores_drop && b->holding && !b->drop_pending) {
			b->drop_pending = 1;
			schedule(b, h_now + b->drain_ns, A_REL_DROP);
		}
		break;
	case NVS_MSG_GPU_MODE:
		b->mode = (int)r->value;
		if (r->value == NVS_GPU_MODE_CONCURRENT) {
			end_hold(b);
			b->waiting = 0;
		} else if (b->autopilot && !b->holding && !b->waiting) {
			schedule(b, h_now, A_REQ);
		}
		break;
	default:
		break;
	}
}

static void port_send(void *ctx, struct client *cl, const struct nvs_msg *m)
{
	(void)ctx;
	struct bot *b = cl->id < MAX_BOTS ? bots[cl->id] : NULL;
	if (!b || !b->cl)
		return; /* going away: the shell's connection is gone */
	/* FNV-1a over what was sent to whom and when. */
	uint64_t f[6] = {h_now, cl->id, m->type, 0, 0, 0};
	struct h_msg *r = &b->msgs[b->nmsgs++ % H_MSGS];
	memset(r, 0, sizeof *r);
	r->t = h_now;
	r->type = m->type;
	switch (m->type) {
	case NVS_MSG_LOCK_OK:
		r->local_gpu = m->u.lock_ok.local_gpu;
		r->value = m->u.lock_ok.quantum_ms;
		r->flags = m->u.lock_ok.flags;
		break;
	case NVS_MSG_DROP_LOCK:
		r->local_gpu = m->u.drop.local_gpu;
		r->value = m->u.drop.grace_ms;
		r->flags = m->u.drop.flags;
		break;
	case NVS_MSG_SET_LIMITS:
		r->local_gpu = m->u.limits.local_gpu;
		r->value = m->u.limits.core_limit;
		r->mem = m->u.limits.mem_limit;
		break;
	default:
		r->local_gpu = m->u.gpu.local_gpu;
		r->value = m->u.gpu.value;
		break;
	}
	f[3] = r->value, f[4] = r->flags, f[5] = r->mem;
	for (unsigned i = 0; i < 6; i++)
		for (unsigned k = 0; k < 8; k++)
			h_trace = (h_trace ^ ((f[i] >> (8 * k)) & 0xff)) * 1099511628211ull;
	react(b, m, r);
}

int (*h_context)(struct client_gpu *cg);

static int port_context(void *ctx, struct client_gpu *cg)
{
	(void)ctx;
	return h_context ? h_context(cg) : -1; /* none: no NVML evidence */
}

static int quiet(const char *fmt, enum nvs_log_level level, unsigned *suppressed)
{
	(void)fmt, (void)level, (void)suppressed;
	return 0; /* INFO and WARN lines: the tests assert on state, not logs */
}

/* ---- setup ---- */

struct gpu *h_gpu(unsigned i)
{
	return &S.gpus[i];
}

void h_teardown(void)
{
	while (S.clients) {
		struct client *cl = S.clients;
		struct bot *b = cl->id < MAX_BOTS ? bots[cl->id] : NULL;
		assert_non_null(b);
		h_gone(b);
	}
}

void h_setup(unsigned ngpus, uint64_t mem, unsigned mode, uint64_t tq_ms)
{
	h_teardown();
	for (unsigned i = 0; i < nall; i++)
		free(all[i]);
	nall = 0;
	memset(bots, 0, sizeof bots);
	memset(evs, 0, sizeof evs);
	nheap = 0;
	memset(&S, 0, sizeof S);
	/* settings.def's defaults for what the core reads */
	S.cfg.mode = mode;
	S.cfg.tq_ms = tq_ms;
	S.cfg.reserve = 0;
	S.cfg.idle_release_ms = 20;
	S.cfg.drop_grace_ms = 5000;
	S.cfg.swap_out = 0; /* needed */
	S.cfg.swap_tq_factor = 50;
	S.cfg.swap_tq_max_factor = 4;
	S.cfg.oversub_factor = 4;
	S.cfg.mode_dwell_ms = 1000;
	S.cfg.mode_switch_burst = 4;
	S.cfg.report_rate = 50;
	S.cfg.q_window_ms = 2000;
	S.cfg.q_sample_ms = 50;
	S.cfg.q_carry_pct = 25;
	S.cfg.q_tail_pct = 70;
	S.cfg.q_slice_ms = 0;
	S.cfg.unknown_core_limit = 10;
	S.cfg.unknown_mem_limit = GiB;
	nvs_cosched_cfg.enabled = 1;
	nvs_cosched_cfg.preempt_ms = 50;
	nvs_cosched_cfg.min_slice_ms = 100;
	nvs_cosched_cfg.batch_floor_pct = 50;
	S.ngpus = ngpus;
	for (unsigned i = 0; i < ngpus; i++) {
		struct gpu *g = &S.gpus[i];
		g->index = (int)i;
		snprintf(g->uuid, sizeof g->uuid, "GPU-00000000-0000-0000-0000-%012u", i);
		snprintf(g->name, sizeof g->name, "virtual");
		g->total_mem = mem;
		g->from_nvml = 1;
		g->mode = mode;
		g->tq_ms = tq_ms;
	}
	h_now = SEC;
	h_steps = 0;
	h_trace = 14695981039346656037ull;
	h_invariants = H_INV_AGREE;
	h_wait_bound = 0;
	static const struct nvs_core_port port = {
	    .send = port_send, .event = port_event, .context = port_context};
	nvs_core_set_port(&port);
	nvs_log_set_filter(quiet);
	static int started;
	if (!started) {
		nvs_quota_start();
		nvs_cosched_start();
		started = 1;
	}
}

struct bot *h_client(unsigned tenant, unsigned gpu, uint64_t allocated, uint32_t hello_flags)
{
	struct bot *b = calloc(1, sizeof *b);
	struct client *cl = calloc(1, sizeof *cl);
	struct client_gpu *cg = calloc(1, sizeof *cg);
	assert_true(b && cl && cg && nall < MAX_BOTS);
	all[nall++] = b;
	b->mode = -1;
	b->cl = cl;
	b->cg = cg;
	/* HELLO (clients.c hello) */
	cl->id = ++S.next_client_id;
	assert_true(cl->id < MAX_BOTS);
	bots[cl->id] = b;
	cl->pid = (pid_t)(10000 + cl->id);
	cl->uid = tenant;
	cl->tenant = NVS_TENANT_UID;
	cl->id_source = NVS_ID_CGROUP;
	snprintf(cl->name, sizeof cl->name, "bot%u", cl->id);
	cl->hello_core_limit = 100;
	cl->hello_mem_limit = NVS_NO_LIMIT;
	cl->hello_flags = hello_flags;
	cl->device_memory = (hello_flags & NVS_HELLO_DEVICE_MEMORY) != 0;
	cl->connected_ns = h_now;
	nvs_core_client_add(cl);
	/* ATTACH_GPU (clients.c attach) */
	cg->client = cl;
	cg->gpu = &S.gpus[gpu];
	cg->local_gpu = 0;
	cg->claimed = allocated;
	cg->reported_total = S.gpus[gpu].total_mem;
	nvs_client_update_limits(cg);
	cg->allocated = nvs_bounds_clamp(cg, cg->claimed);
	cl->gpus[cl->ngpus++] = cg;
	nvs_policy_attach(cg, h_now);
	h_check();
	return b;
}

struct bot *h_bot(unsigned tenant, unsigned gpu, uint64_t allocated, uint64_t work_ns,
		  uint64_t think_ns, uint64_t drain_ns)
{
	struct bot *b = h_client(tenant, gpu, allocated, 0);
	b->autopilot = 1;
	b->work_ns = work_ns;
	b->think_ns = think_ns;
	b->drain_ns = drain_ns;
	if (b->mode > 0)
		schedule(b, h_now, A_REQ);
	return b;
}

void h_clients(struct bot **out, unsigned n, unsigned gpu, uint64_t allocated, int ask)
{
	for (unsigned i = 0; i < n; i++)
		out[i] = h_client(i + 1, gpu, allocated, 0);
	for (unsigned i = 0; ask && i < n; i++)
		h_req(out[i]);
}

void h_req(struct bot *b)
{
	if (!b->holding) {
		b->waiting = 1;
		b->req_at = h_now;
	}
	nvs_policy_req_lock(b->cg, h_now);
	h_check();
}

void h_release(struct bot *b, uint32_t flags)
{
	end_hold(b);
	b->releases++;
	nvs_policy_released(b->cg, flags, 0, h_now);
	h_check();
}

void h_mem(struct bot *b, uint64_t claimed)
{
	nvs_claims_mem_update(b->cg, claimed, h_now);
	h_check();
}

void h_gone(struct bot *b)
{
	struct client *cl = b->cl;
	if (!cl)
		return;
	/* clients.c nvs_client_gone */
	b->cl = NULL; /* nothing reaches it any more */
	cl->conn = NULL;
	cl->flags = 0;
	for (unsigned i = 0; i < cl->ngpus; i++) {
		nvs_core_gpu_detach(cl->gpus[i], h_now);
		free(cl->gpus[i]);
	}
	nvs_core_client_remove(cl);
	bots[cl->id] = NULL;
	free(cl);
	b->cg = NULL;
	b->holding = b->waiting = 0;
	b->gen++;
	h_check();
}

/* ---- running ---- */

static void act(const struct item *it)
{
	struct bot *b = it->b;
	if (!b->cl || it->gen != b->gen)
		return; /* gone, or overtaken by what it received since */
	switch (it->what) {
	case A_REQ:
		if (b->holding || b->waiting || b->mode <= 0)
			return; /* concurrent (or not told yet): no lock needed */
		h_req(b);
		return;
	case A_REL_IDLE:
	case A_REL_DROP:
		if (!b->holding)
			return;
		end_hold(b);
		b->releases++;
		nvs_policy_released(b->cg, it->what == A_REL_IDLE ? NVS_RELEASED_IDLE : 0,
				    it->what == A_REL_DROP ? b->drain_ns : 0, h_now);
		if (b->autopilot && b->think_ns != UINT64_MAX)
			schedule(b, h_now + b->think_ns, A_REQ);
		return;
	}
}

void h_run_until(uint64_t t)
{
	unsigned same = 0;
	for (;;) {
		/* The deadline itself (the real loop sleeps until it, rounded
		 * up to the millisecond: loop.c timeout_ms): what the core
		 * decides, not when the loop wakes. */
		uint64_t d = nvs_core_next_deadline(h_now);
		uint64_t a = nheap ? heap[0].t : UINT64_MAX;
		uint64_t next = d && d < a ? d : a;
		if (next > t)
			break;
		if (next < h_now)
			next = h_now;
		same = next == h_now ? same + 1 : 0;
		if (same > 100000) {
			print_error("seed %llu: the core does not settle at t=%llu ns\n",
				    (unsigned long long)h_seed, (unsigned long long)h_now);
			fail();
		}
		h_now = next;
		if (a <= h_now) {
			struct item it = pop();
			act(&it);
		}
		/* Every loop turn starts with the timers. */
		nvs_core_tick(h_now);
		h_steps++;
		h_check();
	}
	h_now = t;
}

/* ---- messages ---- */

static unsigned kept(const struct bot *b)
{
	return b->nmsgs < H_MSGS ? b->nmsgs : H_MSGS;
}

unsigned h_count(const struct bot *b, uint16_t type)
{
	unsigned n = 0;
	for (unsigned i = 0; i < kept(b); i++)
		n += b->msgs[i].type == type;
	return n;
}

const struct h_msg *h_last(const struct bot *b, uint16_t type)
{
	for (unsigned k = 0; k < kept(b); k++) {
		const struct h_msg *m = &b->msgs[(b->nmsgs - 1 - k) % H_MSGS];
		if (m->type == type)
			return m;
	}
	return NULL;
}

void h_clear(struct bot *b)
{
	b->nmsgs = 0;
}

/* ---- invariants ---- */

#define FAILF(...)                                                                                 \
	do {                                                                                       \
		print_error("seed %llu, t=%.3f ms: ", (unsigned long long)h_seed,                  \
			    (double)(h_now - SEC) / 1e6);                                          \
		print_error(__VA_ARGS__);                                                          \
		print_error("\n");                                                                 \
		fail();                                                                            \
	} while (0)

void h_check(void)
{
	for (unsigned i = 0; i < S.ngpus; i++) {
		struct gpu *g = &S.gpus[i];
		unsigned holders = 0;
		uint64_t mem = 0;
		for (struct client_gpu *cg = g->ahead; cg; cg = cg->anext) {
			if (cg->state == CG_HOLDING) {
				holders++;
				mem += nvs_policy_expected_of(cg);
			}
			struct bot *b = bots[cg->client->id];
			if ((h_invariants & H_INV_AGREE) && b &&
			    b->holding != (cg->state == CG_HOLDING))
				FAILF("client %u: thinks it holds: %d, the core: %d",
				      cg->client->id, b->holding, cg->state == CG_HOLDING);
			if ((h_invariants & H_INV_WAIT) && b && b->waiting && !b->ignores_drop &&
			    h_wait_bound && h_now - b->req_at > h_wait_bound)
				FAILF("client %u waits %.3f ms, bound %.3f ms", cg->client->id,
				      (double)(h_now - b->req_at) / 1e6,
				      (double)h_wait_bound / 1e6);
		}
		if (holders && !g->holder)
			FAILF("gpu %u: %u holders but no primary", i, holders);
		if ((h_invariants & H_INV_ONE_HOLDER) && g->serialized && holders > 1)
			FAILF("gpu %u: %u holders on a serialized GPU", i, holders);
		if ((h_invariants & H_INV_SET_FITS) && holders > 1 && mem > nvs_gpu_capacity(g))
			FAILF("gpu %u: a running set of %u needs %llu MiB, capacity %llu MiB", i,
			      holders, (unsigned long long)(mem >> 20),
			      (unsigned long long)(nvs_gpu_capacity(g) >> 20));
	}
}

void h_srand(uint64_t seed)
{
	h_seed = seed;
	rng = seed ? seed : 0x9e3779b97f4a7c15ull;
}

uint64_t h_rand(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}
