#include "unmanaged.h"

#include "events.h"
#include "k8s/k8s_watch.h"
#include "log.h"
#include "loop.h"
#include "peer.h"
#include "nvml_api.h"
#include "parse.h"
#include "k8s/pod_identity.h"
#include "policy.h"
#include "state.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Rows of settings.def: their defaults are the table's. */
struct nvs_unmanaged_config nvs_unmanaged_cfg;

static const char *const policy_names[] = {"report", "serialize"};

/* ---- NVML ---- */

/* The newest process query the driver has: _v3 and _v2 fill the 24-byte
 * nvmlProcessInfo_v2_t, the original the 16-byte v1 layout. */
static nvs_pfn_nvmlDeviceGetComputeRunningProcesses_v3 list_v2;
static nvs_pfn_nvmlDeviceGetComputeRunningProcesses list_v1;
static nvs_pfn_nvmlDeviceGetHandleByUUID by_uuid;
static int enabled;
static nvmlDevice_t dev_cache[NVS_MAX_GPUS];

/* ---- the table of processes seen ---- */

struct um_proc {
	int used_slot;
	int pid;
	int gpu;
	int confirmed; /* seen without a connection for the confirm time */
	uint64_t first_ns, gen;
	uint64_t mem; /* usedGpuMemory; 0 when NVML does not know */
	/* Identity, read once when first seen: from the process (its cgroup,
	 * /proc owner), never from anything it says. */
	long uid; /* -1 unknown */
	char pod_uid[NVS_POD_UID_LEN], pod_name[NVS_K8S_NAME_LEN], pod_ns[NVS_K8S_NS_LEN];
};

static struct um_proc tab[NVS_UNMANAGED_MAX_TRACKED];
static uint64_t gen, next_check_ns;
static uint64_t checks; /* detection passes completed (the status's "checks") */
/* Processes beyond the table, per GPU (counted, not remembered). */
static unsigned untracked[NVS_MAX_GPUS];
static int table_full_logged, too_many_logged[NVS_MAX_GPUS];
static int query_failed_logged[NVS_MAX_GPUS];

static struct um_proc *find(int pid, int gpu)
{
	for (unsigned i = 0; i < NVS_UNMANAGED_MAX_TRACKED; i++)
		if (tab[i].used_slot && tab[i].pid == pid && tab[i].gpu == gpu)
			return &tab[i];
	return NULL;
}

static void identify(struct um_proc *e)
{
	e->uid = -1;
	char path[sizeof nvs_proc_root + 16];
	snprintf(path, sizeof path, "%s/%d", nvs_proc_root, e->pid);
	struct stat st;
	if (stat(path, &st) == 0)
		e->uid = (long)st.st_uid;
	if (nvs_peer_pod_uid_of_pid((pid_t)e->pid, e->pod_uid, sizeof e->pod_uid))
		e->pod_uid[0] = '\0';
}

static struct um_proc *add(int pid, int gpu, uint64_t now)
{
	for (unsigned i = 0; i < NVS_UNMANAGED_MAX_TRACKED; i++) {
		struct um_proc *e = &tab[i];
		if (e->used_slot)
			continue;
		memset(e, 0, sizeof *e);
		e->used_slot = 1;
		e->pid = pid;
		e->gpu = gpu;
		e->first_ns = now;
		identify(e);
		return e;
	}
	return NULL;
}

/* "pod ns/name (uid U)", "pod uid U" or "uid N" / "uid unknown". */
static const char *who(const struct um_proc *e, char *buf, size_t cap)
{
	if (e->pod_uid[0] && e->pod_name[0])
		snprintf(buf, cap, "pod %s/%s (pod uid %s)", e->pod_ns, e->pod_name, e->pod_uid);
	else if (e->pod_uid[0])
		snprintf(buf, cap, "pod uid %s (not known to the Pod watch)", e->pod_uid);
	else if (e->uid >= 0)
		snprintf(buf, cap, "uid %ld, no Pod", e->uid);
	else
		snprintf(buf, cap, "uid unknown (no %s/%d)", nvs_proc_root, e->pid);
	return buf;
}

/* A connected nvshare client (HELLO sent) with this host pid: the pid
 * comes from SO_PEERCRED at connect, never from HELLO. */
static int is_client(int pid)
{
	for (const struct client *cl = S.clients; cl; cl = cl->next)
		if ((int)cl->pid == pid)
			return 1;
	return 0;
}

static nvmlDevice_t handle(const struct gpu *g)
{
	unsigned k = (unsigned)g->index;
	if (!dev_cache[k] && by_uuid(g->uuid, &dev_cache[k]) != NVML_SUCCESS)
		dev_cache[k] = NULL;
	return dev_cache[k];
}

/* Lists g's compute processes into pids/mem. Returns the count, or -1
 * (logged once per GPU) when the list is unavailable this time. */
static int list_procs(struct gpu *g, int *pids, uint64_t *mem)
{
	nvmlDevice_t d = handle(g);
	if (!d)
		return -1;
	unsigned n = NVS_UNMANAGED_MAX_PROCS;
	nvmlReturn_t r;
	if (list_v2) {
		static nvmlProcessInfo_v2_t buf[NVS_UNMANAGED_MAX_PROCS];
		r = list_v2(d, &n, buf);
		for (unsigned i = 0; r == NVML_SUCCESS && i < n; i++) {
			pids[i] = (int)buf[i].pid;
			mem[i] = buf[i].usedGpuMemory;
		}
	} else {
		static nvmlProcessInfo_v1_t buf[NVS_UNMANAGED_MAX_PROCS];
		r = list_v1(d, &n, buf);
		for (unsigned i = 0; r == NVML_SUCCESS && i < n; i++) {
			pids[i] = (int)buf[i].pid;
			mem[i] = buf[i].usedGpuMemory;
		}
	}
	unsigned k = (unsigned)g->index;
	if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
		if (!too_many_logged[k])
			NVS_WARN(
			    "unmanaged: GPU %d has more than %u compute processes: not checked "
			    "until it has fewer",
			    g->index, NVS_UNMANAGED_MAX_PROCS);
		too_many_logged[k] = 1;
		return -1;
	}
	too_many_logged[k] = 0;
	if (r != NVML_SUCCESS) {
		if (!query_failed_logged[k])
			NVS_WARN("unmanaged: GPU %d: listing compute processes failed (NVML %d): "
				 "retrying every check",
				 g->index, r);
		query_failed_logged[k] = 1;
		return -1;
	}
	query_failed_logged[k] = 0;
	return (int)(n > NVS_UNMANAGED_MAX_PROCS ? NVS_UNMANAGED_MAX_PROCS : n);
}

static unsigned logged_this_check, not_logged_this_check;

/* The Pod watch may have learned the Pod since the process was first
 * seen: its name and namespace come from there. */
static void refresh_pod(struct um_proc *e)
{
	if (!e->pod_uid[0] || e->pod_name[0])
		return;
	const struct nvs_k8s_cached_pod *p = nvs_k8s_pod_lookup(e->pod_uid);
	if (p) {
		snprintf(e->pod_name, sizeof e->pod_name, "%s", p->name);
		snprintf(e->pod_ns, sizeof e->pod_ns, "%s", p->ns);
	}
}

/* JSON for the events: null when not known. */
static const char *opt_str(const char *v, char *buf, size_t cap)
{
	if (!v[0]) {
		snprintf(buf, cap, "null");
		return buf;
	}
	return nvs_json_str(v, buf, cap);
}

static const char *opt_long(long v, char *buf, size_t cap)
{
	if (v < 0)
		snprintf(buf, cap, "null");
	else
		snprintf(buf, cap, "%ld", v);
	return buf;
}

static void log_new(struct um_proc *e, const struct gpu *g)
{
	refresh_pod(e);
	if (logged_this_check >= NVS_UNMANAGED_LOG_PER_CHECK) {
		not_logged_this_check++;
		return;
	}
	logged_this_check++;
	char w[400], m[32], pu[sizeof e->pod_uid + 8], pn[2 * sizeof e->pod_name + 8],
	    ns[2 * sizeof e->pod_ns + 8], uid[24];
	nvs_event("unmanaged_found",
		  "\"gpu\":%d,\"pid\":%d,\"uid\":%s,\"pod_uid\":%s,\"namespace\":%s,\"pod\":%s,"
		  "\"used\":%llu",
		  g->index, e->pid, opt_long(e->uid, uid, sizeof uid),
		  opt_str(e->pod_uid, pu, sizeof pu), opt_str(e->pod_ns, ns, sizeof ns),
		  opt_str(e->pod_name, pn, sizeof pn), (unsigned long long)e->mem);
	NVS_WARN("unmanaged process on GPU %d: pid %d, %s, using %s: it has a GPU context "
		 "without an nvshare connection, so it is neither gated nor limited (policy "
		 "%s; nothing is killed)",
		 g->index, e->pid, who(e, w, sizeof w), nvs_format_size(e->mem, m, sizeof m),
		 policy_names[nvs_unmanaged_cfg.policy]);
}

/* Applies the policy's view of g's unmanaged processes to the scheduler. */
static void apply(struct gpu *g, unsigned count, uint64_t mem)
{
	int serialize = nvs_unmanaged_cfg.policy == NVS_UNMANAGED_SERIALIZE;
	int force = serialize && count > 0;
	uint64_t pinned = serialize ? mem : 0;
	if (g->unmanaged && !count)
		NVS_INFO("GPU %d: no unmanaged process left%s", g->index,
			 g->unmanaged_force ? ": no longer serialized for them" : "");
	g->unmanaged = count;
	if (force == g->unmanaged_force && pinned == g->unmanaged_pinned)
		return;
	if (force && !g->unmanaged_force) {
		char b[32];
		NVS_INFO("GPU %d: %u unmanaged process(es): serializing it "
			 "(NVSHARE_UNMANAGED=serialize), %s kept out of its capacity",
			 g->index, count, nvs_format_size(pinned, b, sizeof b));
	}
	if (force != g->unmanaged_force)
		nvs_event("unmanaged_serialize",
			  "\"gpu\":%d,\"serialized\":%d,\"count\":%u,\"pinned\":%llu", g->index,
			  force, count, (unsigned long long)pinned);
	g->unmanaged_force = force;
	g->unmanaged_pinned = pinned;
	nvs_policy_settings_changed(g);
}

/* Returns the earliest time a process seen but not yet confirmed can be
 * confirmed (0: none): the next check comes no later, so a process is
 * reported within interval + NVS_UNMANAGED_CONFIRM_MS of appearing. */
static uint64_t check(uint64_t now)
{
	uint64_t confirm_at = 0;
	gen++;
	logged_this_check = not_logged_this_check = 0;
	static int pids[NVS_UNMANAGED_MAX_PROCS];
	static uint64_t mem[NVS_UNMANAGED_MAX_PROCS];
	for (unsigned gi = 0; gi < S.ngpus; gi++) {
		struct gpu *g = &S.gpus[gi];
		if (!g->from_nvml)
			continue;
		int n = list_procs(g, pids, mem);
		if (n < 0) {
			/* Unknown this time: keep what was known. */
			for (unsigned i = 0; i < NVS_UNMANAGED_MAX_TRACKED; i++)
				if (tab[i].used_slot && tab[i].gpu == g->index)
					tab[i].gen = gen;
			continue;
		}
		unsigned count = 0, extra = 0;
		uint64_t sum = 0;
		for (int i = 0; i < n; i++) {
			if (pids[i] <= 0 || is_client(pids[i]))
				continue;
			/* NVML_VALUE_NOT_AVAILABLE (all ones): unknown, 0. */
			uint64_t used = mem[i] == ~0ull ? 0 : mem[i];
			struct um_proc *e = find(pids[i], g->index);
			if (!e)
				e = add(pids[i], g->index, now);
			if (!e) {
				/* Table full: counted, never logged one by one. */
				extra++;
				sum += used;
				continue;
			}
			e->gen = gen;
			e->mem = used;
			if (!e->confirmed &&
			    now - e->first_ns >= NVS_UNMANAGED_CONFIRM_MS * 1000000ull) {
				e->confirmed = 1;
				log_new(e, g);
			}
			if (e->confirmed) {
				count++;
				sum += used;
			} else {
				uint64_t t = e->first_ns + NVS_UNMANAGED_CONFIRM_MS * 1000000ull;
				if (!confirm_at || t < confirm_at)
					confirm_at = t;
			}
		}
		if (extra && !table_full_logged)
			NVS_WARN("unmanaged: more than %u processes tracked: GPU %d's further %u "
				 "unmanaged process(es) are counted but not logged one by one",
				 NVS_UNMANAGED_MAX_TRACKED, g->index, extra);
		table_full_logged = extra != 0 || table_full_logged;
		untracked[g->index] = extra;
		apply(g, count + extra, sum);
	}
	if (not_logged_this_check)
		NVS_WARN(
		    "unmanaged: %u more new unmanaged process(es) this check, not logged one by "
		    "one (see the status)",
		    not_logged_this_check);
	/* Processes gone from their GPU (exited, or now connected). */
	unsigned tracked = 0, left_logged = 0;
	for (unsigned i = 0; i < NVS_UNMANAGED_MAX_TRACKED; i++) {
		struct um_proc *e = &tab[i];
		if (!e->used_slot)
			continue;
		if (e->gen == gen) {
			tracked++;
			continue;
		}
		if (e->confirmed && left_logged++ < NVS_UNMANAGED_LOG_PER_CHECK) {
			NVS_INFO("unmanaged process pid %d left GPU %d (exited or connected)",
				 e->pid, e->gpu);
			nvs_event("unmanaged_gone", "\"gpu\":%d,\"pid\":%d", e->gpu, e->pid);
		}
		e->used_slot = 0;
	}
	if (left_logged > NVS_UNMANAGED_LOG_PER_CHECK)
		NVS_INFO("unmanaged: %u more unmanaged process(es) left their GPU this check",
			 left_logged - NVS_UNMANAGED_LOG_PER_CHECK);
	if (tracked < NVS_UNMANAGED_MAX_TRACKED / 2)
		table_full_logged = 0;
	checks++;
	return confirm_at;
}

static void run_check(uint64_t now)
{
	uint64_t confirm_at = check(now);
	next_check_ns = now + nvs_unmanaged_cfg.interval_ms * 1000000ull;
	if (confirm_at && confirm_at < next_check_ns)
		next_check_ns = confirm_at;
}

/* unmanaged_detection: on or off at start, and why (docs/events.md). */
static void detection_event(const char *state, const char *reason)
{
	nvs_event("unmanaged_detection",
		  "\"state\":\"%s\",\"reason\":\"%s\",\"interval_ms\":%u,\"policy\":\"%s\"", state,
		  reason, nvs_unmanaged_cfg.interval_ms, policy_names[nvs_unmanaged_cfg.policy]);
}

/* The loop's timer, registered once detection is on. */
static void unmanaged_tick(uint64_t now)
{
	if (now >= next_check_ns)
		run_check(now);
}

static uint64_t unmanaged_next_deadline(uint64_t now)
{
	return next_check_ns;
}

void nvs_unmanaged_start(void)
{
	const struct nvs_unmanaged_config *uc = &nvs_unmanaged_cfg;
	if (!uc->interval_ms) {
		NVS_INFO("unmanaged-process detection off (NVSHARE_UNMANAGED_INTERVAL_MS=0)");
		detection_event("off", "disabled");
		return;
	}
	void *h = S.nvml_ok ? dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL) : NULL;
	if (h) {
		list_v2 = (nvs_pfn_nvmlDeviceGetComputeRunningProcesses_v3)dlsym(
		    h, "nvmlDeviceGetComputeRunningProcesses_v3");
		if (!list_v2)
			list_v2 = (nvs_pfn_nvmlDeviceGetComputeRunningProcesses_v3)dlsym(
			    h, "nvmlDeviceGetComputeRunningProcesses_v2");
		list_v1 = (nvs_pfn_nvmlDeviceGetComputeRunningProcesses)dlsym(
		    h, "nvmlDeviceGetComputeRunningProcesses");
		by_uuid = (nvs_pfn_nvmlDeviceGetHandleByUUID)dlsym(h, "nvmlDeviceGetHandleByUUID");
	}
	if (!h || (!list_v2 && !list_v1) || !by_uuid) {
		NVS_WARN("unmanaged-process detection off: %s (policy %s has no effect)",
			 S.nvml_ok ? "NVML lacks the process query" : "no NVML",
			 policy_names[uc->policy]);
		detection_event("off", S.nvml_ok ? "no-process-query" : "no-nvml");
		return;
	}
	enabled = 1;
	NVS_INFO("unmanaged-process detection: every %u ms, policy %s", uc->interval_ms,
		 policy_names[uc->policy]);
	detection_event("on", "started");
	run_check(nvs_now_ns());
	nvs_loop_timer(NVS_LOOP_OBSERVE, unmanaged_tick, unmanaged_next_deadline);
}

/* ---- status ---- */

cJSON *nvs_unmanaged_json(uint64_t now)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "policy", policy_names[nvs_unmanaged_cfg.policy]);
	cJSON_AddBoolToObject(o, "detection", enabled);
	cJSON_AddNumberToObject(o, "interval_ms", nvs_unmanaged_cfg.interval_ms);
	cJSON_AddNumberToObject(o, "checks", (double)checks);
	cJSON *gs = cJSON_AddArrayToObject(o, "gpus");
	for (unsigned i = 0; i < S.ngpus; i++) {
		const struct gpu *g = &S.gpus[i];
		cJSON *x = cJSON_CreateObject();
		cJSON_AddNumberToObject(x, "gpu", g->index);
		cJSON_AddNumberToObject(x, "count", g->unmanaged);
		cJSON_AddNumberToObject(x, "untracked", untracked[i]);
		cJSON_AddNumberToObject(x, "pinned_memory", (double)g->unmanaged_pinned);
		cJSON_AddBoolToObject(x, "serialized_for_them", g->unmanaged_force);
		cJSON_AddItemToArray(gs, x);
	}
	cJSON *ps = cJSON_AddArrayToObject(o, "processes");
	for (unsigned i = 0; i < NVS_UNMANAGED_MAX_TRACKED; i++) {
		struct um_proc *e = &tab[i];
		if (!e->used_slot || !e->confirmed)
			continue;
		refresh_pod(e);
		cJSON *x = cJSON_CreateObject();
		cJSON_AddNumberToObject(x, "gpu", e->gpu);
		cJSON_AddNumberToObject(x, "pid", e->pid);
		if (e->uid >= 0)
			cJSON_AddNumberToObject(x, "uid", (double)e->uid);
		else
			cJSON_AddNullToObject(x, "uid");
		if (e->pod_uid[0]) {
			cJSON *p = cJSON_AddObjectToObject(x, "pod");
			cJSON_AddStringToObject(p, "uid", e->pod_uid);
			cJSON_AddStringToObject(p, "name", e->pod_name);
			cJSON_AddStringToObject(p, "namespace", e->pod_ns);
		} else {
			cJSON_AddNullToObject(x, "pod");
		}
		cJSON_AddNumberToObject(x, "used_memory", (double)e->mem);
		cJSON_AddNumberToObject(x, "seen_ns", (double)(now - e->first_ns));
		cJSON_AddItemToArray(ps, x);
	}
	return o;
}
