/*
 * How a container is told which GPUs it got (docs/kubernetes.md, "Device
 * list strategies"), the strategies NVIDIA's device plugin offers, chosen
 * by --device-list-strategy (a comma list; several may be combined):
 *
 *   envvar          NVIDIA_VISIBLE_DEVICES=<uuid,...> (the default): the
 *                   NVIDIA Container Toolkit's runtime hook injects them.
 *   volume-mounts   NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices
 *                   and one mount /dev/null -> that directory/<uuid> per
 *                   GPU: the toolkit reads the list from the mounts, which
 *                   an unprivileged container cannot forge (the toolkit's
 *                   accept-nvidia-visible-devices-as-volume-mounts; the
 *                   only way where it ignores the variable, e.g.
 *                   Bottlerocket's default).
 *   cdi-annotations the CDI device names in a Pod annotation
 *                   cdi.k8s.io/<key> (containerd and CRI-O resolve them).
 *   cdi-cri         the CDI device names in the Allocate response's
 *                   CDIDevices field (Kubernetes 1.28+, GA in 1.31).
 *
 * CDI names two kinds of device per GPU: ours, nvshare.com/gpu=<uuid>,
 * from the spec this file writes (the GPU's device node and the control
 * nodes, as nvidia-ctk's spec lists them), and the driver's,
 * <driver kind>=<uuid> (default nvidia.com/gpu, from the spec nvidia-ctk
 * or the GPU Operator generates on the node: the driver's libraries and
 * hooks, which only the toolkit can list for the installed driver).
 * LD_PRELOAD and the library and socket mounts stay in the Allocate
 * response, which the kubelet applies whatever the runtime.
 *
 * No gRPC or protobuf here: plugin.c copies the result into its response,
 * so the same code can serve a DRA driver later.
 */
#ifndef NVSHARE_DP_CDI_H
#define NVSHARE_DP_CDI_H

#include <stddef.h>

#include "policy.h"   /* NVS_DP_ID_MAX */
#include "protocol.h" /* NVS_MAX_GPUS */

enum {
	NVS_DP_LIST_ENVVAR = 1u << 0,
	NVS_DP_LIST_VOLUME_MOUNTS = 1u << 1,
	NVS_DP_LIST_CDI_ANNOTATIONS = 1u << 2,
	NVS_DP_LIST_CDI_CRI = 1u << 3,
	NVS_DP_LIST_CDI = NVS_DP_LIST_CDI_ANNOTATIONS | NVS_DP_LIST_CDI_CRI,
};

#define NVS_DP_CDI_KIND "nvshare.com/gpu"
#define NVS_DP_CDI_DRIVER_KIND "nvidia.com/gpu"
#define NVS_DP_CDI_SPEC_DIR "/var/run/cdi"
#define NVS_DP_CDI_SPEC_FILE "nvshare.com-gpu.json"
#define NVS_DP_VOLUME_MOUNT_ROOT "/var/run/nvidia-container-devices"
#define NVS_DP_CDI_ANNOTATION_PREFIX "cdi.k8s.io/nvshare-device-plugin_"

/* "envvar,cdi-cri" -> mask. 0, or -1 for an unknown or empty entry. */
int nvs_dp_list_parse(const char *s, unsigned *mask);
/* The mask as a comma list ("envvar,volume-mounts"). */
const char *nvs_dp_list_names(unsigned mask, char *buf, size_t cap);

struct nvs_dp_cdi_cfg {
	unsigned strategies;
	const char *spec_dir;	 /* where the spec is written */
	const char *driver_kind; /* "" or NULL: name only our devices */
	const char *dev_root;	 /* where the plugin sees the node's /dev ("/") */
};

/* What one container gets for its GPUs (plugin.c copies it). */
struct nvs_dp_list_out {
	const char *visible; /* NVIDIA_VISIBLE_DEVICES, NULL: not set */
	unsigned n_mounts;   /* /dev/null -> mount[i] (volume-mounts) */
	char mount[NVS_MAX_GPUS][sizeof NVS_DP_VOLUME_MOUNT_ROOT + NVS_DP_ID_MAX + 1];
	char annotation_key[128]; /* "" : none */
	char annotation_value[2 * NVS_MAX_GPUS *
			      (sizeof NVS_DP_CDI_DRIVER_KIND + NVS_DP_ID_MAX + 32)];
	unsigned n_cdi; /* CDI device names (cdi-cri) */
	char cdi[2 * NVS_MAX_GPUS][96 + NVS_DP_ID_MAX];
};

/* Fills out for a container of `resource` that got the GPUs in
 * uuids_csv ("GPU-a,GPU-b", as NVIDIA_VISIBLE_DEVICES lists them).
 * out->visible points into uuids_csv or at a constant. */
void nvs_dp_device_list(const struct nvs_dp_cdi_cfg *c, const char *resource, const char *uuids_csv,
			struct nvs_dp_list_out *out);

/* A GPU of the spec: its UUID and the minor number of /dev/nvidia<minor>
 * (-1: unknown, no device node of its own is listed). */
struct nvs_dp_cdi_gpu {
	const char *uuid;
	int minor;
};

/* Writes <spec_dir>/nvshare.com-gpu.json (atomically: a temporary file
 * renamed over it), creating spec_dir. Device nodes are listed only where
 * they exist under dev_root, as nvidia-ctk does; without any control node
 * there (no driver) it refuses. 0, or -1 with err set. */
int nvs_dp_cdi_write_spec(const struct nvs_dp_cdi_cfg *c, const struct nvs_dp_cdi_gpu *g,
			  unsigned n, char *err, size_t errcap);

/* For other writers of CDI specs (the DRA driver's per-claim specs): the
 * device nodes that exist under dev_root, as a cJSON array of {"path"[,
 * "hostPath"]}: /dev/nvidia<minor> (minor >= 0) and, with control, the
 * control nodes every GPU needs (nvidiactl, nvidia-uvm, ...). */
struct cJSON;
struct cJSON *nvs_dp_cdi_nodes(const char *dev_root, int minor, int control);

/* mkdir -p with mode for the directories it creates. 0, or -1 (errno). */
int nvs_dp_mkdir_p(const char *dir, unsigned mode);

#endif
