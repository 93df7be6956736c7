/* Environment configuration of the client library. */
#include "client/internal.h"
#include "client/sched_client.h"

#include "parse.h"

#include <pthread.h>
#include <stdlib.h>

struct nvs_config nvs_cfg = {.mem_limit = UINT64_MAX, .unified_memory = 1};
static pthread_once_t once = PTHREAD_ONCE_INIT;

void nvs_config_reload(void)
{
	struct nvs_config c = {.mem_limit = UINT64_MAX, .unified_memory = 1};
	int b = 0;
	if (nvs_env_bool("NVSHARE_DISABLE", &b) == 1)
		c.disable = b;
	b = 0;
	if (nvs_env_bool("NVSHARE_ENABLE_SINGLE_OVERSUB", &b) == 1)
		c.single_oversub = b;
	b = 1;
	if (nvs_env_bool("NVSHARE_UNIFIED_MEMORY", &b) == 1)
		c.unified_memory = b;
	b = 0;
	if (nvs_env_bool("NVSHARE_REQUIRE_SCHEDULER", &b) == 1)
		c.require_scheduler = b;
	uint64_t v;
	if (nvs_env_size("NVSHARE_GPU_MEMORY_LIMIT", 1ull << 20, &v) == 1) {
		if (v == 0)
			NVS_WARN("NVSHARE_GPU_MEMORY_LIMIT=0 ignored (use a size such as 4Gi)");
		else
			c.mem_limit = v;
	}
	if (nvs_env_size("NVSHARE_GPU_MEMORY_REQUEST", 1, &v) == 1 && v) {
		c.mem_request = v;
		if (v < c.mem_limit)
			c.mem_limit = v;
	}
	nvs_cfg = c;
	if (c.disable)
		NVS_INFO("NVSHARE_DISABLE=1: every CUDA call passes through unchanged "
			 "(no managed memory, no limits, no scheduler)");
	if (!c.disable && !c.unified_memory)
		NVS_DEBUG("NVSHARE_UNIFIED_MEMORY=0: device allocations stay device memory (CUDA "
			  "IPC works; this process cannot oversubscribe the GPU)");
	char buf[32];
	NVS_DEBUG("config: single_oversub=%d memory_limit=%s", c.single_oversub,
		  c.mem_limit == UINT64_MAX ? "none"
					    : nvs_format_size(c.mem_limit, buf, sizeof buf));
}

int nvs_config_unified(void)
{
	return __atomic_load_n(&nvs_cfg.unified_memory, __ATOMIC_ACQUIRE);
}

uint64_t nvs_config_env_mem_limit(void)
{
	nvs_config_load();
	return nvs_cfg.mem_limit;
}

void nvs_config_device_memory(void)
{
	if (nvs_cfg.disable || !__atomic_exchange_n(&nvs_cfg.unified_memory, 0, __ATOMIC_ACQ_REL))
		return;
	/* What the user sees: the switch, and that it is not retroactive. */
	NVS_INFO("the Pod's annotation nvshare.com/unified-memory=\"false\" (from the "
		 "scheduler): new allocations stay device memory (CUDA IPC works; this process "
		 "cannot oversubscribe the GPU); earlier ones stay managed");
}

static void load_once(void)
{
	nvs_log_init("libnvshare");
	/* The application's stderr is not ours: a warning that repeats (a
	 * misbehaving scheduler, a loop of failing calls) appears at most
	 * once per 10 s per call site, with a count of the ones left out. */
	nvs_log_set_warn_interval(10ull * 1000000000ull);
	nvs_log_version();
	nvs_config_reload();
}

void nvs_config_load(void)
{
	pthread_once(&once, load_once);
}
