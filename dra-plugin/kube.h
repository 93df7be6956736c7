/*
 * A minimal Kubernetes API client for nvshare-dra-plugin (libcurl, blocking,
 * one request at a time): GET a ResourceClaim, create, replace, list and
 * delete ResourceSlices. One struct nvs_kube per thread (a curl handle is
 * not shared between threads).
 *
 * Configuration as the scheduler's watch takes it (docs/kubernetes-identity.md):
 * --kube-api / --kube-token-file / --kube-ca-file, else in cluster from
 * KUBERNETES_SERVICE_HOST/_PORT and the service account's token and CA.
 * The token is re-read every minute and after a 401 (projected tokens
 * rotate). TLS peer and host verification stay on.
 */
#ifndef NVSHARE_DRA_KUBE_H
#define NVSHARE_DRA_KUBE_H

#include <stddef.h>
#include <stdint.h>

#define NVS_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct nvs_kube_cfg {
	char api[512]; /* https://host:port */
	char token_file[512];
	char ca_file[512];
	unsigned timeout_ms; /* per request */
};

/* Fills cfg from the flags given (NULL: not given) or the in-cluster
 * environment. Returns 0, or -1 with err naming what is missing. */
int nvs_kube_config(struct nvs_kube_cfg *cfg, const char *api, const char *token_file,
		    const char *ca_file, char *err, size_t errcap);

struct nvs_kube;
struct nvs_kube *nvs_kube_new(const struct nvs_kube_cfg *cfg);
void nvs_kube_free(struct nvs_kube *k);

struct nvs_kube_resp {
	long status; /* HTTP status; 0: no answer (err says why) */
	char *body;  /* malloc()ed, NUL-terminated ("" none) */
	size_t len;
	char err[256];
};

/* One request: method GET/POST/PUT/DELETE, path from the API root
 * ("/apis/resource.k8s.io/v1/..."), body JSON or NULL. Returns 0 when an
 * HTTP answer came (any status), -1 when none did (resp->err). Free
 * resp->body with nvs_kube_resp_free either way. */
int nvs_kube_request(struct nvs_kube *k, const char *method, const char *path, const char *body,
		     struct nvs_kube_resp *resp);
void nvs_kube_resp_free(struct nvs_kube_resp *r);

/* The message of a Status answer ("" none), for errors. */
void nvs_kube_status_message(const struct nvs_kube_resp *r, char *out, size_t cap);

#endif
