/*
 * Library initialisation: loads libcuda.so.1 (pinned), resolves every real
 * pointer of the table, starts the scheduler client; fork handling.
 *
 * Nothing runs at load time except registering the fork handler and sorting
 * the name index: a process that never calls a CUDA wrapper never loads
 * libcuda through us and never contacts the scheduler.
 */
#include "client/accounting.h"
#include "client/internal.h"
#include "sockpath.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

atomic_int nvs_inited;
void *nvs_libcuda_handle;

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static int loaded;	     /* real pointers resolved (kept across fork) */
static int sched_started;    /* nvs_sched_start() called in this process */
static __thread int in_init; /* a wrapper reached from our own init */
static atomic_ullong devices_seen;

static void resolve_driver(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
	if (!h)
		h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NODELETE);
	if (!h) {
		NVS_WARN("cannot load libcuda.so.1 (%s): CUDA calls will fail", dlerror());
		return;
	}
	nvs_libcuda_handle = h;
	unsigned missing = 0;
	for (unsigned i = 0; i < nvs_entries_count; i++) {
		const struct nvs_entry *e = &nvs_entries[i];
		if (e->family == NVS_FAM_RT || e->family == NVS_FAM_NVML ||
		    e->family == NVS_FAM_USE_NVML)
			continue;
		*e->real = nvs_dlsym_real(h, e->name);
		if (!*e->real) {
			missing++;
			NVS_DEBUG("driver does not export %s", e->name);
		}
	}
	NVS_DEBUG("libcuda.so.1 loaded and pinned; %u of %u table names not exported", missing,
		  nvs_entries_count);
}

void nvs_init_slow(void)
{
	if (in_init)
		return;
	in_init = 1;
	nvs_config_load();
	pthread_mutex_lock(&init_mu);
	if (!loaded) {
		resolve_driver();
		loaded = 1;
	}
	if (!sched_started && !nvs_cfg.disable) {
		sched_started = 1;
		nvs_sched_start();
	}
	atomic_store_explicit(&nvs_inited, 1, memory_order_release);
	pthread_mutex_unlock(&init_mu);
	in_init = 0;
}

CUresult nvs_current_device(int *dev)
{
	if (!nvs_real.cuCtxGetDevice)
		return CUDA_ERROR_NOT_SUPPORTED;
	CUdevice d = 0;
	CUresult r = nvs_real.cuCtxGetDevice(&d);
	if (r != CUDA_SUCCESS)
		return r;
	if (d < 0 || d >= NVS_MAX_GPUS)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = (int)d;
	return CUDA_SUCCESS;
}

void nvs_device_used(int dev)
{
	if (nvs_cfg.disable || dev < 0 || dev >= NVS_MAX_GPUS)
		return;
	unsigned long long bit = 1ull << dev;
	if ((atomic_load_explicit(&devices_seen, memory_order_relaxed) & bit) ||
	    (atomic_fetch_or(&devices_seen, bit) & bit)) {
		nvs_sched_note_ctx(dev); /* until one is known */
		return;
	}
	NVS_DEBUG("first use of GPU %d", dev);
	nvs_sched_attach_gpu(dev);
}

CUresult nvs_unresolved(const char *name)
{
	static atomic_int warned;
	if (!atomic_exchange(&warned, 1))
		NVS_WARN(
		    "%s: not exported by the loaded driver; returning CUDA_ERROR_NOT_SUPPORTED",
		    name);
	else
		NVS_DEBUG("%s: unresolved, CUDA_ERROR_NOT_SUPPORTED", name);
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult nvs_require_refused(const char *name)
{
	char path[256];
	if (nvs_sock_path(path, sizeof path))
		snprintf(path, sizeof path, "(NVSHARE_SOCK_DIR too long)");
	NVS_WARN("NVSHARE_REQUIRE_SCHEDULER=1: %s refused with CUDA_ERROR_SYSTEM_NOT_READY: the "
		 "nvshare scheduler is not reachable at %s, and this process may not use the GPU "
		 "ungated; its GPU work fails until the scheduler answers (it is retried in the "
		 "background)",
		 name, path);
	return CUDA_ERROR_SYSTEM_NOT_READY;
}

CUresult nvs_legacy_refused(const char *name)
{
	static atomic_int warned;
	nvs_config_load();
	if (atomic_exchange(&warned, 1)) {
		NVS_DEBUG("%s: 32-bit v1 driver ABI refused", name);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	NVS_WARN("%s: 32-bit v1 driver ABI refused (CUDA_ERROR_NOT_SUPPORTED); "
		 "rebuild against CUDA >= 3.2 headers",
		 name);
	return CUDA_ERROR_NOT_SUPPORTED;
}

static void atfork_child(void)
{
	/* Only this thread exists now; locks held by vanished threads are
	 * reinitialised, the parent's scheduler state forgotten. The real
	 * pointers stay valid (same address space); the next CUDA call
	 * re-registers with the scheduler. */
	pthread_mutex_init(&init_mu, NULL);
	in_init = 0;
	if (sched_started)
		nvs_sched_atfork_child();
	sched_started = 0;
	atomic_store(&devices_seen, 0);
	nvs_acct_atfork_child();
	nvs_log_reload_env();
	atomic_store(&nvs_inited, 0);
}

__attribute__((constructor)) static void register_fork_handler(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}
