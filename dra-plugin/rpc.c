/* The kubelet-facing services (rpc.h). */
#include "rpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dra.pb-c.h"
#include "log.h"
#include "pbuf.h"

/* ---- registration ---- */

static int get_info(struct nvs_dra_rpc *r, struct nvs_rpc_buf *resp)
{
	Nvsdra__PluginInfo info = NVSDRA__PLUGIN_INFO__INIT;
	char *versions[] = {"v1.DRAPlugin", "v1beta1.DRAPlugin"};
	info.type = NVS_DRA_PLUGIN_TYPE;
	info.name = (char *)r->driver->cfg->driver;
	info.endpoint = (char *)r->dra_socket;
	info.n_supported_versions = 2;
	info.supported_versions = versions;
	return nvs_pb_pack(&info.base, resp);
}

int nvs_dra_rpc_check_info(const uint8_t *data, size_t len, const char *driver)
{
	Nvsdra__PluginInfo *i = nvsdra__plugin_info__unpack(NULL, len, nvs_pb_bytes(data));
	int ok = i && !strcmp(i->type, NVS_DRA_PLUGIN_TYPE) && !strcmp(i->name, driver);
	if (i)
		nvsdra__plugin_info__free_unpacked(i, NULL);
	return ok ? 0 : -1;
}

static int notify(struct nvs_dra_rpc *r, const uint8_t *data, size_t len, struct nvs_rpc_buf *resp,
		  char *msg, size_t msgcap)
{
	Nvsdra__RegistrationStatus *s =
	    nvs_pb_unpack(&nvsdra__registration_status__descriptor, data, len, msg, msgcap);
	if (!s)
		return NVS_RPC_INVALID_ARGUMENT;
	if (s->plugin_registered) {
		if (atomic_exchange(&r->registered, 1) != 1)
			NVS_INFO("registered with the kubelet as DRA driver %s",
				 r->driver->cfg->driver);
	} else {
		atomic_store(&r->registered, -1);
		NVS_ERROR("the kubelet refused the registration: %s",
			  s->error && *s->error ? s->error : "(no reason given)");
	}
	nvsdra__registration_status__free_unpacked(s, NULL);
	Nvsdra__RegistrationStatusResponse out = NVSDRA__REGISTRATION_STATUS_RESPONSE__INIT;
	return nvs_pb_reply(&out.base, resp, msg, msgcap);
}

static int registration_unary(void *ctx, const char *method, const uint8_t *req, size_t req_len,
			      struct nvs_rpc_buf *resp, char *msg, size_t msgcap)
{
	struct nvs_dra_rpc *r = ctx;
	if (!strcmp(method, NVS_DRA_METHOD_GETINFO))
		return get_info(r, resp) ? NVS_RPC_INTERNAL : NVS_RPC_OK;
	if (!strcmp(method, NVS_DRA_METHOD_NOTIFY))
		return notify(r, req, req_len, resp, msg, msgcap);
	snprintf(msg, msgcap, "unknown method %s", method);
	return NVS_RPC_UNIMPLEMENTED;
}

static int no_stream(void *ctx, struct nvs_rpc_buf *msg, uint64_t *generation)
{
	return -1;
}

static uint64_t no_generation(void *ctx)
{
	return 0;
}

void nvs_dra_rpc_registration_ops(struct nvs_dra_rpc *r, struct nvs_rpc_ops *ops)
{
	memset(ops, 0, sizeof *ops);
	ops->ctx = r;
	ops->unary = registration_unary;
	ops->stream_method = ""; /* no streaming method here */
	ops->snapshot = no_stream;
	ops->generation = no_generation;
}

/* ---- NodePrepareResources ---- */

/* One claim's answer: the response and the strings it points into. */
struct answer {
	Nvsdra__NodePrepareResourceResponse resp;
	Nvsdra__Device dev[NVS_DRA_MAX_RESULTS];
	Nvsdra__Device *devp[NVS_DRA_MAX_RESULTS];
	char *req[NVS_DRA_MAX_RESULTS];
	char ids[NVS_DRA_MAX_RESULTS][2][200];
	char *idp[NVS_DRA_MAX_RESULTS][2];
	struct nvs_dra_prepared p;
	char err[700];
	Nvsdra__NodePrepareResourcesResponse__ClaimsEntry entry;
};

static void fill(struct nvs_dra_rpc *r, struct answer *a)
{
	const char *kind = r->driver->cfg->cdi_driver_kind;
	struct nvs_dra_prepared *p = &a->p;
	for (unsigned i = 0; i < p->ndev; i++) {
		Nvsdra__Device *d = &a->dev[i];
		nvsdra__device__init(d);
		a->req[i] = p->dev[i].request;
		d->n_request_names = 1;
		d->request_names = &a->req[i];
		d->pool_name = p->dev[i].pool;
		d->device_name = p->dev[i].device;
		nvs_dra_cdi_id(p->uid, p->dev[i].device, a->ids[i][0], sizeof a->ids[i][0]);
		a->idp[i][0] = a->ids[i][0];
		d->n_cdi_device_ids = 1;
		if (kind && *kind) {
			/* (from a copy: GCC takes ids and p, both in *a, for
			 * possibly overlapping under -fsanitize: -Wrestrict) */
			char uuid[sizeof p->dev[i].uuid];
			memcpy(uuid, p->dev[i].uuid, sizeof uuid);
			snprintf(a->ids[i][1], sizeof a->ids[i][1], "%s=%s", kind, uuid);
			a->idp[i][1] = a->ids[i][1];
			d->n_cdi_device_ids = 2;
		}
		d->cdi_device_ids = a->idp[i];
		d->share_id = p->dev[i].share_id; /* "" is not sent */
		a->devp[i] = d;
	}
	a->resp.n_devices = p->ndev;
	a->resp.devices = a->devp;
}

static int prepare(struct nvs_dra_rpc *r, const uint8_t *data, size_t len, struct nvs_rpc_buf *out,
		   char *msg, size_t msgcap)
{
	Nvsdra__NodePrepareResourcesRequest *q = nvs_pb_unpack(
	    &nvsdra__node_prepare_resources_request__descriptor, data, len, msg, msgcap);
	if (!q)
		return NVS_RPC_INVALID_ARGUMENT;
	size_t n = q->n_claims;
	struct answer *a = calloc(n ? n : 1, sizeof *a);
	Nvsdra__NodePrepareResourcesResponse__ClaimsEntry **ents = calloc(n ? n : 1, sizeof *ents);
	int status = NVS_RPC_OK;
	if (!a || !ents) {
		snprintf(msg, msgcap, "out of memory");
		status = NVS_RPC_INTERNAL;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const Nvsdra__Claim *c = q->claims[i];
		nvsdra__node_prepare_resource_response__init(&a[i].resp);
		atomic_fetch_add(&r->prepares, 1);
		if (nvs_dra_prepare(r->driver, c->namespace_, c->uid, c->name, &a[i].p, a[i].err,
				    sizeof a[i].err)) {
			NVS_WARN("Prepare %s/%s: %s", c->namespace_, c->name, a[i].err);
			a[i].resp.error = a[i].err;
		} else {
			fill(r, &a[i]);
		}
		nvsdra__node_prepare_resources_response__claims_entry__init(&a[i].entry);
		a[i].entry.key = c->uid;
		a[i].entry.value = &a[i].resp;
		ents[i] = &a[i].entry;
	}
	Nvsdra__NodePrepareResourcesResponse resp = NVSDRA__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
	resp.n_claims = n;
	resp.claims = ents;
	status = nvs_pb_reply(&resp.base, out, msg, msgcap);
out:
	free(ents);
	free(a);
	nvsdra__node_prepare_resources_request__free_unpacked(q, NULL);
	return status;
}

static int unprepare(struct nvs_dra_rpc *r, const uint8_t *data, size_t len,
		     struct nvs_rpc_buf *out, char *msg, size_t msgcap)
{
	Nvsdra__NodeUnprepareResourcesRequest *q = nvs_pb_unpack(
	    &nvsdra__node_unprepare_resources_request__descriptor, data, len, msg, msgcap);
	if (!q)
		return NVS_RPC_INVALID_ARGUMENT;
	size_t n = q->n_claims;
	struct one {
		Nvsdra__NodeUnprepareResourceResponse resp;
		Nvsdra__NodeUnprepareResourcesResponse__ClaimsEntry entry;
		char err[700];
	} *a = calloc(n ? n : 1, sizeof *a);
	Nvsdra__NodeUnprepareResourcesResponse__ClaimsEntry **ents =
	    calloc(n ? n : 1, sizeof *ents);
	int status = NVS_RPC_OK;
	if (!a || !ents) {
		snprintf(msg, msgcap, "out of memory");
		status = NVS_RPC_INTERNAL;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const Nvsdra__Claim *c = q->claims[i];
		nvsdra__node_unprepare_resource_response__init(&a[i].resp);
		atomic_fetch_add(&r->unprepares, 1);
		if (nvs_dra_unprepare(r->driver, c->namespace_, c->uid, c->name, a[i].err,
				      sizeof a[i].err)) {
			NVS_WARN("Unprepare %s/%s: %s", c->namespace_, c->name, a[i].err);
			a[i].resp.error = a[i].err;
		}
		nvsdra__node_unprepare_resources_response__claims_entry__init(&a[i].entry);
		a[i].entry.key = c->uid;
		a[i].entry.value = &a[i].resp;
		ents[i] = &a[i].entry;
	}
	Nvsdra__NodeUnprepareResourcesResponse resp =
	    NVSDRA__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
	resp.n_claims = n;
	resp.claims = ents;
	status = nvs_pb_reply(&resp.base, out, msg, msgcap);
out:
	free(ents);
	free(a);
	nvsdra__node_unprepare_resources_request__free_unpacked(q, NULL);
	return status;
}

/* "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources" and
 * the v1beta1 one: the same messages (dra.proto). */
static int is_method(const char *method, const char *name)
{
	const char *services[] = {NVS_DRA_V1, NVS_DRA_V1BETA1};
	for (size_t i = 0; i < 2; i++) {
		size_t n = strlen(services[i]);
		if (method[0] == '/' && !strncmp(method + 1, services[i], n) &&
		    method[1 + n] == '/' && !strcmp(method + 2 + n, name))
			return 1;
	}
	return 0;
}

static int dra_unary(void *ctx, const char *method, const uint8_t *req, size_t req_len,
		     struct nvs_rpc_buf *resp, char *msg, size_t msgcap)
{
	struct nvs_dra_rpc *r = ctx;
	if (is_method(method, "NodePrepareResources"))
		return prepare(r, req, req_len, resp, msg, msgcap);
	if (is_method(method, "NodeUnprepareResources"))
		return unprepare(r, req, req_len, resp, msg, msgcap);
	snprintf(msg, msgcap, "unknown method %s", method);
	return NVS_RPC_UNIMPLEMENTED;
}

/* ---- the health stream ---- */

static int health(void *ctx, struct nvs_rpc_buf *msg, uint64_t *generation)
{
	struct nvs_dra_rpc *r = ctx;
	struct nvs_dra_gpu g[NVS_MAX_GPUS];
	unsigned n = nvs_dra_gpus_snapshot(r->driver->gpus, g, generation);
	Nvsdra__DeviceHealth dh[NVS_MAX_GPUS], *dp[NVS_MAX_GPUS];
	Nvsdra__DeviceIdentifier id[NVS_MAX_GPUS];
	int64_t now = (int64_t)time(NULL);
	for (unsigned i = 0; i < n; i++) {
		nvsdra__device_health__init(&dh[i]);
		nvsdra__device_identifier__init(&id[i]);
		id[i].pool_name = (char *)r->driver->cfg->node;
		id[i].device_name = g[i].name;
		dh[i].device = &id[i];
		dh[i].health = g[i].healthy ? NVSDRA__HEALTH_STATUS__HEALTHY
					    : NVSDRA__HEALTH_STATUS__UNHEALTHY;
		dh[i].last_updated_time = now;
		dh[i].health_check_timeout_seconds = (int64_t)r->health_timeout_s;
		dh[i].message = g[i].healthy ? "" : "NVML reports the GPU lost or unreachable";
		dp[i] = &dh[i];
	}
	Nvsdra__NodeWatchResourcesResponse resp = NVSDRA__NODE_WATCH_RESOURCES_RESPONSE__INIT;
	resp.n_devices = n;
	resp.devices = dp;
	return nvs_pb_pack(&resp.base, msg);
}

static uint64_t health_generation(void *ctx)
{
	struct nvs_dra_rpc *r = ctx;
	uint64_t gen = 0;
	struct nvs_dra_gpu g[NVS_MAX_GPUS];
	nvs_dra_gpus_snapshot(r->driver->gpus, g, &gen);
	return gen;
}

void nvs_dra_rpc_dra_ops(struct nvs_dra_rpc *r, struct nvs_rpc_ops *ops)
{
	memset(ops, 0, sizeof *ops);
	ops->ctx = r;
	ops->unary = dra_unary;
	ops->stream_method = NVS_DRA_METHOD_HEALTH;
	ops->stream_method_alt = NVS_DRA_METHOD_HEALTH_ALPHA;
	ops->snapshot = health;
	ops->generation = health_generation;
}
