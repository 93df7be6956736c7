/*
 * The client's side of the scheduler lock. See client/sched_client.h for the
 * interface and docs/client-lock.md for the states, messages and failure
 * behaviour.
 *
 * Threads:
 *   - application threads call nvs_gate() (inline, fast path), the slow path
 *     nvs_gate_slow(), nvs_sched_attach_gpu() and nvs_sched_mem_changed().
 *     They never touch the socket: they change per-GPU state under `mu` (or
 *     an atomic) and wake the client thread through an eventfd.
 *   - one client thread (all signals blocked) owns the socket: it connects
 *     and reconnects, composes and sends every message, handles the
 *     scheduler's messages, drains on DROP_LOCK and releases an idle lock.
 *     It is the only thread that synchronizes a context, and it never holds
 *     `mu` while it calls into the driver or waits.
 *
 * The library never exits or aborts the process: a scheduler that is absent
 * or goes away leaves every gate open (the process runs ungated) while the
 * thread retries in the background.
 */
#include "sched_client.h"

#include "accounting.h"
#include "real.h"
#include "sched_quota.h"
#include "sched_swap.h"

#include "log.h"
#include "parse.h"
#include "protocol.h"
#include "sockpath.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

atomic_int nvs_gate_closed;
atomic_int nvs_gate_activity;

/* Idle release delay used until the scheduler's WELCOME says otherwise (and
 * when it says 0). See docs/client-lock.md "Idle release". */
#define NVS_IDLE_RELEASE_DEFAULT_MS 20u
/* Reconnect period while the scheduler is absent (+-25 % jitter). */
#define NVS_RECONNECT_MS 1000u
/* How long the first nvs_sched_attach_gpu() of a device waits for the
 * scheduler's GPU_MODE answer, so the first launches are gated correctly. */
#define NVS_ATTACH_WAIT_DEFAULT_MS 200u
/* An idle check whose drain took longer than this found the GPU still busy
 * (work queued before the last gated call): the job is not idle. */
#define NVS_BUSY_DRAIN_MIN_NS 2000000ull
#define NVS_OUTBUF_SIZE (64u * 1024u)

enum lock_state {
	L_NONE = 0,	  /* not held, not asked for */
	L_REQUESTED = 1,  /* REQ_LOCK queued or sent, waiting for LOCK_OK */
	L_HELD = 2,	  /* LOCK_OK received: gate open */
	L_DROPPING = 3,	  /* DROP_LOCK being served: gate closed, draining */
	L_IDLE_CHECK = 4, /* idle release in progress: gate closed, draining */
};

static const char *lock_name(enum lock_state s)
{
	switch (s) {
	case L_NONE: return "none";
	case L_REQUESTED: return "requested";
	case L_HELD: return "held";
	case L_DROPPING: return "dropping";
	case L_IDLE_CHECK: return "idle-check";
	}
	return "?";
}

/* Per-GPU state; guarded by `mu` unless noted. Index = CUDA ordinal. */
struct gpu {
	int attached;	    /* the process uses this GPU */
	int announced;	    /* ATTACH_GPU queued on the current connection */
	int mode_known;	    /* GPU_MODE received on the current connection */
	int mode_wait_over; /* a limited GPU stopped waiting for GPU_MODE */
	int serialized;	    /* GPU_MODE 1 */
	enum lock_state lock;
	int req_pending;    /* REQ_LOCK to send */
	int blocked;	    /* application threads waiting in nvs_gate_slow */
	uint32_t waiters;   /* other clients waiting for this GPU */
	uint32_t core_limit; /* from SET_LIMITS (for the quota work) */
	uint32_t quantum_ms; /* from the last LOCK_OK */
	uint64_t total_mem;
	CUdevice cudev;
	CUcontext ctx;	    /* an application context seen on this GPU */
	CUcontext primary;  /* retained primary context (fallback), thread only */
	uint64_t mem_sent;  /* thread only: allocated bytes last sent */
	char uuid[NVS_UUID_LEN];
};

static struct gpu gpus[NVS_MAX_GPUS];
static int ndev; /* highest attached ordinal + 1 (under mu) */
static int connected; /* under mu */
static int first_try_done; /* under mu: the thread tried to connect once */

/* Lock-free views for application threads. */
static atomic_int gpu_closed[NVS_MAX_GPUS];
static atomic_int gpu_attached[NVS_MAX_GPUS];
static atomic_int gpu_fits[NVS_MAX_GPUS]; /* not serialized (or no scheduler) */
static _Atomic uint64_t mem_value[NVS_MAX_GPUS];
static atomic_int mem_dirty[NVS_MAX_GPUS];
static atomic_int capture_depth;
static atomic_int started;  /* the client thread was started (or tried) */
static atomic_int stopping; /* process is exiting: no more driver calls */
/* Forked child: keep the gate closed until a gated call has found its
 * device and attached it (launches alone do not attach elsewhere). */
static atomic_int probe_pending;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv; /* CLOCK_MONOTONIC; broadcast on every change */
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
static int evfd = -1;

/* Configuration read at start. */
static int idle_env_set;	 /* NVSHARE_IDLE_RELEASE_MS given */
static uint32_t idle_ms = NVS_IDLE_RELEASE_DEFAULT_MS; /* thread only */
static uint32_t attach_wait_ms = NVS_ATTACH_WAIT_DEFAULT_MS;
static unsigned hello_core_limit = 100;
static uint64_t hello_mem_limit = NVS_NO_LIMIT;
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

/* Client-thread-only state. */
static int sock = -1;
static uint8_t inbuf[NVS_HEADER_SIZE + NVS_MAX_PAYLOAD];
static size_t inlen;
static uint8_t outbuf[NVS_OUTBUF_SIZE];
static size_t outlen;
static int out_overflow;
static uint32_t seq;
static uint64_t next_connect_ns;
static int warned_absent;
static uint32_t client_id;
static int watching;	  /* idle watch active */
static uint64_t act_seen_ns; /* last time activity was observed */
static unsigned jitter_seed;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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
	pthread_cond_init(&cv, &a);
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
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
		 b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* Recomputes the per-GPU and global gates from the per-GPU state. Called with
 * mu held after every state change. */
static void recompute_gate(void)
{
	int any = 0;
	for (int i = 0; i < ndev; i++) {
		const struct gpu *g = &gpus[i];
		int closed = g->attached &&
			     ((g->serialized && g->lock != L_HELD) ||
			      g->lock == L_DROPPING || g->lock == L_IDLE_CHECK);
		/* A throttled GPU (compute quota) is one whose lock the
		 * scheduler withholds: closed by the rule above. */
		atomic_store_explicit(&gpu_closed[i], closed, memory_order_release);
		atomic_store_explicit(&gpu_fits[i], !connected || (g->mode_known && !g->serialized),
				      memory_order_relaxed);
		any |= closed;
	}
	any |= atomic_load(&probe_pending);
	/* A limited GPU's gated calls count in-flight work (sched_quota.h). */
	any |= nvs_qclient_any_capped();
	atomic_store_explicit(&nvs_gate_closed, any, memory_order_seq_cst);
}

/* ---------------------------------------------------------------------- */
/* Outgoing messages (client thread only)                                  */

static void queue_msg(struct nvs_msg *m)
{
	if (sock < 0)
		return;
	m->seq = ++seq;
	size_t n = nvs_msg_encode(m, outbuf + outlen, sizeof outbuf - outlen);
	if (n == 0) {
		/* The scheduler stopped reading for a long time (or a bug):
		 * the loop drops the connection and starts over. */
		out_overflow = 1;
		return;
	}
	outlen += n;
	NVS_DEBUG("-> %s", nvs_msg_type_name(m->type));
}

static void queue_gpu_msg(uint16_t type, int dev, uint32_t value)
{
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = type;
	m.u.gpu.local_gpu = (uint32_t)dev;
	m.u.gpu.value = value;
	queue_msg(&m);
}

static void queue_released(int dev, uint32_t flags, uint64_t drain_ns)
{
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = NVS_MSG_LOCK_RELEASED;
	m.u.released.local_gpu = (uint32_t)dev;
	m.u.released.flags = flags;
	m.u.released.drain_ns = drain_ns;
	queue_msg(&m);
}

/* Sends what application threads asked for: ATTACH_GPU for new devices,
 * REQ_LOCK, coalesced MEM_UPDATE. Called with mu held, while connected. */
static void compose_locked(void)
{
	for (int i = 0; i < ndev; i++) {
		struct gpu *g = &gpus[i];
		if (!g->attached)
			continue;
		if (!g->announced) {
			struct nvs_msg m;
			atomic_store(&mem_dirty[i], 0);
			g->mem_sent = atomic_load(&mem_value[i]);
			nvs_msg_attach(&m, (uint32_t)i, g->uuid, g->total_mem, g->mem_sent);
			queue_msg(&m);
			g->announced = 1;
		}
		if (g->req_pending) {
			g->req_pending = 0;
			queue_gpu_msg(NVS_MSG_REQ_LOCK, i, 0);
		}
		if (atomic_exchange(&mem_dirty[i], 0)) {
			uint64_t v = atomic_load(&mem_value[i]);
			if (v != g->mem_sent) {
				struct nvs_msg m;
				memset(&m, 0, sizeof m);
				m.type = NVS_MSG_MEM_UPDATE;
				m.u.mem.local_gpu = (uint32_t)i;
				m.u.mem.allocated = v;
				queue_msg(&m);
				g->mem_sent = v;
			}
		}
	}
}

/* ---------------------------------------------------------------------- */
/* Connection                                                             */

static uint64_t reconnect_delay_ns(void)
{
	/* 750..1250 ms: clients started together do not retry in lockstep. */
	unsigned j = (unsigned)rand_r(&jitter_seed) % (NVS_RECONNECT_MS / 2);
	return (uint64_t)(NVS_RECONNECT_MS * 3 / 4 + j) * 1000000ull;
}

static void disconnect(const char *why)
{
	if (sock >= 0)
		close(sock);
	sock = -1;
	inlen = outlen = 0;
	out_overflow = 0;
	watching = 0;
	pthread_mutex_lock(&mu);
	connected = 0;
	for (int i = 0; i < ndev; i++) {
		struct gpu *g = &gpus[i];
		g->announced = 0;
		g->mode_known = 0;
		g->mode_wait_over = 0;
		nvs_qclient_set_gpu_quota(i, 0); /* told again on the next connection */
		g->serialized = 0;
		g->lock = L_NONE; /* a lock we held is forgotten */
		g->req_pending = 0;
		g->waiters = 0;
	}
	recompute_gate();
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	NVS_WARN("scheduler connection lost (%s); running ungated, will reconnect", why);
	warned_absent = 1;
	next_connect_ns = now_ns() + reconnect_delay_ns();
}

static void try_connect(void)
{
	int fd = nvs_sock_connect();
	if (fd < 0) {
		if (!warned_absent) {
			NVS_WARN("scheduler not reachable at %s; running ungated, will retry",
				 sock_path);
			warned_absent = 1;
		} else {
			NVS_DEBUG("scheduler not reachable at %s (%s)", sock_path, strerror(-fd));
		}
		next_connect_ns = now_ns() + reconnect_delay_ns();
		pthread_mutex_lock(&mu);
		first_try_done = 1;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
		return;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	sock = fd;
	inlen = outlen = 0;
	out_overflow = 0;
	if (warned_absent)
		NVS_INFO("scheduler reachable at %s; registering", sock_path);
	else
		NVS_DEBUG("connected to scheduler at %s", sock_path);
	warned_absent = 0;

	struct nvs_msg m;
	nvs_msg_hello(&m, program_invocation_short_name, hello_core_limit, hello_mem_limit);
	queue_msg(&m);

	pthread_mutex_lock(&mu);
	connected = 1;
	first_try_done = 1;
	compose_locked(); /* ATTACH_GPU for every device in use */
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void flush_out(void)
{
	while (sock >= 0 && outlen > 0) {
		ssize_t n = send(sock, outbuf, outlen, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			disconnect(strerror(errno));
			return;
		}
		memmove(outbuf, outbuf + n, outlen - (size_t)n);
		outlen -= (size_t)n;
	}
}

/* ---------------------------------------------------------------------- */
/* Draining and releasing                                                  */

static int use_ctx(int dev, CUcontext failed);

/* Waits for the work already submitted on dev's context. Never while a stream
 * capture is active (captured work does not execute, and a synchronize would
 * invalidate the capture). */
static void sync_gpu(int dev)
{
	if (atomic_load(&capture_depth) > 0) {
		NVS_DEBUG("GPU %d: stream capture active, not synchronizing", dev);
		return;
	}
	if (atomic_load(&stopping) || !nvs_real.cuCtxSetCurrent || !nvs_real.cuCtxSynchronize)
		return;
	pthread_mutex_lock(&mu);
	CUcontext ctx = gpus[dev].ctx;
	pthread_mutex_unlock(&mu);
	if (ctx && nvs_real.cuCtxSetCurrent(ctx) == CUDA_SUCCESS &&
	    nvs_real.cuCtxSynchronize() == CUDA_SUCCESS)
		return;
	if (use_ctx(dev, ctx))
		(void)nvs_real.cuCtxSynchronize();
}

/* Makes a context of dev current on the client thread: the application's
 * (unless it is `failed`, which just did not work), else the retained
 * primary one. Returns 0 if none could be made current. */
static int use_ctx(int dev, CUcontext failed)
{
	if (!nvs_real.cuCtxSetCurrent)
		return 0;
	pthread_mutex_lock(&mu);
	CUcontext ctx = gpus[dev].ctx;
	CUdevice cudev = gpus[dev].cudev;
	pthread_mutex_unlock(&mu);
	struct gpu *g = &gpus[dev];
	if (ctx && ctx != failed && nvs_real.cuCtxSetCurrent(ctx) == CUDA_SUCCESS)
		return 1;
	if (ctx) {
		/* The context we saw is gone (destroyed): fall back to the
		 * primary one from now on. */
		pthread_mutex_lock(&mu);
		if (g->ctx == ctx)
			g->ctx = NULL;
		pthread_mutex_unlock(&mu);
	}
	if (!g->primary && nvs_real.cuDevicePrimaryCtxRetain &&
	    nvs_real.cuDevicePrimaryCtxRetain(&g->primary, cudev) != CUDA_SUCCESS)
		g->primary = NULL;
	return g->primary && nvs_real.cuCtxSetCurrent(g->primary) == CUDA_SUCCESS;
}

/* Sends the swap counters of dev if they changed (client thread). */
static void queue_swap_stats(int dev)
{
	struct nvs_swap_totals t;
	if (!nvs_swap_totals(dev, &t))
		return;
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = NVS_MSG_SWAP_STATS;
	m.u.swap.local_gpu = (uint32_t)dev;
	m.u.swap.bytes_in = t.bytes_in;
	m.u.swap.bytes_out = t.bytes_out;
	m.u.swap.ns_in = t.ns_in;
	m.u.swap.ns_out = t.ns_out;
	queue_msg(&m);
}

/* Swapping needs the application's context current and no capture. */
static int swap_possible(int dev)
{
	if (atomic_load(&capture_depth) > 0 || atomic_load(&stopping)) {
		NVS_DEBUG("GPU %d: stream capture active or exiting: no swap", dev);
		return 0;
	}
	return use_ctx(dev, NULL);
}

static uint64_t busy_threshold_ns(void)
{
	uint64_t tick = (uint64_t)(idle_ms / 4 ? idle_ms / 4 : 1) * 1000000ull;
	return tick > NVS_BUSY_DRAIN_MIN_NS ? tick : NVS_BUSY_DRAIN_MIN_NS;
}

/*
 * Gives dev's lock back: closes the gate, drains, answers LOCK_RELEASED.
 * `idle`: an idle release (flags 1) that is abandoned, gate re-opened and
 * lock kept, if the job turns out not to be idle (a gated call since the last
 * tick, an application thread waiting at the gate, or work still running).
 */
static void release_lock(int dev, uint32_t drop_flags, int idle)
{
	struct gpu *g = &gpus[dev];
	pthread_mutex_lock(&mu);
	if (g->lock != L_HELD) {
		pthread_mutex_unlock(&mu);
		return;
	}
	g->lock = idle ? L_IDLE_CHECK : L_DROPPING;
	recompute_gate();
	pthread_mutex_unlock(&mu);

	uint64_t t0 = now_ns();
	sync_gpu(dev);
	if (!idle && (drop_flags & NVS_LOCK_SWAP_OUT) && swap_possible(dev)) {
		/* The amount the scheduler computed (MiB in the flags' upper
		 * bits; 0 = all): just what the next holder needs. */
		uint64_t mib = drop_flags >> NVS_DROP_SWAP_MIB_SHIFT;
		nvs_swap_out(dev, mib ? mib << 20 : UINT64_MAX);
	}
	uint64_t drain = now_ns() - t0;

	pthread_mutex_lock(&mu);
	if (idle) {
		int act = atomic_exchange(&nvs_gate_activity, 0);
		if (act || g->blocked > 0 || drain > busy_threshold_ns() || !g->serialized) {
			NVS_DEBUG("GPU %d: not idle after all (activity %d, waiting %d, drain %.2f ms)",
				  dev, act, g->blocked, (double)drain / 1e6);
			if (g->lock == L_IDLE_CHECK)
				g->lock = L_HELD;
			act_seen_ns = now_ns();
			recompute_gate();
			pthread_cond_broadcast(&cv);
			pthread_mutex_unlock(&mu);
			return;
		}
	}
	if (g->lock == L_DROPPING || g->lock == L_IDLE_CHECK) {
		nvs_swap_released(dev);
		queue_swap_stats(dev);
		queue_released(dev, idle ? 1u : 0u, drain);
		g->lock = L_NONE;
		/* Threads that queued at the closed gate ask again at once, after
		 * the release, so the scheduler sees them behind the waiters. */
		if (g->blocked > 0 && g->serialized) {
			g->lock = L_REQUESTED;
			queue_gpu_msg(NVS_MSG_REQ_LOCK, dev, 0);
		}
		NVS_DEBUG("GPU %d: released (%s, drain %.3f ms)", dev, idle ? "idle" : "asked",
			  (double)drain / 1e6);
	}
	recompute_gate();
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

/* ---------------------------------------------------------------------- */
/* Incoming messages                                                       */

static struct gpu *msg_gpu(uint32_t local_gpu, const char *what)
{
	if (local_gpu >= NVS_MAX_GPUS || !gpus[local_gpu].attached) {
		NVS_DEBUG("%s for unknown GPU %u ignored", what, local_gpu);
		return NULL;
	}
	return &gpus[local_gpu];
}

static void handle_msg(const struct nvs_msg *m)
{
	struct gpu *g;
	NVS_DEBUG("<- %s", nvs_msg_type_name(m->type));
	switch (m->type) {
	case NVS_MSG_WELCOME:
		client_id = m->u.welcome.client_id;
		if (!idle_env_set)
			idle_ms = m->u.welcome.idle_release_ms ? m->u.welcome.idle_release_ms
							       : NVS_IDLE_RELEASE_DEFAULT_MS;
		NVS_DEBUG("registered as client %u (idle release %u ms)", client_id, idle_ms);
		break;
	case NVS_MSG_GPU_MODE: {
		int dev = (int)m->u.gpu.local_gpu;
		if (!(g = msg_gpu(m->u.gpu.local_gpu, "GPU_MODE")))
			break;
		int ser = m->u.gpu.value != 0;
		pthread_mutex_lock(&mu);
		if (!ser && g->lock != L_DROPPING && g->lock != L_IDLE_CHECK) {
			/* Concurrent: there is no lock any more. */
			g->lock = L_NONE;
			g->req_pending = 0;
		}
		if (ser != g->serialized)
			NVS_DEBUG("GPU %d: %s", dev, ser ? "serialized" : "concurrent");
		g->serialized = ser;
		g->mode_known = 1;
		nvs_qclient_set_gpu_quota(dev, m->u.gpu.value == NVS_GPU_MODE_SERIALIZED_QUOTA);
		recompute_gate();
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
		break;
	}
	case NVS_MSG_LOCK_OK: {
		int dev = (int)m->u.lock_ok.local_gpu;
		if (!(g = msg_gpu(m->u.lock_ok.local_gpu, "LOCK_OK")))
			break;
		pthread_mutex_lock(&mu);
		int regrant = g->lock == L_HELD;
		CUdevice cudev = g->cudev;
		pthread_mutex_unlock(&mu);
		/* Before the gate opens: the first kernel finds its data on
		 * the GPU instead of faulting it in page by page. */
		if ((m->u.lock_ok.flags & NVS_LOCK_SWAP_IN) && !regrant && nvs_swap_enabled() &&
		    swap_possible(dev)) {
			nvs_swap_in(dev, cudev);
			queue_swap_stats(dev);
		}
		pthread_mutex_lock(&mu);
		if (g->lock != L_HELD) /* not a repeated LOCK_OK */
			g->waiters = 0; /* as the scheduler: 0 until WAITERS says more */
		g->lock = L_HELD;
		g->req_pending = 0;
		g->quantum_ms = m->u.lock_ok.quantum_ms;
		/* A fresh grant: the job has idle_ms to use it. */
		atomic_store(&nvs_gate_activity, 0);
		act_seen_ns = now_ns();
		recompute_gate();
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
		NVS_DEBUG("GPU %d: lock granted (quantum %u ms)", dev, m->u.lock_ok.quantum_ms);
		break;
	}
	case NVS_MSG_DROP_LOCK: {
		if (!(g = msg_gpu(m->u.drop.local_gpu, "DROP_LOCK")))
			break;
		pthread_mutex_lock(&mu);
		enum lock_state s = g->lock;
		pthread_mutex_unlock(&mu);
		if (s != L_HELD) {
			/* Our LOCK_RELEASED (idle) crossed this DROP_LOCK. */
			NVS_DEBUG("GPU %u: DROP_LOCK while %s ignored", m->u.drop.local_gpu,
				  lock_name(s));
			break;
		}
		if (m->u.drop.grace_ms == 0) {
			/* Revoked: the scheduler already gave the lock away and
			 * would ignore a LOCK_RELEASED. Stop submitting now. */
			pthread_mutex_lock(&mu);
			g->lock = L_NONE;
			if (g->blocked > 0 && g->serialized) {
				g->lock = L_REQUESTED;
				queue_gpu_msg(NVS_MSG_REQ_LOCK, (int)m->u.drop.local_gpu, 0);
			}
			recompute_gate();
			pthread_cond_broadcast(&cv);
			pthread_mutex_unlock(&mu);
			NVS_WARN("GPU %u: lock revoked by the scheduler (did not drain in time)",
				 m->u.drop.local_gpu);
			break;
		}
		release_lock((int)m->u.drop.local_gpu, m->u.drop.flags, 0);
		break;
	}
	case NVS_MSG_WAITERS:
		if (!(g = msg_gpu(m->u.gpu.local_gpu, "WAITERS")))
			break;
		pthread_mutex_lock(&mu);
		g->waiters = m->u.gpu.value;
		pthread_mutex_unlock(&mu);
		break;
	case NVS_MSG_SET_LIMITS:
		if (!(g = msg_gpu(m->u.limits.local_gpu, "SET_LIMITS")))
			break;
		nvs_acct_set_runtime_limit((int)m->u.limits.local_gpu, m->u.limits.mem_limit);
		pthread_mutex_lock(&mu);
		g->core_limit = m->u.limits.core_limit;
		if (nvs_qclient_set_limit((int)m->u.limits.local_gpu, g->core_limit))
			recompute_gate();
		pthread_mutex_unlock(&mu);
		break;
	default:
		NVS_DEBUG("unexpected %s from scheduler ignored", nvs_msg_type_name(m->type));
		break;
	}
}

static void on_readable(void)
{
	for (;;) {
		if (inlen == sizeof inbuf) {
			disconnect("oversized message");
			return;
		}
		ssize_t n = recv(sock, inbuf + inlen, sizeof inbuf - inlen, MSG_DONTWAIT);
		if (n == 0) {
			disconnect("closed by the scheduler");
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			disconnect(strerror(errno));
			return;
		}
		inlen += (size_t)n;
		size_t off = 0;
		while (off < inlen) {
			struct nvs_msg m;
			size_t used = 0;
			enum nvs_decode_result r = nvs_msg_decode(inbuf + off, inlen - off, &m, &used);
			if (r == NVS_DECODE_NEED_MORE)
				break;
			if (r != NVS_DECODE_OK) {
				disconnect("protocol error");
				return;
			}
			handle_msg(&m);
			off += used;
		}
		memmove(inbuf, inbuf + off, inlen - off);
		inlen -= off;
	}
}

/* ---------------------------------------------------------------------- */
/* Idle release                                                            */

/* Returns the poll timeout contribution (ms, -1 = none) of the idle watch and
 * releases idle locks whose time has come. */
static int idle_tick(void)
{
	if (idle_ms == 0)
		return -1;
	int cand[NVS_MAX_GPUS], nc = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < ndev; i++) {
		const struct gpu *g = &gpus[i];
		/* A limited client releases when idle even if nobody waits:
		 * its quota is billed by hold time. */
		if (g->attached && g->serialized && g->lock == L_HELD &&
		    (g->waiters > 0 || nvs_qclient_limited(i)))
			cand[nc++] = i;
	}
	pthread_mutex_unlock(&mu);
	if (nc == 0) {
		watching = 0;
		return -1;
	}
	uint64_t now = now_ns();
	if (!watching) {
		/* act_seen_ns holds the last observation: if nothing happened
		 * since, the job may already have been idle long enough. */
		watching = 1;
	}
	if (atomic_exchange(&nvs_gate_activity, 0))
		act_seen_ns = now;
	uint64_t idle_ns = (uint64_t)idle_ms * 1000000ull;
	if (now - act_seen_ns >= idle_ns) {
		for (int k = 0; k < nc; k++)
			release_lock(cand[k], 0, 1);
		return 0; /* re-evaluate at once */
	}
	int tick = (int)(idle_ms / 4 ? idle_ms / 4 : 1);
	uint64_t left_ms = (idle_ns - (now - act_seen_ns) + 999999) / 1000000;
	return left_ms < (uint64_t)tick ? (int)left_ms : tick;
}

/* ---------------------------------------------------------------------- */
/* The client thread                                                       */

static int min_timeout(int a, int b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	return a < b ? a : b;
}

static void *client_main(void *arg)
{
	(void)arg;
	for (;;) {
		if (atomic_load(&stopping))
			return NULL;
		if (sock < 0 && now_ns() >= next_connect_ns)
			try_connect();
		if (sock >= 0) {
			pthread_mutex_lock(&mu);
			compose_locked();
			pthread_mutex_unlock(&mu);
		}
		int timeout = -1;
		if (sock >= 0)
			timeout = idle_tick();
		if (out_overflow)
			disconnect("send buffer full");
		flush_out();
		if (sock < 0) {
			uint64_t now = now_ns();
			int t = next_connect_ns > now
					? (int)((next_connect_ns - now + 999999) / 1000000)
					: 0;
			timeout = min_timeout(timeout, t);
		}

		struct pollfd p[2];
		int np = 0;
		p[np].fd = evfd;
		p[np].events = POLLIN;
		p[np].revents = 0;
		np++;
		if (sock >= 0) {
			p[np].fd = sock;
			p[np].events = POLLIN | (outlen ? POLLOUT : 0);
			p[np].revents = 0;
			np++;
		}
		int r = poll(p, (nfds_t)np, timeout);
		if (r < 0)
			continue; /* EINTR cannot happen (signals blocked) */
		if (p[0].revents & POLLIN) {
			uint64_t v;
			ssize_t n = read(evfd, &v, sizeof v);
			(void)n;
		}
		if (np > 1 && sock >= 0) {
			if (p[1].revents & (POLLIN | POLLHUP | POLLERR))
				on_readable();
			if (sock >= 0 && (p[1].revents & POLLOUT))
				flush_out();
		}
	}
	return NULL;
}

static void on_exit_handler(void)
{
	atomic_store(&stopping, 1);
}

static void read_config(void)
{
	if (nvs_sock_path(sock_path, sizeof sock_path))
		snprintf(sock_path, sizeof sock_path, "(path too long)");
	unsigned core = 100;
	if (nvs_env_percent("NVSHARE_GPU_CORE_LIMIT", 1, 100, &core) == 1)
		hello_core_limit = core;
	uint64_t mem;
	if (nvs_env_size("NVSHARE_GPU_MEMORY_LIMIT", 1ull << 20, &mem) == 1)
		hello_mem_limit = mem;
	const char *v = getenv("NVSHARE_IDLE_RELEASE_MS");
	if (v && *v) {
		uint64_t ms;
		if (nvs_parse_duration_ms(v, &ms) == 0 && ms <= 3600000) {
			idle_ms = (uint32_t)ms;
			idle_env_set = 1;
		} else {
			NVS_WARN("NVSHARE_IDLE_RELEASE_MS=%s is not a duration; using the scheduler's", v);
		}
	}
	uint64_t w;
	if (nvs_env_u64("NVSHARE_ATTACH_WAIT_MS", 0, 60000, &w) == 1)
		attach_wait_ms = (uint32_t)w;
	jitter_seed = (unsigned)getpid() ^ (unsigned)now_ns();
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
			rc = pthread_create(&t, &a, client_main, NULL);
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
		pthread_mutex_lock(&mu);
		recompute_gate(); /* clears the restart trigger of a forked child */
		pthread_mutex_unlock(&mu);
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

void nvs_sched_attach_gpu(int dev)
{
	if (dev < 0 || dev >= NVS_MAX_GPUS)
		return;
	if (atomic_load_explicit(&gpu_attached[dev], memory_order_acquire))
		return;
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

	pthread_mutex_lock(&mu);
	struct gpu *g = &gpus[dev];
	if (!g->attached) {
		g->attached = 1;
		g->cudev = d;
		g->total_mem = total;
		g->core_limit = hello_core_limit;
		if (nvs_qclient_set_limit(dev, hello_core_limit))
			recompute_gate();
		memcpy(g->uuid, uuid, sizeof g->uuid);
		if (ctx)
			g->ctx = ctx;
		if (dev >= ndev)
			ndev = dev + 1;
		atomic_store_explicit(&gpu_attached[dev], 1, memory_order_release);
		NVS_DEBUG("GPU %d attached (%s)", dev, uuid);
		kick();
		/* Wait (bounded) for the first connection attempt and then
		 * for the scheduler's GPU_MODE, so the first launches on a
		 * serialized GPU are already gated. */
		if (attach_wait_ms > 0 && evfd >= 0) {
			struct timespec ts = deadline_after_ms(attach_wait_ms);
			while ((!first_try_done || (connected && !g->mode_known)) &&
			       pthread_cond_timedwait(&cv, &mu, &ts) != ETIMEDOUT)
				;
		}
	} else if (ctx && !g->ctx) {
		g->ctx = ctx;
	}
	pthread_mutex_unlock(&mu);
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
	pthread_mutex_lock(&mu);
	struct gpu *g = &gpus[dev];
	if (connected && g->attached && !g->mode_known && !g->mode_wait_over) {
		struct timespec ts = deadline_after_ms(LIMITED_MODE_WAIT_MS);
		int r = 0;
		while (connected && !g->mode_known && r != ETIMEDOUT)
			r = pthread_cond_timedwait(&cv, &mu, &ts);
		if (connected && !g->mode_known) {
			g->mode_wait_over = 1;
			NVS_WARN("GPU %d: compute limit set but no GPU_MODE from the scheduler "
				 "within %u ms; running ungated until it answers",
				 dev, LIMITED_MODE_WAIT_MS);
		}
	}
	pthread_mutex_unlock(&mu);
}

void nvs_gate_slow(void)
{
	ensure_started(); /* a forked child restarts here */
	CUdevice dev;
	if (!nvs_real.cuCtxGetDevice || nvs_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
		return; /* no context: nothing to gate */
	if ((unsigned)dev >= NVS_MAX_GPUS)
		return;
	if (!atomic_load_explicit(&gpu_attached[dev], memory_order_acquire))
		nvs_sched_attach_gpu((int)dev);
	if (atomic_load(&probe_pending) && atomic_exchange(&probe_pending, 0)) {
		pthread_mutex_lock(&mu);
		recompute_gate();
		pthread_mutex_unlock(&mu);
	}
	/* Bounded in-flight work of a limited GPU, before the lock check:
	 * the launch follows that check at once. */
	if (nvs_qclient_limited((int)dev))
		wait_for_mode((int)dev);
	if (nvs_qclient_capped((int)dev))
		nvs_qclient_gate((int)dev, atomic_load(&capture_depth) > 0);
	if (!atomic_load_explicit(&gpu_closed[dev], memory_order_acquire))
		return; /* another GPU is closed, not ours */
	CUcontext cur = NULL;
	if (nvs_real.cuCtxGetCurrent && nvs_real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
		cur = NULL;

	pthread_mutex_lock(&mu);
	struct gpu *g = &gpus[dev];
	if (cur)
		g->ctx = cur;
	while (atomic_load_explicit(&gpu_closed[dev], memory_order_relaxed)) {
		if (g->serialized && g->lock == L_NONE) {
			g->lock = L_REQUESTED;
			g->req_pending = 1;
			kick();
		}
		g->blocked++;
		pthread_cond_wait(&cv, &mu);
		g->blocked--;
	}
	pthread_mutex_unlock(&mu);
}

void nvs_sched_mem_changed(int dev, uint64_t allocated)
{
	if (dev < 0 || dev >= NVS_MAX_GPUS)
		return;
	atomic_store(&mem_value[dev], allocated);
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
	/* The parent still owns the connection: close our copy, send nothing. */
	if (sock >= 0)
		close(sock);
	if (evfd >= 0)
		close(evfd);
	sock = -1;
	evfd = -1;
	inlen = outlen = 0;
	out_overflow = 0;
	seq = 0;
	warned_absent = 0;
	watching = 0;
	client_id = 0;
	next_connect_ns = 0;
	pthread_mutex_init(&mu, NULL);
	pthread_mutex_init(&start_mu, NULL);
	init_cv();
	memset(gpus, 0, sizeof gpus);
	nvs_qclient_atfork_child();
	nvs_swap_atfork_child();
	ndev = 0;
	connected = 0;
	first_try_done = 0;
	for (int i = 0; i < NVS_MAX_GPUS; i++) {
		atomic_store(&gpu_closed[i], 0);
		atomic_store(&gpu_attached[i], 0);
		atomic_store(&gpu_fits[i], 0);
		atomic_store(&mem_value[i], 0);
		atomic_store(&mem_dirty[i], 0);
	}
	atomic_store(&capture_depth, 0);
	atomic_store(&nvs_gate_activity, 0);
	/* No thread here: the next gated call takes the slow path, which
	 * restarts it and registers the device the child uses. */
	atomic_store(&started, 0);
	atomic_store(&probe_pending, was_started);
	atomic_store(&nvs_gate_closed, was_started);
}
