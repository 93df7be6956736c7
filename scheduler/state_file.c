/*
 * The state file (state_file.h): run-time settings kept across restarts.
 *
 * Format (docs/scheduler.md), version 1; only what nvsharectl set appears:
 *   {"version":1, "written":"2026-01-01T00:00:00Z",
 *    "all":  {"mode":"on", "tq_ms":500, "capacity":"1073741824",
 *             "idle_release_ms":20},
 *    "gpus": [{"uuid":"GPU-...", "mode":"off", "tq_ms":..., "capacity":"..."}],
 *    "pods": [{"uid":"...", "core_limit":50, "mem_limit":"134217728"}],
 *    "configured": {"mode":"auto", "tq":"30000", "capacity":"auto",
 *                   "idle-release-ms":"20"}}
 * Byte values are decimal strings (exact beyond 2^53); "mem_limit": null
 * is "no limit" set explicitly; an absent key is "not set". "configured"
 * holds, by setting name, the configured value (exact text, settings.h)
 * when the file was written: a saved value whose configured value changed
 * since is dropped at start. Older files without it are restored as they
 * are (logged).
 */
#include "clock.h"
#include "state_file.h"

#include "clients.h"
#include "events.h"
#include "log.h"
#include "parse.h"
#include "core/policy.h"
#include "settings.h"
#include "core/state.h"

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

/* The run-time settings the file keeps: their CTL_SET field, their key in
 * the file (version 1's names) and how the value is written. */
static const struct fkey {
	uint32_t field;
	const char *key;
	enum { V_NUM, V_MODE, V_BYTES } enc;
} fkeys[] = {
    {NVS_CTL_MODE, "mode", V_MODE},
    {NVS_CTL_TQ_MS, "tq_ms", V_NUM},
    {NVS_CTL_CAPACITY, "capacity", V_BYTES},
    {NVS_CTL_IDLE_RELEASE_MS, "idle_release_ms", V_NUM},
};
#define NF (sizeof fkeys / sizeof fkeys[0])

struct gset { /* has[i] 0: fkeys[i] not set */
	int has[NF];
	uint64_t v[NF];
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

char nvs_state_path[512] = NVS_DEFAULT_STATE_FILE;
static struct gset all;
static struct gentry gpus[NVS_MAX_GPUS];
static unsigned ngpus;
static struct pentry *pods;
static unsigned npods, pods_cap;
static uint64_t pod_seq;
static int write_failed; /* log a failure once, and the recovery */
/* The file's record of the configuration (by fkeys index). */
static char rec[NF][128];
static int has_rec[NF];

static int fkey_of(uint32_t field)
{
	for (unsigned i = 0; i < NF; i++)
		if (fkeys[i].field == field)
			return (int)i;
	return -1;
}

static int setting_of(unsigned i)
{
	return nvs_setting_by_ctl(fkeys[i].field);
}

/* ---- the directory ---- */

/* The file's directory ("." for a bare name) and its last component. */
static const char *split(char *dir, size_t cap)
{
	snprintf(dir, cap, "%s", nvs_state_path);
	char *slash = strrchr(dir, '/');
	if (!slash) {
		snprintf(dir, cap, ".");
		return nvs_state_path;
	}
	const char *base = nvs_state_path + (slash - dir) + 1;
	if (slash == dir)
		slash[1] = '\0'; /* "/state.json": the root */
	else
		*slash = '\0';
	return base;
}

/* Opens the directory and checks that nobody but the scheduler's user
 * (or root) can change what is in it: otherwise another user could plant
 * the file, or its temporary file, and own what the scheduler writes.
 * Returns a descriptor; -1 with errno when it cannot be opened; -2 with
 * why when it is not safe. */
static int open_dir(const char *dir, char *why, size_t cap)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	uid_t me = geteuid();
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (st.st_uid != me && st.st_uid != 0)
		snprintf(
		    why, cap,
		    "its directory %s is owned by uid %u, not by the scheduler's user (uid %u) "
		    "or root",
		    dir, (unsigned)st.st_uid, (unsigned)me);
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		snprintf(why, cap, "its directory %s is writable by %s (mode %04o)", dir,
			 (st.st_mode & S_IWOTH) ? "others" : "its group",
			 (unsigned)(st.st_mode & 07777));
	else
		return fd;
	close(fd);
	return -2;
}

/* What to do about an unsafe directory, after the reason. */
#define UNSAFE_HINT                                                                                \
	"refusing to read or write the state file (anyone who can write there could plant "        \
	"it or its temporary file); make the directory owned by root (or the scheduler's user) "   \
	"and not writable by group or others (chmod 0755), or choose another --state-file / "      \
	"NVSHARE_STATE_FILE"

/* ---- reading ---- */

static int get_u64(const cJSON *j, uint64_t *v)
{
	if (cJSON_IsNumber(j) && j->valuedouble >= 0 && j->valuedouble <= 9007199254740992.0 &&
	    j->valuedouble == (double)(uint64_t)j->valuedouble) {
		*v = (uint64_t)j->valuedouble;
		return 0;
	}
	if (!cJSON_IsString(j) || !*j->valuestring || *j->valuestring == '-')
		return -1;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(j->valuestring, &end, 10);
	if (errno || *end)
		return -1;
	*v = x;
	return 0;
}

/* Why a file is ignored: the log's words and the event's reason. */
struct why {
	const char *text, *code;
};
#define WHY(t, c) ((struct why){(t), (c)})
static char why_buf[400];

/* One settings object, each value checked as nvsharectl's would be
 * (settings.h): a value out of range makes the file corrupt. */
static int read_gset(const cJSON *o, struct gset *s, int all_gpus, const char *where)
{
	memset(s, 0, sizeof *s);
	if (!cJSON_IsObject(o)) {
		snprintf(why_buf, sizeof why_buf, "%s is not an object", where);
		return -1;
	}
	for (unsigned i = 0; i < NF; i++) {
		const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, fkeys[i].key);
		int id = setting_of(i);
		uint64_t v = 0;
		if (!j)
			continue;
		if (fkeys[i].enc == V_MODE) {
			int m = cJSON_IsString(j) ? nvs_mode_parse(j->valuestring) : -1;
			if (m < 0) {
				snprintf(why_buf, sizeof why_buf,
					 "%s: \"%s\" is not on, off or auto", where, fkeys[i].key);
				return -1;
			}
			v = (uint64_t)m;
		} else if (get_u64(j, &v)) {
			snprintf(why_buf, sizeof why_buf, "%s: \"%s\" is not a number", where,
				 fkeys[i].key);
			return -1;
		}
		char w[300];
		if (!all_gpus && !(nvs_setting_flags(id) & SF_GPU)) {
			snprintf(why_buf, sizeof why_buf, "%s: %s is one setting for all GPUs",
				 where, nvs_setting_name(id));
			return -1;
		}
		/* As nvsharectl's value would be. GPUs are not known yet:
		 * nvs_state_apply_gpu checks a capacity against each one. */
		if (nvs_setting_check(id, v, -1, w, sizeof w)) {
			snprintf(why_buf, sizeof why_buf, "%s: %s", where, w);
			return -1;
		}
		s->has[i] = 1;
		s->v[i] = v;
	}
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
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "core_limit");
	if (c && (get_u64(c, &core) || core > 100))
		return -1;
	p->core = (uint32_t)core;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "mem_limit");
	if (cJSON_IsNull(m)) {
		p->has_mem = 1;
		p->mem = NVS_NO_LIMIT;
	} else if (m) {
		if (get_u64(m, &p->mem) || !p->mem)
			return -1;
		p->has_mem = 1;
	}
	return 0;
}

static void read_record(const cJSON *j)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "configured");
	for (unsigned i = 0; i < NF; i++) {
		const cJSON *v =
		    cJSON_GetObjectItemCaseSensitive(c, nvs_setting_name(setting_of(i)));
		has_rec[i] = cJSON_IsString(v);
		if (has_rec[i])
			snprintf(rec[i], sizeof rec[i], "%s", v->valuestring);
	}
}

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
	if ((ga && !cJSON_IsArray(ga)) || (pa && !cJSON_IsArray(pa))) {
		why = WHY("bad \"gpus\" or \"pods\"", "bad-settings");
		goto out;
	}
	if (a && read_gset(a, &all, 1, "\"all\"")) {
		why = WHY(why_buf, "bad-settings");
		goto out;
	}
	const cJSON *e;
	cJSON_ArrayForEach(e, ga)
	{
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(e, "uuid");
		if (ngpus >= NVS_MAX_GPUS || !cJSON_IsString(u) || !*u->valuestring ||
		    strlen(u->valuestring) >= NVS_UUID_LEN) {
			why = WHY("bad GPU entry", "bad-gpu-entry");
			goto out;
		}
		if (read_gset(e, &gpus[ngpus].s, 0, "a GPU entry")) {
			why = WHY(why_buf, "bad-gpu-entry");
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
	read_record(j);
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

static unsigned count_all(void)
{
	unsigned n = 0;
	for (unsigned i = 0; i < NF; i++)
		n += (unsigned)all.has[i];
	return n;
}

/* state_loaded: what the start made of the file (docs/events.md). */
static void loaded_event(const char *result, const char *reason, int moved, unsigned dropped)
{
	char p[2 * sizeof nvs_state_path + 8], r[40];
	if (reason)
		snprintf(r, sizeof r, "\"%s\"", reason);
	else
		snprintf(r, sizeof r, "null");
	nvs_event("state_loaded",
		  "\"path\":%s,\"result\":\"%s\",\"reason\":%s,\"moved\":%d,\"settings\":%u,"
		  "\"gpus\":%u,\"pods\":%u,\"dropped\":%u",
		  nvs_json_str(nvs_state_path, p, sizeof p), result, r, moved, count_all(), ngpus,
		  npods, dropped);
}

static void set_aside(int dfd, const char *base, struct why why)
{
	char bad[sizeof nvs_state_path + 8];
	snprintf(bad, sizeof bad, "%s.bad", base);
	int moved = renameat(dfd, base, dfd, bad) == 0;
	NVS_ERROR("state file %s: %s: ignored, starting from the configuration%s%s%s",
		  nvs_state_path, why.text, moved ? "; moved to " : "", moved ? nvs_state_path : "",
		  moved ? ".bad" : "");
	loaded_event("ignored", why.code, moved, 0);
}

static void save(void);

/* Saved values of settings whose configuration changed since they were
 * saved are dropped: the newer word (a changed flag, variable or
 * default) wins over the older run-time change. Returns how many. */
static unsigned drop_outdated(void)
{
	unsigned dropped = 0;
	for (unsigned i = 0; i < NF; i++) {
		int id = setting_of(i), saved = all.has[i];
		for (unsigned g = 0; g < ngpus; g++)
			saved |= gpus[g].s.has[i];
		char now[128], org[80], was[64];
		nvs_setting_configured_text(id, 1, now, sizeof now);
		if (!saved || !has_rec[i] || !strcmp(rec[i], now))
			continue;
		nvs_setting_configured_text(id, 0, now, sizeof now);
		if (all.has[i])
			nvs_setting_format(id, all.v[i], was, sizeof was);
		else
			snprintf(was, sizeof was, "set for some GPUs");
		NVS_WARN("state file %s: %s %s was set at run time (nvsharectl) against another "
			 "configuration; the configuration now says %s (%s) and wins: the saved "
			 "value is dropped",
			 nvs_state_path, nvs_setting_name(id), was, now,
			 nvs_setting_origin(id, org, sizeof org));
		all.has[i] = 0;
		for (unsigned g = 0; g < ngpus; g++)
			gpus[g].s.has[i] = 0;
		dropped++;
	}
	return dropped;
}

void nvs_state_file_load(void)
{
	if (!*nvs_state_path) {
		NVS_INFO(
		    "state file off (NVSHARE_STATE_FILE=none): run-time settings are not kept");
		loaded_event("off", NULL, 0, 0);
		return;
	}
	char dir[sizeof nvs_state_path], why_dir[320];
	const char *base = split(dir, sizeof dir);
	int dfd = open_dir(dir, why_dir, sizeof why_dir);
	if (dfd == -2) {
		NVS_ERROR("state file %s: %s: %s", nvs_state_path, why_dir, UNSAFE_HINT);
		loaded_event("refused", "unsafe-directory", 0, 0);
		return;
	}
	/* Non-blocking and no symbolic link: a FIFO (or a device) planted at
	 * the path must not hang the start; fstat then refuses it. */
	int fd = dfd < 0
		     ? -1
		     : openat(dfd, base, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT) {
			NVS_INFO(
			    "state file %s does not exist yet: starting from the configuration",
			    nvs_state_path);
			loaded_event("absent", NULL, 0, 0);
		} else if (e == ELOOP && dfd >= 0) {
			set_aside(dfd, base, WHY("a symbolic link", "not-a-file"));
		} else {
			NVS_ERROR("state file %s: %s: ignored, starting from the configuration",
				  nvs_state_path, strerror(e));
			loaded_event("ignored", "unreadable", 0, 0);
		}
		if (dfd >= 0)
			close(dfd);
		return;
	}
	struct stat st;
	char *text = NULL;
	struct why why = WHY(NULL, NULL);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		why = WHY("not a regular file", "not-a-file");
	} else if (st.st_uid != geteuid()) {
		snprintf(why_buf, sizeof why_buf, "owned by uid %u, not by the scheduler's (%u)",
			 (unsigned)st.st_uid, (unsigned)geteuid());
		why = WHY(why_buf, "foreign-owner");
	} else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why_buf, sizeof why_buf, "writable by group or others (mode %04o)",
			 (unsigned)(st.st_mode & 07777));
		why = WHY(why_buf, "unsafe-mode");
	} else if (st.st_size > MAX_FILE) {
		why = WHY("larger than 4 MiB", "too-large");
	} else if (!(text = calloc(1, (size_t)st.st_size + 1))) {
		why = WHY("out of memory", "out-of-memory");
	} else if (read(fd, text, (size_t)st.st_size) != st.st_size) {
		why = WHY("short read", "short-read");
	}
	close(fd);
	if (!why.text)
		why = parse(text);
	free(text);
	if (why.text) {
		set_aside(dfd, base, why);
		close(dfd);
		return;
	}
	close(dfd);
	unsigned dropped = drop_outdated();
	for (unsigned i = 0; i < NF; i++) {
		if (!all.has[i])
			continue;
		int id = setting_of(i);
		char was[64], conf[128], org[80];
		nvs_setting_configured_text(id, 0, conf, sizeof conf);
		nvs_setting_apply(id, all.v[i]);
		nvs_setting_note(id, -1, NVS_SRC_SAVED);
		nvs_setting_format(id, all.v[i], was, sizeof was);
		if (nvs_setting_changed(id))
			NVS_WARN(
			    "state file %s: %s %s restored over the configured %s (%s): it was "
			    "set with nvsharectl before the restart%s; nvsharectl --reset %s "
			    "returns to the configuration",
			    nvs_state_path, nvs_setting_name(id), was, conf,
			    nvs_setting_origin(id, org, sizeof org),
			    has_rec[i] ? ""
				       : " (the file does not say against which configuration)",
			    nvs_setting_name(id));
		else
			NVS_INFO("state file %s: %s %s restored (as configured)", nvs_state_path,
				 nvs_setting_name(id), was);
	}
	for (unsigned i = 0; i < npods && i < 16; i++) {
		char m[32] = "not set";
		if (pods[i].has_mem && pods[i].mem == NVS_NO_LIMIT)
			snprintf(m, sizeof m, "none");
		else if (pods[i].has_mem)
			nvs_format_size(pods[i].mem, m, sizeof m);
		NVS_INFO("state file %s: Pod %s: core limit %u%% (0: not set), memory limit %s "
			 "restored for its clients",
			 nvs_state_path, pods[i].uid, pods[i].core, m);
	}
	if (npods > 16)
		NVS_INFO("state file %s: ... and %u more Pods' limits", nvs_state_path, npods - 16);
	NVS_INFO("state file %s: restored %u settings for all GPUs, %u GPU entries, %u Pod "
		 "entries; %u dropped (nvsharectl --settings shows where each setting comes from)",
		 nvs_state_path, count_all(), ngpus, npods, dropped);
	loaded_event("restored", NULL, 0, dropped);
	if (dropped)
		save();
}

/* The value of field i for GPU g now (for the logs). */
static void gpu_value(const struct gpu *g, unsigned i, char *b, size_t cap)
{
	int id = setting_of(i);
	uint64_t v = fkeys[i].field == NVS_CTL_MODE	  ? g->mode
		     : fkeys[i].field == NVS_CTL_TQ_MS	  ? g->tq_ms
		     : fkeys[i].field == NVS_CTL_CAPACITY ? g->capacity_override
							  : 0;
	nvs_setting_format(id, v, b, cap);
}

void nvs_state_apply_gpu(struct gpu *g)
{
	int changed = 0;
	char why[320], a[64], b[64];
	struct gentry *e = NULL;
	for (unsigned k = 0; k < ngpus && !e; k++)
		if (!strcmp(gpus[k].uuid, g->uuid))
			e = &gpus[k];
	for (unsigned i = 0; e && i < NF; i++) {
		if (!e->s.has[i])
			continue;
		int id = setting_of(i);
		uint64_t v = e->s.v[i];
		if (fkeys[i].field == NVS_CTL_CAPACITY &&
		    nvs_capacity_check(g, v, why, sizeof why)) {
			NVS_ERROR(
			    "state file %s: GPU %d (%s): %s: the saved capacity is not restored",
			    nvs_state_path, g->index, g->uuid, why);
			e->s.has[i] = 0;
			changed = 1;
			continue;
		}
		gpu_value(g, i, a, sizeof a);
		if (fkeys[i].field == NVS_CTL_MODE)
			g->mode = (unsigned)v;
		else if (fkeys[i].field == NVS_CTL_TQ_MS)
			g->tq_ms = v;
		else if (fkeys[i].field == NVS_CTL_CAPACITY)
			g->capacity_override = v;
		nvs_setting_note(id, g->index, NVS_SRC_SAVED);
		gpu_value(g, i, b, sizeof b);
		NVS_WARN("GPU %d (%s): %s %s restored from the state file (set with nvsharectl -g "
			 "before the restart; %s for all GPUs)",
			 g->index, g->uuid, nvs_setting_name(id), b, a);
	}
	/* A capacity saved for all GPUs that this one cannot hold: not
	 * restored for any GPU (each gets its configured capacity back). */
	int ci = fkey_of(NVS_CTL_CAPACITY);
	if (ci >= 0 && all.has[ci] && !(e && e->s.has[ci]) &&
	    nvs_capacity_check(g, g->capacity_override, why, sizeof why)) {
		NVS_ERROR("state file %s: %s: the capacity saved for all GPUs is not restored; "
			  "the configured capacity applies",
			  nvs_state_path, why);
		all.has[ci] = 0;
		nvs_setting_reset(NVS_SET_CAPACITY);
		for (unsigned j = 0; j < S.ngpus; j++) {
			struct gpu *o = &S.gpus[j];
			const struct gentry *oe = NULL;
			for (unsigned k = 0; k < ngpus && !oe; k++)
				if (!strcmp(gpus[k].uuid, o->uuid))
					oe = &gpus[k];
			if (oe && oe->s.has[ci])
				continue;
			o->capacity_override =
			    S.cfg.capacity[j] ? S.cfg.capacity[j] : S.cfg.capacity_all;
			if (o != g)
				nvs_policy_settings_changed(o, nvs_now_ns());
		}
		changed = 1;
	}
	if (changed)
		save();
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
	for (unsigned i = 0; o && i < NF; i++) {
		if (!s->has[i])
			continue;
		if (fkeys[i].enc == V_MODE)
			cJSON_AddStringToObject(o, fkeys[i].key, nvs_mode_name((unsigned)s->v[i]));
		else if (fkeys[i].enc == V_BYTES)
			add_bytes(o, fkeys[i].key, s->v[i]);
		else
			cJSON_AddNumberToObject(o, fkeys[i].key, (double)s->v[i]);
	}
	return o;
}

static char *render(void)
{
	cJSON *j = cJSON_CreateObject(), *ga = cJSON_CreateArray(), *pa = cJSON_CreateArray();
	cJSON *rc = cJSON_CreateObject();
	char *s = NULL;
	if (!j || !ga || !pa || !rc) {
		cJSON_Delete(ga);
		cJSON_Delete(pa);
		cJSON_Delete(rc);
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
	cJSON_AddItemToObject(j, "configured", rc);
	for (unsigned i = 0; i < NF; i++) {
		char t[128];
		nvs_setting_configured_text(setting_of(i), 1, t, sizeof t);
		cJSON_AddStringToObject(rc, nvs_setting_name(setting_of(i)), t);
	}
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
static void make_parent(const char *dir)
{
	char d[sizeof nvs_state_path];
	snprintf(d, sizeof d, "%s", dir);
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

/* The temporary file, created by this call and nobody else: O_EXCL and
 * O_NOFOLLOW (a planted file or link is never written through). In a
 * checked directory a leftover one is this scheduler's, from a crash. */
static int create_tmp(int dfd, const char *tmp)
{
	for (int tries = 0; tries < 2; tries++) {
		int fd =
		    openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			/* Its owner and mode whatever the umask and setgid bits. */
			if (fchown(fd, geteuid(), getegid()) < 0 || fchmod(fd, 0600) < 0) {
				int e = errno;
				close(fd);
				unlinkat(dfd, tmp, 0);
				errno = e;
				return -1;
			}
			return fd;
		}
		if (errno != EEXIST || unlinkat(dfd, tmp, 0) < 0)
			return -1;
	}
	errno = EEXIST;
	return -1;
}

/* 0; -1 with errno and the failed step; -2 with why (unsafe directory). */
static int write_file(const char *text, const char **step, char *why, size_t cap)
{
	char dir[sizeof nvs_state_path], tmp[sizeof nvs_state_path + 8];
	const char *base = split(dir, sizeof dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", base);
	*step = "open the directory";
	int dfd = open_dir(dir, why, cap);
	if (dfd == -1 && errno == ENOENT) {
		make_parent(dir);
		dfd = open_dir(dir, why, cap);
	}
	if (dfd < 0)
		return dfd;
	*step = "create";
	int fd = create_tmp(dfd, tmp), e = 0;
	size_t len = strlen(text), off = 0;
	if (fd < 0)
		goto fail;
	*step = "write";
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			goto fail_unlink;
		off += (size_t)w;
	}
	*step = "fsync";
	if (fsync(fd) < 0)
		goto fail_unlink;
	close(fd);
	fd = -1;
	*step = "rename";
	if (renameat(dfd, tmp, dfd, base) < 0)
		goto fail_unlink;
	/* The rename itself is durable once the directory is. */
	fsync(dfd);
	close(dfd);
	return 0;
fail_unlink:
	e = errno;
	if (fd >= 0)
		close(fd);
	unlinkat(dfd, tmp, 0);
	errno = e;
fail:
	e = errno;
	close(dfd);
	errno = e;
	return -1;
}

static void save(void)
{
	if (!*nvs_state_path)
		return;
	char *text = render();
	const char *step = "render";
	char why[320] = "";
	int r = text ? write_file(text, &step, why, sizeof why) : -1;
	int e = text ? errno : ENOMEM;
	free(text);
	if (r < 0 && !write_failed) {
		if (r == -2)
			NVS_ERROR("state file %s: %s: %s; run-time settings will not survive a "
				  "restart (checked again on the next change)",
				  nvs_state_path, why, UNSAFE_HINT);
		else
			NVS_ERROR("state file %s: %s failed: %s: run-time settings will not "
				  "survive a restart (will retry on the next change)",
				  nvs_state_path, step, strerror(e));
		write_failed = 1;
	} else if (r == 0 && write_failed) {
		NVS_INFO("state file %s written again", nvs_state_path);
		write_failed = 0;
	}
}

static void gset_note(struct gset *s, uint32_t field, uint64_t value)
{
	int i = fkey_of(field);
	if (i < 0)
		return;
	s->has[i] = 1;
	s->v[i] = value;
}

static struct gentry *gpu_entry(int gpu, int create)
{
	const struct gpu *g = &S.gpus[gpu];
	unsigned i = 0;
	while (i < ngpus && strcmp(gpus[i].uuid, g->uuid))
		i++;
	if (i < ngpus)
		return &gpus[i];
	if (!create || ngpus >= NVS_MAX_GPUS)
		return NULL;
	memset(&gpus[i], 0, sizeof gpus[i]);
	snprintf(gpus[i].uuid, sizeof gpus[i].uuid, "%s", g->uuid);
	ngpus++;
	return &gpus[i];
}

void nvs_state_note_set(int gpu, uint32_t field, uint64_t value)
{
	if (gpu < 0) {
		gset_note(&all, field, value);
		/* A setting for all GPUs replaces the per-GPU ones, as it
		 * does in memory (control.c). */
		int i = fkey_of(field);
		for (unsigned k = 0; i >= 0 && k < ngpus; k++)
			gpus[k].s.has[i] = 0;
	} else {
		struct gentry *e = gpu_entry(gpu, 1);
		if (!e)
			return;
		gset_note(&e->s, field, value);
	}
	save();
}

void nvs_state_note_reset(int gpu, uint32_t field)
{
	int i = fkey_of(field);
	if (i < 0)
		return;
	if (gpu < 0) {
		all.has[i] = 0;
		for (unsigned k = 0; k < ngpus; k++)
			gpus[k].s.has[i] = 0;
	} else {
		struct gentry *e = gpu_entry(gpu, 0);
		if (e)
			e->s.has[i] = 0;
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
