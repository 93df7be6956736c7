/*
 * client_probe: the scheduler client (client/sched_*.c) and accounting
 * linked into a program with a fake driver table, so the lock protocol can be tested
 * against the real nvshare-scheduler without libnvshare's interposition or a
 * GPU. A "kernel" is nvs_gate() followed by a sleep of --kernel-us in the
 * calling thread (it is synchronous, so the drain has nothing to wait for).
 *
 *   client_probe [--name A] [--alloc BYTES] [--kernels N] [--kernel-us US]
 *                [--idle-after K --idle-ms MS] [--threads T] [--until FILE]
 *
 * Prints the same START / PROGRESS / IDLE / DONE lines as sim_app.
 */
#include "client/accounting.h"
#include "client/real.h"
#include "client/sched_client.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct nvs_real_table nvs_real;

static int fake_ctx_token;
static _Thread_local int has_ctx;
static atomic_int syncs;

static CUresult f_ctx_get_current(CUcontext *c)
{
	*c = has_ctx ? (CUcontext)&fake_ctx_token : NULL;
	return CUDA_SUCCESS;
}
static CUresult f_ctx_set_current(CUcontext c)
{
	has_ctx = c != NULL;
	return CUDA_SUCCESS;
}
static CUresult f_ctx_get_device(CUdevice *d)
{
	if (!has_ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	*d = 0;
	return CUDA_SUCCESS;
}
static CUresult f_ctx_sync(void)
{
	atomic_fetch_add(&syncs, 1);
	return CUDA_SUCCESS;
}
static CUresult f_primary_retain(CUcontext *c, CUdevice d)
{
	(void)d;
	*c = (CUcontext)&fake_ctx_token;
	return CUDA_SUCCESS;
}
static CUresult f_device_get(CUdevice *d, int ordinal)
{
	*d = ordinal;
	return CUDA_SUCCESS;
}
static CUresult f_uuid(CUuuid *u, CUdevice d)
{
	for (int i = 0; i < 16; i++)
		u->bytes[i] = (char)(0x10 + i + d);
	return CUDA_SUCCESS;
}
static CUresult f_total(size_t *b, CUdevice d)
{
	(void)d;
	*b = (size_t)16 << 30;
	return CUDA_SUCCESS;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_us(unsigned long long us)
{
	struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static const char *name = "probe";
static const char *until_file;
static long kernels = 100, idle_after;
static unsigned long long kernel_us = 1000, idle_ms;
static atomic_long done_kernels;

static void *worker(void *arg)
{
	long id = (long)arg;
	has_ctx = 1;
	/* --until FILE: more kernels past --kernels until FILE exists (a run
	 * that must outlast whatever the test does to the scheduler). */
	for (long k = 1; k <= kernels || (until_file && access(until_file, F_OK) != 0); k++) {
		nvs_gate();
		nvs_gate_done(); /* "submitted": the kernel runs on by itself */
		/* t = when the call passed the gate. The "kernel" (a sleep in
		 * this thread) is invisible to the drain, so a time taken after
		 * it may fall into the next holder's turn on a busy machine; the
		 * gate pass may not. */
		double t = now_ms();
		sleep_us(kernel_us);
		long d = atomic_fetch_add(&done_kernels, 1) + 1;
		printf("PROGRESS name=%s kernel=%ld/%ld thread=%ld t=%.3f\n", name, d, kernels, id,
		       t);
		if (id == 0 && idle_after > 0 && k == idle_after) {
			double from = now_ms();
			sleep_us(idle_ms * 1000);
			printf("IDLE name=%s from=%.3f to=%.3f\n", name, from, now_ms());
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t alloc = 0;
	long threads = 1;
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];
		if (!strcmp(a, "--name"))
			name = v;
		else if (!strcmp(a, "--alloc"))
			alloc = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--kernels"))
			kernels = atol(v);
		else if (!strcmp(a, "--kernel-us"))
			kernel_us = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--idle-after"))
			idle_after = atol(v);
		else if (!strcmp(a, "--idle-ms"))
			idle_ms = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--until"))
			until_file = v;
		else if (!strcmp(a, "--threads"))
			threads = atol(v) > 0 ? atol(v) : 1;
		else if (!strcmp(a, "--report"))
			;
		else {
			fprintf(stderr, "client_probe: unknown option %s\n", a);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	nvs_real.cuCtxGetCurrent = f_ctx_get_current;
	nvs_real.cuCtxSetCurrent = f_ctx_set_current;
	nvs_real.cuCtxGetDevice = f_ctx_get_device;
	nvs_real.cuCtxSynchronize = f_ctx_sync;
	nvs_real.cuDevicePrimaryCtxRetain = f_primary_retain;
	nvs_real.cuDeviceGet = f_device_get;
	nvs_real.cuDeviceGetUuid_v2 = f_uuid;
	nvs_real.cuDeviceTotalMem_v2 = f_total;

	double t0 = now_ms();
	printf("START name=%s pid=%d t=%.3f\n", name, (int)getpid(), t0);
	nvs_sched_start();
	has_ctx = 1;
	if (alloc && nvs_acct_reserve(0, alloc))
		printf("ALLOC refused bytes=%llu\n", (unsigned long long)alloc);
	nvs_sched_attach_gpu(0);
	pthread_t t[64];
	if (threads > 64)
		threads = 64;
	for (long i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (long i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	printf("DONE name=%s kernels=%ld elapsed_ms=%.1f syncs=%d result=ok t=%.3f\n", name,
	       (long)atomic_load(&done_kernels), now_ms() - t0, atomic_load(&syncs), now_ms());
	return 0;
}
