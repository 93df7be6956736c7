/*
 * The client's side of the scheduler lock (client/sched_client.c).
 *
 * One background thread per process owns the scheduler connection: it
 * connects (retrying while the scheduler is absent, the process running
 * ungated meanwhile), sends HELLO and one ATTACH_GPU per device in use,
 * receives LOCK_OK / DROP_LOCK / GPU_MODE / SET_LIMITS / WAITERS, drains and
 * answers LOCK_RELEASED, and releases an idle lock by itself.
 *
 * Application threads only touch the gate: nvs_gate() on every launch, graph
 * launch, memcpy and memset. While no GPU of this process is serialized, or
 * every serialized one is held, it is one relaxed atomic load and one relaxed
 * store (activity mark for idle detection): no syscall, no synchronize.
 */
#ifndef NVSHARE_CLIENT_SCHED_CLIENT_H
#define NVSHARE_CLIENT_SCHED_CLIENT_H

#include <stdatomic.h>
#include <stdint.h>

/* Nonzero while some gated call must take the slow path (a serialized GPU
 * not held, a DROP_LOCK being served, a compute limit throttling us). */
extern atomic_int nvs_gate_closed;
/* Set to 1 by every gated call; the client thread clears it to detect
 * idleness. */
extern atomic_int nvs_gate_activity;

/* Gated calls between the gate and the end of their real call. The client
 * thread closes a gate, then waits for this to reach 0 before it drains and
 * swaps: a call that passed the gate just before it closed has submitted
 * its work by then, so the drain waits for that work too and nothing
 * reaches the GPU while memory is swapped out (docs/client-lock.md "The
 * gate and calls in flight"). Dekker-style: the count's increment and the
 * gate's store are sequentially consistent, as are the loads after them. */
extern atomic_int nvs_gate_inflight;

/* Slow path, entered counted in nvs_gate_inflight: finds the calling
 * thread's current device, asks for its lock if needed and waits for it
 * (uncounted meanwhile), and returns counted again, its device's gate open.
 * Never fails: if the scheduler is gone it returns and the work runs
 * ungated. */
void nvs_gate_slow(void);

/* NVSHARE_REQUIRE_SCHEDULER=1: 1 while connected to the scheduler; the
 * first call waits (at most 2 s) for the first connection attempt.
 * (sched_require.c) */
int nvs_sched_require_ok(void);

static inline void nvs_gate(void)
{
	atomic_fetch_add_explicit(&nvs_gate_inflight, 1, memory_order_seq_cst);
	if (__builtin_expect(atomic_load_explicit(&nvs_gate_closed, memory_order_seq_cst), 0))
		nvs_gate_slow();
	atomic_store_explicit(&nvs_gate_activity, 1, memory_order_relaxed);
}

/* After the real call of a gated wrapper returned. */
static inline void nvs_gate_done(void)
{
	atomic_fetch_sub_explicit(&nvs_gate_inflight, 1, memory_order_release);
}

/* Waits until dev's gate is open (asking for its lock if it is serialized
 * and not held): for calls that need the GPU's memory in place but are not
 * gated themselves (a VMM mapping of memory that is swapped out). Returns at
 * once if the scheduler client is not running or dev is not attached. */
void nvs_sched_wait_open(int dev);
/* Wakes the client thread (something it reports changed). */
void nvs_sched_kick(void);

/* Started once from the library's lazy init (after real driver pointers are
 * resolved). Does not block on the scheduler. NVSHARE_DISABLE=1 or the
 * absence of any CUDA use means it is never called. */
void nvs_sched_start(void);

/* The process uses device ordinal `dev` (first context / allocation /
 * launch on it). Idempotent and cheap after the first call per device. */
void nvs_sched_attach_gpu(int dev);

/* The calling thread's current context, if it is dev's, is remembered as
 * the application's (once; cheap afterwards): the client thread drains,
 * swaps and pins staging in it. Called on allocations. */
void nvs_sched_note_ctx(int dev);

/* 1 when `dev` is not serialized by the scheduler (its clients' memory
 * fits), or no scheduler is connected; 0 while serialized or before the
 * scheduler answered. */
int nvs_sched_gpu_fits(int dev);

/* Stream capture began / ended on some stream: while any capture is active
 * the client never synchronizes the context (it would break the capture). */
void nvs_sched_capture_begin(void);
void nvs_sched_capture_end(void);

/* In a forked child: forget the parent's connection and lock state. */
void nvs_sched_atfork_child(void);

/* config.c: whether new cuMemAlloc* become managed memory (NVSHARE_UNIFIED_MEMORY,
 * default 1), and the scheduler's MEMORY_MODE (the Pod's annotation
 * nvshare.com/unified-memory: "false"), which turns it off for the rest of
 * the process's life; any thread. */
int nvs_config_unified(void);
void nvs_config_device_memory(void);
/* config.c, the one reader of NVSHARE_GPU_MEMORY_LIMIT and
 * NVSHARE_GPU_MEMORY_REQUEST: the memory limit the environment gives (the
 * smaller of the two), UINT64_MAX (NVS_NO_LIMIT) for none; what HELLO
 * announces. Loads the configuration if it was not yet. */
uint64_t nvs_config_env_mem_limit(void);

#endif
