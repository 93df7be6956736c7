/*
 * Two processes on one NVSHARE_SIM_STATE_DIR share one simulated GPU:
 * memory use, kernel serialisation (each gets about half the GPU), the NVML
 * process list and utilization; plus the NVML API itself.
 */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "nvml_api.h"
#include "sim_api.h"
#include "tap.h"

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int, nvmlDevice_t *);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *, nvmlDevice_t *);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t, unsigned int *);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t, char *, unsigned int);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t, char *, unsigned int);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t *);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t, nvmlMemory_v2_t *);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t, nvmlUtilization_t *);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t, unsigned int *,
						  nvmlProcessInfo_v1_t *);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t, unsigned int *,
						     nvmlProcessInfo_v2_t *);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t, unsigned int *,
						     nvmlProcessInfo_v2_t *);

#define MiB (1ULL << 20)
#define KERNELS 100
#define KERNEL_US 5000ULL

/* Child: context on GPU 1, `mib` MiB allocated, then on "go" runs KERNELS
 * kernels one at a time (launch + sync, as a time-sliced app would) and
 * reports its elapsed ms; exits on the next byte. */
static int child(int mib, int rd, int wr)
{
	CUcontext ctx;
	CUmodule m;
	CUfunction k;
	CUstream s;
	CUdeviceptr d;
	char c;
	if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 1) || cuCtxSetCurrent(ctx) ||
	    cuMemAlloc_v2(&d, (size_t)mib * MiB) || cuModuleLoadData(&m, "x") ||
	    cuModuleGetFunction(&k, m, NVSHARE_SIM_KERNEL_NAME) || cuStreamCreate(&s, 0))
		return 1;
	if (write(wr, "r", 1) != 1 || read(rd, &c, 1) != 1)
		return 2;
	unsigned long long us = KERNEL_US;
	void *params[] = {&us, NULL, NULL};
	uint64_t t0 = nvshareSimNowNs();
	for (int i = 0; i < KERNELS; i++) {
		cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
		cuStreamSynchronize(s);
	}
	double ms = (double)(nvshareSimNowNs() - t0) / 1e6;
	if (write(wr, &ms, sizeof(ms)) != sizeof(ms) || read(rd, &c, 1) != 1)
		return 3;
	return 0;
}

struct kid {
	pid_t pid;
	int to, from;
};

static struct kid spawn(int mib)
{
	int a[2], b[2];
	struct kid k = {0};
	if (pipe(a) || pipe(b))
		return k;
	k.pid = fork();
	if (k.pid == 0) {
		close(a[1]);
		close(b[0]);
		_exit(child(mib, a[0], b[1]));
	}
	close(a[0]);
	close(b[1]);
	k.to = a[1];
	k.from = b[0];
	return k;
}

static int find_pid_v1(const nvmlProcessInfo_v1_t *p, unsigned n, pid_t pid,
		       unsigned long long *used)
{
	for (unsigned i = 0; i < n; i++)
		if (p[i].pid == (unsigned)pid) {
			*used = p[i].usedGpuMemory;
			return 1;
		}
	return 0;
}

int main(void)
{
	tap_private_state();
	setenv("NVSHARE_SIM_GPUS", "2", 1);
	setenv("NVSHARE_SIM_MEM", "2Gi", 1);
	setenv("NVSHARE_SIM_UUIDS", "GPU-aaaa,GPU-bbbb", 1);
	unsetenv("CUDA_VISIBLE_DEVICES");

	struct kid k1 = spawn(256), k2 = spawn(128);
	char c;
	OK(k1.pid > 0 && k2.pid > 0 && read(k1.from, &c, 1) == 1 && read(k2.from, &c, 1) == 1,
	   "two processes hold contexts on GPU 1");

	/* ---- NVML API ---- */
	unsigned n = 0, idx = 9;
	nvmlDevice_t d0, d1, h;
	char buf[96];
	OK(nvmlDeviceGetCount_v2(&n) == NVML_ERROR_UNINITIALIZED, "NVML calls before init fail");
	OK(nvmlInit_v2() == NVML_SUCCESS, "nvmlInit_v2");
	OK(nvmlDeviceGetCount_v2(&n) == 0 && n == 2, "2 devices");
	OK(nvmlDeviceGetHandleByIndex_v2(0, &d0) == 0 &&
	       nvmlDeviceGetHandleByIndex_v2(1, &d1) == 0 &&
	       nvmlDeviceGetHandleByIndex_v2(2, &h) == NVML_ERROR_INVALID_ARGUMENT,
	   "handles by index");
	OK(nvmlDeviceGetUUID(d1, buf, sizeof(buf)) == 0 && !strcmp(buf, "GPU-bbbb"),
	   "UUID from NVSHARE_SIM_UUIDS");
	OK(nvmlDeviceGetUUID(d1, buf, 4) == NVML_ERROR_INSUFFICIENT_SIZE, "UUID buffer too small");
	OK(nvmlDeviceGetHandleByUUID("GPU-bbbb", &h) == 0 && h == d1 &&
	       nvmlDeviceGetIndex(h, &idx) == 0 && idx == 1,
	   "handle by UUID, index");
	OK(nvmlDeviceGetHandleByUUID("GPU-cccc", &h) == NVML_ERROR_NOT_FOUND, "unknown UUID");
	OK(nvmlDeviceGetName(d0, buf, sizeof(buf)) == 0 && strstr(buf, "H200"), "name %s", buf);
	nvmlMemory_t m1;
	nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
	OK(nvmlDeviceGetMemoryInfo(d1, &m1) == 0 && m1.total == 2048 * MiB &&
	       m1.used == 384 * MiB && m1.free == m1.total - m1.used,
	   "memory info: both processes' allocations (%llu MiB)", m1.used / MiB);
	OK(nvmlDeviceGetMemoryInfo_v2(d1, &m2) == 0 && m2.used == 384 * MiB &&
	       m2.total == 2048 * MiB,
	   "memory info v2");
	m2.version = 1;
	OK(nvmlDeviceGetMemoryInfo_v2(d1, &m2) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
	   "v2 version checked");
	OK(nvmlDeviceGetMemoryInfo(d0, &m1) == 0 && m1.used == 0, "GPU 0 untouched");

	nvmlProcessInfo_v1_t p1[4];
	nvmlProcessInfo_v2_t p2[4];
	unsigned long long u1 = 0, u2 = 0;
	n = 4;
	OK(nvmlDeviceGetComputeRunningProcesses(d1, &n, p1) == 0 && n == 2 &&
	       find_pid_v1(p1, n, k1.pid, &u1) && find_pid_v1(p1, n, k2.pid, &u2) &&
	       u1 == 256 * MiB && u2 == 128 * MiB,
	   "process list v1 (16-byte entries): pids and memory");
	n = 4;
	OK(nvmlDeviceGetComputeRunningProcesses_v3(d1, &n, p2) == 0 && n == 2 &&
	       (p2[0].pid == (unsigned)k1.pid || p2[1].pid == (unsigned)k1.pid) &&
	       p2[0].usedGpuMemory + p2[1].usedGpuMemory == 384 * MiB &&
	       p2[1].gpuInstanceId == 0xFFFFFFFFu,
	   "process list v3 (24-byte entries)");
	n = 4;
	OK(nvmlDeviceGetComputeRunningProcesses_v2(d1, &n, p2) == 0 && n == 2, "process list v2");
	n = 1;
	OK(nvmlDeviceGetComputeRunningProcesses_v3(d1, &n, p2) == NVML_ERROR_INSUFFICIENT_SIZE &&
	       n == 2,
	   "too small: INSUFFICIENT_SIZE with the needed count");
	n = 0;
	OK(nvmlDeviceGetComputeRunningProcesses(d0, &n, NULL) == 0 && n == 0,
	   "no processes on GPU 0");
	OK(strcmp(nvmlErrorString(NVML_ERROR_NOT_FOUND), "Not Found") == 0, "nvmlErrorString");

	/* ---- the fake libcuda in this process sees the others' memory ---- */
	CUcontext ctx;
	size_t fr, tot;
	cuInit(0);
	cuDevicePrimaryCtxRetain(&ctx, 1);
	cuCtxSetCurrent(ctx);
	OK(cuMemGetInfo_v2(&fr, &tot) == 0 && tot - fr == 384 * MiB,
	   "cuMemGetInfo counts other processes");

	/* ---- co-running processes share the GPU's time ---- */
	uint64_t t0 = nvshareSimNowNs();
	double e1 = 0, e2 = 0;
	OK(write(k1.to, "g", 1) == 1 && write(k2.to, "g", 1) == 1 &&
	       read(k1.from, &e1, sizeof(e1)) == sizeof(e1) &&
	       read(k2.from, &e2, sizeof(e2)) == sizeof(e2),
	   "both ran %d x %llu us", KERNELS, KERNEL_US);
	double wall = (double)(nvshareSimNowNs() - t0) / 1e6, alone = KERNELS * KERNEL_US / 1000.0;
	DIAG("alone %.0f ms; co-running: %.0f ms and %.0f ms, wall %.0f ms", alone, e1, e2, wall);
	uint64_t t_end = nvshareSimNowNs();
	/* Sharing shows in each one's time; wall only has to show no hang
	 * (a busy machine stretches it: tap.h HANG_GUARD_MS). */
	OK(e1 > 1.7 * alone && e2 > 1.7 * alone && wall < 2 * alone + HANG_GUARD_MS,
	   "each got about half the GPU");
	struct nvshare_sim_stats st, s1;
	nvshareSimGetStats(1, &st);
	OK(st.kernels == 2 * KERNELS && st.kernel_busy_ns >= 2 * KERNELS * KERNEL_US * 1000 &&
	       st.nprocs == 3,
	   "GPU stats: kernels, busy time, 3 processes");
	OK(nvshareSimGetProcStats(1, k1.pid, &s1) == 0 && s1.kernels == KERNELS &&
	       s1.used_bytes == 256 * MiB,
	   "per-process stats of another process");
	nvmlUtilization_t u;
	int ur = nvmlDeviceGetUtilizationRates(d1, &u);
	/* The GPU was busy until both replies came (the children queue all
	 * their kernels at once); at most the time since then, which a busy
	 * machine can stretch, is idle in the last second. */
	double idle_ms = (double)(nvshareSimNowNs() - t_end) / 1e6;
	double floor_pct = 100.0 * (1.0 - idle_ms / 1000.0) - 15.0;
	OK(ur == 0 && u.gpu <= 100 && u.gpu >= floor_pct,
	   "GPU 1 utilization %u%% over the last second (>= %.0f%%: idle at most %.1f ms of it)",
	   u.gpu, floor_pct, idle_ms);
	OK(nvmlDeviceGetUtilizationRates(d0, &u) == 0 && u.gpu == 0, "GPU 0 idle");

	/* ---- exit: entries of dead processes are reclaimed ---- */
	int ws1 = -1, ws2 = -1;
	if (write(k1.to, "x", 1) != 1 || write(k2.to, "x", 1) != 1)
		DIAG("write failed");
	waitpid(k1.pid, &ws1, 0);
	waitpid(k2.pid, &ws2, 0);
	OK(WIFEXITED(ws1) && !WEXITSTATUS(ws1) && WIFEXITED(ws2) && !WEXITSTATUS(ws2),
	   "children exited cleanly");
	n = 4;
	OK(nvmlDeviceGetComputeRunningProcesses_v3(d1, &n, p2) == 0 && n == 1 &&
	       p2[0].pid == (unsigned)getpid(),
	   "only this process listed after they exit");
	OK(nvmlDeviceGetMemoryInfo(d1, &m1) == 0 && m1.used == 0, "their memory is reclaimed");
	OK(nvmlShutdown() == 0 && nvmlDeviceGetCount_v2(&n) == NVML_ERROR_UNINITIALIZED,
	   "shutdown");
	TAP_DONE();
}
