/* Device list strategies and the CDI spec (cdi.h). */
#include "cdi.h"

#include "log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
	const char *name;
	unsigned bit;
} strategies[] = {
    {"envvar", NVS_DP_LIST_ENVVAR},
    {"volume-mounts", NVS_DP_LIST_VOLUME_MOUNTS},
    {"cdi-annotations", NVS_DP_LIST_CDI_ANNOTATIONS},
    {"cdi-cri", NVS_DP_LIST_CDI_CRI},
};
#define NSTRATEGIES (sizeof strategies / sizeof strategies[0])

int nvs_dp_list_parse(const char *s, unsigned *mask)
{
	unsigned m = 0;
	const char *p = s;
	if (!s || !*s)
		return -1;
	for (;;) {
		size_t len = strcspn(p, ",");
		size_t i = 0;
		for (; i < NSTRATEGIES; i++)
			if (strlen(strategies[i].name) == len &&
			    !strncmp(p, strategies[i].name, len))
				break;
		if (i == NSTRATEGIES)
			return -1;
		m |= strategies[i].bit;
		p += len;
		if (!*p)
			break;
		p++;
	}
	*mask = m;
	return 0;
}

const char *nvs_dp_list_names(unsigned mask, char *buf, size_t cap)
{
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < NSTRATEGIES && off < cap; i++)
		if (mask & strategies[i].bit)
			off += (size_t)snprintf(buf + off, cap - off, "%s%s", off ? "," : "",
						strategies[i].name);
	return buf;
}

/* "nvshare.com/gpu" -> "nvshare.com_gpu": an annotation key's name part
 * allows letters, digits, '-', '_' and '.'. */
static void key_part(const char *resource, char *out, size_t cap)
{
	size_t i = 0;
	for (; resource[i] && i + 1 < cap; i++) {
		char ch = resource[i];
		int okc = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			  (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_';
		out[i] = okc ? ch : '_';
	}
	out[i] = '\0';
}

void nvs_dp_device_list(const struct nvs_dp_cdi_cfg *c, const char *resource, const char *uuids_csv,
			struct nvs_dp_list_out *out)
{
	memset(out, 0, sizeof *out);
	/* volume-mounts wins the variable when both are asked for: the
	 * toolkit then reads the mounts, and a variable listing UUIDs would
	 * be the forgeable kind again. */
	if (c->strategies & NVS_DP_LIST_VOLUME_MOUNTS)
		out->visible = NVS_DP_VOLUME_MOUNT_ROOT;
	else if (c->strategies & NVS_DP_LIST_ENVVAR)
		out->visible = uuids_csv;
	int driver = c->driver_kind && *c->driver_kind;
	size_t aoff = 0;
	for (const char *p = uuids_csv; *p;) {
		size_t len = strcspn(p, ",");
		if (len && len < NVS_DP_ID_MAX) {
			if ((c->strategies & NVS_DP_LIST_VOLUME_MOUNTS) &&
			    out->n_mounts < NVS_MAX_GPUS)
				snprintf(out->mount[out->n_mounts++], sizeof out->mount[0],
					 "%s/%.*s", NVS_DP_VOLUME_MOUNT_ROOT, (int)len, p);
			for (int d = 0; d <= driver; d++) {
				const char *kind = d ? c->driver_kind : NVS_DP_CDI_KIND;
				if ((c->strategies & NVS_DP_LIST_CDI_CRI) &&
				    out->n_cdi < sizeof out->cdi / sizeof out->cdi[0])
					snprintf(out->cdi[out->n_cdi++], sizeof out->cdi[0],
						 "%s=%.*s", kind, (int)len, p);
				if ((c->strategies & NVS_DP_LIST_CDI_ANNOTATIONS) &&
				    aoff < sizeof out->annotation_value)
					aoff += (size_t)snprintf(
					    out->annotation_value + aoff,
					    sizeof out->annotation_value - aoff, "%s%s=%.*s",
					    aoff ? "," : "", kind, (int)len, p);
			}
		}
		p += len;
		if (*p == ',')
			p++;
	}
	if ((c->strategies & NVS_DP_LIST_CDI_ANNOTATIONS) && aoff) {
		char k[64];
		key_part(resource, k, sizeof k);
		snprintf(out->annotation_key, sizeof out->annotation_key, "%s%s",
			 NVS_DP_CDI_ANNOTATION_PREFIX, k);
	}
}

/* ---- the spec ---- */

/* Adds {"path": P, "hostPath": <dev_root>P} when the node exists. */
static void add_node(cJSON *nodes, const char *dev_root, const char *path)
{
	char host[512];
	int root = dev_root && *dev_root && strcmp(dev_root, "/");
	snprintf(host, sizeof host, "%s%s", root ? dev_root : "", path);
	struct stat st;
	if (stat(host, &st) != 0)
		return;
	cJSON *n = cJSON_CreateObject();
	cJSON_AddStringToObject(n, "path", path);
	if (root)
		cJSON_AddStringToObject(n, "hostPath", host);
	cJSON_AddItemToArray(nodes, n);
}

static cJSON *device(const char *name, cJSON *nodes)
{
	cJSON *d = cJSON_CreateObject(), *e = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "name", name);
	cJSON_AddItemToObject(e, "deviceNodes", nodes);
	cJSON_AddItemToObject(d, "containerEdits", e);
	return d;
}

/* The control nodes every GPU needs; nvidia-ctk puts them in the
 * spec-wide edits. */
static const char *const ctl_nodes[] = {"/dev/nvidiactl", "/dev/nvidia-uvm",
					"/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"};

static cJSON *control_nodes(const char *dev_root)
{
	cJSON *cn = cJSON_CreateArray();
	for (size_t i = 0; i < sizeof ctl_nodes / sizeof ctl_nodes[0]; i++)
		add_node(cn, dev_root, ctl_nodes[i]);
	return cn;
}

/* A CDI device must edit something (the CDI library refuses a spec with an
 * empty device): a GPU whose own node is unknown (no NVML minor) or
 * missing gets the control nodes as its edits; the runtime replaces a
 * device node it already added under the same path. */
static cJSON *nodes_or_control(cJSON *nodes, const char *dev_root)
{
	if (cJSON_GetArraySize(nodes) > 0)
		return nodes;
	cJSON_Delete(nodes);
	return control_nodes(dev_root);
}

cJSON *nvs_dp_cdi_nodes(const char *dev_root, int minor, int control)
{
	cJSON *nodes = control ? control_nodes(dev_root) : cJSON_CreateArray();
	if (minor >= 0) {
		char path[32];
		snprintf(path, sizeof path, "/dev/nvidia%d", minor);
		add_node(nodes, dev_root, path);
	}
	return nodes;
}

static char *render(const struct nvs_dp_cdi_cfg *c, const struct nvs_dp_cdi_gpu *g, unsigned n,
		    char *err, size_t errcap)
{
	cJSON *common = control_nodes(c->dev_root);
	if (cJSON_GetArraySize(common) == 0) {
		cJSON_Delete(common);
		snprintf(
		    err, errcap,
		    "no NVIDIA device node under %s/dev (nvidiactl, nvidia-uvm): CDI hands "
		    "devices over as device nodes, and the driver's are missing (--cdi-dev-root "
		    "is where the plugin sees the node's /dev)",
		    strcmp(c->dev_root, "/") ? c->dev_root : "");
		return NULL;
	}
	cJSON *j = cJSON_CreateObject(), *devs = cJSON_CreateArray();
	/* 0.5.0: what nvidia-ctk writes for specs with device nodes and
	 * mounts only; read by every CDI-capable containerd and CRI-O. */
	cJSON_AddStringToObject(j, "cdiVersion", "0.5.0");
	cJSON_AddStringToObject(j, "kind", NVS_DP_CDI_KIND);
	cJSON *all = cJSON_CreateArray();
	for (unsigned i = 0; i < n; i++) {
		cJSON *nodes = cJSON_CreateArray();
		if (g[i].minor >= 0) {
			char path[32];
			snprintf(path, sizeof path, "/dev/nvidia%d", g[i].minor);
			add_node(nodes, c->dev_root, path);
			add_node(all, c->dev_root, path);
		}
		nodes = nodes_or_control(nodes, c->dev_root);
		/* By UUID (what Allocate names) and by index, as nvidia-ctk. */
		char idx[16];
		snprintf(idx, sizeof idx, "%u", i);
		cJSON_AddItemToArray(devs, device(g[i].uuid, nodes));
		cJSON_AddItemToArray(devs, device(idx, cJSON_Duplicate(nodes, 1)));
	}
	cJSON_AddItemToArray(devs, device("all", nodes_or_control(all, c->dev_root)));
	cJSON_AddItemToObject(j, "devices", devs);
	cJSON *edits = cJSON_CreateObject();
	cJSON_AddItemToObject(edits, "deviceNodes", common);
	cJSON_AddItemToObject(j, "containerEdits", edits);
	char *s = cJSON_Print(j);
	cJSON_Delete(j);
	if (!s)
		snprintf(err, errcap, "out of memory");
	return s;
}

int nvs_dp_mkdir_p(const char *dir, unsigned mode)
{
	char p[512];
	snprintf(p, sizeof p, "%s", dir);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char ch = *s;
		*s = '\0';
		if (mkdir(p, (mode_t)mode) && errno != EEXIST)
			return -1;
		*s = ch;
		if (!ch)
			return 0;
	}
}

int nvs_dp_cdi_write_spec(const struct nvs_dp_cdi_cfg *c, const struct nvs_dp_cdi_gpu *g,
			  unsigned n, char *err, size_t errcap)
{
	char path[512], tmp[520];
	snprintf(path, sizeof path, "%s/%s", c->spec_dir, NVS_DP_CDI_SPEC_FILE);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	if (nvs_dp_mkdir_p(c->spec_dir, 0755)) {
		snprintf(err, errcap, "cannot create %s: %s", c->spec_dir, strerror(errno));
		return -1;
	}
	char *s = render(c, g, n, err, errcap);
	if (!s)
		return -1;
	size_t len = strlen(s);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc = -1;
	if (fd >= 0) {
		ssize_t w = write(fd, s, len);
		rc = (w == (ssize_t)len && write(fd, "\n", 1) == 1 && fsync(fd) == 0) ? 0 : -1;
		if (close(fd))
			rc = -1;
	}
	if (rc == 0 && rename(tmp, path))
		rc = -1;
	if (rc) {
		snprintf(err, errcap, "cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
	}
	free(s);
	return rc;
}
