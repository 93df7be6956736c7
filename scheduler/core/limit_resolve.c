#include "limit_resolve.h"

#include "protocol.h"

/* A source that gives the field replaces what the ones below gave. */
static void core_from(struct nvs_limits *l, uint32_t core, enum nvs_limit_from f)
{
	if (core) {
		l->core = core;
		l->core_from = f;
	}
}

static void mem_from(struct nvs_limits *l, int has, uint64_t mem, enum nvs_limit_from f)
{
	if (has) {
		l->mem = mem;
		l->mem_from = f;
	}
}

struct nvs_limits nvs_limits_resolve(const struct nvs_limit_sources *s)
{
	struct nvs_limits l = {100, NVS_NO_LIMIT, NVS_LIMIT_FROM_DEFAULT, NVS_LIMIT_FROM_DEFAULT};

	core_from(&l, s->hello_core < 100 ? s->hello_core : 0, NVS_LIMIT_FROM_HELLO);
	core_from(&l, s->annot_core, NVS_LIMIT_FROM_ANNOTATION);
	core_from(&l, s->ctl_core, NVS_LIMIT_FROM_CTL);
	core_from(&l, s->gpu_core, NVS_LIMIT_FROM_CTL_GPU);

	/* HELLO is the process's own claim: it may lower the Pod's request,
	 * never raise it. */
	mem_from(&l, s->hello_mem && s->hello_mem != NVS_NO_LIMIT, s->hello_mem,
		 NVS_LIMIT_FROM_HELLO);
	mem_from(&l, s->request && s->request < l.mem, s->request, NVS_LIMIT_FROM_REQUEST);
	mem_from(&l, s->has_annot_mem, s->annot_mem, NVS_LIMIT_FROM_ANNOTATION);
	mem_from(&l, s->has_ctl_mem, s->ctl_mem, NVS_LIMIT_FROM_CTL);
	mem_from(&l, s->has_gpu_mem, s->gpu_mem, NVS_LIMIT_FROM_CTL_GPU);

	/* Then the sources that only lower. */
	core_from(&l, s->has_claim && s->claim_core < l.core ? s->claim_core : 0,
		  NVS_LIMIT_FROM_CLAIM);
	mem_from(&l, s->has_claim && s->claim_mem < l.mem, s->claim_mem, NVS_LIMIT_FROM_CLAIM);
	core_from(&l, s->ceil_core < l.core ? s->ceil_core : 0, NVS_LIMIT_FROM_CEILING);
	mem_from(&l, s->ceil_mem && s->ceil_mem < l.mem, s->ceil_mem, NVS_LIMIT_FROM_CEILING);
	return l;
}

const char *nvs_limit_from_name(enum nvs_limit_from f)
{
	static const char *const names[] = {
	    [NVS_LIMIT_FROM_DEFAULT] = "default", [NVS_LIMIT_FROM_HELLO] = "hello",
	    [NVS_LIMIT_FROM_REQUEST] = "request", [NVS_LIMIT_FROM_ANNOTATION] = "annotation",
	    [NVS_LIMIT_FROM_CTL] = "ctl",	  [NVS_LIMIT_FROM_CTL_GPU] = "ctl-gpu",
	    [NVS_LIMIT_FROM_CLAIM] = "claim",	  [NVS_LIMIT_FROM_CEILING] = "ceiling",
	};
	return (unsigned)f < sizeof names / sizeof names[0] ? names[f] : "?";
}
