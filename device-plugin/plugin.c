/* Device-plugin API handlers (see plugin.h). */
#include "plugin.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bindings.h"
#include "deviceplugin.pb-c.h"
#include "log.h"
#include "pbuf.h"
#include "sockpath.h"

/* ---- ListAndWatch ---- */

struct list_build {
	V1beta1__Device *dev;
	V1beta1__Device **ptr;
	char (*ids)[NVS_DP_ID_MAX];
	size_t n, cap;
};

static void count_one(void *arg, const char *id, int healthy)
{
	(void)id;
	(void)healthy;
	(*(size_t *)arg)++;
}

static void add_one(void *arg, const char *id, int healthy)
{
	struct list_build *b = arg;
	if (b->n >= b->cap)
		return;
	V1beta1__Device *d = &b->dev[b->n];
	v1beta1__device__init(d);
	snprintf(b->ids[b->n], NVS_DP_ID_MAX, "%s", id);
	d->id = b->ids[b->n];
	d->health = healthy ? "Healthy" : "Unhealthy";
	b->ptr[b->n] = d;
	b->n++;
}

static int snapshot(void *ctx, struct nvs_rpc_buf *msg, uint64_t *generation)
{
	struct nvs_dp_plugin *p = ctx;
	size_t cap = 0;
	nvs_dp_devices_foreach(p->dev, p->kind, count_one, &cap);
	struct list_build b = {0};
	b.cap = cap;
	b.dev = calloc(cap + 1, sizeof *b.dev);
	b.ptr = calloc(cap + 1, sizeof *b.ptr);
	b.ids = calloc(cap + 1, sizeof *b.ids);
	int rc = -1;
	if (b.dev && b.ptr && b.ids) {
		*generation = nvs_dp_devices_foreach(p->dev, p->kind, add_one, &b);
		V1beta1__ListAndWatchResponse r = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
		r.n_devices = b.n;
		r.devices = b.ptr;
		rc = nvs_pb_pack(&r.base, msg);
		size_t unhealthy = 0;
		for (size_t i = 0; i < b.n; i++)
			unhealthy += strcmp(b.dev[i].health, "Healthy") != 0;
		NVS_INFO("ListAndWatch %s: %zu devices (%zu unhealthy)", p->resource_name, b.n,
			 unhealthy);
	}
	free(b.dev);
	free(b.ptr);
	free(b.ids);
	return rc;
}

static uint64_t generation(void *ctx)
{
	struct nvs_dp_plugin *p = ctx;
	return nvs_dp_devices_generation(p->dev);
}

/* ---- GetDevicePluginOptions ---- */

/* PreStartContainer binds the container's allocation to its Pod (Pod
 * sockets, bindings.h). */
static int options(struct nvs_rpc_buf *resp)
{
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
	o.pre_start_required = 1;
	o.get_preferred_allocation_available = 1;
	return nvs_pb_pack(&o.base, resp);
}

int nvs_dp_check_options(const uint8_t *data, size_t len)
{
	V1beta1__DevicePluginOptions *o =
	    v1beta1__device_plugin_options__unpack(NULL, len, nvs_pb_bytes(data));
	if (!o)
		return -1;
	int ok = o->get_preferred_allocation_available;
	v1beta1__device_plugin_options__free_unpacked(o, NULL);
	return ok ? 0 : -1;
}

/* ---- GetPreferredAllocation ---- */

static int preferred(struct nvs_dp_plugin *p, const uint8_t *data, size_t len,
		     struct nvs_rpc_buf *resp, char *msg, size_t msgcap)
{
	V1beta1__PreferredAllocationRequest *req = nvs_pb_unpack(
	    &v1beta1__preferred_allocation_request__descriptor, data, len, msg, msgcap);
	if (!req)
		return NVS_RPC_INVALID_ARGUMENT;
	size_t nc = req->n_container_requests;
	V1beta1__ContainerPreferredAllocationResponse *cr = calloc(nc + 1, sizeof *cr);
	V1beta1__ContainerPreferredAllocationResponse **crp = calloc(nc + 1, sizeof *crp);
	const char ***chosen = calloc(nc + 1, sizeof *chosen);
	int status = NVS_RPC_OK;
	if (!cr || !crp || !chosen) {
		snprintf(msg, msgcap, "out of memory");
		status = NVS_RPC_INTERNAL;
		goto out;
	}
	for (size_t i = 0; i < nc; i++) {
		V1beta1__ContainerPreferredAllocationRequest *c = req->container_requests[i];
		v1beta1__container_preferred_allocation_response__init(&cr[i]);
		crp[i] = &cr[i];
		if (c->allocation_size < 0 ||
		    (size_t)c->allocation_size > c->n_available_deviceids) {
			snprintf(msg, msgcap, "allocation_size %d with %zu devices available",
				 c->allocation_size, c->n_available_deviceids);
			status = NVS_RPC_INVALID_ARGUMENT;
			goto out;
		}
		size_t size = (size_t)c->allocation_size;
		chosen[i] = calloc(size + 1, sizeof(char *));
		if (!chosen[i]) {
			status = NVS_RPC_INTERNAL;
			snprintf(msg, msgcap, "out of memory");
			goto out;
		}
		int n = (p->kind == NVS_DP_KIND_MEMORY ? nvs_dp_prefer_units : nvs_dp_prefer)(
		    p->cfg->policy, (const char *const *)c->available_deviceids,
		    c->n_available_deviceids, (const char *const *)c->must_include_deviceids,
		    c->n_must_include_deviceids, size, chosen[i]);
		if (n < 0) {
			status = NVS_RPC_INTERNAL;
			snprintf(msg, msgcap, "allocation policy failed");
			goto out;
		}
		cr[i].n_deviceids = (size_t)n;
		cr[i].deviceids = (char **)chosen[i];
		char line[256] = "";
		size_t off = 0;
		for (int k = 0; k < n && off < sizeof line; k++)
			off += (size_t)snprintf(line + off, sizeof line - off, "%s%s", k ? " " : "",
						chosen[i][k]);
		NVS_INFO("GetPreferredAllocation %s (%s, %zu of %zu available): %s",
			 p->resource_name, nvs_dp_policy_name(p->cfg->policy), size,
			 c->n_available_deviceids, line);
	}
	V1beta1__PreferredAllocationResponse r = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
	r.n_container_responses = nc;
	r.container_responses = crp;
	status = nvs_pb_reply(&r.base, resp, msg, msgcap);
out:
	if (chosen)
		for (size_t i = 0; i < nc; i++)
			free(chosen[i]);
	free(chosen);
	free(cr);
	free(crp);
	v1beta1__preferred_allocation_request__free_unpacked(req, NULL);
	return status;
}

/* ---- Allocate ---- */

#define MAX_ENVS 6
#define MAX_MOUNTS (2 + NVS_MAX_GPUS) /* library, socket, volume-mounts' list */

struct one_response {
	V1beta1__ContainerAllocateResponse r;
	V1beta1__ContainerAllocateResponse__EnvsEntry env[MAX_ENVS];
	V1beta1__ContainerAllocateResponse__EnvsEntry *envp[MAX_ENVS];
	V1beta1__Mount mount[MAX_MOUNTS];
	V1beta1__Mount *mountp[MAX_MOUNTS];
	/* The device list strategies' part (cdi.c). */
	struct nvs_dp_list_out list;
	V1beta1__ContainerAllocateResponse__AnnotationsEntry ann, *annp;
	V1beta1__CDIDevice cdi[2 * NVS_MAX_GPUS];
	V1beta1__CDIDevice *cdip[2 * NVS_MAX_GPUS];
	char preload[512];
	char sock_dir[PATH_MAX]; /* the allocation's pods/<key> directory */
	char visible[NVS_MAX_GPUS * NVS_DP_ID_MAX];
	char mem_request[24], mem_total[24]; /* decimal bytes */
};

static void set_env(struct one_response *o, const char *k, char *v)
{
	size_t i = o->r.n_envs;
	v1beta1__container_allocate_response__envs_entry__init(&o->env[i]);
	o->env[i].key = (char *)k;
	o->env[i].value = v;
	o->envp[i] = &o->env[i];
	o->r.n_envs++;
}

static void add_mount(struct one_response *o, const char *host, const char *ctr)
{
	size_t i = o->r.n_mounts;
	v1beta1__mount__init(&o->mount[i]);
	o->mount[i].host_path = (char *)host;
	o->mount[i].container_path = (char *)ctr;
	o->mount[i].read_only = 1;
	o->mountp[i] = &o->mount[i];
	o->r.n_mounts++;
}

/* How the container learns its GPUs: --device-list-strategy (cdi.h). */
static void device_list(const struct nvs_dp_plugin *p, struct one_response *r)
{
	struct nvs_dp_list_out *l = &r->list;
	nvs_dp_device_list(&p->cfg->cdi, p->resource_name, r->visible, l);
	if (l->visible)
		set_env(r, "NVIDIA_VISIBLE_DEVICES", (char *)l->visible);
	for (unsigned i = 0; i < l->n_mounts; i++)
		add_mount(r, "/dev/null", l->mount[i]);
	if (l->annotation_key[0]) {
		v1beta1__container_allocate_response__annotations_entry__init(&r->ann);
		r->ann.key = l->annotation_key;
		r->ann.value = l->annotation_value;
		r->annp = &r->ann;
		r->r.annotations = &r->annp;
		r->r.n_annotations = 1;
	}
	for (unsigned i = 0; i < l->n_cdi; i++) {
		v1beta1__cdidevice__init(&r->cdi[i]);
		r->cdi[i].name = l->cdi[i];
		r->cdip[i] = &r->cdi[i];
	}
	r->r.cdi_devices = r->cdip;
	r->r.n_cdi_devices = l->n_cdi;
}

/* nvshare.com/gpu: one slice per GPU; every GPU named is visible. */
static int gpu_slices(const char *const *ids, size_t n_ids, struct one_response *r, char *err,
		      size_t errcap)
{
	char uuids[NVS_MAX_GPUS][NVS_DP_ID_MAX];
	int n = nvs_dp_check_request(ids, n_ids, uuids, NVS_MAX_GPUS, err, errcap);
	if (n < 0)
		return -1;
	size_t off = 0;
	for (int k = 0; k < n; k++)
		off += (size_t)snprintf(r->visible + off, sizeof r->visible - off, "%s%s",
					k ? "," : "", uuids[k]);
	return 0;
}

/*
 * nvshare.com/gpu-memory: the units' GPU, the request in bytes and the GPU's
 * size. Units that span GPUs (the Kubernetes scheduler counts a node's units,
 * not a GPU's, so a request can fit the node and no single GPU) give the
 * container the GPU holding most of them, with the whole request: nvshare
 * lets that GPU's memory be oversubscribed, and failing the Pod at admission
 * would only have its controller recreate it on the same node. Logged.
 */
static int memory_units(struct nvs_dp_plugin *p, const char *const *ids, size_t n_ids,
			struct one_response *r, char *err, size_t errcap)
{
	size_t on_gpu = 0;
	char uuid[NVS_DP_ID_MAX];
	int ngpus = nvs_dp_units_gpu(ids, n_ids, uuid, &on_gpu, err, errcap);
	if (ngpus < 0)
		return -1;
	if (ngpus > 1)
		NVS_WARN("Allocate %s: %zu units span %d GPUs; the container gets %s, which "
			 "holds %zu of them (its GPU memory is oversubscribed by the rest)",
			 p->resource_name, n_ids, ngpus, uuid, on_gpu);
	snprintf(r->visible, sizeof r->visible, "%s", uuid);
	snprintf(r->mem_request, sizeof r->mem_request, "%llu",
		 (unsigned long long)((uint64_t)n_ids * p->cfg->mem_unit));
	snprintf(r->mem_total, sizeof r->mem_total, "%llu",
		 (unsigned long long)nvs_dp_devices_mem_total(p->dev, uuid));
	return 0;
}

static int allocate(struct nvs_dp_plugin *p, const uint8_t *data, size_t len,
		    struct nvs_rpc_buf *resp, char *msg, size_t msgcap)
{
	const struct nvs_dp_config *cfg = p->cfg;
	V1beta1__AllocateRequest *req =
	    nvs_pb_unpack(&v1beta1__allocate_request__descriptor, data, len, msg, msgcap);
	if (!req)
		return NVS_RPC_INVALID_ARGUMENT;
	size_t nc = req->n_container_requests;
	struct one_response *o = calloc(nc + 1, sizeof *o);
	V1beta1__ContainerAllocateResponse **op = calloc(nc + 1, sizeof *op);
	int status = NVS_RPC_OK;
	if (!o || !op) {
		snprintf(msg, msgcap, "out of memory");
		status = NVS_RPC_INTERNAL;
		goto out;
	}
	char lib[1024];
	snprintf(lib, sizeof lib, "%s/%s", cfg->host_lib_dir, cfg->lib_name);
	if (cfg->check_library && access(lib, R_OK) != 0) {
		snprintf(msg, msgcap,
			 "%s is not installed on this node (%s missing): is the nvshare "
			 "library init container running?",
			 cfg->lib_name, lib);
		status = NVS_RPC_FAILED_PRECONDITION;
		goto out;
	}
	for (size_t i = 0; i < nc; i++) {
		V1beta1__ContainerAllocateRequest *c = req->container_requests[i];
		for (size_t k = 0; k < c->n_devices_ids; k++) {
			if (!nvs_dp_devices_has_id(p->dev, p->kind, c->devices_ids[k])) {
				snprintf(msg, msgcap, "unknown device %.*s for %s", NVS_DP_ID_MAX,
					 c->devices_ids[k], p->resource_name);
				status = NVS_RPC_INVALID_ARGUMENT;
				goto out;
			}
		}
		struct one_response *r = &o[i];
		v1beta1__container_allocate_response__init(&r->r);
		r->r.envs = r->envp;
		r->r.mounts = r->mountp;
		char err[400];
		int rc = p->kind == NVS_DP_KIND_MEMORY
			     ? memory_units(p, (const char *const *)c->devices_ids,
					    c->n_devices_ids, r, err, sizeof err)
			     : gpu_slices((const char *const *)c->devices_ids, c->n_devices_ids, r,
					  err, sizeof err);
		if (rc) {
			snprintf(msg, msgcap, "%s: %s", p->resource_name, err);
			status = NVS_RPC_INVALID_ARGUMENT;
			goto out;
		}
		/* The rest is the same for both resources: a container that
		 * asks for nvshare.com/gpu-memory alone gets nvshare too. */
		snprintf(r->preload, sizeof r->preload, "%s/%s", cfg->container_lib_dir,
			 cfg->lib_name);
		set_env(r, "LD_PRELOAD", r->preload);
		device_list(p, r);
		if (cfg->require_scheduler)
			set_env(r, "NVSHARE_REQUIRE_SCHEDULER", (char *)"1");
		if (strcmp(cfg->container_sock_dir, NVS_DEFAULT_SOCK_DIR))
			set_env(r, "NVSHARE_SOCK_DIR", (char *)cfg->container_sock_dir);
		if (p->kind == NVS_DP_KIND_MEMORY) {
			set_env(r, "NVSHARE_GPU_MEMORY_REQUEST", r->mem_request);
			set_env(r, "NVSHARE_GPU_MEMORY_TOTAL", r->mem_total);
		}
		/* Only this allocation's directory, never the whole socket
		 * directory: its socket is the container's identity, and the
		 * other Pods' sockets are out of its reach (bindings.h). */
		if (nvs_dp_bind_allocate(p->resource_name, (const char *const *)c->devices_ids,
					 c->n_devices_ids, r->sock_dir, sizeof r->sock_dir, err,
					 sizeof err)) {
			snprintf(msg, msgcap, "%s: %s", p->resource_name, err);
			status = NVS_RPC_FAILED_PRECONDITION;
			goto out;
		}
		add_mount(r, cfg->host_lib_dir, cfg->container_lib_dir);
		add_mount(r, r->sock_dir, cfg->container_sock_dir);
		op[i] = &r->r;
		NVS_INFO("Allocate %s: %zu device(s) -> %s%s%s%s", p->resource_name,
			 c->n_devices_ids, r->visible,
			 r->list.n_cdi || r->list.annotation_key[0] ? " (CDI)" : "",
			 p->kind == NVS_DP_KIND_MEMORY ? " NVSHARE_GPU_MEMORY_REQUEST=" : "",
			 p->kind == NVS_DP_KIND_MEMORY ? r->mem_request : "");
	}
	V1beta1__AllocateResponse ar = V1BETA1__ALLOCATE_RESPONSE__INIT;
	ar.n_container_responses = nc;
	ar.container_responses = op;
	status = nvs_pb_reply(&ar.base, resp, msg, msgcap);
out:
	free(o);
	free(op);
	v1beta1__allocate_request__free_unpacked(req, NULL);
	return status;
}

/* ---- PreStartContainer ---- */

/* Never fails the container: binding or not, it is logged (bindings.c). */
static int prestart(struct nvs_dp_plugin *p, const uint8_t *data, size_t len,
		    struct nvs_rpc_buf *resp, char *msg, size_t msgcap)
{
	V1beta1__PreStartContainerRequest *req = nvs_pb_unpack(
	    &v1beta1__pre_start_container_request__descriptor, data, len, msg, msgcap);
	if (!req)
		return NVS_RPC_INVALID_ARGUMENT;
	nvs_dp_bind_prestart(p->resource_name, (const char *const *)req->devices_ids,
			     req->n_devices_ids);
	v1beta1__pre_start_container_request__free_unpacked(req, NULL);
	V1beta1__PreStartContainerResponse r = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
	return nvs_pb_reply(&r.base, resp, msg, msgcap);
}

/* ---- dispatch ---- */

static int unary(void *ctx, const char *method, const uint8_t *req, size_t req_len,
		 struct nvs_rpc_buf *resp, char *msg, size_t msgcap)
{
	struct nvs_dp_plugin *p = ctx;
	if (!strcmp(method, NVS_DP_METHOD_OPTIONS)) {
		if (options(resp))
			goto oom;
		return NVS_RPC_OK;
	}
	if (!strcmp(method, NVS_DP_METHOD_PREFERRED))
		return preferred(p, req, req_len, resp, msg, msgcap);
	if (!strcmp(method, NVS_DP_METHOD_ALLOCATE))
		return allocate(p, req, req_len, resp, msg, msgcap);
	if (!strcmp(method, NVS_DP_METHOD_PRESTART))
		return prestart(p, req, req_len, resp, msg, msgcap);
	snprintf(msg, msgcap, "unknown method %s", method);
	return NVS_RPC_UNIMPLEMENTED;
oom:
	snprintf(msg, msgcap, "out of memory");
	return NVS_RPC_INTERNAL;
}

void nvs_dp_plugin_ops(struct nvs_dp_plugin *p, struct nvs_rpc_ops *ops)
{
	memset(ops, 0, sizeof *ops);
	ops->ctx = p;
	ops->unary = unary;
	ops->stream_method = NVS_DP_METHOD_LIST;
	ops->snapshot = snapshot;
	ops->generation = generation;
}

int nvs_dp_register_request(const struct nvs_dp_plugin *p, struct nvs_rpc_buf *out)
{
	/* The same options as GetDevicePluginOptions: older kubelets take
	 * them from here. */
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
	o.pre_start_required = 1;
	o.get_preferred_allocation_available = 1;
	V1beta1__RegisterRequest r = V1BETA1__REGISTER_REQUEST__INIT;
	r.version = NVS_DP_API_VERSION;
	r.endpoint = (char *)p->socket_name;
	r.resource_name = (char *)p->resource_name;
	r.options = &o;
	return nvs_pb_pack(&r.base, out);
}
