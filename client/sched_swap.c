/*
 * Swap hooks called on lock hand-off. Placeholders: the prefetch on grant and
 * the eviction on drop are a later issue (see sched_swap.h).
 */
#include "sched_swap.h"

void nvs_swap_in(int dev)
{
	(void)dev; /* TODO(swap): prefetch managed ranges on dev to the GPU. */
}

void nvs_swap_out(int dev)
{
	(void)dev; /* TODO(swap): move managed ranges on dev to the host. */
}
