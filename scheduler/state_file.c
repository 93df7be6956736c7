/*
 * The state file (state_file.h): run-time settings kept across restarts.
 *
 * Format (docs/scheduler.md), version 1; only what nvsharectl set appears:
 *   {"version":1, "written":"2026-01-01T00:00:00Z",
 *    "all":  {"mode":"on", "tq_ms":500, "capacity":"1073741824",
 *             "idle_release_ms":20},
 *    "gpus": [{"uuid":"GPU-...", "mode":"off", "tq_ms":..., "capacity":"..."}],
 *    "pods": [{"uid":"...", "core_limit":50, "mem_limit":"134217728"}]}
 * Byte values are decimal strings (exact beyond 2^53); "mem_limit": null
 * is "no limit" set explicitly; an absent key is "not set".
 */
#include "state_file.h"

#include "clients.h"
#include "events.h"
#include "log.h"
#include "parse.h"
#include "policy.h"
#include "settings.h"
#include "state.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILE (4u << 20)

struct gset { /* settings; has_* 0: not set */
	int has_mode, has_tq, has_cap, has_idle;
	unsigned mode;
	uint64_t tq_ms, capacity;
	uint32_t idle_release_ms;
};

struct gentry {
	char uuid[NVS_UUID_LEN];
	struct gset s;
};

struct pentry {
	char uid[NVS_POD_UID_LEN];
	uint32_t core; /* 0: not set */
	int has_mem;
	uint64_t mem; /* NVS_NO_LIMIT: none, set explicitly */
	uint64_t seq; /* last set: the oldest goes first when full */
};

static char path[512] = NVS_DEFAULT_STATE_FILE;
static struct gset all;
static struct gentry gpus[NVS_MAX_GPUS];
static unsigned ngpus;
static struct pentry *pods;
static unsigned npods, pods_cap;
static uint64_t pod_seq;
static int write_failed; /* log a failure once, and the recovery */

int nvs_state_file_set_path(const char *p)
{
	if (!strcmp(p, "none"))
		p = "";
	if (strlen(p) >= sizeof path - 8) /* room for ".tmp" / ".bad" */
		return -1;
	snprintf(path, sizeof path, "%s", p);
	return 0;
}

const char *nvs_state_file_path(void)
{
	return path;
}

/* ---- reading ---- */

static int get_u64(const cJSON *o, const char *k, uint64_t *v, int *has)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!j)
		return 0;
	if (cJSON_IsNumber(j) && j->valuedouble >= 0 && j->valuedouble <= 9007199254740992.0 &&
	    j->valuedouble == (double)(uint64_t)j->valuedouble) {
		*v = (uint64_t)j->valuedouble;
	} else if (cJSON_IsString(j)) {
		char *end;
		errno = 0;
		if (!*j->valuestring || *j->valuestring == '-')
			return -1;
		unsigned long long x = strtoull(j->valuestring, &end, 10);
		if (errno || *end)
			return -1;
		*v = x;
	} else {
		return -1;
	}
	*has = 1;
	return 0;
}

/* One settings object; the same ranges as CTL_SET (control.c). */
static int read_gset(const cJSON *o, struct gset *s, int all_gpus)
{
	memset(s, 0, sizeof *s);
	if (!cJSON_IsObject(o))
		return -1;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "mode");
	if (m) {
		int v = cJSON_IsString(m) ? nvs_mode_parse(m->valuestring) : -1;
		if (v < 0)
			return -1;
		s->mode = (unsigned)v;
		s->has_mode = 1;
	}
	if (get_u64(o, "tq_ms", &s->tq_ms, &s->has_tq) ||
	    (s->has_tq && (s->tq_ms < NVS_MIN_TQ_MS || s->tq_ms > NVS_MAX_TQ_MS)))
		return -1;
	if (get_u64(o, "capacity", &s->capacity, &s->has_cap))
		return -1;
	uint64_t idle = 0;
	if (get_u64(o, "idle_release_ms", &idle, &s->has_idle) || idle > UINT32_MAX ||
	    (s->has_idle && !all_gpus))
		return -1;
	s->idle_release_ms = (uint32_t)idle;
	return 0;
}

static int read_pod(const cJSON *o, struct pentry *p)
{
	memset(p, 0, sizeof *p);
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "uid");
	if (!cJSON_IsObject(o) || !cJSON_IsString(u) || !*u->valuestring ||
	    strlen(u->valuestring) >= sizeof p->uid)
		return -1;
	snprintf(p->uid, sizeof p->uid, "%s", u->valuestring);
	uint64_t core = 0;
	int has = 0;
	if (get_u64(o, "core_limit", &core, &has) || core > 100)
		return -1;
	p->core = (uint32_t)core;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "mem_limit");
	if (cJSON_IsNull(m)) {
		p->has_mem = 1;
		p->mem = NVS_NO_LIMIT;
	} else if (get_u64(o, "mem_limit", &p->mem, &p->has_mem) || (p->has_mem && !p->mem)) {
		return -1;
	}
	return 0;
}

/* Why a file is ignored: the log's words and the event's reason. */
struct why {
	const char *text, *code;
};
#define WHY(t, c) ((struct why){(t), (c)})

/* Parses the whole file into the tables; on any error leaves them empty
 * and returns a reason (text NULL: none). */
static struct why parse(const char *text)
{
	cJSON *j = cJSON_Parse(text);
	if (!j)
		return WHY("not valid JSON", "bad-json");
	struct why why = WHY(NULL, NULL);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "version");
	const cJSON *ga = cJSON_GetObjectItemCaseSensitive(j, "gpus");
	const cJSON *pa = cJSON_GetObjectItemCaseSensitive(j, "pods");
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "all");
	if (!cJSON_IsObject(j) || !cJSON_IsNumber(v)) {
		why = WHY("no \"version\"", "no-version");
		goto out;
	}
	if (v->valuedouble != NVS_STATE_FILE_VERSION) {
		why = WHY("unknown version (this scheduler reads version 1)", "unknown-version");
		goto out;
	}
	if ((a && read_gset(a, &all, 1)) || (ga && !cJSON_IsArray(ga)) ||
	    (pa && !cJSON_IsArray(pa))) {
		why = WHY("bad \"all\", \"gpus\" or \"pods\"", "bad-settings");
		goto out;
	}
	const cJSON *e;
	cJSON_ArrayForEach(e, ga)
	{
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(e, "uuid");
		if (ngpus >= NVS_MAX_GPUS || !cJSON_IsString(u) || !*u->valuestring ||
		    strlen(u->valuestring) >= NVS_UUID_LEN || read_gset(e, &gpus[ngpus].s, 0)) {
			why = WHY("bad GPU entry", "bad-gpu-entry");
			goto out;
		}
		snprintf(gpus[ngpus].uuid, NVS_UUID_LEN, "%s", u->valuestring);
		ngpus++;
	}
	int n = pa ? cJSON_GetArraySize(pa) : 0;
	if (n > NVS_STATE_MAX_PODS) {
		why = WHY("too many Pod entries", "too-many-pods");
		goto out;
	}
	if (n) {
		pods = calloc((size_t)n, sizeof *pods);
		if (!pods) {
			why = WHY("out of memory", "out-of-memory");
			goto out;
		}
		pods_cap = (unsigned)n;
	}
	cJSON_ArrayForEach(e, pa)
	{
		if (read_pod(e, &pods[npods])) {
			why = WHY("bad Pod entry", "bad-pod-entry");
			goto out;
		}
		pods[npods].seq = ++pod_seq;
		npods++;
	}
out:
	cJSON_Delete(j);
	if (why.text) {
		memset(&all, 0, sizeof all);
		ngpus = npods = pods_cap = 0;
		free(pods);
		pods = NULL;
	}
	return why;
}

/* state_loaded: what the start made of the file (docs/events.md). */
static void loaded_event(const char *result, const char *reason, int moved)
{
	char p[2 * sizeof path + 8], r[40];
	if (reason)
		snprintf(r, sizeof r, "\"%s\"", reason);
	else
		snprintf(r, sizeof r, "null");
	unsigned settings = (unsigned)(all.has_mode + all.has_tq + all.has_cap + all.has_idle);
	nvs_event("state_loaded",
		  "\"path\":%s,\"result\":\"%s\",\"reason\":%s,\"moved\":%d,\"settings\":%u,"
		  "\"gpus\":%u,\"pods\":%u",
		  nvs_json_str(path, p, sizeof p), result, r, moved, settings, ngpus, npods);
}

static void set_aside(struct why why)
{
	char bad[sizeof path + 8];
	snprintf(bad, sizeof bad, "%s.bad", path);
	int moved = rename(path, bad) == 0;
	NVS_ERROR("state file %s: %s: ignored, starting from the configuration%s%s", path, why.text,
		  moved ? "; moved to " : "", moved ? bad : "");
	loaded_event("ignored", why.code, moved);
}

void nvs_state_file_load(void)
{
	if (!*path) {
		NVS_INFO(
		    "state file off (NVSHARE_STATE_FILE=none): run-time settings are not kept");
		loaded_event("off", NULL, 0);
		return;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT) {
			NVS_INFO(
			    "state file %s does not exist yet: starting from the configuration",
			    path);
			loaded_event("absent", NULL, 0);
		} else {
			NVS_ERROR("state file %s: %s: ignored, starting from the configuration",
				  path, strerror(errno));
			loaded_event("ignored", "unreadable", 0);
		}
		return;
	}
	struct stat st;
	char *text = NULL;
	struct why why = WHY(NULL, NULL);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		why = WHY("not a regular file", "not-a-file");
	else if (st.st_size > MAX_FILE)
		why = WHY("larger than 4 MiB", "too-large");
	else if (!(text = calloc(1, (size_t)st.st_size + 1)))
		why = WHY("out of memory", "out-of-memory");
	else if (read(fd, text, (size_t)st.st_size) != st.st_size)
		why = WHY("short read", "short-read");
	close(fd);
	if (!why.text)
		why = parse(text);
	free(text);
	if (why.text) {
		set_aside(why);
		return;
	}
	if (all.has_mode)
		S.cfg.mode = all.mode;
	if (all.has_tq)
		S.cfg.tq_ms = all.tq_ms;
	if (all.has_cap) {
		S.cfg.capacity_all = all.capacity;
		memset(S.cfg.capacity, 0, sizeof S.cfg.capacity);
	}
	if (all.has_idle)
		S.cfg.idle_release_ms = all.idle_release_ms;
	NVS_INFO("state file %s: restored run-time settings over the configuration: mode %s, tq "
		 "%" PRIu64 " ms, capacity %s, idle release %u ms; %u GPU entries, %u Pod "
		 "entries (delete the file to start from the configuration alone)",
		 path, nvs_mode_name(S.cfg.mode), S.cfg.tq_ms,
		 all.has_cap ? "set" : "as configured", S.cfg.idle_release_ms, ngpus, npods);
	loaded_event("restored", NULL, 0);
}

void nvs_state_apply_gpu(struct gpu *g)
{
	for (unsigned i = 0; i < ngpus; i++) {
		if (strcmp(gpus[i].uuid, g->uuid))
			continue;
		const struct gset *s = &gpus[i].s;
		if (s->has_mode)
			g->mode = s->mode;
		if (s->has_tq)
			g->tq_ms = s->tq_ms;
		if (s->has_cap)
			g->capacity_override = s->capacity;
		NVS_INFO("GPU %d: settings restored from the state file", g->index);
		return;
	}
}

static struct pentry *pod_find(const char *uid)
{
	for (unsigned i = 0; i < npods; i++)
		if (!strcmp(pods[i].uid, uid))
			return &pods[i];
	return NULL;
}

void nvs_state_apply_client(struct client *cl)
{
	if (cl->tenant != NVS_TENANT_POD || !cl->pod_uid[0])
		return;
	const struct pentry *p = pod_find(cl->pod_uid);
	if (!p)
		return;
	if (p->core)
		cl->core_override = p->core;
	if (p->has_mem) {
		cl->has_mem_override = 1;
		cl->mem_override = p->mem;
	}
}

/* ---- writing ---- */

static void add_bytes(cJSON *o, const char *k, uint64_t v)
{
	char b[24];
	snprintf(b, sizeof b, "%" PRIu64, v);
	cJSON_AddStringToObject(o, k, b);
}

static cJSON *gset_json(const struct gset *s)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	if (s->has_mode)
		cJSON_AddStringToObject(o, "mode", nvs_mode_name(s->mode));
	if (s->has_tq)
		cJSON_AddNumberToObject(o, "tq_ms", (double)s->tq_ms);
	if (s->has_cap)
		add_bytes(o, "capacity", s->capacity);
	if (s->has_idle)
		cJSON_AddNumberToObject(o, "idle_release_ms", s->idle_release_ms);
	return o;
}

static char *render(void)
{
	cJSON *j = cJSON_CreateObject(), *ga = cJSON_CreateArray(), *pa = cJSON_CreateArray();
	char *s = NULL;
	if (!j || !ga || !pa) {
		cJSON_Delete(ga);
		cJSON_Delete(pa);
		goto out;
	}
	cJSON_AddNumberToObject(j, "version", NVS_STATE_FILE_VERSION);
	char ts[32];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
	cJSON_AddStringToObject(j, "written", ts);
	cJSON_AddItemToObject(j, "all", gset_json(&all));
	cJSON_AddItemToObject(j, "gpus", ga);
	cJSON_AddItemToObject(j, "pods", pa);
	for (unsigned i = 0; i < ngpus; i++) {
		cJSON *o = gset_json(&gpus[i].s);
		if (!o)
			goto out;
		cJSON_AddStringToObject(o, "uuid", gpus[i].uuid);
		cJSON_AddItemToArray(ga, o);
	}
	for (unsigned i = 0; i < npods; i++) {
		cJSON *o = cJSON_CreateObject();
		if (!o)
			goto out;
		cJSON_AddStringToObject(o, "uid", pods[i].uid);
		if (pods[i].core)
			cJSON_AddNumberToObject(o, "core_limit", pods[i].core);
		if (pods[i].has_mem && pods[i].mem == NVS_NO_LIMIT)
			cJSON_AddNullToObject(o, "mem_limit");
		else if (pods[i].has_mem)
			add_bytes(o, "mem_limit", pods[i].mem);
		cJSON_AddItemToArray(pa, o);
	}
	s = cJSON_Print(j);
out:
	cJSON_Delete(j);
	return s;
}

/* mkdir -p of the file's directory (0755 parents, as /var/lib). */
static void make_parent(void)
{
	char d[sizeof path];
	snprintf(d, sizeof d, "%s", path);
	char *slash = strrchr(d, '/');
	if (!slash || slash == d)
		return;
	*slash = '\0';
	for (char *p = d + 1;; p++) {
		if (*p != '/' && *p)
			continue;
		char c = *p;
		*p = '\0';
		mkdir(d, 0755);
		*p = c;
		if (!c)
			break;
	}
}

static int write_file(const char *text, const char **step)
{
	char tmp[sizeof path + 8];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	make_parent();
	*step = "create";
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	size_t len = strlen(text), off = 0;
	*step = "write";
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			unlink(tmp);
			return -1;
		}
		off += (size_t)w;
	}
	*step = "fsync";
	if (fsync(fd) < 0) {
		int e = errno;
		close(fd);
		unlink(tmp);
		errno = e;
		return -1;
	}
	close(fd);
	*step = "rename";
	if (rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		errno = e;
		return -1;
	}
	/* The rename itself is durable once the directory is. */
	char d[sizeof path];
	snprintf(d, sizeof d, "%s", path);
	char *slash = strrchr(d, '/');
	if (slash) {
		*(slash == d ? slash + 1 : slash) = '\0';
		int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
	return 0;
}

static void save(void)
{
	if (!*path)
		return;
	char *text = render();
	const char *step = "render";
	int r = text ? write_file(text, &step) : -1;
	if (!text)
		errno = ENOMEM;
	free(text);
	if (r < 0 && !write_failed) {
		NVS_ERROR("state file %s: %s failed: %s: run-time settings will not survive a "
			  "restart (will retry on the next change)",
			  path, step, strerror(errno));
		write_failed = 1;
	} else if (r == 0 && write_failed) {
		NVS_INFO("state file %s written again", path);
		write_failed = 0;
	}
}

static void gset_note(struct gset *s, uint32_t field, uint64_t value)
{
	switch (field) {
	case NVS_CTL_MODE:
		s->has_mode = 1;
		s->mode = (unsigned)value;
		break;
	case NVS_CTL_TQ_MS:
		s->has_tq = 1;
		s->tq_ms = value;
		break;
	case NVS_CTL_CAPACITY:
		s->has_cap = 1;
		s->capacity = value;
		break;
	case NVS_CTL_IDLE_RELEASE_MS:
		s->has_idle = 1;
		s->idle_release_ms = (uint32_t)value;
		break;
	}
}

void nvs_state_note_set(int gpu, uint32_t field, uint64_t value)
{
	if (gpu < 0) {
		gset_note(&all, field, value);
		/* A setting for all GPUs replaces the per-GPU ones, as it
		 * does in memory (control.c). */
		for (unsigned i = 0; i < ngpus; i++)
			gset_note(&gpus[i].s, field, value);
	} else {
		const struct gpu *g = &S.gpus[gpu];
		unsigned i = 0;
		while (i < ngpus && strcmp(gpus[i].uuid, g->uuid))
			i++;
		if (i == ngpus) {
			if (ngpus >= NVS_MAX_GPUS)
				return;
			memset(&gpus[i], 0, sizeof gpus[i]);
			snprintf(gpus[i].uuid, sizeof gpus[i].uuid, "%s", g->uuid);
			ngpus++;
		}
		gset_note(&gpus[i].s, field, value);
	}
	save();
}

void nvs_state_note_pod(const struct client *cl)
{
	if (cl->tenant != NVS_TENANT_POD || !cl->pod_uid[0])
		return;
	struct pentry *p = pod_find(cl->pod_uid);
	if (!p) {
		if (npods >= NVS_STATE_MAX_PODS) {
			unsigned old = 0;
			for (unsigned i = 1; i < npods; i++)
				if (pods[i].seq < pods[old].seq)
					old = i;
			NVS_WARN("state file: %u Pods with limits kept: forgetting Pod %s's",
				 NVS_STATE_MAX_PODS, pods[old].uid);
			pods[old] = pods[--npods];
		}
		if (npods == pods_cap) {
			struct pentry *n = realloc(pods, (pods_cap + 64) * sizeof *pods);
			if (!n) {
				NVS_ERROR("state file: out of memory: Pod %s's limits not kept",
					  cl->pod_uid);
				return;
			}
			pods = n;
			pods_cap += 64;
		}
		p = &pods[npods++];
		memset(p, 0, sizeof *p);
		snprintf(p->uid, sizeof p->uid, "%s", cl->pod_uid);
	}
	p->core = cl->core_override;
	p->has_mem = cl->has_mem_override;
	p->mem = cl->mem_override;
	p->seq = ++pod_seq;
	if (!p->core && !p->has_mem)
		*p = pods[--npods]; /* nothing left to keep */
	save();
}
