/*
 * Threads: the watch thread runs libcurl (blocking, one transfer at a
 * time) and owns everything under "thread state". The loop thread owns the
 * Pod cache and the clients. `mu` guards the queue and `stopping`; the
 * eventfd wakes the loop; `cv` wakes the thread's back-off sleeps.
 */
#include "k8s_watch.h"

#include "k8s_json.h"

#include "../events.h"
#include "../loop.h"

#include "log.h"
#include "parse.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define WATCH_TIMEOUT_S 300  /* timeoutSeconds asked of the server */
#define LOW_SPEED_TIME_S 150 /* no byte for this long: dead stream */
#define LIST_TIMEOUT_S 60
#define CONNECT_TIMEOUT_S 10
#define TOKEN_REREAD_S 60
#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS 30000
/* Pods per LIST page. The page is read as it arrives and never held
 * whole (k8s_json.h), so its size costs this process nothing; the API
 * server, though, builds each page in memory: 100 Pods of up to 1.5 MiB
 * (etcd's object limit) is 150 MB there. */
#define LIST_PAGE 100
#define LIST_BUFFER (512u << 10) /* curl's receive buffer for a LIST */
#define LINE_MAX_BYTES (16u << 20)
#define ERRBODY_MAX 4096

enum { KM_UPSERT = 1, KM_DELETE, KM_RESYNC_BEGIN, KM_RESYNC_END };

struct kmsg {
	int kind;
	uint64_t t_ns; /* when the thread parsed it */
	struct nvs_k8s_pod pod;
	struct kmsg *next;
};

struct kq {
	struct kmsg *head, *tail;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct kq queue; /* mu */
static int stopping;	/* mu; read unlocked as a hint in curl callbacks */
static int efd = -1;
static pthread_t thr;
static int started;
static const char *volatile state_name = "off";
/* loop thread: the Pod cache */
static struct nvs_k8s_cached_pod *cache;
static unsigned ncache;
static void (*on_changed)(const struct nvs_k8s_cached_pod *p);
static void (*on_removed)(const struct nvs_k8s_cached_pod *p);

void nvs_k8s_on_change(void (*changed)(const struct nvs_k8s_cached_pod *p),
		       void (*removed)(const struct nvs_k8s_cached_pod *p))
{
	on_changed = changed;
	on_removed = removed;
}

/* ---- thread state ---- */
static char base_url[600];
static char node_q[800]; /* escaped fieldSelector value */
static char token[16384];
static char token_file[600], ca_file[600];
static uint64_t token_read_ns;
static char rv[NVS_K8S_RV_LEN];
static int need_list = 1;
static uint64_t backoff_ms;

static void *run(void *arg);
static void on_queue(void *ctx, uint32_t events);

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void set_state(const char *s)
{
	__atomic_store_n(&state_name, s, __ATOMIC_RELAXED);
}

/* k8s_watch event: the watch's state ("off", "on", "backoff", "relisting")
 * and a stable reason code. Called from the loop and the watch thread
 * (one write(2) per line: safe from both). */
static void watch_event(const char *state, const char *reason)
{
	nvs_event("k8s_watch", "\"state\":\"%s\",\"reason\":\"%s\"", state, reason);
}

const char *nvs_k8s_state(void)
{
	return __atomic_load_n(&state_name, __ATOMIC_RELAXED);
}

static int is_stopping(void)
{
	return __atomic_load_n(&stopping, __ATOMIC_RELAXED);
}

/* Reads the token file; returns 1 if the token changed, 0 if not, -1 on
 * error (the old token is kept). */
static int read_token(void)
{
	token_read_ns = mono_ns();
	int fd = open(token_file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		NVS_WARN("k8s: cannot read the token %s: %s", token_file, strerror(errno));
		return -1;
	}
	char buf[sizeof token];
	size_t len = 0;
	ssize_t r;
	while (len < sizeof buf - 1 && (r = read(fd, buf + len, sizeof buf - 1 - len)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		len += (size_t)r;
	}
	close(fd);
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
		len--;
	buf[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x21 || (unsigned char)buf[i] > 0x7e) {
			NVS_WARN("k8s: the token in %s has a non-printable byte: ignored",
				 token_file);
			return -1;
		}
	if (!len) {
		NVS_WARN("k8s: the token file %s is empty", token_file);
		return -1;
	}
	if (!strcmp(buf, token))
		return 0;
	int had = token[0] != '\0';
	memcpy(token, buf, len + 1);
	if (had) {
		NVS_INFO("k8s: token re-read from %s (changed)", token_file);
		char fq[2 * sizeof token_file];
		nvs_event("k8s_token_changed", "\"file\":%s",
			  nvs_json_str(token_file, fq, sizeof fq));
	}
	return 1;
}

/* snprintf that reports truncation. */
static int fit(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fit(char *dst, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(dst, cap, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int nvs_k8s_start(void)
{
	struct nvs_k8s_config *kc = &nvs_k8s_cfg;
	if (kc->disabled) {
		NVS_INFO("k8s: Pod watch disabled (--no-kube)");
		watch_event("off", "disabled");
		return 0;
	}
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	if (kc->api[0]) {
		if (fit(base_url, sizeof base_url, "%s", kc->api))
			goto too_long;
	} else {
		if (!kc->node_name[0]) {
			NVS_INFO("k8s: Pod watch off (no NODE_NAME and no --kube-api)");
			watch_event("off", "no-node-name");
			return 0;
		}
		if (!host || !*host) {
			NVS_INFO("k8s: Pod watch off: NODE_NAME is set but KUBERNETES_SERVICE_HOST "
				 "is not (not in a cluster; use --kube-api)");
			watch_event("off", "not-in-cluster");
			return 0;
		}
		/* IPv6 literals go in brackets. */
		int v6 = strchr(host, ':') != NULL;
		if (fit(base_url, sizeof base_url, "https://%s%s%s:%s", v6 ? "[" : "", host,
			v6 ? "]" : "", port && *port ? port : "443"))
			goto too_long;
	}
	size_t n = strlen(base_url);
	while (n && base_url[n - 1] == '/')
		base_url[--n] = '\0';
	if (!kc->node_name[0]) {
		NVS_ERROR("k8s: --kube-api needs --node-name (or NODE_NAME)");
		watch_event("off", "needs-node-name");
		return -1;
	}
	if (fit(token_file, sizeof token_file, "%s",
		kc->token_file[0] ? kc->token_file : NVS_K8S_SA_DIR "/token") ||
	    fit(ca_file, sizeof ca_file, "%s",
		kc->ca_file[0] ? kc->ca_file : NVS_K8S_SA_DIR "/ca.crt"))
		goto too_long;
	if (!kc->api[0] && access(token_file, R_OK)) {
		NVS_INFO("k8s: Pod watch off: no service-account token at %s", token_file);
		watch_event("off", "no-token");
		return 0;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		NVS_ERROR("k8s: curl_global_init failed");
		return -1;
	}
	char *e = curl_easy_escape(NULL, kc->node_name, 0);
	if (!e)
		return -1;
	snprintf(node_q, sizeof node_q, "spec.nodeName%%3D%s", e);
	curl_free(e);
	read_token();
	efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (efd < 0 || nvs_loop_add(efd, EPOLLIN, on_queue, NULL) < 0) {
		NVS_ERROR("k8s: eventfd: %s", strerror(errno));
		return -1;
	}
	if (pthread_create(&thr, NULL, run, NULL)) {
		NVS_ERROR("k8s: cannot start the watch thread");
		return -1;
	}
	started = 1;
	char ub[32];
	NVS_INFO("k8s: watching Pods of node %s at %s (CA %s, token %s; %s units of %s)",
		 kc->node_name, base_url, ca_file, token_file,
		 nvs_format_size(kc->mem_unit, ub, sizeof ub), NVS_K8S_RES_MEM);
	{
		char nq[2 * sizeof kc->node_name], uq[2 * sizeof base_url];
		nvs_event("k8s_watch",
			  "\"state\":\"on\",\"reason\":\"started\",\"node\":%s,\"api\":%s",
			  nvs_json_str(kc->node_name, nq, sizeof nq),
			  nvs_json_str(base_url, uq, sizeof uq));
	}
	return 0;
too_long:
	NVS_ERROR("k8s: API server URL or file path too long");
	return -1;
}

/* ---- queue (thread -> loop) ---- */

static void kq_add(struct kq *q, int kind, const struct nvs_k8s_pod *p)
{
	struct kmsg *m = calloc(1, sizeof *m);
	if (!m) {
		/* Lost change: re-list to get back in step. */
		need_list = 1;
		return;
	}
	m->kind = kind;
	m->t_ns = mono_ns();
	if (p)
		m->pod = *p;
	if (q->tail)
		q->tail->next = m;
	else
		q->head = m;
	q->tail = m;
}

static void kq_post(struct kq *q)
{
	if (!q->head)
		return;
	pthread_mutex_lock(&mu);
	if (queue.tail)
		queue.tail->next = q->head;
	else
		queue.head = q->head;
	queue.tail = q->tail;
	pthread_mutex_unlock(&mu);
	q->head = q->tail = NULL;
	uint64_t one = 1;
	if (write(efd, &one, sizeof one) < 0 && errno != EAGAIN)
		NVS_WARN("k8s: eventfd write: %s", strerror(errno));
}

static void kq_free(struct kq *q)
{
	while (q->head) {
		struct kmsg *m = q->head;
		q->head = m->next;
		free(m);
	}
	q->tail = NULL;
}

/* ---- HTTP ---- */

struct xfer {
	CURL *h;
	int watch;
	long status;
	char *body; /* the error body of a failed request */
	size_t blen, bcap, bmax;
	int too_big;
	struct nvs_k8s_list *list; /* LIST: reads the body as it comes */
	int not_json;		   /* ... and found it is not JSON */
	struct nvs_k8s_lines lines;
	struct kq out;	 /* events parsed by this write callback */
	int relist;	 /* ERROR event with code 410 */
	int error_event; /* another ERROR event */
	unsigned long nevents, nbad;
};

static int body_append(struct xfer *x, const char *d, size_t n)
{
	if (x->blen + n + 1 > x->bmax) {
		x->too_big = 1;
		n = x->bmax > x->blen + 1 ? x->bmax - x->blen - 1 : 0;
	}
	if (x->blen + n + 1 > x->bcap) {
		size_t cap = x->bcap ? x->bcap : 65536;
		while (cap < x->blen + n + 1)
			cap *= 2;
		char *b = realloc(x->body, cap);
		if (!b)
			return -1;
		x->body = b;
		x->bcap = cap;
	}
	memcpy(x->body + x->blen, d, n);
	x->blen += n;
	x->body[x->blen] = '\0';
	return 0;
}

static int on_line(const char *line, size_t len, void *arg)
{
	struct xfer *x = arg;
	if (!len)
		return 0;
	struct nvs_k8s_event *ev = malloc(sizeof *ev);
	if (!ev)
		return 1;
	int stop = 0;
	if (nvs_k8s_parse_event(line, len, ev)) {
		x->nbad++;
		char ex[80];
		snprintf(ex, sizeof ex, "%.*s", (int)(len < 60 ? len : 60), line);
		for (char *c = ex; *c; c++)
			if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
				*c = '?';
		NVS_WARN("k8s: skipping a malformed watch event (%zu bytes: %s...)", len, ex);
		nvs_event("k8s_event_malformed", "\"bytes\":%zu", len);
		free(ev);
		return 0;
	}
	x->nevents++;
	switch (ev->type) {
	case NVS_K8S_ERROR:
		if (ev->code == 410) {
			NVS_INFO("k8s: watch ERROR 410 (%s): re-listing", ev->message);
			watch_event("relisting", "error-410");
			x->relist = 1;
		} else {
			NVS_WARN("k8s: watch ERROR event code %d: %s", ev->code, ev->message);
			nvs_event("k8s_request_failed",
				  "\"op\":\"watch\",\"reason\":\"error-event\",\"http_status\":%d",
				  ev->code);
			x->error_event = 1;
		}
		stop = 1;
		break;
	case NVS_K8S_BOOKMARK:
		NVS_DEBUG("k8s: BOOKMARK resourceVersion %s", ev->rv);
		break;
	default:
		NVS_DEBUG("k8s: %s pod %s/%s rv %s",
			  ev->type == NVS_K8S_ADDED	 ? "ADDED"
			  : ev->type == NVS_K8S_MODIFIED ? "MODIFIED"
							 : "DELETED",
			  ev->pod.ns, ev->pod.name, ev->rv);
		kq_add(&x->out, ev->type == NVS_K8S_DELETED ? KM_DELETE : KM_UPSERT, &ev->pod);
		break;
	}
	if (ev->rv[0] && ev->type != NVS_K8S_ERROR)
		memcpy(rv, ev->rv, sizeof rv);
	free(ev);
	return stop;
}

static size_t on_data(char *d, size_t sz, size_t nm, void *arg)
{
	struct xfer *x = arg;
	size_t n = sz * nm;
	if (is_stopping())
		return 0;
	if (!x->status)
		curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status);
	if (!x->watch && x->status == 200 && x->list) {
		if (!nvs_k8s_list_feed(x->list, d, n))
			return n;
		x->not_json = 1;
		return 0;
	}
	if (x->status != 200) {
		if (body_append(x, d, n))
			return 0;
		return n;
	}
	int r = nvs_k8s_lines_feed(&x->lines, d, n, on_line, x);
	kq_post(&x->out); /* what this chunk completed, at once */
	return r ? 0 : n;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	return is_stopping();
}

/* Runs one GET; returns the curl result. x->status has the HTTP status. */
static CURLcode get(struct xfer *x, const char *url)
{
	CURL *h = curl_easy_init();
	if (!h)
		return CURLE_OUT_OF_MEMORY;
	x->h = h;
	char auth[sizeof token + 32];
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
	struct curl_slist *hd = curl_slist_append(NULL, auth);
	struct curl_slist *h2 = hd ? curl_slist_append(hd, "Accept: application/json") : NULL;
	if (!h2) {
		curl_slist_free_all(hd);
		curl_easy_cleanup(h);
		return CURLE_OUT_OF_MEMORY;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, h2);
	curl_easy_setopt(h, CURLOPT_CAINFO, ca_file);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 10L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
	if (x->watch) {
		curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)(WATCH_TIMEOUT_S + 60));
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)LOW_SPEED_TIME_S);
	} else {
		curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)LIST_TIMEOUT_S);
		curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
		curl_easy_setopt(h, CURLOPT_BUFFERSIZE, (long)LIST_BUFFER);
	}
	CURLcode r = curl_easy_perform(h);
	if (!x->status)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &x->status);
	curl_slist_free_all(h2);
	curl_easy_cleanup(h);
	x->h = NULL;
	return r;
}

/* Result of one LIST or WATCH round. */
enum { RES_OK, RES_RELIST, RES_AUTH, RES_FAIL, RES_STOP };

/* A stable reason code for a curl failure (k8s_request_failed). */
static const char *curl_reason(CURLcode r)
{
	switch (r) {
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
		return "tls";
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
		return "connect";
	case CURLE_OPERATION_TIMEDOUT:
		return "timeout";
	default:
		return "curl";
	}
}

/* Logs a failed request: curl error or HTTP status + the Status message. */
static void log_failure(const char *what, CURLcode r, const struct xfer *x)
{
	if (is_stopping())
		return;
	const char *op = !strcmp(what, "LIST") ? "list" : "watch";
	if (r != CURLE_OK && r != CURLE_WRITE_ERROR && !(x->status && x->status != 200)) {
		NVS_WARN("k8s: %s: %s", what, curl_easy_strerror(r));
		nvs_event("k8s_request_failed", "\"op\":\"%s\",\"reason\":\"%s\",\"curl_code\":%d",
			  op, curl_reason(r), (int)r);
		return;
	}
	char msg[200] = "";
	if (x->body && x->blen) {
		/* A Status object's message, else the body's start. */
		cJSON *j = cJSON_ParseWithLength(x->body, x->blen);
		const cJSON *m = j ? cJSON_GetObjectItemCaseSensitive(j, "message") : NULL;
		const char *s = cJSON_IsString(m) ? m->valuestring : x->body;
		size_t i = 0;
		for (; s[i] && i + 1 < sizeof msg; i++)
			msg[i] = ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f) ? '?'
											     : s[i];
		msg[i] = '\0';
		cJSON_Delete(j);
	}
	NVS_WARN("k8s: %s: HTTP %ld%s%s", what, x->status, msg[0] ? ": " : "", msg);
	char mq[2 * sizeof msg];
	nvs_event("k8s_request_failed",
		  "\"op\":\"%s\",\"reason\":\"http\",\"http_status\":%ld,\"message\":%s", op,
		  x->status, nvs_json_str(msg, mq, sizeof mq));
}

static void list_item(const struct nvs_k8s_pod *p, void *arg)
{
	kq_add(arg, KM_UPSERT, p);
}

static int do_list(void)
{
	set_state("listing");
	char cont[4096] = "";
	unsigned total = 0, skipped = 0, pages = 0;
	char new_rv[NVS_K8S_RV_LEN] = "";
	for (;;) {
		char url[sizeof base_url + sizeof node_q + sizeof cont * 3 + 64];
		char *ec = cont[0] ? curl_easy_escape(NULL, cont, 0) : NULL;
		snprintf(url, sizeof url, "%s/api/v1/pods?fieldSelector=%s&limit=%d%s%s", base_url,
			 node_q, LIST_PAGE, ec ? "&continue=" : "", ec ? ec : "");
		curl_free(ec);
		struct xfer x;
		memset(&x, 0, sizeof x);
		x.bmax = ERRBODY_MAX;
		/* The page's Pods are queued as they are read, and posted to the
		 * loop only once the whole page proved to be a PodList. */
		struct kq q = {0};
		if (!pages)
			kq_add(&q, KM_RESYNC_BEGIN, NULL);
		x.list = nvs_k8s_list_new(list_item, &q);
		CURLcode r = x.list ? get(&x, url) : CURLE_OUT_OF_MEMORY;
		int res = RES_FAIL;
		char scratch_rv[NVS_K8S_RV_LEN], scratch_c[8];
		if (is_stopping()) {
			res = RES_STOP;
		} else if (r == CURLE_OK && x.status == 200 && !x.not_json) {
			int n = nvs_k8s_list_end(x.list, new_rv, sizeof new_rv, cont, sizeof cont,
						 &skipped);
			x.list = NULL;
			if (n < 0) {
				NVS_WARN("k8s: LIST: the response is not a PodList");
			} else {
				total += (unsigned)n;
				pages++;
				if (!cont[0])
					kq_add(&q, KM_RESYNC_END, NULL);
				kq_post(&q);
				res = RES_OK;
			}
		} else if (x.status == 410) {
			NVS_INFO("k8s: LIST continuation expired (410): listing again");
			watch_event("relisting", "continue-410");
			res = RES_RELIST;
		} else {
			if (x.not_json)
				NVS_WARN("k8s: LIST: the response is not JSON");
			else
				log_failure("LIST", r, &x);
			res = x.status == 401 ? RES_AUTH : RES_FAIL;
		}
		if (x.list)
			nvs_k8s_list_end(x.list, scratch_rv, sizeof scratch_rv, scratch_c,
					 sizeof scratch_c, NULL);
		kq_free(&q);
		free(x.body);
		if (res != RES_OK)
			return res;
		if (!cont[0])
			break;
	}
	memcpy(rv, new_rv, sizeof rv);
	need_list = 0;
	NVS_INFO("k8s: LIST: %u pod(s) on node %s%s, resourceVersion %s", total,
		 nvs_k8s_cfg.node_name, skipped ? " (some without a usable uid skipped)" : "", rv);
	{
		char rq[2 * sizeof rv];
		nvs_event("k8s_list", "\"pods\":%u,\"skipped\":%d,\"resource_version\":%s", total,
			  skipped ? 1 : 0, nvs_json_str(rv, rq, sizeof rq));
	}
	return RES_OK;
}

static int do_watch(uint64_t *lasted_ns, unsigned long *nevents)
{
	set_state("watching");
	char *erv = curl_easy_escape(NULL, rv, 0);
	if (!erv)
		return RES_FAIL;
	char url[sizeof base_url + sizeof node_q + sizeof rv * 3 + 128];
	snprintf(url, sizeof url,
		 "%s/api/v1/pods?fieldSelector=%s&watch=1&resourceVersion=%s"
		 "&allowWatchBookmarks=true&timeoutSeconds=%d",
		 base_url, node_q, erv, WATCH_TIMEOUT_S);
	curl_free(erv);
	NVS_DEBUG("k8s: WATCH from resourceVersion %s", rv);
	struct xfer x;
	memset(&x, 0, sizeof x);
	x.watch = 1;
	x.bmax = ERRBODY_MAX;
	nvs_k8s_lines_init(&x.lines, LINE_MAX_BYTES);
	uint64_t t0 = mono_ns();
	CURLcode r = get(&x, url);
	*lasted_ns = mono_ns() - t0;
	*nevents = x.nevents;
	kq_post(&x.out);
	if (x.lines.dropped)
		NVS_WARN("k8s: %lu watch event(s) over %u bytes dropped", x.lines.dropped,
			 LINE_MAX_BYTES);
	nvs_k8s_lines_free(&x.lines);
	int res;
	if (is_stopping()) {
		res = RES_STOP;
	} else if (x.relist || x.status == 410) {
		if (x.status == 410) {
			NVS_INFO("k8s: WATCH: 410 Gone (resourceVersion %s too old): re-listing",
				 rv);
			watch_event("relisting", "http-410");
		}
		res = RES_RELIST;
	} else if (x.status == 401) {
		log_failure("WATCH", r, &x);
		res = RES_AUTH;
	} else if (x.status == 200 && r == CURLE_OK && !x.error_event) {
		NVS_INFO("k8s: watch ended after %.1f s, %lu event(s): watching again from %s",
			 (double)*lasted_ns / 1e9, x.nevents, rv);
		res = RES_OK;
	} else {
		if (x.error_event)
			NVS_WARN("k8s: watch ended by an ERROR event");
		else
			log_failure("WATCH", r, &x);
		res = RES_FAIL;
	}
	free(x.body);
	return res;
}

/* Sleeps ms unless stopped; returns 1 when stopping. */
static int nap(uint64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&mu);
	while (!stopping && pthread_cond_timedwait(&cv, &mu, &ts) != ETIMEDOUT)
		;
	int s = stopping;
	pthread_mutex_unlock(&mu);
	return s;
}

/* Exponential back-off, capped, with jitter in [b/2, b]. */
static int back_off(void)
{
	backoff_ms = backoff_ms ? backoff_ms * 2 : BACKOFF_FIRST_MS;
	if (backoff_ms > BACKOFF_MAX_MS)
		backoff_ms = BACKOFF_MAX_MS;
	uint64_t d = backoff_ms / 2 + (uint64_t)random() % (backoff_ms / 2 + 1);
	set_state("backoff");
	NVS_INFO("k8s: retrying in %llu ms", (unsigned long long)d);
	nvs_event("k8s_watch", "\"state\":\"backoff\",\"reason\":\"retry\",\"delay_ms\":%llu",
		  (unsigned long long)d);
	return nap(d);
}

static void *run(void *arg)
{
	srandom((unsigned)mono_ns() ^ (unsigned)getpid());
	/* Background work: reading a LIST of thousands of big Pods takes
	 * seconds of CPU, which must not come out of the loop's (clients wait
	 * for their lock there). Nice 10 for this thread only. */
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), 10))
		NVS_DEBUG("k8s: watch thread keeps its priority: %s", strerror(errno));
	int auth_retried = 0;
	while (!is_stopping()) {
		if (mono_ns() - token_read_ns >= (uint64_t)TOKEN_REREAD_S * 1000000000ull)
			read_token();
		int res;
		uint64_t lasted = 0;
		unsigned long nev = 0;
		int was_watch = !need_list;
		if (need_list)
			res = do_list();
		else
			res = do_watch(&lasted, &nev);
		if (res == RES_STOP)
			break;
		if (res != RES_AUTH)
			auth_retried = 0;
		switch (res) {
		case RES_OK:
			/* A watch that ends at once with nothing is a failure in
			 * disguise: do not spin on it. */
			if (was_watch && !nev && lasted < 1000000000ull) {
				if (back_off())
					goto out;
			} else {
				backoff_ms = 0;
			}
			break;
		case RES_RELIST:
			need_list = 1;
			backoff_ms = 0;
			break;
		case RES_AUTH:
			/* 401: the token may have been rotated. Retry at once
			 * if it changed, else back off (and re-read next time). */
			if (read_token() == 1 && !auth_retried) {
				auth_retried = 1;
				break;
			}
			token_read_ns = 0;
			if (back_off())
				goto out;
			break;
		default:
			/* A stream that delivered events was healthy: start
			 * the back-off afresh. */
			if (nev || lasted >= 5000000000ull)
				backoff_ms = 0;
			if (back_off())
				goto out;
			break;
		}
	}
out:
	set_state("off");
	return NULL;
}

void nvs_k8s_stop(void)
{
	if (!started)
		return;
	pthread_mutex_lock(&mu);
	__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(thr, NULL);
	started = 0;
	kq_free(&queue);
	while (cache) {
		struct nvs_k8s_cached_pod *n = cache->next;
		free(cache);
		cache = n;
	}
	ncache = 0;
	nvs_loop_remove(efd);
	close(efd);
	efd = -1;
	curl_global_cleanup();
}

/* ---- loop side: the Pod cache ---- */

unsigned nvs_k8s_npods(void)
{
	return ncache;
}

const struct nvs_k8s_cached_pod *nvs_k8s_pod_lookup(const char *cgroup_uid)
{
	for (struct nvs_k8s_cached_pod *p = cache; p; p = p->next)
		if (!strcmp(p->uid, cgroup_uid) || (p->mirror[0] && !strcmp(p->mirror, cgroup_uid)))
			return p;
	return NULL;
}

const struct nvs_k8s_cached_pod *nvs_k8s_pod_by_name(const char *ns, const char *name)
{
	for (struct nvs_k8s_cached_pod *p = cache; p; p = p->next)
		if (!strcmp(p->ns, ns) && !strcmp(p->name, name))
			return p;
	return NULL;
}

void nvs_k8s_foreach_pod(void (*fn)(const struct nvs_k8s_cached_pod *p, void *arg), void *arg)
{
	for (struct nvs_k8s_cached_pod *p = cache; p; p = p->next)
		fn(p, arg);
}

static struct nvs_k8s_cached_pod *find(const char *uid)
{
	for (struct nvs_k8s_cached_pod *p = cache; p; p = p->next)
		if (!strcmp(p->uid, uid))
			return p;
	return NULL;
}

static void unlink_pod(struct nvs_k8s_cached_pod *e)
{
	struct nvs_k8s_cached_pod **pp = &cache;
	while (*pp && *pp != e)
		pp = &(*pp)->next;
	if (*pp) {
		*pp = e->next;
		ncache--;
	}
	free(e);
}

/* One annotation of a new Pod version: merge, and log a bad value once. */
static void merge(struct nvs_k8s_cached_pod *e, enum nvs_pod_ann id, const struct nvs_k8s_limit *l)
{
	const char *ann = nvs_pod_annotations[id].key, *expected = nvs_pod_annotations[id].expected;
	int *has = &e->ann[id].has;
	uint64_t *v = &e->ann[id].v;
	char *bad = e->ann[id].bad;
	size_t badcap = sizeof e->ann[id].bad;
	if (l->state == NVS_ANN_INVALID) {
		if (strcmp(bad, l->raw)) {
			snprintf(bad, badcap, "%s", l->raw);
			char b[32] = "none";
			if (*has)
				snprintf(b, sizeof b, "%llu", (unsigned long long)*v);
			NVS_WARN("pod %s/%s: ignoring invalid annotation %s=\"%s\" (expected %s); "
				 "keeping %s",
				 e->ns, e->name, ann, l->raw, expected, b);
			/* Pod fields are the Pod author's: escaped. */
			char nsq[2 * sizeof e->ns], nq[2 * sizeof e->name], vq[2 * sizeof l->raw];
			nvs_event("pod_annotation_invalid",
				  "\"namespace\":%s,\"pod\":%s,\"key\":\"%s\",\"value\":%s,"
				  "\"keeping\":%s",
				  nvs_json_str(e->ns, nsq, sizeof nsq),
				  nvs_json_str(e->name, nq, sizeof nq), ann,
				  nvs_json_str(l->raw, vq, sizeof vq), *has ? b : "null");
		}
		return;
	}
	bad[0] = '\0';
	nvs_k8s_merge_limit(l, has, v);
}

static void upsert(const struct kmsg *m)
{
	const struct nvs_k8s_pod *p = &m->pod;
	struct nvs_k8s_cached_pod *e = find(p->uid);
	int fresh = !e;
	if (!e) {
		e = calloc(1, sizeof *e);
		if (!e)
			return;
		memcpy(e->uid, p->uid, sizeof e->uid);
		e->next = cache;
		cache = e;
		ncache++;
	}
	snprintf(e->mirror, sizeof e->mirror, "%s", p->mirror);
	snprintf(e->name, sizeof e->name, "%s", p->name);
	snprintf(e->ns, sizeof e->ns, "%s", p->ns);
	struct nvs_k8s_ann_in_force oc = e->ann[NVS_POD_ANN_CORE], om = e->ann[NVS_POD_ANN_MEM];
	uint64_t orq = e->mem_request;
	/* The spec's request: the API server keeps it immutable, and the
	 * tenant's processes cannot change it (unlike their environment). */
	e->mem_request = p->mem_units * nvs_k8s_cfg.mem_unit;
	for (unsigned i = 0; i < NVS_POD_ANN_N; i++)
		merge(e, i, &p->ann[i]);
	e->mark = 1;
	const struct nvs_k8s_ann_in_force *c = &e->ann[NVS_POD_ANN_CORE],
					  *mem = &e->ann[NVS_POD_ANN_MEM];
	if (fresh || oc.has != c->has || om.has != mem->has || oc.v != c->v || om.v != mem->v ||
	    orq != e->mem_request)
		NVS_DEBUG("k8s: pod %s/%s uid %s: core %llu mem %llu request %llu (%.1f ms after "
			  "receipt)",
			  e->ns, e->name, e->uid, c->has ? (unsigned long long)c->v : 0ull,
			  mem->has ? (unsigned long long)mem->v : 0ull,
			  (unsigned long long)e->mem_request, (double)(mono_ns() - m->t_ns) / 1e6);
	if (on_changed)
		on_changed(e);
}

/* pod_deleted: a Pod left the cache (its fields are escaped). */
static void pod_event(const struct nvs_k8s_cached_pod *e, const char *reason)
{
	char nsq[2 * sizeof e->ns], nq[2 * sizeof e->name], uq[2 * sizeof e->uid];
	nvs_event("pod_deleted", "\"namespace\":%s,\"pod\":%s,\"uid\":%s,\"reason\":\"%s\"",
		  nvs_json_str(e->ns, nsq, sizeof nsq), nvs_json_str(e->name, nq, sizeof nq),
		  nvs_json_str(e->uid, uq, sizeof uq), reason);
}

static void remove_pod(struct nvs_k8s_cached_pod *e)
{
	if (on_removed)
		on_removed(e);
	unlink_pod(e);
}

void nvs_k8s_on_event(void)
{
	uint64_t v;
	while (read(efd, &v, sizeof v) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&mu);
	struct kmsg *m = queue.head;
	queue.head = queue.tail = NULL;
	pthread_mutex_unlock(&mu);
	while (m) {
		struct kmsg *next = m->next;
		struct nvs_k8s_cached_pod *e;
		switch (m->kind) {
		case KM_UPSERT:
			upsert(m);
			break;
		case KM_DELETE:
			if ((e = find(m->pod.uid))) {
				pod_event(e, "deleted");
				remove_pod(e);
			}
			break;
		case KM_RESYNC_BEGIN:
			for (e = cache; e; e = e->next)
				e->mark = 0;
			break;
		case KM_RESYNC_END:
			for (e = cache; e;) {
				struct nvs_k8s_cached_pod *n = e->next;
				if (!e->mark) {
					NVS_INFO("k8s: pod %s/%s is gone (not in the new LIST)",
						 e->ns, e->name);
					pod_event(e, "not-listed");
					remove_pod(e);
				}
				e = n;
			}
			break;
		}
		free(m);
		m = next;
	}
}

/* The eventfd is readable (loop.h): apply what the thread queued. */
static void on_queue(void *ctx, uint32_t events)
{
	nvs_k8s_on_event();
}
