/*
 * The Pod watch's configuration: flags (main.c) and environment (here).
 * Built in every scheduler, with or without the watch itself (k8s_watch.c,
 * or k8s_off.c when built with K8S=0), so both read the same settings.
 */
#include "k8s_watch.h"

#include "log.h"
#include "parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nvs_k8s_config nvs_k8s_cfg;

static void env_copy(char *dst, size_t cap, const char *name)
{
	const char *v = getenv(name);
	if (v && *v)
		snprintf(dst, cap, "%s", v);
}

void nvs_k8s_config_from_env(struct nvs_k8s_config *kc)
{
	env_copy(kc->node_name, sizeof kc->node_name, "NODE_NAME");
	env_copy(kc->api, sizeof kc->api, "NVSHARE_KUBE_API");
	env_copy(kc->token_file, sizeof kc->token_file, "NVSHARE_KUBE_TOKEN_FILE");
	env_copy(kc->ca_file, sizeof kc->ca_file, "NVSHARE_KUBE_CA_FILE");
	kc->mem_unit = 1ull << 30;
	uint64_t u;
	/* A bare number is bytes, as the device plugin's --memory-unit. */
	if (nvs_env_size("NVSHARE_GPU_MEMORY_UNIT", 1, &u) == 1) {
		if (u >= (1ull << 20) && u <= (1ull << 40))
			kc->mem_unit = u;
		else
			NVS_WARN("NVSHARE_GPU_MEMORY_UNIT: %llu bytes is not within 1Mi..1Ti; "
				 "using 1Gi",
				 (unsigned long long)u);
	}
	const char *v = getenv("NVSHARE_KUBE");
	if (v && (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off") || !strcmp(v, "no")))
		kc->disabled = 1;
}
