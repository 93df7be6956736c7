/*
 * The kubelet-facing services of nvshare-dra-plugin: protobuf (dra.proto,
 * protobuf-c) in and out, answered by driver.c and gpus.c. Transport is
 * device-plugin/grpc_server.c's business, two servers:
 *
 *   registration socket  (<registry-dir>/<driver>-reg.sock, found by the
 *     kubelet's plugin watcher): pluginregistration.Registration GetInfo
 *     (type DRAPlugin, the driver name, the DRA socket, versions
 *     v1.DRAPlugin and v1beta1.DRAPlugin) and NotifyRegistrationStatus;
 *   DRA socket (<plugin-dir>/dra.sock): NodePrepareResources and
 *     NodeUnprepareResources of both k8s.io.kubelet.pkg.apis.dra.v1 and
 *     .v1beta1, and v1.DRAResourceHealth/NodeWatchResources (and its
 *     v1alpha1 twin), the health stream: every GPU with HEALTHY or UNHEALTHY, sent again whenever a
 *     GPU's health changes.
 */
#ifndef NVSHARE_DRA_RPC_H
#define NVSHARE_DRA_RPC_H

#include <stdatomic.h>

#include "driver.h"
#include "grpc_server.h"

#define NVS_DRA_PLUGIN_TYPE "DRAPlugin"
#define NVS_DRA_V1 "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
#define NVS_DRA_V1BETA1 "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"
#define NVS_DRA_METHOD_GETINFO "/pluginregistration.Registration/GetInfo"
#define NVS_DRA_METHOD_NOTIFY "/pluginregistration.Registration/NotifyRegistrationStatus"
#define NVS_DRA_METHOD_HEALTH "/v1.DRAResourceHealth/NodeWatchResources"
/* The same stream as Kubernetes 1.34 and 1.35 call it (feature gate
 * ResourceHealthStatus, alpha): package v1alpha1, the same messages. */
#define NVS_DRA_METHOD_HEALTH_ALPHA "/v1alpha1.DRAResourceHealth/NodeWatchResources"

struct nvs_dra_rpc {
	struct nvs_dra_driver *driver;
	const char *dra_socket; /* what GetInfo names */
	/* Set by NotifyRegistrationStatus: 1 registered, -1 refused. */
	atomic_int registered;
	atomic_uint prepares, unprepares;
	uint64_t health_timeout_s; /* health_check_timeout_seconds sent */
};

/* Callbacks for the registration and the DRA server (ctx = r). */
void nvs_dra_rpc_registration_ops(struct nvs_dra_rpc *r, struct nvs_rpc_ops *ops);
void nvs_dra_rpc_dra_ops(struct nvs_dra_rpc *r, struct nvs_rpc_ops *ops);

/* Decodes a PluginInfo (the self-check after listening): 0 when it names
 * this driver as a DRAPlugin. */
int nvs_dra_rpc_check_info(const uint8_t *data, size_t len, const char *driver);

#endif
