/* PodResources List (see podres.h). */
#include "podres.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "grpc_server.h"
#include "podresources.pb-c.h"

int nvs_dp_podres_list(const char *socket_path, unsigned timeout_ms, struct nvs_dp_podres *out,
		       char *err, size_t errcap)
{
	memset(out, 0, sizeof *out);
	/* A missing socket would fail fast in gRPC too (UNAVAILABLE); the
	 * plain check names the cause. */
	struct stat st;
	if (stat(socket_path, &st) < 0) {
		snprintf(err, errcap, "%s: %s", socket_path, strerror(errno));
		return -1;
	}
	V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
	uint8_t reqbuf[16];
	size_t reqlen = v1__list_pod_resources_request__pack(&req, reqbuf);
	struct nvs_rpc_buf resp = {0};
	char msg[256];
	int rc = nvs_rpc_call(socket_path, NVS_DP_PODRES_METHOD_LIST, reqbuf, reqlen, &resp,
			      timeout_ms, msg, sizeof msg);
	if (rc != NVS_RPC_OK) {
		snprintf(err, errcap, "List on %s: status %d %s", socket_path, rc, msg);
		free(resp.data);
		return -1;
	}
	V1__ListPodResourcesResponse *r = v1__list_pod_resources_response__unpack(
	    NULL, resp.len, resp.data ? resp.data : (const uint8_t *)"");
	free(resp.data);
	if (!r) {
		snprintf(err, errcap, "List on %s: cannot decode the answer", socket_path);
		return -1;
	}
	size_t n = 0;
	for (size_t i = 0; i < r->n_pod_resources; i++)
		for (size_t c = 0; c < r->pod_resources[i]->n_containers; c++)
			n += r->pod_resources[i]->containers[c]->n_devices;
	out->e = calloc(n + 1, sizeof *out->e);
	if (!out->e) {
		v1__list_pod_resources_response__free_unpacked(r, NULL);
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < r->n_pod_resources; i++) {
		const V1__PodResources *p = r->pod_resources[i];
		for (size_t c = 0; c < p->n_containers; c++) {
			const V1__ContainerResources *cr = p->containers[c];
			for (size_t d = 0; d < cr->n_devices; d++) {
				const V1__ContainerDevices *cd = cr->devices[d];
				out->e[out->n++] = (struct nvs_dp_podres_entry){
				    .ns = p->namespace_,
				    .pod = p->name,
				    .container = cr->name,
				    .resource = cd->resource_name,
				    .ids = (const char *const *)cd->device_ids,
				    .n_ids = cd->n_device_ids,
				};
			}
		}
	}
	out->msg = r;
	return 0;
}

void nvs_dp_podres_free(struct nvs_dp_podres *r)
{
	if (r->msg)
		v1__list_pod_resources_response__free_unpacked(r->msg, NULL);
	free(r->e);
	memset(r, 0, sizeof *r);
}
