#include "control.h"

#include "clock.h"
#include "clients.h"
#include "conn.h"
#include "events.h"
#include "gpus.h"
#include "log.h"
#include "parse.h"
#include "peer.h"
#include "core/policy.h"
#include "settings.h"
#include "state_file.h"
#include "core/state.h"
#include "status_json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reply(struct conn *c, uint32_t seq, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void reply_text(struct conn *c, uint32_t seq, int status, const char *text, size_t len)
{
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = NVS_MSG_CTL_REPLY;
	m.seq = seq;
	m.reply_status = status;
	m.reply_text = text;
	m.reply_len = (uint32_t)len;
	conn_send(c, &m);
}

static void reply(struct conn *c, uint32_t seq, int status, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof buf)
		n = sizeof buf - 1;
	reply_text(c, seq, status, buf, (size_t)n);
}

/* A control request from a tenant is logged at most once a second: a Pod
 * sending them in a loop must not fill the log. */
static void log_refused(const struct conn *c, const struct nvs_msg *m, const char *why)
{
	static uint64_t last_ns;
	static unsigned quiet;
	uint64_t now = nvs_now_ns();
	char w[2 * 256 + 8];
	nvs_event("ctl_refused",
		  "\"conn\":%u,\"pid\":%d,\"uid\":%d,\"msg\":\"%s\",\"socket\":\"%s\",\"why\":%s",
		  c->id, (int)c->peer.pid, (int)c->peer.uid, nvs_msg_type_name(m->type),
		  c->role == CONN_ROLE_ADMIN ? "admin" : "client", nvs_json_str(why, w, sizeof w));
	if (last_ns && now - last_ns < 1000000000ull) {
		quiet++;
		return;
	}
	NVS_WARN("refused %s from pid %d uid %d on the %s socket: %s (%u more refused since the "
		 "last line)",
		 nvs_msg_type_name(m->type), (int)c->peer.pid, (int)c->peer.uid,
		 c->role == CONN_ROLE_ADMIN ? "admin" : "client", why, quiet);
	last_ns = now;
	quiet = 0;
}

/* Defence in depth behind the admin socket's 0600 mode: a peer in a Pod
 * (other than the scheduler's own, where `kubectl exec` runs nvsharectl)
 * or one whose identity could not be pinned is refused. NULL: allowed;
 * else why not. */
static const char *admin_refusal(const struct conn *c, char *b, size_t cap)
{
	if (c->peer.kind == NVS_TENANT_UNKNOWN) {
		snprintf(b, cap, "the scheduler cannot tell who you are (%s)",
			 c->peer.unknown_why ? c->peer.unknown_why : "?");
		return b;
	}
	if (c->peer.kind != NVS_TENANT_POD)
		return NULL;
	char own[NVS_POD_UID_LEN];
	if (nvs_peer_own_pod(own, sizeof own) == 0 && !strcmp(own, c->peer.pod_uid))
		return NULL;
	snprintf(b, cap,
		 "your process is in Pod %s; the admin socket serves only the node and "
		 "the scheduler's own Pod",
		 c->peer.pod_uid);
	return b;
}

static void status(struct conn *c, uint32_t seq, uint32_t flags)
{
	uint64_t now = nvs_now_ns();
	cJSON *j = c->role == CONN_ROLE_ADMIN ? nvs_status_json(now)
					      : nvs_status_tenant_json(now, &c->peer, c->client);
	char *s = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	if (!s) {
		reply(c, seq, -ENOMEM, "out of memory building the status");
		return;
	}
	size_t len = strlen(s);
	if (flags & NVS_CTL_STATUS_STREAM) {
		/* Any size: sent a frame at a time as the peer reads (conn.c). */
		if (conn_send_stream(c, seq, s, len) == 0)
			return;
		reply(c, seq, -EBUSY, "a status is still being sent on this connection");
	} else if (len > NVS_MAX_PAYLOAD - 8)
		reply(c, seq, -E2BIG,
		      "status is %zu bytes, more than one message holds (this nvsharectl is "
		      "older than the scheduler: it does not ask for a streamed status)",
		      len);
	else
		reply_text(c, seq, 0, s, len);
	free(s);
}

/* Applies one field to one GPU; the value was validated. */
static void apply(struct gpu *g, uint32_t field, uint64_t v)
{
	switch (field) {
	case NVS_CTL_MODE:
		g->mode = (unsigned)v;
		break;
	case NVS_CTL_TQ_MS:
		g->tq_ms = v;
		break;
	case NVS_CTL_CAPACITY:
		g->capacity_override = v;
		break;
	default:
		return;
	}
	nvs_policy_settings_changed(g, nvs_now_ns());
}

/* A GPU's value of a per-GPU setting as the value for all GPUs gives it
 * (what a GPU added now would get: gpus.c). */
static uint64_t all_gpus_value(uint32_t field, const struct gpu *g)
{
	switch (field) {
	case NVS_CTL_MODE:
		return S.cfg.mode;
	case NVS_CTL_TQ_MS:
		return S.cfg.tq_ms;
	case NVS_CTL_CAPACITY:
		return S.cfg.capacity[g->index] ? S.cfg.capacity[g->index] : S.cfg.capacity_all;
	}
	return 0;
}

/* nvsharectl --reset, -T default ...: for all GPUs, the configured value
 * (flag, variable or default) everywhere; for one GPU, the value for all
 * GPUs. Either way the state file forgets it. */
static void ctl_reset(struct conn *c, const struct nvs_msg *m, int id, uint32_t field)
{
	const struct nvs_ctl_set *s = &m->u.ctl_set;
	const char *name = nvs_setting_name(id);
	char t[96], org[80];
	if (s->gpu == -1) {
		nvs_setting_reset(id);
		if (nvs_setting_flags(id) & SF_GPU)
			for (unsigned i = 0; i < S.ngpus; i++)
				apply(&S.gpus[i], field, all_gpus_value(field, &S.gpus[i]));
		nvs_state_note_reset(-1, field);
		nvs_setting_text(id, t, sizeof t);
		nvs_setting_origin(id, org, sizeof org);
		NVS_INFO("CTL_SET reset %s to its configured value %s (%s) by pid %d uid %d", name,
			 t, org, (int)c->peer.pid, (int)c->peer.uid);
		reply(c, m->seq, 0, "%s back to its configured value %s (%s)%s", name, t, org,
		      (nvs_setting_flags(id) & SF_GPU) ? " on all GPUs" : "");
		return;
	}
	struct gpu *g = &S.gpus[s->gpu];
	apply(g, field, all_gpus_value(field, g));
	nvs_setting_note(id, s->gpu, NVS_SRC_INHERIT);
	nvs_state_note_reset(s->gpu, field);
	nvs_setting_format(id, all_gpus_value(field, g), t, sizeof t);
	NVS_INFO("CTL_SET reset gpu=%d %s to the value for all GPUs, %s, by pid %d uid %d", s->gpu,
		 name, t, (int)c->peer.pid, (int)c->peer.uid);
	reply(c, m->seq, 0, "%s of GPU %d back to the value for all GPUs: %s", name, s->gpu, t);
}

/* Every value is checked by its setting's row (settings.def), as the same
 * value in the configuration would be: the range, and for the capacity
 * the memory of the GPUs it would apply to. */
static void ctl_set(struct conn *c, const struct nvs_msg *m)
{
	const struct nvs_ctl_set *s = &m->u.ctl_set;
	uint32_t field = s->field & ~NVS_CTL_RESET;
	int id = nvs_setting_by_ctl(field);
	char what[64], why[320];
	if (id < 0) {
		reply(c, m->seq, -EINVAL, "unknown setting %u", s->field);
		return;
	}
	unsigned flags = nvs_setting_flags(id);
	if (s->gpu != -1 && !(flags & SF_GPU)) {
		reply(c, m->seq, -EINVAL, "%s is one setting for all GPUs (gpu -1)",
		      nvs_setting_name(id));
		return;
	}
	if (s->gpu < -1 || (s->gpu >= 0 && !nvs_gpu_by_index(s->gpu))) {
		reply(c, m->seq, -ENODEV, "no GPU %d (the scheduler knows %u)", s->gpu, S.ngpus);
		return;
	}
	if (s->field & NVS_CTL_RESET) {
		ctl_reset(c, m, id, field);
		return;
	}
	if (nvs_setting_check(id, s->value, s->gpu, why, sizeof why)) {
		reply(c, m->seq, -EINVAL, "%s", why);
		return;
	}
	nvs_setting_format(id, s->value, what, sizeof what);
	if (s->gpu == -1) {
		/* Also the default for GPUs learned later. */
		nvs_setting_apply(id, s->value);
		nvs_setting_note(id, -1, NVS_SRC_RUNTIME);
		if (flags & SF_GPU)
			for (unsigned i = 0; i < S.ngpus; i++)
				apply(&S.gpus[i], field, s->value);
	} else {
		apply(&S.gpus[s->gpu], field, s->value);
		nvs_setting_note(id, s->gpu, NVS_SRC_RUNTIME);
	}
	nvs_state_note_set(s->gpu, field, s->value);
	char gname[16];
	snprintf(gname, sizeof gname, "%d", s->gpu);
	NVS_INFO("CTL_SET gpu=%s %s=%s by pid %d uid %d", s->gpu == -1 ? "all" : gname,
		 nvs_setting_name(id), what, (int)c->peer.pid, (int)c->peer.uid);
	if (!(flags & SF_GPU))
		reply(c, m->seq, 0, "%s set to %s (clients that connect from now on)",
		      nvs_setting_name(id), what);
	else
		reply(c, m->seq, 0, "%s set to %s on %s%s", nvs_setting_name(id), what,
		      s->gpu == -1 ? "all GPUs" : "GPU ", s->gpu == -1 ? "" : gname);
}

static void ctl_set_client(struct conn *c, const struct nvs_msg *m)
{
	const struct nvs_ctl_set_client *s = &m->u.ctl_client;
	if (s->core_limit > 100) {
		reply(c, m->seq, -EINVAL, "core limit must be 1..100");
		return;
	}
	if ((s->flags & NVS_CTL_CLIENT_SET_MEM) && s->mem_limit == 0) {
		reply(c, m->seq, -EINVAL, "memory limit 0 is not a limit (none: UINT64_MAX)");
		return;
	}
	if (s->gpu < -1 || (s->gpu >= 0 && !nvs_gpu_by_index(s->gpu))) {
		reply(c, m->seq, -ENODEV, "no GPU %d", s->gpu);
		return;
	}
	unsigned matched = 0, sent = 0, capped = 0;
	uint64_t now = nvs_now_ns();
	for (struct client *cl = S.clients; cl; cl = cl->next) {
		if ((uint32_t)cl->pid != s->pid)
			continue;
		matched++;
		/* --core-limit default (CLEAR_CORE) wins over a value. */
		int core_set = s->core_limit || (s->flags & NVS_CTL_CLIENT_CLEAR_CORE);
		uint32_t core = (s->flags & NVS_CTL_CLIENT_CLEAR_CORE) ? 0 : s->core_limit;
		int mem_set = !!(s->flags & NVS_CTL_CLIENT_SET_MEM);
		sent += nvs_limits_ctl_set(cl, s->gpu, core_set, core, mem_set, s->mem_limit, now,
					   &capped);
		/* A client in a Pod: the limits are its Pod's, kept in the
		 * state file for the Pod's clients. */
		if (s->gpu == -1)
			nvs_state_note_pod(cl);
	}
	if (!matched) {
		reply(c, m->seq, -ESRCH, "no client with pid %u is connected", s->pid);
		return;
	}
	reply(c, m->seq, 0, "limits set for %u client(s) with pid %u, %u GPU(s) told%s", matched,
	      s->pid, sent,
	      capped ? "; capped at the ceiling of its DRA claim (a limit above what the claim "
		       "consumed cannot be set: change the claim)"
		     : "");
}

void nvs_control_msg(struct conn *c, const struct nvs_msg *m)
{
	/* Where each request is accepted: common/messages.def. The client
	 * socket is mounted into every Pod and Pods run as root: no uid there
	 * means "administrator", so it accepts status only (and shows only
	 * the caller's own tenant). */
	if (!(nvs_msg_accepted_on(m->type) & conn_socket(c))) {
		log_refused(c, m, "control messages are not accepted on the client socket");
		reply(c, m->seq, -EPERM,
		      "permission denied: %s changes settings only through the admin socket "
		      "%s, not the client socket %s (it is mounted into Pods). Run nvsharectl "
		      "as the scheduler's user (uid %d) on the node; in Kubernetes, kubectl "
		      "exec into the nvshare-scheduler Pod",
		      nvs_msg_type_name(m->type), S.admin_sock_path, S.sock_path, (int)S.euid);
		return;
	}
	char b[256];
	const char *why = c->role == CONN_ROLE_ADMIN ? admin_refusal(c, b, sizeof b) : NULL;
	if (why) {
		log_refused(c, m, why);
		reply(c, m->seq, -EPERM, "permission denied on the admin socket %s: %s",
		      S.admin_sock_path, why);
		return;
	}
	switch (m->type) {
	case NVS_MSG_CTL_STATUS:
		status(c, m->seq, m->u.ctl_status.flags);
		return;
	case NVS_MSG_CTL_SET:
		ctl_set(c, m);
		return;
	case NVS_MSG_CTL_SET_CLIENT:
		ctl_set_client(c, m);
		return;
	}
}
