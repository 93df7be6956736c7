/* Prepare and Unprepare (driver.h). */
#include "driver.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "clock.h"
#include "log.h"
#include "parse.h"
#include "sockpath.h"

/* ---- names the kubelet sends ---- */

static int check_names(const char *ns, const char *uid, const char *name, char *err, size_t errcap)
{
	if (!nvs_k8s_name_ok(ns, NVS_K8S_NS_LEN, 0) ||
	    !nvs_k8s_name_ok(name, NVS_K8S_NAME_LEN, 1) || !nvs_k8s_uid_ok(uid)) {
		snprintf(err, errcap,
			 "not a claim: namespace \"%.63s\", name \"%.80s\", uid \"%.40s\" (names "
			 "in lower case, a UUID)",
			 ns, name, uid);
		return -1;
	}
	return 0;
}

/* ---- the registry (lock held) ---- */

static struct nvs_dra_prepared *find(struct nvs_dra_driver *d, const char *uid)
{
	for (struct nvs_dra_prepared *p = d->prepared; p; p = p->next)
		if (!strcmp(p->uid, uid))
			return p;
	return NULL;
}

static int save(struct nvs_dra_driver *d, char *err, size_t errcap)
{
	return nvs_dra_checkpoint_save(d->cfg->checkpoint, d->cfg->driver, d->cfg->node,
				       d->prepared, err, errcap);
}

/* What the prepared claims other than `skip` consume on device dev. */
static void used_on(const struct nvs_dra_driver *d, const char *dev, const char *skip,
		    uint64_t *mem, uint64_t *cores, unsigned *claims)
{
	*mem = *cores = 0;
	*claims = 0;
	for (const struct nvs_dra_prepared *p = d->prepared; p; p = p->next) {
		if (skip && !strcmp(p->uid, skip))
			continue;
		int counted = 0;
		for (unsigned i = 0; i < p->ndev; i++)
			if (!strcmp(p->dev[i].device, dev)) {
				*mem += p->dev[i].mem;
				*cores += p->dev[i].cores;
				counted = 1;
			}
		*claims += (unsigned)counted;
	}
}

/* ---- files ---- */

static int minors_of(struct nvs_dra_driver *d, const struct nvs_dra_prepared *p, int *minors)
{
	for (unsigned i = 0; i < p->ndev; i++) {
		struct nvs_dra_gpu g;
		minors[i] = nvs_dra_gpus_find(d->gpus, p->dev[i].device, &g) >= 0 ? g.minor : -1;
	}
	return 0;
}

static int exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Rewrites what went missing (a restarted node's /var/run, a removed
 * file). Returns 0, or -1 with err. */
static int restore_files(struct nvs_dra_driver *d, const struct nvs_dra_prepared *p, char *err,
			 size_t errcap)
{
	const struct nvs_dra_files_cfg *f = &d->cfg->files;
	char path[4200];
	nvs_dra_binding_path(f, p->key, path, sizeof path);
	if (!exists(path)) {
		if (nvs_dra_write_binding(f, p, err, errcap))
			return -1;
		NVS_INFO("claim %s/%s: binding %s rewritten", p->ns, p->name, p->key);
	}
	nvs_dra_pod_dir(f, p->key, path, sizeof path);
	mkdir(path, 0755);
	nvs_dra_cdi_path(f, p->uid, path, sizeof path);
	if (!exists(path)) {
		int minors[NVS_DRA_MAX_RESULTS];
		minors_of(d, p, minors);
		if (nvs_dra_write_cdi(f, p, minors, err, errcap))
			return -1;
		NVS_INFO("claim %s/%s: CDI spec rewritten", p->ns, p->name);
	}
	return 0;
}

/* Waits until the scheduler listens on the claim's Pod socket. */
static int wait_socket(struct nvs_dra_driver *d, const struct nvs_dra_prepared *p, char *err,
		       size_t errcap)
{
	char dir[4200], sock[4300];
	nvs_dra_pod_dir(&d->cfg->files, p->key, dir, sizeof dir);
	snprintf(sock, sizeof sock, "%s/%s", dir, NVS_SOCK_NAME);
	uint64_t end = nvs_dra_now_ms() + d->cfg->scheduler_wait_ms;
	for (;;) {
		struct stat st;
		if (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode))
			return 0;
		if (nvs_dra_now_ms() >= end)
			break;
		struct timespec ts = {0, 20 * 1000000};
		nanosleep(&ts, NULL);
	}
	snprintf(err, errcap,
		 "nvshare-scheduler opened no Pod socket %s within %llu ms of the binding: it "
		 "is not running, or runs as another user than this driver (uid %d) and "
		 "refused the binding (its log says why)",
		 sock, (unsigned long long)d->cfg->scheduler_wait_ms, (int)geteuid());
	return -1;
}

/* ---- Prepare ---- */

static int fetch(struct nvs_dra_driver *d, const char *ns, const char *uid, const char *name,
		 struct nvs_dra_claim *c, char *err, size_t errcap)
{
	char path[512];
	snprintf(path, sizeof path, "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s", ns,
		 name);
	struct nvs_kube_resp r;
	int rc = -1;
	if (nvs_kube_request(d->kube, "GET", path, NULL, &r)) {
		snprintf(err, errcap, "cannot read ResourceClaim %s/%s: %s", ns, name, r.err);
		goto out;
	}
	if (r.status != 200) {
		char m[200];
		nvs_kube_status_message(&r, m, sizeof m);
		snprintf(err, errcap,
			 "cannot read ResourceClaim %s/%s: the API server answered %ld%s%s", ns,
			 name, r.status, m[0] ? ": " : "", m);
		goto out;
	}
	char perr[300];
	if (nvs_dra_claim_parse(r.body, r.len, d->cfg->driver, c, perr, sizeof perr)) {
		snprintf(err, errcap, "ResourceClaim %s/%s: %s", ns, name, perr);
		goto out;
	}
	if (strcmp(c->uid, uid)) {
		snprintf(err, errcap,
			 "ResourceClaim %s/%s has uid %s, the kubelet asked for %s (deleted and "
			 "made again?)",
			 ns, name, c->uid, uid);
		goto out;
	}
	if (!c->allocated) {
		snprintf(err, errcap, "ResourceClaim %s/%s is not allocated", ns, name);
		goto out;
	}
	if (c->nres == 0) {
		snprintf(err, errcap, "ResourceClaim %s/%s has no device of driver %s", ns, name,
			 d->cfg->driver);
		goto out;
	}
	rc = 0;
out:
	nvs_kube_resp_free(&r);
	return rc;
}

/* The claim's devices into p (lock held): on this node, here, healthy,
 * and fitting beside the other prepared claims. */
static int devices(struct nvs_dra_driver *d, const struct nvs_dra_claim *c,
		   struct nvs_dra_prepared *p, char *err, size_t errcap)
{
	for (unsigned i = 0; i < c->nres; i++) {
		const struct nvs_dra_result *r = &c->res[i];
		struct nvs_dra_pdev *x = &p->dev[p->ndev++];
		struct nvs_dra_gpu g;
		if (strcmp(r->pool, d->cfg->node)) {
			snprintf(err, errcap, "device %s of pool %s is not on this node (pool %s)",
				 r->device, r->pool, d->cfg->node);
			return -1;
		}
		if (nvs_dra_gpus_find(d->gpus, r->device, &g) < 0) {
			snprintf(err, errcap, "device %s is not a GPU of node %s", r->device,
				 d->cfg->node);
			return -1;
		}
		if (!g.healthy) {
			snprintf(err, errcap, "GPU %s (%s) is unhealthy", r->device, g.uuid);
			return -1;
		}
		snprintf(x->request, sizeof x->request, "%s", r->request);
		snprintf(x->pool, sizeof x->pool, "%s", r->pool);
		snprintf(x->device, sizeof x->device, "%s", r->device);
		snprintf(x->share_id, sizeof x->share_id, "%s", r->share_id);
		snprintf(x->uuid, sizeof x->uuid, "%s", g.uuid);
		/* No entry: the whole GPU (an exclusive allocation, or a
		 * cluster without consumable capacity). */
		x->mem = r->has_mem ? r->mem : g.mem_capacity;
		x->cores = r->has_cores ? r->cores : 100;
		if (x->mem == 0 || x->cores == 0) {
			snprintf(err, errcap,
				 "the claim consumes no %s of GPU %s: nothing to run with",
				 x->mem ? "cores" : "memory", r->device);
			return -1;
		}
	}
	/* Capacity, per GPU: this claim's results on it plus the others'. */
	for (unsigned i = 0; i < p->ndev; i++) {
		const char *dev = p->dev[i].device;
		uint64_t mem = 0, cores = 0, omem, ocores;
		unsigned others;
		int first = 1;
		for (unsigned k = 0; k < p->ndev; k++)
			if (!strcmp(p->dev[k].device, dev)) {
				first &= k >= i;
				mem += p->dev[k].mem;
				cores += p->dev[k].cores;
			}
		if (!first)
			continue;
		struct nvs_dra_gpu g;
		nvs_dra_gpus_find(d->gpus, dev, &g);
		used_on(d, dev, p->uid, &omem, &ocores, &others);
		char a[32], b[32], t[32];
		if (omem + mem > g.mem_capacity) {
			uint64_t left = g.mem_capacity > omem ? g.mem_capacity - omem : 0;
			snprintf(
			    err, errcap,
			    "GPU %s (%s): the claim consumes %s of memory but %s of %s are left "
			    "(%u other claim(s) prepared on it)",
			    dev, g.uuid, nvs_dra_format_bytes(mem, a, sizeof a),
			    nvs_dra_format_bytes(left, b, sizeof b),
			    nvs_dra_format_bytes(g.mem_capacity, t, sizeof t), others);
			return -1;
		}
		if (ocores + cores > 100) {
			snprintf(err, errcap,
				 "GPU %s (%s): the claim consumes %llu %% of its cores but %llu %% "
				 "are left (%u other claim(s) prepared on it)",
				 dev, g.uuid, (unsigned long long)cores,
				 (unsigned long long)(ocores < 100 ? 100 - ocores : 0), others);
			return -1;
		}
		/* The ceiling: the smallest per-GPU share (limits apply to a
		 * process on every GPU it uses). */
		if (!p->mem_limit || mem < p->mem_limit)
			p->mem_limit = mem;
		if (!p->core_limit || cores < p->core_limit)
			p->core_limit = (uint32_t)cores;
	}
	return 0;
}

static int library_ok(struct nvs_dra_driver *d, char *err, size_t errcap)
{
	const struct nvs_dra_files_cfg *f = &d->cfg->files;
	char lib[4200];
	snprintf(lib, sizeof lib, "%s/%s", f->host_lib_dir, f->lib_name);
	if (!d->cfg->check_library || access(lib, R_OK) == 0)
		return 0;
	snprintf(err, errcap,
		 "%s is not on the node (the library image's init container installs it; "
		 "--no-library-check to skip this check)",
		 lib);
	return -1;
}

static void log_prepared(const struct nvs_dra_prepared *p, const char *how)
{
	char m[32];
	NVS_INFO("claim %s/%s (uid %s) %s: %u device(s), first %s (%s); ceiling %u %%, %s; "
		 "binding %s for %s%s",
		 p->ns, p->name, p->uid, how, p->ndev, p->dev[0].device, p->dev[0].uuid,
		 p->core_limit, nvs_format_size(p->mem_limit, m, sizeof m), p->key,
		 p->pod_name[0] ? "pod " : "no Pod (shared claim)", p->pod_name);
}

int nvs_dra_prepare(struct nvs_dra_driver *d, const char *ns, const char *uid, const char *name,
		    struct nvs_dra_prepared *out, char *err, size_t errcap)
{
	if (check_names(ns, uid, name, err, errcap))
		return -1;
	pthread_mutex_lock(&d->lock);
	struct nvs_dra_prepared *have = find(d, uid);
	if (have) {
		int rc = restore_files(d, have, err, errcap);
		if (rc == 0) {
			*out = *have;
			out->next = NULL;
		}
		pthread_mutex_unlock(&d->lock);
		if (rc == 0)
			NVS_DEBUG("claim %s/%s: prepared already", ns, name);
		return rc;
	}
	pthread_mutex_unlock(&d->lock);

	/* The API call without the lock: a slow API server must not hold
	 * up the main thread's readers. */
	struct nvs_dra_claim *c = malloc(sizeof *c);
	struct nvs_dra_prepared *p = calloc(1, sizeof *p);
	int rc = -1;
	if (!c || !p) {
		snprintf(err, errcap, "out of memory");
		goto out;
	}
	if (library_ok(d, err, errcap) || fetch(d, ns, uid, name, c, err, errcap))
		goto out;
	snprintf(p->uid, sizeof p->uid, "%s", uid);
	snprintf(p->ns, sizeof p->ns, "%s", ns);
	snprintf(p->name, sizeof p->name, "%s", name);
	nvs_dra_key(uid, p->key);
	int pod = nvs_dra_claim_single_pod(c);
	if (pod >= 0) {
		snprintf(p->pod_name, sizeof p->pod_name, "%s", c->pod[pod].name);
		snprintf(p->pod_uid, sizeof p->pod_uid, "%s", c->pod[pod].uid);
	}
	pthread_mutex_lock(&d->lock);
	char why[600];
	const struct nvs_dra_files_cfg *f = &d->cfg->files;
	if (devices(d, c, p, why, sizeof why)) {
		pthread_mutex_unlock(&d->lock);
		snprintf(err, errcap, "ResourceClaim %s/%s: %s", ns, name, why);
		goto out;
	}
	char dir[4200];
	int minors[NVS_DRA_MAX_RESULTS];
	minors_of(d, p, minors);
	nvs_dra_pod_dir(f, p->key, dir, sizeof dir);
	if (nvs_dra_write_binding(f, p, err, errcap)) {
		pthread_mutex_unlock(&d->lock);
		goto out;
	}
	/* The directory the CDI spec mounts: there from now on, whether or
	 * not the scheduler has made it yet (it listens in it). */
	if (mkdir(dir, 0755) && errno != EEXIST)
		NVS_WARN("cannot create %s: %s", dir, strerror(errno));
	if (wait_socket(d, p, err, errcap) || nvs_dra_write_cdi(f, p, minors, err, errcap)) {
		nvs_dra_remove_files(f, p);
		pthread_mutex_unlock(&d->lock);
		goto out;
	}
	p->next = d->prepared;
	d->prepared = p;
	d->nprepared++;
	if (save(d, why, sizeof why)) {
		d->prepared = p->next;
		d->nprepared--;
		nvs_dra_remove_files(f, p);
		pthread_mutex_unlock(&d->lock);
		snprintf(err, errcap, "checkpoint: %s", why);
		goto out;
	}
	*out = *p;
	out->next = NULL;
	pthread_mutex_unlock(&d->lock);
	log_prepared(p, "prepared");
	p = NULL; /* the registry's */
	rc = 0;
out:
	free(c);
	free(p);
	return rc;
}

int nvs_dra_unprepare(struct nvs_dra_driver *d, const char *ns, const char *uid, const char *name,
		      char *err, size_t errcap)
{
	if (check_names(ns, uid, name, err, errcap))
		return -1;
	pthread_mutex_lock(&d->lock);
	struct nvs_dra_prepared **pp = &d->prepared;
	while (*pp && strcmp((*pp)->uid, uid))
		pp = &(*pp)->next;
	struct nvs_dra_prepared *p = *pp;
	if (!p) {
		pthread_mutex_unlock(&d->lock);
		NVS_INFO("claim %s/%s (uid %s): not prepared here: nothing to undo", ns, name, uid);
		return 0;
	}
	*pp = p->next;
	d->nprepared--;
	char why[600];
	if (save(d, why, sizeof why)) {
		/* Still prepared as far as the next start knows: keep it so,
		 * and let the kubelet retry. */
		p->next = d->prepared;
		d->prepared = p;
		d->nprepared++;
		pthread_mutex_unlock(&d->lock);
		snprintf(err, errcap, "checkpoint: %s", why);
		return -1;
	}
	nvs_dra_remove_files(&d->cfg->files, p);
	pthread_mutex_unlock(&d->lock);
	NVS_INFO("claim %s/%s (uid %s) unprepared: binding %s, CDI spec removed", ns, name, uid,
		 p->key);
	free(p);
	return 0;
}

unsigned nvs_dra_prepared_count(struct nvs_dra_driver *d)
{
	pthread_mutex_lock(&d->lock);
	unsigned n = d->nprepared;
	pthread_mutex_unlock(&d->lock);
	return n;
}

int nvs_dra_driver_init(struct nvs_dra_driver *d, const struct nvs_dra_cfg *cfg,
			struct nvs_dra_gpus *gpus, struct nvs_kube *kube)
{
	memset(d, 0, sizeof *d);
	d->cfg = cfg;
	d->gpus = gpus;
	d->kube = kube;
	pthread_mutex_init(&d->lock, NULL);
	char err[700];
	int n = nvs_dra_checkpoint_load(cfg->checkpoint, cfg->driver, cfg->node, &d->prepared, err,
					sizeof err);
	if (n < 0) {
		char bad[4200];
		snprintf(bad, sizeof bad, "%s.bad", cfg->checkpoint);
		int moved = rename(cfg->checkpoint, bad) == 0;
		NVS_ERROR("%s; %s: starting with no prepared claim (the kubelet prepares its "
			  "claims again; files of the old ones stay until it unprepares them)",
			  err, moved ? "moved aside to .bad" : "cannot move it aside");
		if (!moved)
			return -1;
		d->prepared = NULL;
		return 0;
	}
	for (struct nvs_dra_prepared *p = d->prepared; p; p = p->next) {
		d->nprepared++;
		if (restore_files(d, p, err, sizeof err))
			NVS_WARN("claim %s/%s: %s (again at the next Prepare)", p->ns, p->name,
				 err);
		log_prepared(p, "recovered from the checkpoint");
	}
	if (n)
		NVS_INFO("%d prepared claim(s) recovered from %s", n, cfg->checkpoint);
	return n;
}

void nvs_dra_driver_fini(struct nvs_dra_driver *d)
{
	while (d->prepared) {
		struct nvs_dra_prepared *p = d->prepared;
		d->prepared = p->next;
		free(p);
	}
	pthread_mutex_destroy(&d->lock);
}
