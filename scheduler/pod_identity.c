#include "pod_identity.h"

#include "clients.h"
#include "k8s_json.h"
#include "k8s_watch.h"
#include "log.h"
#include "parse.h"
#include "quota.h"
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char nvs_proc_root[256] = "/proc";

int nvs_pod_set_proc_root(const char *dir)
{
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 0 || n >= sizeof nvs_proc_root)
		return -1;
	memcpy(nvs_proc_root, dir, n);
	nvs_proc_root[n] = '\0';
	return 0;
}

int nvs_pod_uid_of_pid(int pid, char *out, unsigned cap)
{
	if (pid <= 0 || cap < 37)
		return -1;
	char path[sizeof nvs_proc_root + 32];
	snprintf(path, sizeof path, "%s/%d/cgroup", nvs_proc_root, pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		NVS_DEBUG("pod identity: %s: %s", path, strerror(errno));
		return -1;
	}
	/* procfs: small, read in one go; a v1 hierarchy has ~15 lines. */
	char buf[16384];
	size_t len = 0;
	for (;;) {
		ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
		if (len == sizeof buf - 1)
			break;
	}
	close(fd);
	buf[len] = '\0';
	int rc = -1;
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (nvs_parse_cgroup_pod_uid(line, out, cap) == 0) {
			rc = 0;
			break;
		}
	return rc;
}

/* Annotation-sourced limits (core 0 / mem 0: none) through quota.c's
 * per-source setter (ctl > annotation > env), which sends SET_LIMITS to
 * the GPUs whose effective limits changed. */
static void set_annotation_limits(struct client *cl, uint32_t core, uint64_t mem)
{
	if (cl->annot_core == core && cl->has_annot_mem == (mem != 0) && cl->annot_mem == mem)
		return;
	char cb[16] = "none", mb[32] = "none";
	if (core)
		snprintf(cb, sizeof cb, "%u%%", core);
	if (mem)
		nvs_format_size(mem, mb, sizeof mb);
	NVS_INFO("client=%u pid=%d pod %s/%s annotation limits: core %s, memory %s", cl->id,
		 (int)cl->pid, cl->pod_namespace, cl->pod_name, cb, mb);
	nvs_client_set_limits_from(cl, NVS_LIMIT_SRC_ANNOTATION, core, mem);
}

/* The Pod's nvshare.com/gpu-memory request (bytes, 0 none). */
static void set_request(struct client *cl, uint64_t bytes)
{
	if (cl->pod_mem_request == bytes)
		return;
	char b[32] = "none";
	if (bytes)
		nvs_format_size(bytes, b, sizeof b);
	NVS_INFO("client=%u pid=%d pod %s/%s %s request: %s", cl->id, (int)cl->pid,
		 cl->pod_namespace, cl->pod_name, NVS_K8S_RES_MEM, b);
	nvs_client_set_limits_from(cl, NVS_LIMIT_SRC_REQUEST, 0, bytes);
}

/* The client's view of Pod p: name, namespace, annotation limits, memory
 * request. */
static void apply(struct client *cl, const struct nvs_k8s_cached_pod *p)
{
	if (strcmp(cl->pod_name, p->name) || strcmp(cl->pod_namespace, p->ns)) {
		snprintf(cl->pod_name, sizeof cl->pod_name, "%s", p->name);
		snprintf(cl->pod_namespace, sizeof cl->pod_namespace, "%s", p->ns);
		NVS_INFO("client=%u pid=%d is in pod %s/%s (uid %s)", cl->id, (int)cl->pid, p->ns,
			 p->name, cl->pod_uid);
	}
	/* At HELLO nothing is attached yet: ATTACH_GPU sends the limits. */
	set_request(cl, p->mem_request);
	set_annotation_limits(cl, p->has_core ? (uint32_t)p->core : 0, p->has_mem ? p->mem : 0);
}

void nvs_pod_identify(struct client *cl)
{
	if (nvs_pod_uid_of_pid((int)cl->pid, cl->pod_uid, sizeof cl->pod_uid)) {
		cl->pod_uid[0] = '\0';
		return;
	}
	const struct nvs_k8s_cached_pod *p = nvs_k8s_pod_lookup(cl->pod_uid);
	if (p)
		apply(cl, p);
	else
		NVS_INFO("client=%u pid=%d is in pod uid %s (not known to the watch yet)", cl->id,
			 (int)cl->pid, cl->pod_uid);
}

static int in_pod(const struct client *cl, const struct nvs_k8s_cached_pod *p)
{
	if (!cl->pod_uid[0])
		return 0;
	return !strcmp(cl->pod_uid, p->uid) || (p->mirror[0] && !strcmp(cl->pod_uid, p->mirror));
}

void nvs_pod_changed(const struct nvs_k8s_cached_pod *p)
{
	for (struct client *cl = S.clients; cl; cl = cl->next)
		if (in_pod(cl, p))
			apply(cl, p);
}

void nvs_pod_removed(const struct nvs_k8s_cached_pod *p)
{
	for (struct client *cl = S.clients; cl; cl = cl->next) {
		if (!in_pod(cl, p))
			continue;
		NVS_INFO("client=%u pid=%d: pod %s/%s deleted; its annotation limits and "
			 "memory request no longer apply",
			 cl->id, (int)cl->pid, p->ns, p->name);
		set_request(cl, 0);
		set_annotation_limits(cl, 0, 0);
	}
}
