/* The Kubernetes API client of nvshare-dra-plugin (kube.h). */
#include "kube.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

#define TOKEN_REREAD_MS 60000
#define BODY_MAX (8u << 20) /* a claim or a slice list is far smaller */

struct nvs_kube {
	struct nvs_kube_cfg cfg;
	CURL *h;
	char token[4096];
	uint64_t token_ms;
};

int nvs_kube_config(struct nvs_kube_cfg *cfg, const char *api, const char *token_file,
		    const char *ca_file, char *err, size_t errcap)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->timeout_ms = 10000;
	if (api && *api) {
		snprintf(cfg->api, sizeof cfg->api, "%s", api);
	} else {
		const char *host = getenv("KUBERNETES_SERVICE_HOST");
		const char *port = getenv("KUBERNETES_SERVICE_PORT");
		if (!host || !*host) {
			snprintf(err, errcap,
				 "no API server: give --kube-api, or run in a Pod "
				 "(KUBERNETES_SERVICE_HOST is not set)");
			return -1;
		}
		/* An IPv6 address goes in brackets. */
		int v6 = strchr(host, ':') != NULL;
		snprintf(cfg->api, sizeof cfg->api, "https://%s%s%s:%s", v6 ? "[" : "", host,
			 v6 ? "]" : "", port && *port ? port : "443");
	}
	size_t n = strlen(cfg->api);
	while (n && cfg->api[n - 1] == '/')
		cfg->api[--n] = '\0';
	snprintf(cfg->token_file, sizeof cfg->token_file, "%s",
		 token_file && *token_file ? token_file : NVS_KUBE_SA_DIR "/token");
	snprintf(cfg->ca_file, sizeof cfg->ca_file, "%s",
		 ca_file && *ca_file ? ca_file : NVS_KUBE_SA_DIR "/ca.crt");
	if (access(cfg->token_file, R_OK)) {
		snprintf(err, errcap, "cannot read the API token %s: %s", cfg->token_file,
			 strerror(errno));
		return -1;
	}
	return 0;
}

struct nvs_kube *nvs_kube_new(const struct nvs_kube_cfg *cfg)
{
	struct nvs_kube *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	k->cfg = *cfg;
	k->h = curl_easy_init();
	if (!k->h) {
		free(k);
		return NULL;
	}
	return k;
}

void nvs_kube_free(struct nvs_kube *k)
{
	if (!k)
		return;
	curl_easy_cleanup(k->h);
	free(k);
}

/* Reads the token file (trimmed, printable). 0, or -1 (the old one kept). */
static int read_token(struct nvs_kube *k)
{
	k->token_ms = nvs_dra_now_ms();
	int fd = open(k->cfg.token_file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		NVS_WARN("cannot read the API token %s: %s", k->cfg.token_file, strerror(errno));
		return -1;
	}
	char buf[sizeof k->token];
	ssize_t r = read(fd, buf, sizeof buf - 1);
	close(fd);
	size_t len = r > 0 ? (size_t)r : 0;
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
		len--;
	buf[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x21 || (unsigned char)buf[i] > 0x7e)
			len = 0;
	if (!len) {
		NVS_WARN("the API token file %s is empty or not printable", k->cfg.token_file);
		return -1;
	}
	memcpy(k->token, buf, len + 1);
	return 0;
}

struct body {
	char *p;
	size_t len, cap;
	int over;
};

static size_t on_data(char *d, size_t sz, size_t nm, void *arg)
{
	struct body *b = arg;
	size_t n = sz * nm;
	if (b->len + n + 1 > BODY_MAX) {
		b->over = 1;
		return 0;
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
	b->p[b->len] = '\0';
	return n;
}

static int once(struct nvs_kube *k, const char *method, const char *url, const char *body,
		struct nvs_kube_resp *r)
{
	CURL *h = k->h;
	curl_easy_reset(h);
	struct body b = {0};
	struct curl_slist *hdr = NULL;
	char auth[sizeof k->token + 32];
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", k->token);
	hdr = curl_slist_append(hdr, auth);
	hdr = curl_slist_append(hdr, "Accept: application/json");
	if (body)
		hdr = curl_slist_append(hdr, "Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	curl_easy_setopt(h, CURLOPT_CAINFO, k->cfg.ca_file);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)k->cfg.timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)k->cfg.timeout_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	CURLcode c = curl_easy_perform(h);
	curl_slist_free_all(hdr);
	r->body = b.p ? b.p : calloc(1, 1);
	r->len = b.len;
	if (c != CURLE_OK) {
		snprintf(r->err, sizeof r->err, "%s %s: %s", method, url,
			 b.over ? "answer larger than 8 MiB" : curl_easy_strerror(c));
		r->status = 0;
		return -1;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	return 0;
}

int nvs_kube_request(struct nvs_kube *k, const char *method, const char *path, const char *body,
		     struct nvs_kube_resp *r)
{
	memset(r, 0, sizeof *r);
	if (!k->token[0] || nvs_dra_now_ms() - k->token_ms >= TOKEN_REREAD_MS)
		read_token(k);
	char url[sizeof k->cfg.api + 1024];
	if ((size_t)snprintf(url, sizeof url, "%s%s", k->cfg.api, path) >= sizeof url) {
		snprintf(r->err, sizeof r->err, "request path too long");
		r->body = calloc(1, 1);
		return -1;
	}
	int rc = once(k, method, url, body, r);
	if (rc == 0 && r->status == 401) {
		/* A rotated token: read it again and retry once. */
		char old[sizeof k->token];
		memcpy(old, k->token, sizeof old);
		if (read_token(k) == 0 && strcmp(old, k->token)) {
			nvs_kube_resp_free(r);
			memset(r, 0, sizeof *r);
			rc = once(k, method, url, body, r);
		}
	}
	return rc;
}

void nvs_kube_resp_free(struct nvs_kube_resp *r)
{
	free(r->body);
	r->body = NULL;
}

void nvs_kube_status_message(const struct nvs_kube_resp *r, char *out, size_t cap)
{
	out[0] = '\0';
	cJSON *j = r->body ? cJSON_Parse(r->body) : NULL;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
	if (cJSON_IsString(m)) {
		/* Printable only: it goes into logs and the kubelet's events. */
		size_t i = 0;
		for (const char *s = m->valuestring; *s && i + 1 < cap; s++)
			out[i++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s;
		out[i] = '\0';
	}
	cJSON_Delete(j);
}
