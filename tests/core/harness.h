/*
 * tests/core/: the scheduler's decision core (scheduler/core/) in process,
 * on a virtual clock, behind a fake port (core/port.h) that records what
 * the core sends. No socket, no thread, no sleep: a scenario of minutes
 * runs in milliseconds and durations can be asserted exactly.
 *
 * A scenario: h_setup() (one or more GPUs, settings), clients
 * (h_client: HELLO and ATTACH_GPU as clients.c does them), then either
 * calls into the core by hand (h_req, h_release, h_mem, h_gone) at
 * h_at()/h_run_until() times, or bots: clients that follow the protocol
 * on their own (REQ_LOCK when serialized and they have work, release
 * idle after their work or after DROP_LOCK with a drain, re-queue after
 * thinking), driven by an agenda of timed actions. h_run_until() runs the
 * agenda and the core's timer (nvs_policy_next_deadline / tick) in time
 * order, and after every step checks the invariants (h_check).
 */
#ifndef NVS_TESTS_CORE_HARNESS_H
#define NVS_TESTS_CORE_HARNESS_H

#include "scheduler/core/bounds.h"
#include "scheduler/core/claims.h"
#include "scheduler/core/coschedule.h"
#include "scheduler/core/fairness.h"
#include "scheduler/core/limits_apply.h"
#include "scheduler/core/policy.h"
#include "scheduler/core/port.h"
#include "scheduler/core/quota.h"
#include "scheduler/core/registry.h"
#include "scheduler/core/state.h"

#include "protocol.h"

#include <stdint.h>

#define MS 1000000ull
#define SEC 1000000000ull
#define GiB (1ull << 30)
#define MiB (1ull << 20)

/* One message the core sent to a client. */
struct h_msg {
	uint64_t t;
	uint16_t type;
	uint32_t local_gpu;
	uint32_t value; /* GPU_MODE, WAITERS, SWAP_HINT; DROP_LOCK grace_ms;
			 * LOCK_OK quantum_ms; SET_LIMITS core_limit */
	uint32_t flags; /* DROP_LOCK, LOCK_OK flags */
	uint64_t mem;	/* SET_LIMITS mem_limit */
};

#define H_MSGS 256 /* kept per client: the latest (a ring) */

struct bot {
	struct client *cl;
	struct client_gpu *cg; /* its one GPU (h_client attaches one) */
	/* Behaviour (auto != 0): once granted it runs work_ns, then releases
	 * idle (0: until asked); it answers DROP_LOCK after drain_ns unless
	 * ignores_drop; after a release or a revocation it asks again after
	 * think_ns (UINT64_MAX: never). */
	int autopilot;
	uint64_t work_ns, think_ns, drain_ns;
	int ignores_drop;
	/* What it knows (from the messages) */
	int mode; /* last GPU_MODE, -1 none */
	int holding, waiting, drop_pending;
	uint64_t granted_at, req_at;
	/* Counters */
	uint64_t grants, drops, revokes, releases;
	uint64_t run_ns;      /* total time holding, completed holds */
	uint64_t max_wait_ns; /* longest REQ_LOCK -> LOCK_OK */
	unsigned gen;	      /* invalidates its scheduled actions */
	/* Received messages (ring) */
	struct h_msg msgs[H_MSGS];
	unsigned nmsgs; /* all ever received */
			/* Events about it are not kept per client; see h_events(). */
};

/* The virtual clock (CLOCK_MONOTONIC ns as the core sees it). */
extern uint64_t h_now;

/* Fresh state: ngpus GPUs of mem bytes each (reserve 0: capacity = mem),
 * every GPU in mode, TQ tq_ms; every other setting its settings.def
 * default. Frees what an earlier scenario left. The clock starts at 1 s. */
void h_setup(unsigned ngpus, uint64_t mem, unsigned mode, uint64_t tq_ms);
/* Ends the scenario: every client goes away (the core must survive it). */
void h_teardown(void);

/* A client of tenant `tenant` (a host uid: clients with the same uid are
 * one tenant) attached to GPU gpu with `allocated` bytes; hello_flags as
 * in HELLO (NVS_HELLO_*). Not a bot until autopilot is set. */
struct bot *h_client(unsigned tenant, unsigned gpu, uint64_t allocated, uint32_t hello_flags);
/* A bot: h_client with autopilot, which asks for the lock now if its GPU is
 * serialized. */
struct bot *h_bot(unsigned tenant, unsigned gpu, uint64_t allocated, uint64_t work_ns,
		  uint64_t think_ns, uint64_t drain_ns);

/* n clients of tenants 1..n on GPU gpu, `allocated` bytes each, into
 * out[]; with ask, each sends REQ_LOCK in that order. */
void h_clients(struct bot **out, unsigned n, unsigned gpu, uint64_t allocated, int ask);

/* Protocol messages from a client, at h_now. */
void h_req(struct bot *b);
void h_release(struct bot *b, uint32_t flags);
void h_mem(struct bot *b, uint64_t claimed);
void h_gone(struct bot *b);

/* Runs the agenda and the core's timer up to t (inclusive), then sets
 * the clock to t. */
void h_run_until(uint64_t t);
static inline void h_advance(uint64_t dt)
{
	h_run_until(h_now + dt);
}

/* Messages of a type a client received: how many (since h_clear), the
 * latest (NULL none). */
unsigned h_count(const struct bot *b, uint16_t type);
const struct h_msg *h_last(const struct bot *b, uint16_t type);
void h_clear(struct bot *b);

/* Events (port.h): how many named `name` since setup, the fields of the
 * latest (NULL none). */
unsigned h_events(const char *name);
const char *h_event_fields(const char *name);

/* Invariant checks, run after every step of h_run_until and every h_*
 * call; a failure prints the scenario's seed and the time and fails the
 * test. Which invariants: */
#define H_INV_ONE_HOLDER 1u /* serialized, no running set: at most one holder */
#define H_INV_SET_FITS 2u   /* a running set of 2+ fits the capacity */
#define H_INV_AGREE 4u	    /* bots hold exactly when the core says they do */
#define H_INV_WAIT 8u	    /* no waiter waits longer than h_wait_bound (hogs: any) */
extern unsigned h_invariants;
extern uint64_t h_wait_bound;
extern uint64_t h_seed; /* printed on failure */
void h_check(void);

/* Small deterministic PRNG (xorshift64*): h_srand sets h_seed. */
void h_srand(uint64_t seed);
uint64_t h_rand(void);
static inline uint64_t h_rand_range(uint64_t lo, uint64_t hi)
{
	return lo + h_rand() % (hi - lo + 1);
}

struct gpu *h_gpu(unsigned i);
/* The port's context query (port.h: does cg's process have a context on
 * its GPU, by NVML): NULL answers -1, unknown (no evidence); the shell's
 * is nvs_unmanaged_context (tests/core/t_unmanaged.c sets it). */
extern int (*h_context)(struct client_gpu *cg);
/* Core steps (agenda actions and timer ticks) run since setup; a hash of
 * every message sent since setup (time, client, type, values): two builds
 * of the core that decide alike give the same. */
extern uint64_t h_steps;
extern uint64_t h_trace;

#endif
