/*
 * Device memory chosen by the Pod (devmem.h). The library decides at each
 * allocation, so the word must reach it before the first one: MEMORY_MODE
 * goes right after WELCOME, before the GPU_MODE that answers the process's
 * first ATTACH_GPU (its first context attaches the GPU and waits, bounded,
 * for that GPU_MODE, reading every message before it). When the
 * Pod is not in the watch cache yet at HELLO, or the annotation is added
 * later, it goes when the watch learns it and applies to the allocations
 * made after (the library logs the switch).
 *
 * One-way: allocations made as device memory cannot become managed, so a
 * later "true" or a removed annotation changes nothing for a process
 * already told. Setting it only makes the Pod's own scheduling worse (its
 * memory counts as pinned: policy.h nvs_policy_pinned), so any Pod may.
 */
#include "clock.h"
#include "devmem.h"

#include "clients.h"
#include "events.h"
#include "log.h"
#include "core/policy.h"
#include "core/state.h"

#include <string.h>

static void tell(struct client *cl)
{
	if (cl->devmem_told || (cl->hello_flags & NVS_HELLO_DEVICE_MEMORY))
		return;
	cl->devmem_told = 1;
	if (!(cl->hello_flags & NVS_HELLO_MEMORY_MODE)) {
		NVS_WARN("client=%u pid=%d pod %s/%s: %s is \"false\" but this client cannot "
			 "switch (an older libnvshare): set NVSHARE_UNIFIED_MEMORY=0 in the "
			 "container",
			 cl->id, (int)cl->pid, cl->pod_namespace, cl->pod_name,
			 "nvshare.com/unified-memory");
		return;
	}
	struct nvs_msg m;
	nvs_msg_gpu(&m, NVS_MSG_MEMORY_MODE, 0, NVS_MEMORY_MODE_DEVICE);
	nvs_client_send(cl, &m);
	/* From now on its new memory is pinned; count all of it so (what it
	 * allocated before may be managed: counting it pinned is only
	 * conservative, and only for this client). */
	cl->device_memory = 1;
	for (unsigned i = 0; i < cl->ngpus; i++)
		nvs_policy_mem_update(cl->gpus[i], cl->gpus[i]->allocated, nvs_now_ns());
	NVS_INFO("client=%u pid=%d pod %s/%s: MEMORY_MODE device (annotation "
		 "nvshare.com/unified-memory=false)",
		 cl->id, (int)cl->pid, cl->pod_namespace, cl->pod_name);
	nvs_event("memory_mode_sent", "\"client\":%u,\"pid\":%d,\"attached\":%u", cl->id,
		  (int)cl->pid, cl->ngpus);
}

void nvs_devmem_pod(struct client *cl, int device)
{
	if (!device || cl->devmem_annot)
		return;
	cl->devmem_annot = 1;
	if (cl->welcomed)
		tell(cl);
}

void nvs_devmem_welcomed(struct client *cl)
{
	cl->welcomed = 1;
	if (cl->devmem_annot)
		tell(cl);
}
