/*
 * Simulated GPU: the fake libnvidia-ml.so.1. It reads the same state as
 * the fake libcuda.so.1 (sim_state.c; through NVSHARE_SIM_STATE_DIR when
 * they live in different processes, as the scheduler and its clients do):
 * names, UUIDs, memory in use, utilization from kernel busy time, and the
 * processes holding a context. NVML ignores CUDA_VISIBLE_DEVICES, as the
 * real one does: indices are physical.
 */
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <errno.h>
#include <time.h>

#include "nvml_api.h"
#include "sim_internal.h"

struct nvmlDevice_st {
	int index;
};
static struct nvmlDevice_st devs[SIM_MAX_GPUS];
static int init_count;
static pthread_mutex_t nvml_mu = PTHREAD_MUTEX_INITIALIZER;

static int inited(void)
{
	pthread_mutex_lock(&nvml_mu);
	int r = init_count > 0;
	pthread_mutex_unlock(&nvml_mu);
	return r;
}

#define NEED_INIT()                                                                                \
	do {                                                                                       \
		if (!inited())                                                                     \
			return NVML_ERROR_UNINITIALIZED;                                           \
	} while (0)

static int dev_index(nvmlDevice_t d)
{
	if (!d)
		return -1;
	for (uint32_t i = 0; i < sim_sh->ngpus; i++)
		if (d == &devs[i])
			return (int)i;
	return -1;
}

#define DEV(d, i)                                                                                  \
	NEED_INIT();                                                                               \
	int i = dev_index(d);                                                                      \
	if (i < 0)                                                                                 \
	return NVML_ERROR_INVALID_ARGUMENT

nvmlReturn_t nvmlInit_v2(void)
{
	sim_state_init();
	pthread_mutex_lock(&nvml_mu);
	init_count++;
	for (int i = 0; i < SIM_MAX_GPUS; i++)
		devs[i].index = i;
	pthread_mutex_unlock(&nvml_mu);
	sim_log("nvml nvmlInit_v2");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void)
{
	return nvmlInit_v2();
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void)
{
	pthread_mutex_lock(&nvml_mu);
	int ok = init_count > 0;
	if (ok)
		init_count--;
	pthread_mutex_unlock(&nvml_mu);
	return ok ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_UNINITIALIZED:
		return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	case NVML_ERROR_NO_PERMISSION:
		return "Insufficient Permissions";
	case NVML_ERROR_NOT_FOUND:
		return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE:
		return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	case NVML_ERROR_FUNCTION_NOT_FOUND:
		return "Function Not Found";
	case NVML_ERROR_GPU_IS_LOST:
		return "GPU is lost";
	case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
		return "Argument version mismatch";
	default:
		return "Unknown Error";
	}
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	NEED_INIT();
	if (!version || length < 2)
		return NVML_ERROR_INVALID_ARGUMENT;
	snprintf(version, length, "580.00.00");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	if (!version || length < 2)
		return NVML_ERROR_INVALID_ARGUMENT;
	snprintf(version, length, "13.580.00");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
	if (!v)
		return NVML_ERROR_INVALID_ARGUMENT;
	*v = SIM_DRIVER_VERSION;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
	return nvmlSystemGetCudaDriverVersion(v);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	NEED_INIT();
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = sim_sh->ngpus;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
	return nvmlDeviceGetCount_v2(count);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	NEED_INIT();
	if (!device || index >= sim_sh->ngpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = &devs[index];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
	NEED_INIT();
	if (!uuid || !device)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (uint32_t i = 0; i < sim_sh->ngpus; i++)
		if (strcmp(sim_sh->gpu[i].uuid, uuid) == 0) {
			*device = &devs[i];
			return NVML_SUCCESS;
		}
	return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
	DEV(device, i);
	if (!index)
		return NVML_ERROR_INVALID_ARGUMENT;
	*index = (unsigned)i;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
	return nvmlDeviceGetIndex(device, minor);
}

static nvmlReturn_t copy_str(char *out, unsigned int len, const char *s)
{
	if (!out)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(s) + 1 > len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(out, s, strlen(s) + 1);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	DEV(device, i);
	return copy_str(uuid, length, sim_sh->gpu[i].uuid);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	DEV(device, i);
	return copy_str(name, length, sim_sh->gpu[i].name);
}

static void mem_of(int i, unsigned long long *total, unsigned long long *used)
{
	sim_lock();
	sim_reap_dead_locked();
	*total = sim_sh->gpu[i].total;
	*used = sim_gpu_used_locked(i) + sim_sh->gpu[i].resident;
	sim_unlock();
	if (*used > *total)
		*used = *total;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	DEV(device, i);
	if (!memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	mem_of(i, &memory->total, &memory->used);
	memory->free = memory->total - memory->used;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	DEV(device, i);
	if (!memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (memory->version != nvmlMemory_v2)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	mem_of(i, &memory->total, &memory->used);
	memory->reserved = 0;
	memory->free = memory->total - memory->used;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u)
{
	DEV(device, i);
	if (!u)
		return NVML_ERROR_INVALID_ARGUMENT;
	sim_lock();
	u->gpu = sim_util_percent_locked(i, sim_now());
	sim_unlock();
	u->memory = u->gpu; /* simulated kernels are memory-bound enough */
	return NVML_SUCCESS;
}

/* Processes with a context on GPU i; elem is the caller's struct size
 * (v1: 16 bytes, v2/v3: 24). */
static nvmlReturn_t procs(int i, unsigned int *count, void *infos, size_t elem)
{
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	unsigned n = 0, cap = *count;
	nvmlReturn_t r = NVML_SUCCESS;
	sim_lock();
	sim_reap_dead_locked();
	for (int k = 0; k < SIM_MAX_PROCS; k++) {
		struct sim_proc *p = &sim_sh->procs[k];
		if (!p->pid || !(p->ctx_mask & (1u << i)))
			continue;
		if (infos && n < cap) {
			unsigned long long used =
			    p->used[i] + (sim_cfg.nvml_proc_managed ? p->resident[i] : 0);
			if (elem == sizeof(nvmlProcessInfo_v1_t)) {
				nvmlProcessInfo_v1_t *o = (nvmlProcessInfo_v1_t *)infos + n;
				o->pid = (unsigned)p->pid;
				o->usedGpuMemory = used;
			} else {
				nvmlProcessInfo_v2_t *o = (nvmlProcessInfo_v2_t *)infos + n;
				o->pid = (unsigned)p->pid;
				o->usedGpuMemory = used;
				o->gpuInstanceId = 0xFFFFFFFFu;
				o->computeInstanceId = 0xFFFFFFFFu;
			}
		}
		n++;
	}
	sim_unlock();
	if (n > cap || (!infos && n > 0))
		r = NVML_ERROR_INSUFFICIENT_SIZE;
	*count = n;
	return r;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
						  nvmlProcessInfo_v1_t *infos)
{
	DEV(device, i);
	return procs(i, infoCount, infos, sizeof(nvmlProcessInfo_v1_t));
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_v2_t *infos)
{
	DEV(device, i);
	return procs(i, infoCount, infos, sizeof(nvmlProcessInfo_v2_t));
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_v2_t *infos)
{
	DEV(device, i);
	return procs(i, infoCount, infos, sizeof(nvmlProcessInfo_v2_t));
}

static nvmlReturn_t no_procs(nvmlDevice_t device, unsigned int *infoCount)
{
	DEV(device, i);
	(void)i;
	if (!infoCount)
		return NVML_ERROR_INVALID_ARGUMENT;
	*infoCount = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
						   nvmlProcessInfo_v1_t *infos)
{
	return no_procs(device, infoCount);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
						      nvmlProcessInfo_v2_t *infos)
{
	return no_procs(device, infoCount);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
						      nvmlProcessInfo_v2_t *infos)
{
	return no_procs(device, infoCount);
}

/* Per-process samples: one for each process whose latest kernel on the GPU
 * ran after lastSeenTimeStamp (CPU time in microseconds, CLOCK_REALTIME as
 * the real NVML's), stamped with that kernel's end (or now, while it runs),
 * smUtil 100. None: NVML_ERROR_NOT_FOUND, as the real one says. */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
					     nvmlProcessUtilizationSample_t *utilization,
					     unsigned int *processSamplesCount,
					     unsigned long long lastSeenTimeStamp)
{
	DEV(device, i);
	if (!processSamplesCount)
		return NVML_ERROR_INVALID_ARGUMENT;
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	unsigned long long rt_us =
	    (unsigned long long)rt.tv_sec * 1000000ull + (unsigned long long)rt.tv_nsec / 1000;
	unsigned n = 0, cap = utilization ? *processSamplesCount : 0;
	sim_lock();
	sim_reap_dead_locked();
	uint64_t now = sim_now();
	for (int k = 0; k < SIM_MAX_PROCS; k++) {
		const struct sim_proc *p = &sim_sh->procs[k];
		if (!p->pid || !(p->ctx_mask & (1u << i)) || !p->k_end[i] || p->k_start[i] > now)
			continue;
		uint64_t end = p->k_end[i] < now ? p->k_end[i] : now;
		unsigned long long ts = rt_us - (now - end) / 1000;
		if (ts <= lastSeenTimeStamp)
			continue;
		if (n < cap) {
			nvmlProcessUtilizationSample_t *o = &utilization[n];
			memset(o, 0, sizeof *o);
			o->pid = (unsigned)p->pid;
			o->timeStamp = ts;
			o->smUtil = 100;
		}
		n++;
	}
	sim_unlock();
	*processSamplesCount = n;
	if (!n)
		return NVML_ERROR_NOT_FOUND;
	return n > cap ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}
