/* The scheduler's state (state.h): one instance, owned by the loop thread. */
#include "state.h"

struct sched S;

uint64_t nvs_gpu_capacity(const struct gpu *g)
{
	uint64_t cap;
	if (g->capacity_override)
		cap = g->capacity_override;
	else if (!g->total_mem)
		return UINT64_MAX;
	else
		cap = g->total_mem > S.cfg.reserve ? g->total_mem - S.cfg.reserve : g->total_mem;
	/* Memory that unmanaged processes hold (NVSHARE_UNMANAGED=serialize,
	 * unmanaged.c) is not there for clients: it is pinned. */
	return cap > g->unmanaged_pinned ? cap - g->unmanaged_pinned : 0;
}
