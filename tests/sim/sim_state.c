/*
 * Simulated GPU: configuration and the state shared between processes.
 *
 * With NVSHARE_SIM_STATE_DIR set, all processes using the fake driver (and
 * the fake NVML) map one file, $NVSHARE_SIM_STATE_DIR/gpu-state, so that they
 * see one GPU: one memory, one "busy until" time, one set of counters, one
 * process table. The first process creates it from its environment (GPU count,
 * memory, names, UUIDs are then fixed for the file's lifetime); the others
 * take the configuration from the file. Without the variable, the same
 * structure lives in private anonymous memory.
 *
 * A robust process-shared mutex in the file guards everything: a process
 * killed while holding it (tests kill clients) does not wedge the others.
 * Entries of processes that died are reclaimed lazily (kill(pid, 0)).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "parse.h"
#include "sim_internal.h"

#define SIM_STATE_MAGIC 0x4d495356u /* "VSIM" */
#define SIM_STATE_VERSION 4

struct sim_config sim_cfg;
struct sim_shared *sim_sh;
pthread_mutex_t sim_mu = PTHREAD_MUTEX_INITIALIZER;

static pthread_once_t state_once = PTHREAD_ONCE_INIT, map_once = PTHREAD_ONCE_INIT;
static int log_fd = -1;

uint64_t sim_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

struct keep {
	void *p;
	struct keep *next;
};
static struct keep *kept;

void sim_keep(void *p)
{
	struct keep *k = malloc(sizeof(*k));
	if (!k)
		return;
	k->p = p;
	pthread_mutex_lock(&sim_mu);
	k->next = kept;
	kept = k;
	pthread_mutex_unlock(&sim_mu);
}

uint64_t nvshareSimNowNs(void)
{
	return sim_now();
}

void sim_sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ULL),
			      .tv_nsec = (long)(t % 1000000000ULL)};
	while (sim_now() < t && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

uint64_t sim_xfer_ns(uint64_t bytes, double bps)
{
	if (bps <= 0)
		return 0;
	return (uint64_t)((double)bytes * 1e9 / bps);
}

int sim_log_enabled(void)
{
	return log_fd >= 0;
}

/* One line per call, written with one write() on an O_APPEND fd so lines of
 * several processes sharing the log do not interleave. */
void sim_log(const char *fmt, ...)
{
	if (log_fd < 0)
		return;
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%d ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += m;
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	ssize_t w = write(log_fd, buf, (size_t)n);
	(void)w;
}

static double env_gbps(const char *name, double def)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def * 1e9;
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || v <= 0) {
		fprintf(stderr, "[nvshare-sim] bad %s=%s, using %g\n", name, s, def);
		return def * 1e9;
	}
	return v * 1e9;
}

static uint32_t nslots_for(uint64_t total)
{
	/* Room for every 2 MiB page twice over (partial pages of small
	 * allocations) plus slack; slots only cost file space when used. */
	uint64_t n = (total / SIM_PAGE) * 2 + 1024;
	return n > 0xffffffffULL ? 0xffffffffU : (uint32_t)n;
}

/* Fills a fresh state image from this process's environment. */
static void state_format(struct sim_shared *sh, uint32_t ngpus, uint64_t mem, size_t size)
{
	memset(sh, 0, sizeof(*sh));
	sh->magic = SIM_STATE_MAGIC;
	sh->version = SIM_STATE_VERSION;
	sh->file_size = size;
	sh->ngpus = ngpus;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&sh->lock, &a);
	pthread_mutexattr_destroy(&a);

	const char *name = getenv("NVSHARE_SIM_NAME");
	if (!name || !*name)
		name = "NVIDIA H200 (simulated)";
	const char *uuids = getenv("NVSHARE_SIM_UUIDS");
	const char *u = uuids && *uuids ? uuids : NULL;
	uint64_t off = sizeof(*sh);
	for (uint32_t i = 0; i < ngpus; i++) {
		struct sim_gpu *g = &sh->gpu[i];
		snprintf(g->name, sizeof(g->name), "%s", name);
		if (u) {
			size_t len = strcspn(u, ",");
			if (len >= sizeof(g->uuid))
				len = sizeof(g->uuid) - 1;
			memcpy(g->uuid, u, len);
			g->uuid[len] = 0;
			u = u[len] ? u + len + 1 : NULL;
		} else {
			snprintf(g->uuid, sizeof(g->uuid), "GPU-5e1f0000-0000-4000-8000-%012x", i);
		}
		g->total = mem;
		g->nslots = nslots_for(mem);
		g->slot_off = off;
		off += (uint64_t)g->nslots * sizeof(struct sim_slot);
	}
}

static size_t state_size(uint32_t ngpus, uint64_t mem)
{
	return sizeof(struct sim_shared) +
	       (size_t)ngpus * nslots_for(mem) * sizeof(struct sim_slot);
}

static struct sim_shared *map_existing(int fd)
{
	struct stat st;
	for (int tries = 0; tries < 200; tries++) {
		if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(struct sim_shared))
			break;
		usleep(5000);
	}
	if ((size_t)st.st_size < sizeof(struct sim_shared))
		return NULL;
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return NULL;
	struct sim_shared *sh = p;
	if (sh->magic != SIM_STATE_MAGIC || sh->version != SIM_STATE_VERSION ||
	    sh->file_size != (uint64_t)st.st_size) {
		munmap(p, (size_t)st.st_size);
		return NULL;
	}
	return sh;
}

/* Shared file: built under a private name, then link()ed into place, so a
 * process never maps a half-initialised state; the loser of a creation race
 * maps the winner's file. */
static struct sim_shared *attach_file(const char *dir, uint32_t ngpus, uint64_t mem)
{
	char path[4096], tmp[4096];
	snprintf(path, sizeof(path), "%s/gpu-state", dir);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		struct sim_shared *sh = map_existing(fd);
		close(fd);
		if (sh)
			return sh;
		fprintf(stderr, "[nvshare-sim] %s: incompatible state file, using private state\n",
			path);
		return NULL;
	}
	snprintf(tmp, sizeof(tmp), "%s/.gpu-state.%d", dir, (int)getpid());
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		fprintf(stderr, "[nvshare-sim] cannot create %s: %s\n", tmp, strerror(errno));
		return NULL;
	}
	size_t size = state_size(ngpus, mem);
	if (ftruncate(fd, (off_t)size) != 0) {
		close(fd);
		unlink(tmp);
		return NULL;
	}
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		unlink(tmp);
		return NULL;
	}
	state_format(p, ngpus, mem, size);
	if (link(tmp, path) == 0) {
		unlink(tmp);
		close(fd);
		return p;
	}
	/* Someone else won: use theirs. */
	munmap(p, size);
	close(fd);
	unlink(tmp);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct sim_shared *sh = map_existing(fd);
	close(fd);
	return sh;
}

/* Reads the configuration and maps the state; takes no lock. */
static void map_state(void)
{
	const char *lp = getenv("NVSHARE_SIM_LOG");
	if (lp && *lp)
		log_fd = open(lp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);

	uint64_t ngpus = 1, mem = 16ULL << 30, kus = 100;
	nvs_env_u64("NVSHARE_SIM_GPUS", 1, SIM_MAX_GPUS, &ngpus);
	nvs_env_size("NVSHARE_SIM_MEM", 1, &mem);
	if (mem < SIM_PAGE)
		mem = SIM_PAGE;
	nvs_env_u64("NVSHARE_SIM_KERNEL_US", 0, 3600ULL * 1000000, &kus);
	sim_cfg.kernel_ns = kus * 1000;
	sim_cfg.max_pending = 1024;
	nvs_env_u64("NVSHARE_SIM_MAX_PENDING", 1, 1000000, &sim_cfg.max_pending);
	sim_cfg.h2d_bps = env_gbps("NVSHARE_SIM_H2D_GBPS", 50);
	sim_cfg.d2h_bps = env_gbps("NVSHARE_SIM_D2H_GBPS", 4.5);
	sim_cfg.fault_bps = env_gbps("NVSHARE_SIM_FAULT_GBPS", 10);
	/* Test knob (t_sim_stop.sh): hold the state lock this long on every
	 * take, so a stop lands inside it often. */
	nvs_env_u64("NVSHARE_SIM_LOCK_HOLD_US", 0, 999999, &sim_cfg.lock_hold_us);
	uint64_t pm = 1;
	nvs_env_u64("NVSHARE_SIM_NVML_PROC_MANAGED", 0, 1, &pm);
	sim_cfg.nvml_proc_managed = (int)pm;
	/* Pinned host memory (cuMemHostRegister): how much may be pinned
	 * (memlock / cgroup limits; 0 = no limit) and how long pinning takes
	 * (a real H200 host: ~700 us per MiB). */
	nvs_env_size("NVSHARE_SIM_PIN_LIMIT", 1, &sim_cfg.pin_limit);
	nvs_env_u64("NVSHARE_SIM_PIN_US_PER_MIB", 0, 1000000, &sim_cfg.pin_us_per_mib);

	const char *dir = getenv("NVSHARE_SIM_STATE_DIR");
	if (dir && *dir)
		sim_sh = attach_file(dir, (uint32_t)ngpus, mem);
	if (!sim_sh) {
		size_t size = state_size((uint32_t)ngpus, mem);
		void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "[nvshare-sim] cannot map state\n");
			abort();
		}
		state_format(p, (uint32_t)ngpus, mem, size);
		sim_sh = p;
	}
}

static void state_init_once(void)
{
	pthread_once(&map_once, map_state);
	sim_lock();
	sim_reap_dead_locked();
	sim_unlock();
}

void sim_state_init(void)
{
	pthread_once(&state_once, state_init_once);
}

void sim_lock(void)
{
	int r = pthread_mutex_lock(&sim_sh->lock);
	if (r == EOWNERDEAD)
		pthread_mutex_consistent(&sim_sh->lock);
	if (sim_cfg.lock_hold_us)
		sim_sleep_until(sim_now() + sim_cfg.lock_hold_us * 1000);
}

void sim_unlock(void)
{
	pthread_mutex_unlock(&sim_sh->lock);
}

int nvshareSimLockFree(int timeout_ms)
{
	/* Only the mapping: sim_state_init's reaping takes the lock untimed,
	 * which would hang here behind a stopped holder, and (waiting for
	 * the holder to let go) would time sim_stop's SIGSTOP to the moment
	 * just after a release. */
	pthread_once(&map_once, map_state);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts); /* timedlock's clock */
	uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000;
	ts.tv_sec += (time_t)(ns / 1000000000);
	ts.tv_nsec = (long)(ns % 1000000000);
	int r = pthread_mutex_timedlock(&sim_sh->lock, &ts);
	if (r == EOWNERDEAD)
		pthread_mutex_consistent(&sim_sh->lock);
	else if (r)
		return 0;
	pthread_mutex_unlock(&sim_sh->lock);
	return 1;
}

struct sim_slot *sim_slots(int dev)
{
	return (struct sim_slot *)((char *)sim_sh + sim_sh->gpu[dev].slot_off);
}

struct sim_proc *sim_proc_find_locked(int pid)
{
	for (int i = 0; i < SIM_MAX_PROCS; i++)
		if (sim_sh->procs[i].pid == pid)
			return &sim_sh->procs[i];
	return NULL;
}

static int pid_dead(int pid)
{
	return kill(pid, 0) != 0 && errno == ESRCH;
}

/* Frees what dead processes left behind: process entries, resident pages. */
void sim_reap_dead_locked(void)
{
	for (int i = 0; i < SIM_MAX_PROCS; i++) {
		struct sim_proc *p = &sim_sh->procs[i];
		if (p->pid && pid_dead(p->pid))
			memset(p, 0, sizeof(*p));
	}
	for (uint32_t d = 0; d < sim_sh->ngpus; d++) {
		struct sim_slot *s = sim_slots((int)d);
		int last = 0, dead = 0;
		for (uint32_t i = 0; i < sim_sh->gpu[d].nslots; i++) {
			if (!s[i].pid)
				continue;
			if (s[i].pid != last) {
				last = s[i].pid;
				dead = pid_dead(last);
			}
			if (dead) {
				sim_sh->gpu[d].resident -= s[i].bytes;
				memset(&s[i], 0, sizeof(s[i]));
			}
		}
	}
}

struct sim_proc *sim_self_locked(void)
{
	int pid = (int)getpid();
	struct sim_proc *p = sim_proc_find_locked(pid);
	if (p)
		return p;
	p = sim_proc_find_locked(0);
	if (!p) {
		sim_reap_dead_locked();
		p = sim_proc_find_locked(0);
	}
	if (!p) {
		/* Table full of live processes: share the last entry rather than
		 * fail (counters get mixed; tests never run 256 processes). */
		p = &sim_sh->procs[SIM_MAX_PROCS - 1];
		return p;
	}
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

uint64_t sim_gpu_used_locked(int dev)
{
	uint64_t u = 0;
	for (int i = 0; i < SIM_MAX_PROCS; i++)
		if (sim_sh->procs[i].pid)
			u += sim_sh->procs[i].used[dev];
	return u;
}

/* Busy time goes into 10 ms buckets indexed by absolute time; a bucket slot
 * is reused when its epoch changes. Kernels queued into the future are
 * accounted in the buckets they will occupy (up to the ring's horizon). */
void sim_util_add_locked(int dev, uint64_t start, uint64_t end)
{
	struct sim_gpu *g = &sim_sh->gpu[dev];
	while (start < end) {
		uint64_t b = start / SIM_UTIL_BUCKET_NS;
		uint64_t bend = (b + 1) * SIM_UTIL_BUCKET_NS;
		uint64_t e = end < bend ? end : bend;
		unsigned i = (unsigned)(b % SIM_UTIL_BUCKETS);
		if (g->util_epoch[i] != b) {
			g->util_epoch[i] = b;
			g->util_busy[i] = 0;
		}
		g->util_busy[i] += e - start;
		start = e;
	}
}

/* Percent of the last second (the 100 complete buckets before now's) that
 * the GPU spent running kernels. */
unsigned sim_util_percent_locked(int dev, uint64_t now)
{
	struct sim_gpu *g = &sim_sh->gpu[dev];
	uint64_t cur = now / SIM_UTIL_BUCKET_NS, busy = 0;
	uint64_t n = 1000000000ULL / SIM_UTIL_BUCKET_NS;
	for (uint64_t b = cur >= n ? cur - n : 0; b < cur; b++) {
		unsigned i = (unsigned)(b % SIM_UTIL_BUCKETS);
		if (g->util_epoch[i] == b)
			busy += g->util_busy[i];
	}
	unsigned pct = (unsigned)((busy * 100 + 500000000ULL) / 1000000000ULL);
	return pct > 100 ? 100 : pct;
}

/* ---- stats API ---- */

static void fill_counters(struct nvshare_sim_stats *o, const struct sim_counters *c)
{
	o->prefetch_h2d_bytes = c->prefetch_h2d_bytes;
	o->prefetch_h2d_ns = c->prefetch_h2d_ns;
	o->prefetch_d2h_bytes = c->prefetch_d2h_bytes;
	o->prefetch_d2h_ns = c->prefetch_d2h_ns;
	o->fault_bytes = c->fault_bytes;
	o->fault_ns = c->fault_ns;
	o->evictions = c->evictions;
	o->evicted_bytes = c->evicted_bytes;
	o->evict_ns = c->evict_ns;
	o->kernels = c->kernels;
	o->kernel_busy_ns = c->kernel_busy_ns;
	o->discard_bytes = c->discard_bytes;
	o->stray_accesses = c->stray_accesses;
}

int nvshareSimGetStats(int dev, struct nvshare_sim_stats *out)
{
	sim_state_init();
	if (!out || dev < 0 || (uint32_t)dev >= sim_sh->ngpus)
		return -1;
	memset(out, 0, sizeof(*out));
	sim_lock();
	struct sim_gpu *g = &sim_sh->gpu[dev];
	fill_counters(out, &g->c);
	out->total_bytes = g->total;
	out->used_bytes = sim_gpu_used_locked(dev);
	out->resident_bytes = g->resident;
	out->busy_until_ns = g->busy_until;
	for (int i = 0; i < SIM_MAX_PROCS; i++)
		if (sim_sh->procs[i].pid && (sim_sh->procs[i].ctx_mask & (1u << dev)))
			out->nprocs++;
	sim_unlock();
	return 0;
}

int nvshareSimGetProcStats(int dev, int pid, struct nvshare_sim_stats *out)
{
	sim_state_init();
	if (!out || dev < 0 || (uint32_t)dev >= sim_sh->ngpus)
		return -1;
	memset(out, 0, sizeof(*out));
	sim_lock();
	struct sim_proc *p = sim_proc_find_locked(pid ? pid : (int)getpid());
	if (p) {
		fill_counters(out, &p->c[dev]);
		out->total_bytes = sim_sh->gpu[dev].total;
		out->used_bytes = p->used[dev];
		out->resident_bytes = p->resident[dev];
		out->host_pinned_bytes = p->host_pinned;
	}
	sim_unlock();
	return p ? 0 : -1;
}

int nvshareSimResetStats(int dev)
{
	sim_state_init();
	if (dev >= 0 && (uint32_t)dev >= sim_sh->ngpus)
		return -1;
	sim_lock();
	for (uint32_t d = 0; d < sim_sh->ngpus; d++) {
		if (dev >= 0 && (uint32_t)dev != d)
			continue;
		memset(&sim_sh->gpu[d].c, 0, sizeof(sim_sh->gpu[d].c));
		for (int i = 0; i < SIM_MAX_PROCS; i++)
			memset(&sim_sh->procs[i].c[d], 0, sizeof(sim_sh->procs[i].c[d]));
	}
	memset(sim_sh->prefetch, 0, sizeof(sim_sh->prefetch));
	sim_sh->prefetch_seq = 0;
	sim_unlock();
	return 0;
}

int nvshareSimGetPrefetchLog(struct nvshare_sim_prefetch *out, int max)
{
	sim_state_init();
	if (!out || max <= 0)
		return 0;
	sim_lock();
	uint64_t seq = sim_sh->prefetch_seq;
	uint64_t n = seq < SIM_PREFETCH_LOG ? seq : SIM_PREFETCH_LOG;
	if (n > (uint64_t)max)
		n = (uint64_t)max;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t s = seq - n + 1 + i; /* seq numbers start at 1 */
		out[i] = sim_sh->prefetch[(s - 1) % SIM_PREFETCH_LOG];
	}
	sim_unlock();
	return (int)n;
}
