/*
 * The client's side of the scheduler lock. See client/sched_client.h for the
 * interface and docs/client-lock.md for the states, messages and failure
 * behaviour. This file holds the interface application threads call, the
 * start-up of the client thread and the fork handler; the thread's loop and
 * connection are in sched_conn.c, its lock work in sched_lock.c
 * (sched_client_internal.h has what they share).
 *
 * Threads:
 *   - application threads call nvs_gate() (inline, fast path), the slow path
 *     nvs_gate_slow() and nvs_sched_attach_gpu(); accounting calls
 *     mem_changed(), the observer this file registers (nvs_acct_observe).
 *     They never touch the socket: they change per-GPU state under nvs_sc.mu
 *     (or an atomic) and wake the client thread through an eventfd.
 *   - one client thread (all signals blocked) owns the socket: it connects
 *     and reconnects, composes and sends every message, handles the
 *     scheduler's messages, drains on DROP_LOCK and releases an idle lock.
 *     It is the only thread that synchronizes a context, and it never holds
 *     nvs_sc.mu while it calls into the driver or waits.
 *
 * The library never exits or aborts the process: a scheduler that is absent
 * or goes away leaves every gate open (the process runs ungated) while the
 * thread retries in the background.
 */
#include "sched_client_internal.h"

#include "accounting.h"
#include "sched_quota.h"
#include "sched_swap.h"

#include "log.h"
#include "parse.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* How long the first nvs_sched_attach_gpu() of a device waits for the
 * scheduler's GPU_MODE answer, so the first launches are gated correctly. */
#define NVS_ATTACH_WAIT_DEFAULT_MS 200u

atomic_int nvs_gate_closed;
atomic_int nvs_gate_activity;
atomic_int nvs_gate_inflight;

struct nvs_sc_state nvs_sc = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Lock-free views for application threads. */
static atomic_int gpu_closed[NVS_MAX_GPUS];
static atomic_int gpu_attached[NVS_MAX_GPUS];
static atomic_int gpu_fits[NVS_MAX_GPUS]; /* not serialized (or no scheduler) */
/* Connected, attached, and GPU_MODE not yet here (nor waited for in vain):
 * a limited GPU's gated calls wait (wait_for_mode); read without nvs_sc.mu. */
static atomic_int mode_pending[NVS_MAX_GPUS];
static atomic_int mem_dirty[NVS_MAX_GPUS]; /* accounting's count changed */
static atomic_int ctx_known[NVS_MAX_GPUS]; /* an application context of it is noted */
static atomic_int capture_depth;
static atomic_int started;  /* the client thread was started (or tried) */
static atomic_int stopping; /* process is exiting: no more driver calls */
/* Forked child: keep the gate closed until a gated call has found its
 * device and attached it (launches alone do not attach elsewhere). */
static atomic_int probe_pending;

static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
static int evfd = -1;

static void mem_changed(int dev);
static void gate_wait(int dev);
static void wait_open_locked(int dev);

/* Configuration read at start. */
static uint32_t attach_wait_ms = NVS_ATTACH_WAIT_DEFAULT_MS;

/* Absolute CLOCK_MONOTONIC time ms from now, for pthread_cond_timedwait on
 * cv (which uses that clock). */
static struct timespec deadline_after_ms(uint32_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

static void init_cv(void)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&nvs_sc.cv, &a);
	pthread_condattr_destroy(&a);
}

static void kick(void)
{
	int fd = evfd;
	if (fd >= 0) {
		uint64_t one = 1;
		ssize_t w = write(fd, &one, sizeof one);
		(void)w; /* EAGAIN: the counter is already nonzero, fine */
	}
}

/* Formats the 16 UUID bytes as NVML does: GPU-8-4-4-4-12 hex digits. */
static void format_uuid(const CUuuid *u, char *out, size_t cap)
{
	const unsigned char *b = (const unsigned char *)u->bytes;
	snprintf(out, cap,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

/* Recomputes the per-GPU and global gates from the per-GPU state. Called with
 * mu held after every state change. */
void nvs_sc_recompute_gate(void)
{
	int any = 0;
	for (int i = 0; i < nvs_sc.ndev; i++) {
		const struct sc_gpu *g = &nvs_sc.gpus[i];
		/* Swapped-out memory keeps the gate closed until the client
		 * thread restored it, whatever else would open it. */
		int closed =
		    g->attached && ((g->serialized && g->lock != L_HELD) || g->lock == L_DROPPING ||
				    g->lock == L_IDLE_CHECK || nvs_swap_must_restore(i));
		/* A throttled GPU (compute quota) is one whose lock the
		 * scheduler withholds: closed by the rule above. */
		atomic_store_explicit(&gpu_closed[i], closed, memory_order_release);
		atomic_store_explicit(&gpu_fits[i],
				      !nvs_sc.connected || (g->mode_known && !g->serialized),
				      memory_order_relaxed);
		atomic_store_explicit(&mode_pending[i],
				      nvs_sc.connected && g->attached && !g->mode_known &&
					  !g->mode_wait_over,
				      memory_order_release);
		any |= closed;
	}
	any |= atomic_load(&probe_pending);
	/* A limited GPU's gated calls count in-flight work (sched_quota.h). */
	any |= nvs_qclient_any_capped();
	atomic_store_explicit(&nvs_gate_closed, any, memory_order_seq_cst);
}

uint64_t nvs_sc_take_mem(int dev, int *changed)
{
	int dirty = atomic_exchange(&mem_dirty[dev], 0);
	if (changed)
		*changed = dirty;
	return nvs_acct_used(dev);
}

int nvs_sc_capturing(void)
{
	return atomic_load(&capture_depth) > 0;
}

int nvs_sc_stopping(void)
{
	return atomic_load(&stopping);
}

/* ---------------------------------------------------------------------- */
/* Start-up                                                                */

static void on_exit_handler(void)
{
	atomic_store(&stopping, 1);
}

static void read_config(void)
{
	nvs_sc_conn_configure(); /* socket path, HELLO's limits, reconnect jitter */
	nvs_sc_lock_configure(); /* NVSHARE_IDLE_RELEASE_MS */
	uint64_t w;
	if (nvs_env_u64("NVSHARE_ATTACH_WAIT_MS", 0, 60000, &w) == 1)
		attach_wait_ms = (uint32_t)w;
}

/* Starts the client thread once per process (again in a forked child). */
static void ensure_started(void)
{
	if (atomic_load_explicit(&started, memory_order_acquire))
		return;
	pthread_once(&cv_once, init_cv);
	pthread_mutex_lock(&start_mu);
	if (!atomic_load(&started)) {
		static int atexit_done;
		read_config();
		/* ATTACH_GPU carries the count at that time; MEM_UPDATE the
		 * changes after it. */
		nvs_acct_observe(mem_changed);
		evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		int rc = evfd < 0 ? errno : 0;
		if (rc == 0) {
			sigset_t all, old;
			sigfillset(&all);
			pthread_sigmask(SIG_SETMASK, &all, &old);
			pthread_attr_t a;
			pthread_attr_init(&a);
			pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
			pthread_t t;
			rc = pthread_create(&t, &a, nvs_sc_thread_main, (void *)(intptr_t)evfd);
			pthread_attr_destroy(&a);
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			if (rc == 0)
				pthread_setname_np(t, "nvshare-sched");
		}
		if (rc != 0) {
			NVS_WARN("cannot start the scheduler client thread (%s); running ungated",
				 strerror(rc));
			if (evfd >= 0)
				close(evfd);
			evfd = -1;
		}
		if (!atexit_done) {
			atexit(on_exit_handler);
			atexit_done = 1;
		}
		pthread_mutex_lock(&nvs_sc.mu);
		nvs_sc_recompute_gate(); /* clears the restart trigger of a forked child */
		pthread_mutex_unlock(&nvs_sc.mu);
		atomic_store_explicit(&started, 1, memory_order_release);
	}
	pthread_mutex_unlock(&start_mu);
}

/* ---------------------------------------------------------------------- */
/* Public interface                                                        */

void nvs_sched_start(void)
{
	ensure_started();
}

/* An application context of dev, once (the first use of a device may come
 * before any context is current: a primary-context retain). The client
 * thread needs one to drain and swap, and to pin staging early. */
static void note_ctx(int dev)
{
	CUcontext cur = NULL;
	CUdevice cd;
	if (!nvs_real.cuCtxGetCurrent || nvs_real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur ||
	    !nvs_real.cuCtxGetDevice || nvs_real.cuCtxGetDevice(&cd) != CUDA_SUCCESS)
		return;
	pthread_mutex_lock(&nvs_sc.mu);
	struct sc_gpu *g = &nvs_sc.gpus[dev];
	int stage = 0;
	if (cd == g->cudev && !g->ctx) {
		g->ctx = cur;
		/* Told serialized before a context was known (the GPU_MODE
		 * came first): the staging starts now, not at the first
		 * hand-off, whose swap-out would find none. */
		stage = g->serialized;
	}
	if (g->ctx)
		atomic_store_explicit(&ctx_known[dev], 1, memory_order_release);
	pthread_mutex_unlock(&nvs_sc.mu);
	if (stage)
		nvs_swap_prepare(dev); /* only asks the staging thread */
}

void nvs_sched_note_ctx(int dev)
{
	if (dev >= 0 && dev < NVS_MAX_GPUS &&
	    atomic_load_explicit(&gpu_attached[dev], memory_order_acquire) &&
	    !atomic_load_explicit(&ctx_known[dev], memory_order_acquire))
		note_ctx(dev);
}

void nvs_sched_attach_gpu(int dev)
{
	if (dev < 0 || dev >= NVS_MAX_GPUS)
		return;
	if (atomic_load_explicit(&gpu_attached[dev], memory_order_acquire)) {
		nvs_sched_note_ctx(dev);
		return;
	}
	ensure_started();

	/* Driver queries outside the mutex. */
	char uuid[NVS_UUID_LEN] = "";
	size_t total = 0;
	CUcontext ctx = NULL;
	CUdevice d = (CUdevice)dev;
	if (nvs_real.cuDeviceGet && nvs_real.cuDeviceGet(&d, dev) != CUDA_SUCCESS)
		d = (CUdevice)dev;
	CUuuid u;
	if (nvs_real.cuDeviceGetUuid_v2 && nvs_real.cuDeviceGetUuid_v2(&u, d) == CUDA_SUCCESS)
		format_uuid(&u, uuid, sizeof uuid);
	if (nvs_real.cuDeviceTotalMem_v2 && nvs_real.cuDeviceTotalMem_v2(&total, d) != CUDA_SUCCESS)
		total = 0;
	CUcontext cur = NULL;
	CUdevice cd;
	if (nvs_real.cuCtxGetCurrent && nvs_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur &&
	    nvs_real.cuCtxGetDevice && nvs_real.cuCtxGetDevice(&cd) == CUDA_SUCCESS && cd == d)
		ctx = cur;

	pthread_mutex_lock(&nvs_sc.mu);
	struct sc_gpu *g = &nvs_sc.gpus[dev];
	if (!g->attached) {
		g->attached = 1;
		g->cudev = d;
		g->total_mem = total;
		g->core_limit = nvs_sc_hello_core_limit();
		nvs_qclient_set_limit(dev, g->core_limit);
		memcpy(g->uuid, uuid, sizeof g->uuid);
		if (ctx)
			g->ctx = ctx;
		if (dev >= nvs_sc.ndev)
			nvs_sc.ndev = dev + 1;
		nvs_sc_recompute_gate();
		atomic_store_explicit(&gpu_attached[dev], 1, memory_order_release);
		NVS_DEBUG("GPU %d attached (%s)", dev, uuid);
		kick();
		/* Wait (bounded) for the first connection attempt and then
		 * for the scheduler's GPU_MODE, so the first launches on a
		 * serialized GPU are already gated. */
		if (attach_wait_ms > 0 && evfd >= 0) {
			struct timespec ts = deadline_after_ms(attach_wait_ms);
			while ((!nvs_sc.first_try_done || (nvs_sc.connected && !g->mode_known)) &&
			       pthread_cond_timedwait(&nvs_sc.cv, &nvs_sc.mu, &ts) != ETIMEDOUT)
				;
			/* Connected, and still no answer: its first launches run
			 * ungated. Said once a process, counted (sched_conn.c
			 * "Ungated runs"). (Not connected: the thread's warning
			 * says so already.) */
			if (nvs_sc.connected && !g->mode_known) {
				static int said;
				nvs_sc_ungated_cause(NVS_UNGATED_NO_ANSWER);
				kick(); /* the client thread marks the episode's start */
				if (!said && !nvs_sc_fail_closed())
					NVS_WARN(
					    "GPU %d: no answer from the scheduler within %u ms "
					    "(NVSHARE_ATTACH_WAIT_MS); running ungated until it "
					    "answers",
					    dev, attach_wait_ms);
				said = 1;
			}
		}
	} else if (ctx && !g->ctx) {
		g->ctx = ctx;
	}
	pthread_mutex_unlock(&nvs_sc.mu);
}

/* A GPU with a compute limit runs nothing before the scheduler's GPU_MODE
 * has arrived: a limited client always makes its GPU serialized, and
 * kernels launched before the answer would run outside the lock, unbilled
 * (seen with a loaded machine, where GPU_MODE took longer than the 200 ms
 * attach wait). Bounded, so that a scheduler which accepts connections but
 * never answers cannot stop the application: after LIMITED_MODE_WAIT_MS it
 * runs ungated (with a warning) until GPU_MODE arrives. Unlimited clients
 * keep the attach wait only. */
#define LIMITED_MODE_WAIT_MS 10000u

static void wait_for_mode(int dev)
{
	/* The known mode is read without the mutex: the common case, once. */
	if (!atomic_load_explicit(&mode_pending[dev], memory_order_acquire))
		return;
	pthread_mutex_lock(&nvs_sc.mu);
	struct sc_gpu *g = &nvs_sc.gpus[dev];
	if (nvs_sc.connected && g->attached && !g->mode_known && !g->mode_wait_over) {
		struct timespec ts = deadline_after_ms(LIMITED_MODE_WAIT_MS);
		int r = 0;
		while (nvs_sc.connected && !g->mode_known && r != ETIMEDOUT)
			r = pthread_cond_timedwait(&nvs_sc.cv, &nvs_sc.mu, &ts);
		if (nvs_sc.connected && !g->mode_known) {
			g->mode_wait_over = 1;
			nvs_sc_ungated_cause(NVS_UNGATED_MODE_WAIT);
			kick();
			nvs_sc_recompute_gate();
			NVS_WARN("GPU %d: compute limit set but no GPU_MODE from the scheduler "
				 "within %u ms; running ungated until it answers",
				 dev, LIMITED_MODE_WAIT_MS);
		}
	}
	pthread_mutex_unlock(&nvs_sc.mu);
}

static void gate_slow(void);

void nvs_gate_slow(void)
{
	/* Uncounted while waiting: the client thread may be waiting for the
	 * in-flight count to drain before it opens this gate again. */
	atomic_fetch_sub_explicit(&nvs_gate_inflight, 1, memory_order_seq_cst);
	gate_slow();
}

/* Counted again before the device's gate is read once more: a gate that
 * closed in between sends us back to wait. */
static int enter_open(int dev)
{
	atomic_fetch_add_explicit(&nvs_gate_inflight, 1, memory_order_seq_cst);
	if (dev < 0 || !atomic_load_explicit(&gpu_closed[dev], memory_order_seq_cst))
		return 1;
	atomic_fetch_sub_explicit(&nvs_gate_inflight, 1, memory_order_seq_cst);
	return 0;
}

static void gate_slow(void)
{
	ensure_started(); /* a forked child restarts here */
	CUdevice dev;
	if (!nvs_real.cuCtxGetDevice || nvs_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
	    (unsigned)dev >= NVS_MAX_GPUS) {
		enter_open(-1); /* no context: nothing to gate */
		return;
	}
	for (;;) {
		gate_wait((int)dev);
		if (enter_open((int)dev))
			return;
	}
}

/* Waits until dev's gate is open (uncounted). */
static void gate_wait(int dev)
{
	if (!atomic_load_explicit(&gpu_attached[dev], memory_order_acquire))
		nvs_sched_attach_gpu(dev);
	if (atomic_load(&probe_pending) && atomic_exchange(&probe_pending, 0)) {
		pthread_mutex_lock(&nvs_sc.mu);
		nvs_sc_recompute_gate();
		pthread_mutex_unlock(&nvs_sc.mu);
	}
	/* Bounded in-flight work of a limited GPU, before the lock check:
	 * the launch follows that check at once. */
	if (nvs_qclient_limited(dev))
		wait_for_mode(dev);
	if (nvs_qclient_capped(dev))
		nvs_qclient_gate(dev, atomic_load(&capture_depth) > 0);
	if (!atomic_load_explicit(&gpu_closed[dev], memory_order_acquire))
		return; /* another GPU is closed, not ours */
	CUcontext cur = NULL;
	if (nvs_real.cuCtxGetCurrent && nvs_real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
		cur = NULL;

	pthread_mutex_lock(&nvs_sc.mu);
	struct sc_gpu *g = &nvs_sc.gpus[dev];
	if (cur)
		g->ctx = cur;
	wait_open_locked(dev);
	pthread_mutex_unlock(&nvs_sc.mu);
}

/* mu held: asks for dev's lock if it needs one, and waits for its gate to
 * open. A gate closed because swapped-out memory must come back first
 * wakes the client thread, which restores it (docs/swap.md). */
static void wait_open_locked(int dev)
{
	struct sc_gpu *g = &nvs_sc.gpus[dev];
	while (atomic_load_explicit(&gpu_closed[dev], memory_order_relaxed)) {
		if (g->serialized && g->lock == L_NONE) {
			g->lock = L_REQUESTED;
			g->req_pending = 1;
			kick();
		} else if (nvs_swap_must_restore(dev)) {
			kick();
		}
		g->blocked++;
		pthread_cond_wait(&nvs_sc.cv, &nvs_sc.mu);
		g->blocked--;
	}
}

void nvs_sched_wait_open(int dev)
{
	if (dev < 0 || dev >= NVS_MAX_GPUS || !atomic_load(&started))
		return;
	pthread_mutex_lock(&nvs_sc.mu);
	if (nvs_sc.gpus[dev].attached)
		wait_open_locked(dev);
	pthread_mutex_unlock(&nvs_sc.mu);
}

/* Accounting's observer (registered at start): dev's allocated bytes
 * changed. Coalesced: the client thread reads the count when it next runs. */
static void mem_changed(int dev)
{
	if (dev < 0 || dev >= NVS_MAX_GPUS)
		return;
	if (!atomic_exchange(&mem_dirty[dev], 1) &&
	    atomic_load_explicit(&started, memory_order_acquire))
		kick();
}

int nvs_sched_gpu_fits(int dev)
{
	if (dev < 0 || dev >= NVS_MAX_GPUS)
		return 0;
	if (!atomic_load_explicit(&gpu_attached[dev], memory_order_acquire))
		return !atomic_load_explicit(&started, memory_order_acquire);
	return atomic_load_explicit(&gpu_fits[dev], memory_order_relaxed);
}

void nvs_sched_kick(void)
{
	if (atomic_load_explicit(&started, memory_order_acquire))
		kick();
}

void nvs_sched_capture_begin(void)
{
	atomic_fetch_add(&capture_depth, 1);
}

void nvs_sched_capture_end(void)
{
	int v = atomic_load(&capture_depth);
	while (v > 0 && !atomic_compare_exchange_weak(&capture_depth, &v, v - 1))
		;
}

void nvs_sched_atfork_child(void)
{
	int was_started = atomic_load(&started);
	nvs_sc_conn_atfork_child();
	if (evfd >= 0)
		close(evfd);
	evfd = -1;
	nvs_sc_lock_atfork_child();
	pthread_mutex_init(&nvs_sc.mu, NULL);
	pthread_mutex_init(&start_mu, NULL);
	init_cv();
	memset(nvs_sc.gpus, 0, sizeof nvs_sc.gpus);
	nvs_qclient_atfork_child();
	nvs_swap_atfork_child();
	nvs_sc.ndev = 0;
	nvs_sc.connected = 0;
	nvs_sc.first_try_done = 0;
	for (int i = 0; i < NVS_MAX_GPUS; i++) {
		atomic_store(&gpu_closed[i], 0);
		atomic_store(&gpu_attached[i], 0);
		atomic_store(&gpu_fits[i], 0);
		atomic_store(&mode_pending[i], 0);
		atomic_store(&mem_dirty[i], 0);
		atomic_store(&ctx_known[i], 0);
	}
	atomic_store(&capture_depth, 0);
	atomic_store(&nvs_gate_activity, 0);
	/* No thread here: the next gated call takes the slow path, which
	 * restarts it and registers the device the child uses. */
	atomic_store(&started, 0);
	atomic_store(&probe_pending, was_started);
	atomic_store(&nvs_gate_closed, was_started);
}
