/*
 * The device-plugin API of nvshare-device-plugin: decodes and encodes the
 * kubelet's v1beta1 messages (protobuf-c, generated from deviceplugin.proto)
 * and answers them from the device table and the allocation policy.
 * Transport is grpc_server.c's business.
 *
 * One struct nvs_dp_plugin per resource (the kubelet wants one endpoint per
 * resource name): nvshare.com/gpu and nvshare.com/gpu-memory share the
 * configuration and the device table.
 */
#ifndef NVSHARE_DP_PLUGIN_H
#define NVSHARE_DP_PLUGIN_H

#include <stdint.h>

#include "cdi.h"
#include "devices.h"
#include "grpc_server.h"
#include "policy.h"

#define NVS_DP_API_VERSION "v1beta1"
#define NVS_DP_METHOD_REGISTER "/v1beta1.Registration/Register"
#define NVS_DP_METHOD_OPTIONS "/v1beta1.DevicePlugin/GetDevicePluginOptions"
#define NVS_DP_METHOD_LIST "/v1beta1.DevicePlugin/ListAndWatch"
#define NVS_DP_METHOD_PREFERRED "/v1beta1.DevicePlugin/GetPreferredAllocation"
#define NVS_DP_METHOD_ALLOCATE "/v1beta1.DevicePlugin/Allocate"
#define NVS_DP_METHOD_PRESTART "/v1beta1.DevicePlugin/PreStartContainer"

struct nvs_dp_config {
	const char *kubelet_dir;   /* the kubelet's device-plugin directory */
	const char *resource_name; /* nvshare.com/gpu */
	const char *socket_name;   /* our socket, in kubelet_dir */
	unsigned replicas;	   /* virtual devices per GPU */
	enum nvs_dp_policy policy;
	uint64_t health_interval_ms; /* 0: no health checks */
	const char *host_lib_dir;    /* holds libnvshare.so on the node */
	const char *container_lib_dir;
	const char *lib_name;
	const char *host_sock_dir; /* the scheduler's socket directory on the node */
	const char *container_sock_dir;
	/* Pod sockets (bindings.h) */
	const char *podres_socket; /* the kubelet's PodResources API */
	uint64_t podres_interval_ms;
	uint64_t pod_socket_wait_ms;
	const char *state_dir; /* copies of the allocation records; NULL: none */
	int check_library;     /* Allocate fails if host_lib_dir/lib_name is missing */
	/* nvshare.com/gpu-memory (docs/kubernetes.md) */
	const char *mem_resource_name; /* NULL: not advertised */
	const char *mem_socket_name;
	uint64_t mem_unit; /* bytes per unit */
	double mem_oversubscription;
	uint64_t gpu_memory_size;  /* GPU size when NVML cannot tell, 0 none */
	struct nvs_dp_cdi_cfg cdi; /* --device-list-strategy and CDI (cdi.h) */
	int require_scheduler;	   /* NVSHARE_REQUIRE_SCHEDULER=1 in every container */
};

struct nvs_dp_plugin {
	const struct nvs_dp_config *cfg;
	struct nvs_dp_devices *dev;
	enum nvs_dp_kind kind;
	const char *resource_name;
	const char *socket_name;
};

/* Fills the transport callbacks (ctx = p). */
void nvs_dp_plugin_ops(struct nvs_dp_plugin *p, struct nvs_rpc_ops *ops);

/* Encodes our RegisterRequest. Returns 0 or -1. */
int nvs_dp_register_request(const struct nvs_dp_plugin *p, struct nvs_rpc_buf *out);

/* Decodes a DevicePluginOptions answer (self-check after listening). */
int nvs_dp_check_options(const uint8_t *data, size_t len);

#endif
