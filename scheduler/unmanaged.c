#include "unmanaged.h"

#include "clock.h"
#include "events.h"
#include "k8s/k8s_watch.h"
#include "log.h"
#include "loop.h"
#include "peer.h"
#include "nvml_api.h"
#include "parse.h"
#include "k8s/pod_identity.h"
#include "core/policy.h"
#include "core/bounds.h"
#include "gpus.h"
#include "core/state.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Rows of settings.def: their defaults are the table's. */
struct nvs_unmanaged_config nvs_unmanaged_cfg;

static const char *const policy_names[] = {"report", "serialize"};

/* ---- NVML ---- */

/* The newest process query the driver has: _v3 and _v2 fill the 24-byte
 * nvmlProcessInfo_v2_t, the original the 16-byte v1 layout. */
static struct nvs_unmanaged_nvml nv;
static int enabled;
static nvmlDevice_t dev_cache[NVS_MAX_GPUS];
/* NVML has listed a client's pid at least once: pids match (the host PID
 * namespace, a driver that lists processes), so a client NVML does not
 * list has no context. Until then no conclusion is drawn from absence. */
static int pids_match;
static uint64_t fresh_ns[NVS_MAX_GPUS]; /* the last look outside a pass */

/* ---- the table of processes seen ---- */

struct um_proc {
	int used_slot;
	int pid;
	int gpu;
	int confirmed;	    /* counted: seen so for the confirm time, or its owner is */
	int managed_now;    /* became managed (left the table that way, not exited) */
	const char *reason; /* no-connection, not-attached, ungated */
	uint64_t first_ns, gen;
	uint64_t mem; /* usedGpuMemory; 0 when NVML does not know */
	/* Identity, read once when first seen: from the process (its cgroup,
	 * /proc owner), never from anything it says. */
	long uid; /* -1 unknown */
	char pod_uid[NVS_POD_UID_LEN], pod_name[NVS_K8S_NAME_LEN], pod_ns[NVS_K8S_NS_LEN];
};

/* Who runs unmanaged processes on a GPU: a Pod, else a uid. Processes that
 * each live less than the confirm time are counted against their owner:
 * NVS_UNMANAGED_OWNER_VANISHED of them leaving the GPU unmanaged (never
 * having been managed), within NVS_UNMANAGED_OWNER_WINDOW_MS, confirm the
 * owner; from then on its processes count at once, and the owner keeps
 * counting (as one, with the memory its processes used) for a hold time
 * after the last one, so that a GPU serialized for it stays so between
 * them. */
struct um_owner {
	int used_slot;
	int gpu;
	long uid;
	char pod_uid[NVS_POD_UID_LEN];
	unsigned vanished;
	uint64_t window_ns; /* the first of those */
	int confirmed;
	uint64_t last_ns; /* a process of it was on the GPU, unmanaged */
	uint64_t mem;	  /* the most its processes used at one pass */
	unsigned live;	  /* its counted processes this pass */
	uint64_t live_mem;
};

static struct um_proc tab[NVS_UNMANAGED_MAX_TRACKED];
static struct um_owner owners[NVS_UNMANAGED_MAX_OWNERS];
static uint64_t gen, next_check_ns, rnd;
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

static uint64_t owner_hold_ns(void)
{
	uint64_t h = 4ull * nvs_unmanaged_cfg.interval_ms * 1000000ull;
	return h > NVS_UNMANAGED_OWNER_HOLD_MS * 1000000ull
		   ? h
		   : NVS_UNMANAGED_OWNER_HOLD_MS * 1000000ull;
}

/* e's owner, added when new (NULL: the table is full). */
static struct um_owner *owner_of(const struct um_proc *e)
{
	struct um_owner *fr = NULL;
	for (unsigned i = 0; i < NVS_UNMANAGED_MAX_OWNERS; i++) {
		struct um_owner *o = &owners[i];
		if (!o->used_slot) {
			if (!fr)
				fr = o;
			continue;
		}
		if (o->gpu == e->gpu && (e->pod_uid[0] ? !strcmp(o->pod_uid, e->pod_uid)
						       : !o->pod_uid[0] && o->uid == e->uid))
			return o;
	}
	if (fr) {
		memset(fr, 0, sizeof *fr);
		fr->used_slot = 1;
		fr->gpu = e->gpu;
		fr->uid = e->uid;
		snprintf(fr->pod_uid, sizeof fr->pod_uid, "%s", e->pod_uid);
	}
	return fr;
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

/* The connected client with this host pid (SO_PEERCRED at connect, never
 * HELLO's), or NULL. */
static struct client *client_of(int pid)
{
	for (struct client *cl = S.clients; cl; cl = cl->next)
		if ((int)cl->pid == pid && cl->conn)
			return cl;
	return NULL;
}

static struct client_gpu *attached(const struct client *cl, const struct gpu *g)
{
	for (unsigned i = 0; cl && i < cl->ngpus; i++)
		if (cl->gpus[i]->gpu == g)
			return cl->gpus[i];
	return NULL;
}

static nvmlDevice_t handle(const struct gpu *g)
{
	unsigned k = (unsigned)g->index;
	if (!dev_cache[k] && nv.by_uuid(g->uuid, &dev_cache[k]) != NVML_SUCCESS)
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
	if (nv.list_v2) {
		static nvmlProcessInfo_v2_t buf[NVS_UNMANAGED_MAX_PROCS];
		r = nv.list_v2(d, &n, buf);
		for (unsigned i = 0; r == NVML_SUCCESS && i < n; i++) {
			pids[i] = (int)buf[i].pid;
			mem[i] = buf[i].usedGpuMemory;
		}
	} else {
		static nvmlProcessInfo_v1_t buf[NVS_UNMANAGED_MAX_PROCS];
		r = nv.list_v1(d, &n, buf);
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

/* Pids of g that ran kernels since the last pass (NVML's per-process
 * utilization samples), into act; the count (0 when NVML has none). */
static unsigned active_procs(struct gpu *g, int *act)
{
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	uint64_t now_us = (uint64_t)rt.tv_sec * 1000000ull + (uint64_t)rt.tv_nsec / 1000;
	uint64_t since = g->ev.util_seen_us;
	g->ev.util_seen_us = now_us;
	nvmlDevice_t d = handle(g);
	if (!nv.proc_util || !d || !since)
		return 0;
	static nvmlProcessUtilizationSample_t buf[NVS_UNMANAGED_MAX_PROCS];
	unsigned n = NVS_UNMANAGED_MAX_PROCS, k = 0;
	if (nv.proc_util(d, buf, &n, since) != NVML_SUCCESS)
		return 0;
	for (unsigned i = 0; i < n && i < NVS_UNMANAGED_MAX_PROCS; i++)
		if (buf[i].smUtil > 0 && buf[i].timeStamp > since)
			act[k++] = (int)buf[i].pid;
	return k;
}

static int in(const int *a, unsigned n, int v)
{
	for (unsigned i = 0; i < n; i++)
		if (a[i] == v)
			return 1;
	return 0;
}

/* ---- evidence for claims (bounds.c reads cg->ev) ---- */

/* Recounts cg's allocation when what the evidence allows changed. */
static void recount(struct client_gpu *cg, uint64_t now)
{
	uint64_t v = nvs_bounds_clamp(cg, cg->claimed);
	if (v != cg->allocated)
		nvs_policy_mem_update(cg, v, now);
}

/* A pass saw cg's process on its GPU (listed, with used bytes) or not. */
static void evidence(struct client_gpu *cg, int listed, uint64_t used, int mem_known, uint64_t now)
{
	struct cg_ev *ev = &cg->ev;
	const struct gpu *g = cg->gpu;
	int was_listed = ev->listed, was_checked = ev->checked, was_clamped = ev->clamped;
	uint64_t was_cap = ev->cap;
	ev->checked = 1;
	ev->listed = listed;
	ev->used = used;
	if (used > ev->hwm)
		ev->hwm = used;
	ev->cap = mem_known ? ev->hwm + g->ev.unattributed_hwm : UINT64_MAX;
	uint64_t slack = ev->cap / 8 > NVS_EVIDENCE_SLACK ? ev->cap / 8 : NVS_EVIDENCE_SLACK;
	if (!listed || ev->cap == UINT64_MAX || cg->claimed <= ev->cap + slack) {
		ev->unproven = 0;
		ev->chances = 0;
		ev->clamped = 0;
	} else {
		if (!ev->unproven) {
			ev->unproven = 1;
			ev->chances = 0;
			ev->grants0 = cg->st.grants;
		}
		/* Still queued for its first turn since: no chance to touch
		 * its memory yet. */
		if (!(cg->state == CG_WAITING && cg->st.grants == ev->grants0))
			ev->chances++;
		if (ev->chances >= NVS_EVIDENCE_CHANCES)
			ev->clamped = 1;
	}
	if (was_clamped != ev->clamped || (ev->clamped && was_cap != ev->cap) ||
	    was_listed != listed || !was_checked)
		recount(cg, now);
}

int nvs_unmanaged_context(struct client_gpu *cg)
{
	struct gpu *g = cg->gpu;
	if (!enabled || !pids_match || !g->from_nvml || cg->client->pid <= 0)
		return -1;
	if (cg->ev.checked)
		return cg->ev.listed;
	/* Attached since the last pass: look now, at most every 50 ms a GPU. */
	uint64_t now = nvs_now_ns();
	unsigned k = (unsigned)g->index;
	if (now - fresh_ns[k] < 50000000ull)
		return -1;
	fresh_ns[k] = now;
	static int pids[NVS_UNMANAGED_MAX_PROCS];
	static uint64_t mem[NVS_UNMANAGED_MAX_PROCS];
	int n = list_procs(g, pids, mem);
	if (n < 0)
		return -1;
	cg->ev.checked = 1;
	cg->ev.listed = in(pids, (unsigned)n, (int)cg->client->pid);
	cg->ev.cap = UINT64_MAX;
	return cg->ev.listed;
}

/* ---- reporting ---- */

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

static const char *why_text(const char *reason)
{
	if (!strcmp(reason, "not-attached"))
		return "its nvshare connection never attached this GPU";
	if (!strcmp(reason, "ungated"))
		return "it runs kernels on the serialized GPU without holding the lock";
	return "it has a GPU context without an nvshare connection";
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
		  "\"used\":%llu,\"reason\":\"%s\"",
		  g->index, e->pid, opt_long(e->uid, uid, sizeof uid),
		  opt_str(e->pod_uid, pu, sizeof pu), opt_str(e->pod_ns, ns, sizeof ns),
		  opt_str(e->pod_name, pn, sizeof pn), (unsigned long long)e->mem, e->reason);
	NVS_WARN("unmanaged process on GPU %d: pid %d, %s, using %s: %s, so it is neither gated "
		 "nor limited (policy %s; nothing is killed)",
		 g->index, e->pid, who(e, w, sizeof w), nvs_format_size(e->mem, m, sizeof m),
		 why_text(e->reason), policy_names[nvs_unmanaged_cfg.policy]);
}

static void owner_event(struct um_owner *o, const struct um_proc *e, const char *name)
{
	char pu[sizeof o->pod_uid + 8], uid[24], w[400];
	nvs_event(name, "\"gpu\":%d,\"uid\":%s,\"pod_uid\":%s,\"vanished\":%u", o->gpu,
		  opt_long(o->uid, uid, sizeof uid), opt_str(o->pod_uid, pu, sizeof pu),
		  o->vanished);
	if (e)
		NVS_WARN("unmanaged: %s started %u short-lived GPU processes on GPU %d without "
			 "nvshare: its processes count as unmanaged at once from now on",
			 who(e, w, sizeof w), o->vanished, o->gpu);
	else
		NVS_INFO("unmanaged: the owner of short-lived processes on GPU %d (%s) has had "
			 "none for %llu s: no longer counted",
			 o->gpu, o->pod_uid[0] ? o->pod_uid : "a uid",
			 (unsigned long long)(owner_hold_ns() / 1000000000ull));
}

/* Applies the policy's view of g's unmanaged processes to the scheduler. */
static void apply(struct gpu *g, unsigned count, uint64_t mem, uint64_t now)
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
	nvs_policy_settings_changed(g, now);
}

/* The GPU's used memory that no listed process accounts for, and its
 * highest over the last passes. 0 when NVML has no memory figure. */
static void unattributed(struct gpu *g, const uint64_t *mem, int n)
{
	nvmlMemory_t m = {0, 0, 0};
	uint64_t u = 0, sum = 0;
	nvmlDevice_t d = handle(g);
	if (nv.mem_info && d && nv.mem_info(d, &m) == NVML_SUCCESS) {
		for (int i = 0; i < n; i++)
			sum += mem[i] == ~0ull ? 0 : mem[i];
		u = m.used > sum ? m.used - sum : 0;
	}
	g->ev.unattributed = u;
	g->ev.unattr_ring[g->ev.unattr_n++ % 8] = u;
	uint64_t h = 0;
	for (unsigned i = 0; i < 8 && i < g->ev.unattr_n; i++)
		if (g->ev.unattr_ring[i] > h)
			h = g->ev.unattr_ring[i];
	g->ev.unattributed_hwm = h;
}

/* One GPU's pass: classify its processes, update the clients' evidence,
 * count the unmanaged ones. Returns the earliest confirm time (0: none). */
static uint64_t check_gpu(struct gpu *g, uint64_t now)
{
	static int pids[NVS_UNMANAGED_MAX_PROCS], act[NVS_UNMANAGED_MAX_PROCS];
	static uint64_t mem[NVS_UNMANAGED_MAX_PROCS];
	uint64_t confirm_at = 0;
	int n = list_procs(g, pids, mem);
	if (n < 0) {
		/* Unknown this time: keep what was known. */
		g->ev.ok = 0;
		for (unsigned i = 0; i < NVS_UNMANAGED_MAX_TRACKED; i++)
			if (tab[i].used_slot && tab[i].gpu == g->index)
				tab[i].gen = gen;
		return 0;
	}
	g->ev.ok = 1;
	g->ev.at_ns = now;
	unattributed(g, mem, n);
	unsigned nact = active_procs(g, act);
	/* Serialized for the whole time since the last pass: any kernel run
	 * meanwhile needed the lock. */
	int window_serialized =
	    g->serialized && g->ev.serialized_seen && g->mode_switches == g->ev.switches_seen;
	int mem_known = 1;
	for (int i = 0; i < n; i++)
		if (mem[i] == ~0ull)
			mem_known = 0;
	/* The clients attached to g: what NVML shows of them. */
	for (struct client_gpu *cg = g->ahead; cg; cg = cg->anext) {
		int pid = (int)cg->client->pid, listed = 0;
		uint64_t used = 0;
		for (int i = 0; pid > 0 && i < n; i++)
			if (pids[i] == pid) {
				listed = 1;
				used = mem[i] == ~0ull ? 0 : mem[i];
			}
		if (listed && !pids_match) {
			pids_match = 1;
			NVS_INFO("unmanaged: NVML lists clients' pids: claims are checked against "
				 "what it shows");
		}
		if (pid > 0 && pids_match)
			evidence(cg, listed, used, mem_known, now);
		int ran_kernels = listed && in(act, nact, pid);
		int permitted = cg->state == CG_HOLDING || cg->ev.held_seen ||
				cg->st.grants != cg->ev.grants_seen;
		if (window_serialized && ran_kernels && !permitted)
			cg->ev.ungated++;
		else if (ran_kernels || !window_serialized)
			cg->ev.ungated = 0;
		cg->ev.grants_seen = cg->st.grants;
		cg->ev.held_seen = cg->state == CG_HOLDING;
	}
	g->ev.serialized_seen = g->serialized;
	g->ev.switches_seen = g->mode_switches;

	unsigned count = 0, extra = 0;
	uint64_t sum = 0;
	for (int i = 0; i < n; i++) {
		if (pids[i] <= 0)
			continue;
		struct client *cl = client_of(pids[i]);
		struct client_gpu *cg = attached(cl, g);
		/* Managed: its connection attached this GPU and, on a serialized
		 * GPU, runs only with the lock. */
		const char *reason = !cl				    ? "no-connection"
				     : !cg				    ? "not-attached"
				     : cg->ev.ungated >= NVS_UNGATED_PASSES ? "ungated"
									    : NULL;
		/* NVML_VALUE_NOT_AVAILABLE (all ones): unknown, 0. */
		uint64_t used = mem[i] == ~0ull ? 0 : mem[i];
		struct um_proc *e = find(pids[i], g->index);
		if (!reason) {
			if (e)
				e->managed_now = 1; /* leaves the table as managed */
			continue;
		}
		if (!e && (e = add(pids[i], g->index, now))) {
			struct um_owner *o = owner_of(e);
			e->reason = reason;
			e->mem = used;
			/* Its owner is known, or it has been running kernels
			 * without the lock for passes already: at once. */
			if ((o && o->confirmed) || !strcmp(reason, "ungated")) {
				e->confirmed = 1;
				log_new(e, g);
			}
		}
		/* An ungated client's claim is counted already: pin the rest. */
		uint64_t pin = cg && used > cg->allocated ? used - cg->allocated : cg ? 0 : used;
		if (!e) {
			/* Table full: counted, never logged one by one. */
			extra++;
			sum += pin;
			continue;
		}
		e->gen = gen;
		e->mem = used;
		e->reason = reason;
		e->managed_now = 0;
		if (!e->confirmed && now - e->first_ns >= NVS_UNMANAGED_CONFIRM_MS * 1000000ull) {
			e->confirmed = 1;
			log_new(e, g);
		}
		struct um_owner *o = owner_of(e);
		if (o)
			o->last_ns = now;
		if (e->confirmed) {
			count++;
			sum += pin;
			if (o) {
				o->live++;
				o->live_mem += used;
			}
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
	/* Owners whose short-lived processes keep coming: counted between
	 * them too, for the hold time after the last. */
	for (unsigned i = 0; i < NVS_UNMANAGED_MAX_OWNERS; i++) {
		struct um_owner *o = &owners[i];
		if (!o->used_slot || o->gpu != g->index || !o->confirmed)
			continue;
		if (o->live_mem > o->mem)
			o->mem = o->live_mem;
		if (!o->live && now - o->last_ns < owner_hold_ns()) {
			count++;
			sum += o->mem;
		}
	}
	apply(g, count + extra, sum, now);
	return confirm_at;
}

/* A process left the GPU while unmanaged (exited, or gave up its
 * context), whether it lived long enough to be confirmed or not. */
static void vanished(struct um_proc *e, uint64_t now)
{
	struct um_owner *o = owner_of(e);
	if (!o || o->confirmed)
		return;
	if (!o->vanished || now - o->window_ns > NVS_UNMANAGED_OWNER_WINDOW_MS * 1000000ull) {
		o->vanished = 0;
		o->window_ns = now;
	}
	if (++o->vanished < NVS_UNMANAGED_OWNER_VANISHED)
		return;
	o->confirmed = 1;
	o->last_ns = now;
	if (e->mem > o->mem)
		o->mem = e->mem;
	owner_event(o, e, "unmanaged_owner");
}

/* Returns the earliest time a process seen but not yet confirmed can be
 * confirmed (0: none): the next check comes no later, so a process is
 * reported within interval + NVS_UNMANAGED_CONFIRM_MS of appearing. */
static uint64_t check(uint64_t now)
{
	uint64_t confirm_at = 0;
	gen++;
	logged_this_check = not_logged_this_check = 0;
	/* Owners: the hold ends after their last process; an unconfirmed
	 * one's window passes. */
	for (unsigned i = 0; i < NVS_UNMANAGED_MAX_OWNERS; i++) {
		struct um_owner *o = &owners[i];
		o->live = 0;
		o->live_mem = 0;
		if (!o->used_slot)
			continue;
		uint64_t idle = now - (o->last_ns > o->window_ns ? o->last_ns : o->window_ns);
		if (o->confirmed && idle >= owner_hold_ns()) {
			owner_event(o, NULL, "unmanaged_owner_gone");
			o->used_slot = 0;
		} else if (!o->confirmed && idle >= NVS_UNMANAGED_OWNER_WINDOW_MS * 1000000ull) {
			o->used_slot = 0;
		}
	}
	for (unsigned gi = 0; gi < S.ngpus; gi++) {
		struct gpu *g = &S.gpus[gi];
		if (!g->from_nvml)
			continue;
		uint64_t t = check_gpu(g, now);
		if (t && (!confirm_at || t < confirm_at))
			confirm_at = t;
	}
	if (not_logged_this_check)
		NVS_WARN(
		    "unmanaged: %u more new unmanaged process(es) this check, not logged one by "
		    "one (see the status)",
		    not_logged_this_check);
	/* Processes gone from their GPU (exited, or now managed). */
	unsigned tracked = 0, left_logged = 0;
	for (unsigned i = 0; i < NVS_UNMANAGED_MAX_TRACKED; i++) {
		struct um_proc *e = &tab[i];
		if (!e->used_slot)
			continue;
		if (e->gen == gen) {
			tracked++;
			continue;
		}
		if (!e->managed_now)
			vanished(e, now);
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
	/* 3/4 to 5/4 of the interval: a process cannot time its life to fall
	 * between passes. */
	rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
	uint64_t iv = nvs_unmanaged_cfg.interval_ms * 1000000ull;
	next_check_ns = now + iv * 3 / 4 + (rnd >> 33) % (iv / 2 + 1);
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

void nvs_unmanaged_tick(uint64_t now)
{
	if (enabled && now >= next_check_ns)
		run_check(now);
}

uint64_t nvs_unmanaged_next_deadline(uint64_t now)
{
	return enabled ? next_check_ns : 0;
}

void nvs_unmanaged_begin(const struct nvs_unmanaged_nvml *f, uint64_t now, uint64_t seed)
{
	/* Fresh: nothing seen, no owner known, no handle looked up. */
	nv = *f;
	memset(tab, 0, sizeof tab);
	memset(owners, 0, sizeof owners);
	memset(dev_cache, 0, sizeof dev_cache);
	memset(fresh_ns, 0, sizeof fresh_ns);
	memset(untracked, 0, sizeof untracked);
	memset(too_many_logged, 0, sizeof too_many_logged);
	memset(query_failed_logged, 0, sizeof query_failed_logged);
	gen = checks = 0;
	pids_match = table_full_logged = 0;
	enabled = 1;
	rnd = seed;
	run_check(now);
}

void nvs_unmanaged_start(void)
{
	const struct nvs_unmanaged_config *uc = &nvs_unmanaged_cfg;
	if (!uc->interval_ms) {
		NVS_INFO("unmanaged-process detection off (NVSHARE_UNMANAGED_INTERVAL_MS=0)");
		detection_event("off", "disabled");
		return;
	}
	struct nvs_unmanaged_nvml f = {0};
	void *h = S.nvml_ok ? dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL) : NULL;
	if (h) {
		f.list_v2 = (nvs_pfn_nvmlDeviceGetComputeRunningProcesses_v3)dlsym(
		    h, "nvmlDeviceGetComputeRunningProcesses_v3");
		if (!f.list_v2)
			f.list_v2 = (nvs_pfn_nvmlDeviceGetComputeRunningProcesses_v3)dlsym(
			    h, "nvmlDeviceGetComputeRunningProcesses_v2");
		f.list_v1 = (nvs_pfn_nvmlDeviceGetComputeRunningProcesses)dlsym(
		    h, "nvmlDeviceGetComputeRunningProcesses");
		f.by_uuid =
		    (nvs_pfn_nvmlDeviceGetHandleByUUID)dlsym(h, "nvmlDeviceGetHandleByUUID");
		f.mem_info = (nvs_pfn_nvmlDeviceGetMemoryInfo)dlsym(h, "nvmlDeviceGetMemoryInfo");
		f.proc_util = (nvs_pfn_nvmlDeviceGetProcessUtilization)dlsym(
		    h, "nvmlDeviceGetProcessUtilization");
	}
	if (!h || (!f.list_v2 && !f.list_v1) || !f.by_uuid) {
		NVS_WARN("unmanaged-process detection off: %s (policy %s has no effect)",
			 S.nvml_ok ? "NVML lacks the process query" : "no NVML",
			 policy_names[uc->policy]);
		detection_event("off", S.nvml_ok ? "no-process-query" : "no-nvml");
		return;
	}
	NVS_INFO("unmanaged-process detection: every %u ms, policy %s%s", uc->interval_ms,
		 policy_names[uc->policy],
		 f.proc_util ? "" : " (no per-process utilization: ungated clients not detected)");
	detection_event("on", "started");
	uint64_t now = nvs_now_ns();
	nvs_unmanaged_begin(&f, now, now ^ (uint64_t)getpid());
	nvs_loop_timer(NVS_LOOP_OBSERVE, nvs_unmanaged_tick, nvs_unmanaged_next_deadline);
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
		cJSON_AddStringToObject(x, "reason", e->reason ? e->reason : "no-connection");
		cJSON_AddItemToArray(ps, x);
	}
	/* Owners of short-lived processes (counted per Pod, else uid). */
	cJSON *os = cJSON_AddArrayToObject(o, "owners");
	for (unsigned i = 0; i < NVS_UNMANAGED_MAX_OWNERS; i++) {
		const struct um_owner *w = &owners[i];
		if (!w->used_slot || (!w->confirmed && !w->vanished))
			continue;
		cJSON *x = cJSON_CreateObject();
		cJSON_AddNumberToObject(x, "gpu", w->gpu);
		if (w->uid >= 0)
			cJSON_AddNumberToObject(x, "uid", (double)w->uid);
		else
			cJSON_AddNullToObject(x, "uid");
		if (w->pod_uid[0])
			cJSON_AddStringToObject(x, "pod_uid", w->pod_uid);
		else
			cJSON_AddNullToObject(x, "pod_uid");
		cJSON_AddNumberToObject(x, "vanished", w->vanished);
		cJSON_AddBoolToObject(x, "confirmed", w->confirmed);
		cJSON_AddNumberToObject(x, "live", w->live);
		cJSON_AddNumberToObject(x, "memory", (double)w->mem);
		cJSON_AddNumberToObject(x, "last_seen_ns", (double)(now - w->last_ns));
		cJSON_AddItemToArray(os, x);
	}
	return o;
}
