/*
 * malloc_fail.so: an LD_PRELOAD allocation-failure injector for the
 * scheduler's fault tests. malloc, calloc and realloc return NULL (errno
 * ENOMEM) once armed:
 *
 *   NVS_MALLOC_FAIL_ARMED=1      armed from the start (default: not armed)
 *   SIGUSR2                      toggles arming at run time (the process
 *                                starts cleanly, then fails under load)
 *   NVS_MALLOC_FAIL_AFTER=N      armed: the first N calls still succeed
 *   NVS_MALLOC_FAIL_PERMILLE=P   armed: each call fails with probability
 *                                P/1000 (default 1000: every call)
 *   NVS_MALLOC_FAIL_SEED=S       random seed (default 1: reproducible)
 *
 * On each disarm (and at exit) it writes "malloc_fail: F of C calls failed"
 * to stderr. free() of what it handed out goes to the real free.
 *
 * The real functions come from dlsym(RTLD_NEXT): glibc's, or the ASan
 * runtime's when the injector is preloaded before it (the SAN build:
 * LD_PRELOAD=malloc_fail.so:libasan.so with ASAN_OPTIONS
 * verify_asan_link_order=0). dlsym itself allocates: those few calls are
 * served from a static arena.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);

static _Alignas(16) unsigned char arena[64 * 1024];
static atomic_size_t arena_used;
static atomic_int resolving;

static atomic_int armed;
static atomic_ulong calls, failed, armed_calls;
static unsigned long fail_after;
static unsigned permille = 1000;
static _Atomic uint64_t rng = 1;
static int configured;

static void *arena_alloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	size_t off = atomic_fetch_add(&arena_used, n);
	if (off + n > sizeof arena)
		return NULL;
	return arena + off;
}

static int in_arena(const void *p)
{
	return (const unsigned char *)p >= arena && (const unsigned char *)p < arena + sizeof arena;
}

static void resolve(void)
{
	if (real_malloc || atomic_exchange(&resolving, 1))
		return;
	real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	atomic_store(&resolving, 0);
}

static void report(void)
{
	char b[128];
	int n = snprintf(b, sizeof b, "malloc_fail: %lu of %lu calls failed\n",
			 atomic_load(&failed), atomic_load(&calls));
	if (n > 0 && write(2, b, (size_t)n) < 0) {
	}
}

static void on_usr2(int sig)
{
	(void)sig;
	if (atomic_fetch_xor(&armed, 1))
		report(); /* was armed: disarmed now */
	else
		atomic_store(&armed_calls, 0);
}

__attribute__((constructor)) static void init(void)
{
	resolve();
	const char *v;
	if ((v = getenv("NVS_MALLOC_FAIL_AFTER")))
		fail_after = strtoul(v, NULL, 10);
	if ((v = getenv("NVS_MALLOC_FAIL_PERMILLE")))
		permille = (unsigned)strtoul(v, NULL, 10);
	if ((v = getenv("NVS_MALLOC_FAIL_SEED")))
		atomic_store(&rng, strtoull(v, NULL, 10) | 1);
	if ((v = getenv("NVS_MALLOC_FAIL_ARMED")) && *v == '1')
		atomic_store(&armed, 1);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr2;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR2, &sa, NULL);
	configured = 1;
}

__attribute__((destructor)) static void fini(void)
{
	report();
}

/* 1: this call fails. */
static int fail_now(void)
{
	atomic_fetch_add(&calls, 1);
	if (!configured || !atomic_load(&armed))
		return 0;
	if (atomic_fetch_add(&armed_calls, 1) < fail_after)
		return 0;
	/* xorshift64 */
	uint64_t x = atomic_load(&rng);
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	atomic_store(&rng, x);
	if (x % 1000 >= permille)
		return 0;
	atomic_fetch_add(&failed, 1);
	errno = ENOMEM;
	return 1;
}

void *malloc(size_t n)
{
	if (!real_malloc) {
		resolve();
		if (!real_malloc)
			return arena_alloc(n);
	}
	return fail_now() ? NULL : real_malloc(n);
}

void *calloc(size_t a, size_t b)
{
	if (!real_calloc) {
		resolve();
		if (!real_calloc) {
			if (b && a > SIZE_MAX / b)
				return NULL;
			return arena_alloc(a * b); /* static: already zero */
		}
	}
	return fail_now() ? NULL : real_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
	if (p && in_arena(p)) {
		void *q = malloc(n);
		if (q)
			memcpy(q, p, n); /* arena blocks outlive any read here */
		return q;
	}
	if (!real_realloc) {
		resolve();
		if (!real_realloc)
			return NULL;
	}
	return fail_now() ? NULL : real_realloc(p, n);
}

void free(void *p)
{
	if (!p || in_arena(p))
		return;
	if (!real_free)
		resolve();
	if (real_free)
		real_free(p);
}
