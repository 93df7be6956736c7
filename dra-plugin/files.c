/* The files of a prepared claim (files.h). */
#include "files.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi.h"      /* nvs_dp_cdi_nodes */
#include "sockpath.h" /* NVS_DEFAULT_SOCK_DIR, NVS_SOCK_NAME */

void nvs_dra_key(const char *claim_uid, char out[NVS_DRA_KEY_HEX + 1])
{
	uint64_t h = 1469598103934665603ull;
	for (const char *s = "dra:"; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	for (const char *s = claim_uid; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	snprintf(out, NVS_DRA_KEY_HEX + 1, "%016llx", (unsigned long long)h);
}

int nvs_dra_write_atomic(const char *path, const char *data, unsigned mode, char *err,
			 size_t errcap)
{
	char tmp[4200];
	const char *slash = strrchr(path, '/');
	size_t dl = slash ? (size_t)(slash - path) : 0;
	/* A dot name: not <16 hex>.json, so the scheduler's scan and the CDI
	 * loader (*.json) skip it while it is written. */
	if ((size_t)snprintf(tmp, sizeof tmp, "%.*s%s.%s.tmp", (int)dl, path, slash ? "/" : "",
			     slash ? slash + 1 : path) >= sizeof tmp) {
		snprintf(err, errcap, "path too long: %s", path);
		return -1;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0) {
		snprintf(err, errcap, "cannot create %s: %s", tmp, strerror(errno));
		return -1;
	}
	size_t len = strlen(data);
	int rc = fchmod(fd, mode) == 0 && write(fd, data, len) == (ssize_t)len && fsync(fd) == 0
		     ? 0
		     : -1;
	int e = errno;
	if (close(fd))
		rc = -1;
	if (rc == 0 && rename(tmp, path))
		rc = -1, e = errno;
	if (rc) {
		snprintf(err, errcap, "cannot write %s: %s", path, strerror(e));
		unlink(tmp);
		return -1;
	}
	/* The rename itself is durable once the directory is synced. */
	char dir[4200];
	snprintf(dir, sizeof dir, "%.*s", (int)(dl ? dl : 1), slash ? path : ".");
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

void nvs_dra_binding_path(const struct nvs_dra_files_cfg *c, const char *key, char *out, size_t cap)
{
	snprintf(out, cap, "%s/bindings/%s.json", c->host_sock_dir, key);
}

void nvs_dra_pod_dir(const struct nvs_dra_files_cfg *c, const char *key, char *out, size_t cap)
{
	snprintf(out, cap, "%s/pods/%s", c->host_sock_dir, key);
}

void nvs_dra_cdi_path(const struct nvs_dra_files_cfg *c, const char *uid, char *out, size_t cap)
{
	snprintf(out, cap, "%s/nvshare.com-claim_%s.json", c->cdi_dir, uid);
}

void nvs_dra_cdi_id(const char *uid, const char *device, char *out, size_t cap)
{
	snprintf(out, cap, "%s=%s-%s", NVS_DRA_CDI_KIND, uid, device);
}

char *nvs_dra_binding_json(const struct nvs_dra_prepared *p)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "namespace", p->ns);
	if (p->pod_name[0]) {
		cJSON_AddStringToObject(j, "name", p->pod_name);
		cJSON_AddStringToObject(j, "uid", p->pod_uid);
	}
	cJSON_AddStringToObject(j, "origin", NVS_DRA_ORIGIN);
	char claim[sizeof p->ns + sizeof p->name + 2];
	snprintf(claim, sizeof claim, "%s/%s", p->ns, p->name);
	cJSON_AddStringToObject(j, "claim", claim);
	cJSON_AddNumberToObject(j, "core_limit", p->core_limit);
	cJSON_AddNumberToObject(j, "memory_limit", (double)p->mem_limit);
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

int nvs_dra_write_binding(const struct nvs_dra_files_cfg *c, const struct nvs_dra_prepared *p,
			  char *err, size_t errcap)
{
	char dir[4096], path[4200];
	snprintf(dir, sizeof dir, "%s/bindings", c->host_sock_dir);
	struct stat st;
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(err, errcap,
			 "the scheduler's bindings directory %s is missing: nvshare-scheduler is "
			 "not running on this node, or not on --host-socket-dir %s",
			 dir, c->host_sock_dir);
		return -1;
	}
	char *s = nvs_dra_binding_json(p);
	if (!s) {
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	nvs_dra_binding_path(c, p->key, path, sizeof path);
	int rc = nvs_dra_write_atomic(path, s, 0600, err, errcap);
	free(s);
	return rc;
}

static void add_env(cJSON *env, const char *k, const char *v)
{
	char b[8448];
	snprintf(b, sizeof b, "%s=%s", k, v);
	cJSON_AddItemToArray(env, cJSON_CreateString(b));
}

static void add_mount(cJSON *mounts, const char *host, const char *ctr, const char *rw)
{
	cJSON *m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "hostPath", host);
	cJSON_AddStringToObject(m, "containerPath", ctr);
	cJSON *o = cJSON_AddArrayToObject(m, "options");
	const char *opts[] = {rw, "nosuid", "nodev", "bind"};
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
		cJSON_AddItemToArray(o, cJSON_CreateString(opts[i]));
	cJSON_AddItemToArray(mounts, m);
}

int nvs_dra_write_cdi(const struct nvs_dra_files_cfg *c, const struct nvs_dra_prepared *p,
		      const int *minors, char *err, size_t errcap)
{
	cJSON *control = nvs_dp_cdi_nodes(c->dev_root, -1, 1);
	if (cJSON_GetArraySize(control) == 0) {
		cJSON_Delete(control);
		snprintf(err, errcap,
			 "no NVIDIA device node under %s/dev (nvidiactl, nvidia-uvm): CDI hands "
			 "GPUs over as device nodes, and the driver's are missing (--cdi-dev-root "
			 "is where the plugin sees the node's /dev)",
			 strcmp(c->dev_root, "/") ? c->dev_root : "");
		return -1;
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "cdiVersion", "0.5.0");
	cJSON_AddStringToObject(j, "kind", NVS_DRA_CDI_KIND);
	cJSON *devs = cJSON_AddArrayToObject(j, "devices");
	for (unsigned i = 0; i < p->ndev; i++) {
		int dup = 0; /* two results on one GPU: one CDI device */
		for (unsigned k = 0; k < i; k++)
			dup |= !strcmp(p->dev[k].device, p->dev[i].device);
		if (dup)
			continue;
		cJSON *nodes = nvs_dp_cdi_nodes(c->dev_root, minors[i], 0);
		if (cJSON_GetArraySize(nodes) == 0) {
			/* Unknown node: the control nodes, so that the device
			 * edits something (the CDI library refuses an empty
			 * device); the runtime keeps one node per path. */
			cJSON_Delete(nodes);
			nodes = cJSON_Duplicate(control, 1);
		}
		char name[NVS_POD_UID_LEN + NVS_DRA_LABEL_LEN + 2];
		snprintf(name, sizeof name, "%s-%s", p->uid, p->dev[i].device);
		cJSON *d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "name", name);
		cJSON *e = cJSON_AddObjectToObject(d, "containerEdits");
		cJSON_AddItemToObject(e, "deviceNodes", nodes);
		cJSON_AddItemToArray(devs, d);
	}
	cJSON *edits = cJSON_AddObjectToObject(j, "containerEdits");
	cJSON *env = cJSON_AddArrayToObject(edits, "env");
	char lib[4200], pod_dir[4200];
	snprintf(lib, sizeof lib, "%s/%s", c->container_lib_dir, c->lib_name);
	add_env(env, "LD_PRELOAD", lib);
	if (strcmp(c->container_sock_dir, NVS_DEFAULT_SOCK_DIR))
		add_env(env, "NVSHARE_SOCK_DIR", c->container_sock_dir);
	if (c->require_scheduler)
		add_env(env, "NVSHARE_REQUIRE_SCHEDULER", "1");
	cJSON *mounts = cJSON_AddArrayToObject(edits, "mounts");
	add_mount(mounts, c->host_lib_dir, c->container_lib_dir, "ro");
	nvs_dra_pod_dir(c, p->key, pod_dir, sizeof pod_dir);
	add_mount(mounts, pod_dir, c->container_sock_dir, "rw");
	cJSON_AddItemToObject(edits, "deviceNodes", control);
	char *s = cJSON_Print(j);
	cJSON_Delete(j);
	if (!s) {
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	char path[4200];
	nvs_dra_cdi_path(c, p->uid, path, sizeof path);
	int rc = nvs_dra_write_atomic(path, s, 0644, err, errcap);
	free(s);
	return rc;
}

void nvs_dra_remove_files(const struct nvs_dra_files_cfg *c, const struct nvs_dra_prepared *p)
{
	char path[4200];
	nvs_dra_binding_path(c, p->key, path, sizeof path);
	unlink(path);
	nvs_dra_cdi_path(c, p->uid, path, sizeof path);
	unlink(path);
	/* The scheduler removes its socket when the binding goes and then
	 * the directory; if it has not yet, it will (podsock.c drop()). */
	nvs_dra_pod_dir(c, p->key, path, sizeof path);
	rmdir(path);
}
