/*
 * Pod sockets, the device plugin's side (see bindings.h).
 *
 * Files, all under --host-socket-dir (the scheduler's socket directory,
 * which the plugin sees at the node's path), but the copies:
 *   bindings/<key>.json     the binding (0644, directory 0700): read by the
 *                           scheduler, which wants both owned by its user;
 *   pods/<key>/             mounted into the container (0755);
 *   pods/<key>/.device-plugin.json  our record of the allocation (0644);
 *   pods/<key>/scheduler.sock  the scheduler's Pod socket once bound, else
 *                           our hard link to the shared socket;
 *   <state-dir>/<key>.json  a copy of the record, on the node's disk.
 * Every file is written under a temporary name and renamed into place. One
 * mutex orders the gRPC threads and the main thread; PodResources calls and
 * the wait for the scheduler's socket run outside it.
 */
#include "bindings.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "podres.h"
#include "sockpath.h"

#define BIND_DIR "bindings"
#define PODS_DIR "pods"
#define LINK_TMP ".link-new"
/* Our own files; a record lists at most a few thousand memory units. */
#define FILE_MAX (1u << 20)
/* PodResources is rate-limited by the kubelet (burst 10, 100/s): a
 * PreStartContainer tries List this many times within its wait. */
#define LIST_TRIES 3
#define LIST_RETRY_MS 100
#define POLL_MS 10
/* --host-socket-dir and --state-dir at most (nvs_dp_bind_init refuses
 * longer ones). */
#define DIR_CAP 256

/* What we know of one allocation between lists. */
struct track {
	char key[NVS_DP_KEY_HEX + 1];
	unsigned misses; /* lists in a row that did not show it */
	struct track *next;
};

struct pod {
	char ns[64], name[256];
};

/* One allocation, as its record says. */
struct alloc {
	char key[NVS_DP_KEY_HEX + 1];
	char *resource;
	char **ids; /* sorted */
	size_t n;
	uint64_t seq;
	int bound; /* the record names pod: the key is that Pod's for good */
	struct pod pod;
};

struct allocs {
	struct alloc *a;
	size_t n;
};

static struct {
	struct nvs_dp_bind_cfg cfg;
	/* The socket directory is short (a socket path must fit in 108
	 * bytes), which keeps every path below PATH_MAX. */
	char bind_dir[DIR_CAP + 16], pods_dir[DIR_CAP + 16], shared[DIR_CAP + 16];
	char state_dir[DIR_CAP]; /* "" none */
	pthread_mutex_t mu;
	int podres;   /* 1 answered last time, -1 failed (said once), 0 not asked */
	uint64_t seq; /* the newest allocation's seq */
	dev_t sh_dev; /* the shared socket the links point at */
	ino_t sh_ino;
	int dirs_logged;  /* the directories' problem, said once */
	int state_logged; /* the state directory's problem, said once */
	struct track *tracks;
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A sorted copy of ids (the strings shared), or NULL when out of memory. */
static const char **sorted_ids(const char *const *ids, size_t n)
{
	const char **s = malloc((n ? n : 1) * sizeof *s);
	if (!s)
		return NULL;
	if (n)
		memcpy(s, ids, n * sizeof *s);
	qsort(s, n, sizeof *s, cmp_str);
	return s;
}

/* ---- keys ---- */

static int is_key(const char *s)
{
	for (int i = 0; i < NVS_DP_KEY_HEX; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* "<key>.json" -> key; 0 when the name is not one. */
static int json_name_key(const char *name, char key[NVS_DP_KEY_HEX + 1])
{
	if (strlen(name) != NVS_DP_KEY_HEX + 5 || strcmp(name + NVS_DP_KEY_HEX, ".json") ||
	    !is_key(name))
		return 0;
	memcpy(key, name, NVS_DP_KEY_HEX);
	key[NVS_DP_KEY_HEX] = '\0';
	return 1;
}

static int exists(const char *fmt_dir, const char *key, const char *suffix)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s%s", fmt_dir, key, suffix);
	return lstat(p, &st) == 0;
}

/* A key never seen here: 64 random bits, none of ours or another binder's
 * by that name (directory, binding or copy). Returns 0, or -1 (errno). */
static int new_key(char key[NVS_DP_KEY_HEX + 1])
{
	for (int tries = 0; tries < 8; tries++) {
		unsigned char b[8];
		if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
			return -1;
		for (int i = 0; i < 8; i++)
			snprintf(key + 2 * i, 3, "%02x", b[i]);
		if (!exists(G.pods_dir, key, "") && !exists(G.bind_dir, key, ".json") &&
		    !(G.state_dir[0] && exists(G.state_dir, key, ".json")))
			return 0;
	}
	errno = EEXIST;
	return -1;
}

/* ---- files and directories ---- */

/* Creates dir (mode) when missing; then it must be a directory (not a
 * symlink) of our uid that nobody else may write: the scheduler reads
 * bindings only from such a directory, and a directory another user may
 * write would let them plant files where we write as root. */
static int own_dir(const char *dir, mode_t mode, char *err, size_t errcap)
{
	if (mkdir(dir, mode) == 0) {
		if (chmod(dir, mode) < 0) {
			snprintf(err, errcap, "cannot chmod %s: %s", dir, strerror(errno));
			return -1;
		}
	} else if (errno != EEXIST) {
		snprintf(err, errcap, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	struct stat st;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errcap, "%s is not a directory", dir);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		snprintf(err, errcap,
			 "%s belongs to uid %d, not the plugin's uid %d (plugin and scheduler must "
			 "run as the same user)",
			 dir, (int)st.st_uid, (int)geteuid());
		return -1;
	}
	if (st.st_mode & 022) {
		snprintf(err, errcap, "%s is writable by group or others (mode %04o)", dir,
			 (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

/* Creates the parents of path (0755) that are missing. */
static int make_parents(const char *path, char *err, size_t errcap)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			snprintf(err, errcap, "cannot create %s: %s", p, strerror(errno));
			return -1;
		}
		*s = '/';
	}
	return 0;
}

/* The state directory (0700), when there is one; its problem is said
 * once, and only costs the copies. Returns 0 when it can be used. */
static int ensure_state_dir(void)
{
	if (!G.state_dir[0])
		return -1;
	char err[PATH_MAX + 128];
	int rc = make_parents(G.state_dir, err, sizeof err) ||
		 own_dir(G.state_dir, 0700, err, sizeof err);
	if (rc && !G.state_logged)
		NVS_WARN("Pod sockets: %s: allocation records are not kept on disk; after a "
			 "reboot, containers restarted with their checkpointed mounts find no "
			 "socket (--state-dir)",
			 err);
	G.state_logged = rc != 0;
	return rc ? -1 : 0;
}

/* The socket directory and ours in it; called under the lock before every
 * change (someone may have removed them). */
static int ensure_dirs(char *err, size_t errcap)
{
	if (!G.bind_dir[0]) {
		snprintf(err, errcap, "Pod sockets are not set up (--host-socket-dir)");
		return -1;
	}
	/* The socket directory's parents, as the scheduler makes them. */
	int rc = make_parents(G.cfg.sock_dir, err, errcap) ||
		 own_dir(G.cfg.sock_dir, 0755, err, errcap) ||
		 own_dir(G.bind_dir, 0700, err, errcap) || own_dir(G.pods_dir, 0755, err, errcap);
	if (rc && !G.dirs_logged)
		NVS_ERROR("Pod sockets: %s: Allocate fails until this is fixed", err);
	G.dirs_logged = rc != 0;
	return rc ? -1 : 0;
}

/* Writes text to dir/name (mode) through dir/.name.tmp and rename(). */
static int write_atomic(const char *dir, const char *name, const char *text, mode_t mode, char *err,
			size_t errcap)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	unlink(tmp); /* a leftover of ours: the directory is nobody else's */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		snprintf(err, errcap, "cannot create %s: %s", tmp, strerror(errno));
		return -1;
	}
	size_t len = strlen(text), off = 0;
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(err, errcap, "cannot write %s: %s", tmp, strerror(errno));
			close(fd);
			unlink(tmp);
			return -1;
		}
		off += (size_t)w;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		snprintf(err, errcap, "cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Reads dir/name, a JSON object: NULL when missing or not one. Never
 * follows a symlink or blocks on a FIFO. */
static cJSON *read_json(const char *dir, const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	char *buf = NULL;
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= FILE_MAX &&
	    (buf = malloc((size_t)st.st_size + 1)))
		n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	cJSON *j = NULL;
	if (n >= 0) {
		buf[n] = '\0';
		j = cJSON_Parse(buf);
	}
	free(buf);
	if (j && !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		j = NULL;
	}
	return j;
}

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The binding of key: 1 (pod filled, *ours whether we wrote it), 0 none,
 * -1 a file that is not a readable binding. */
static int read_binding(const char *key, struct pod *pod, int *ours)
{
	char name[NVS_DP_KEY_HEX + 8];
	snprintf(name, sizeof name, "%s.json", key);
	cJSON *j = read_json(G.bind_dir, name);
	if (!j) {
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/%s", G.bind_dir, name);
		struct stat st;
		return lstat(path, &st) == 0 ? -1 : 0;
	}
	const char *ns = jstr(j, "namespace"), *n = jstr(j, "name"), *o = jstr(j, "origin");
	int rc = ns && n ? 1 : -1;
	if (rc == 1) {
		snprintf(pod->ns, sizeof pod->ns, "%s", ns);
		snprintf(pod->name, sizeof pod->name, "%s", n);
	}
	if (ours)
		*ours = o && !strcmp(o, NVS_DP_BIND_ORIGIN);
	cJSON_Delete(j);
	return rc;
}

static int write_binding(const char *key, const struct pod *pod, char *err, size_t errcap)
{
	cJSON *j = cJSON_CreateObject();
	if (!j || !cJSON_AddStringToObject(j, "namespace", pod->ns) ||
	    !cJSON_AddStringToObject(j, "name", pod->name) ||
	    !cJSON_AddStringToObject(j, "origin", NVS_DP_BIND_ORIGIN)) {
		cJSON_Delete(j);
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	char *text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (!text) {
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	char name[NVS_DP_KEY_HEX + 8];
	snprintf(name, sizeof name, "%s.json", key);
	int rc = write_atomic(G.bind_dir, name, text, 0644, err, errcap);
	free(text);
	return rc;
}

static void remove_binding(const char *key)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s.json", G.bind_dir, key);
	unlink(path);
}

/* ---- the allocation's directory and socket ---- */

static void sock_path(const char *key, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s/%s", G.pods_dir, key, NVS_SOCK_NAME);
}

static int make_pod_dir(const char *key, char *err, size_t errcap)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/%s", G.pods_dir, key);
	return own_dir(dir, 0755, err, errcap);
}

/* Removes whatever socket file is at pods/<key>/scheduler.sock: only done
 * while the key has no binding, when a socket there is our link (or the
 * dead socket of a scheduler that was killed). */
static void unlink_sock(const char *key)
{
	char path[PATH_MAX];
	sock_path(key, path, sizeof path);
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
}

/* An unbound allocation's way to the scheduler: pods/<key>/scheduler.sock
 * made a hard link to the shared socket (link() to a temporary name, then
 * rename() over what is there). Connecting through any name of a socket's
 * inode reaches it. Returns 0 (linked, or already), -1 (logged at debug:
 * no shared socket yet, for one; the tick links once it appears). */
static int link_shared(const char *key)
{
	struct stat sh, st;
	if (stat(G.shared, &sh) < 0 || !S_ISSOCK(sh.st_mode)) {
		NVS_DEBUG("allocation %s: no shared socket %s to link to yet", key, G.shared);
		return -1;
	}
	char path[PATH_MAX], tmp[PATH_MAX], err[PATH_MAX + 128];
	sock_path(key, path, sizeof path);
	if (lstat(path, &st) == 0 && st.st_dev == sh.st_dev && st.st_ino == sh.st_ino)
		return 0;
	snprintf(tmp, sizeof tmp, "%s/%s/%s", G.pods_dir, key, LINK_TMP);
	/* The scheduler removes an empty Pod socket directory when a binding
	 * goes: made again if that raced with us. */
	for (int tries = 0; tries < 3; tries++) {
		if (make_pod_dir(key, err, sizeof err) < 0) {
			NVS_WARN("allocation %s: %s", key, err);
			return -1;
		}
		unlink(tmp);
		if (link(G.shared, tmp) == 0) {
			if (rename(tmp, path) == 0)
				return 0;
			unlink(tmp);
		}
		if (errno != ENOENT)
			break;
	}
	NVS_WARN("allocation %s: cannot link %s to the shared socket %s: %s: its container "
		 "cannot reach the scheduler until it is bound",
		 key, path, G.shared, strerror(errno));
	return -1;
}

/* Links key to the shared socket unless a binding of it is there. */
static void link_unbound(const char *key)
{
	struct pod cur;
	if (read_binding(key, &cur, NULL) != 1)
		link_shared(key);
}

/* ---- tracks ---- */

static struct track *track(const char *key)
{
	for (struct track *t = G.tracks; t; t = t->next)
		if (!strcmp(t->key, key))
			return t;
	struct track *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	snprintf(t->key, sizeof t->key, "%s", key);
	t->next = G.tracks;
	G.tracks = t;
	return t;
}

static void untrack(const char *key)
{
	for (struct track **pp = &G.tracks; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->key, key)) {
			struct track *t = *pp;
			*pp = t->next;
			free(t);
			return;
		}
}

/* Removes an allocation for good: binding, socket, record, directory,
 * copy. Its key is never used again (new_key: 64 random bits). */
static void remove_alloc(const char *key)
{
	remove_binding(key);
	unlink_sock(key);
	const char *leftovers[] = {LINK_TMP, NVS_DP_RECORD, "." NVS_DP_RECORD ".tmp"};
	char p[PATH_MAX];
	for (size_t i = 0; i < sizeof leftovers / sizeof leftovers[0]; i++) {
		snprintf(p, sizeof p, "%s/%s/%s", G.pods_dir, key, leftovers[i]);
		unlink(p);
	}
	snprintf(p, sizeof p, "%s/%s", G.pods_dir, key);
	if (rmdir(p) < 0 && errno != ENOENT)
		NVS_WARN("cannot remove %s: %s", p, strerror(errno));
	if (G.state_dir[0]) {
		snprintf(p, sizeof p, "%s/%s.json", G.state_dir, key);
		unlink(p);
	}
	untrack(key);
}

/* ---- records ---- */

static int same_pod(const struct pod *a, const struct pod *b)
{
	return !strcmp(a->ns, b->ns) && !strcmp(a->name, b->name);
}

/* The record's text: {"origin", "resource", "devices", "seq", "pod"?}. */
static char *record_text(const struct alloc *a)
{
	cJSON *j = cJSON_CreateObject();
	int ok = j && cJSON_AddStringToObject(j, "origin", NVS_DP_BIND_ORIGIN) &&
		 cJSON_AddStringToObject(j, "resource", a->resource);
	cJSON *d = ok ? cJSON_AddArrayToObject(j, "devices") : NULL;
	ok = d != NULL;
	for (size_t i = 0; ok && i < a->n; i++) {
		cJSON *s = cJSON_CreateString(a->ids[i]);
		ok = s && cJSON_AddItemToArray(d, s);
	}
	ok = ok && cJSON_AddNumberToObject(j, "seq", (double)a->seq);
	if (ok && a->bound) {
		cJSON *p = cJSON_AddObjectToObject(j, "pod");
		ok = p && cJSON_AddStringToObject(p, "namespace", a->pod.ns) &&
		     cJSON_AddStringToObject(p, "name", a->pod.name);
	}
	char *text = ok ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	return text;
}

/* pods/<key>/.device-plugin.json (the directory exists), readable by the
 * container, which sees its own devices and Pod in it, nothing else; and
 * its copy in the state directory. */
static int write_record(const struct alloc *a, char *err, size_t errcap)
{
	char *text = record_text(a);
	if (!text) {
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	char dir[PATH_MAX], name[NVS_DP_KEY_HEX + 8], cerr[PATH_MAX + 128];
	snprintf(dir, sizeof dir, "%s/%s", G.pods_dir, a->key);
	int rc = write_atomic(dir, NVS_DP_RECORD, text, 0644, err, errcap);
	snprintf(name, sizeof name, "%s.json", a->key);
	if (rc == 0 && ensure_state_dir() == 0 &&
	    write_atomic(G.state_dir, name, text, 0600, cerr, sizeof cerr) < 0)
		NVS_WARN("allocation %s: %s (its record is not kept on disk)", a->key, cerr);
	free(text);
	return rc;
}

static void free_alloc(struct alloc *a)
{
	for (size_t i = 0; a->ids && i < a->n; i++)
		free(a->ids[i]);
	free(a->ids);
	free(a->resource);
	memset(a, 0, sizeof *a);
}

static void free_allocs(struct allocs *as)
{
	for (size_t i = 0; i < as->n; i++)
		free_alloc(&as->a[i]);
	free(as->a);
	as->a = NULL;
	as->n = 0;
}

/* A record's JSON -> a (key set by the caller). Returns 0, or -1 when it
 * is not a record of ours. */
static int parse_record(const cJSON *j, struct alloc *a)
{
	const char *o = jstr(j, "origin"), *res = jstr(j, "resource");
	const cJSON *devs = cJSON_GetObjectItemCaseSensitive(j, "devices");
	const cJSON *seq = cJSON_GetObjectItemCaseSensitive(j, "seq");
	const cJSON *pod = cJSON_GetObjectItemCaseSensitive(j, "pod");
	if (!o || strcmp(o, NVS_DP_BIND_ORIGIN) || !res || !cJSON_IsArray(devs) ||
	    !cJSON_IsNumber(seq) || seq->valuedouble < 0)
		return -1;
	size_t n = (size_t)cJSON_GetArraySize(devs);
	a->resource = strdup(res);
	a->ids = calloc(n + 1, sizeof *a->ids);
	if (!a->resource || !a->ids)
		return -1;
	const cJSON *d;
	cJSON_ArrayForEach(d, devs)
	{
		if (!cJSON_IsString(d) || !(a->ids[a->n] = strdup(d->valuestring)))
			return -1;
		a->n++;
	}
	qsort(a->ids, a->n, sizeof *a->ids, cmp_str);
	a->seq = (uint64_t)seq->valuedouble;
	if (cJSON_IsObject(pod)) {
		const char *ns = jstr(pod, "namespace"), *name = jstr(pod, "name");
		if (!ns || !name)
			return -1;
		snprintf(a->pod.ns, sizeof a->pod.ns, "%s", ns);
		snprintf(a->pod.name, sizeof a->pod.name, "%s", name);
		a->bound = 1;
	}
	return 0;
}

static struct alloc *find_alloc(struct allocs *as, const char *key)
{
	for (size_t i = 0; i < as->n; i++)
		if (!strcmp(as->a[i].key, key))
			return &as->a[i];
	return NULL;
}

/* Reads dir/<name> as a record of key into as (when it is one and key is
 * not there yet). Returns the entry or NULL. */
static struct alloc *add_record(struct allocs *as, const char *dir, const char *name,
				const char *key)
{
	if (find_alloc(as, key))
		return NULL;
	cJSON *j = read_json(dir, name);
	if (!j)
		return NULL;
	void *grown = realloc(as->a, (as->n + 1) * sizeof *as->a);
	if (!grown) {
		cJSON_Delete(j);
		return NULL;
	}
	as->a = grown;
	struct alloc *a = &as->a[as->n];
	memset(a, 0, sizeof *a);
	snprintf(a->key, sizeof a->key, "%s", key);
	int rc = parse_record(j, a);
	cJSON_Delete(j);
	if (rc) {
		free_alloc(a);
		return NULL;
	}
	as->n++;
	return a;
}

/* Our allocations (under the lock): the directories pods/<key> with our
 * record, then the copies in the state directory whose directory is gone
 * (a reboot emptied the tmpfs): the directory and record are made again,
 * so that a container the kubelet restarts finds its mount. */
static void load_allocs(struct allocs *as)
{
	as->a = NULL;
	as->n = 0;
	DIR *d = opendir(G.pods_dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (strlen(e->d_name) != NVS_DP_KEY_HEX || !is_key(e->d_name))
			continue;
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s/%s", G.pods_dir, e->d_name);
		add_record(as, dir, NVS_DP_RECORD, e->d_name);
	}
	if (d)
		closedir(d);
	d = G.state_dir[0] ? opendir(G.state_dir) : NULL;
	while (d && (e = readdir(d))) {
		char key[NVS_DP_KEY_HEX + 1], err[PATH_MAX + 128];
		if (!json_name_key(e->d_name, key))
			continue;
		struct alloc *a = add_record(as, G.state_dir, e->d_name, key);
		if (!a)
			continue;
		if (make_pod_dir(key, err, sizeof err) < 0 || write_record(a, err, sizeof err) < 0)
			NVS_WARN("allocation %s: cannot restore its directory: %s", key, err);
		else
			NVS_INFO("allocation %s%s%s%s: directory restored from %s", key,
				 a->bound ? " (pod " : "", a->bound ? a->pod.ns : "",
				 a->bound ? ")" : "", G.state_dir);
	}
	if (d)
		closedir(d);
	for (size_t i = 0; i < as->n; i++)
		if (as->a[i].seq > G.seq)
			G.seq = as->a[i].seq;
}

static int same_devices(const struct alloc *a, const char *resource, const char *const *sorted,
			size_t n)
{
	if (strcmp(a->resource, resource) || a->n != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (strcmp(a->ids[i], sorted[i]))
			return 0;
	return 1;
}

/* The k newest allocations of exactly these devices, newest first, into
 * out (at most cap). Returns how many. */
static size_t newest_of(struct allocs *as, const char *resource, const char *const *sorted,
			size_t n, size_t k, struct alloc **out, size_t cap)
{
	size_t m = 0;
	if (k > cap)
		k = cap;
	for (size_t i = 0; i < as->n; i++) {
		struct alloc *a = &as->a[i];
		if (!same_devices(a, resource, sorted, n))
			continue;
		/* insertion into out[0..m), by seq descending, keeping k */
		size_t at = m;
		while (at > 0 && out[at - 1]->seq < a->seq)
			at--;
		if (at >= k)
			continue;
		if (m < k)
			m++;
		memmove(&out[at + 1], &out[at], (m - 1 - at) * sizeof *out);
		out[at] = a;
	}
	return m;
}

/* ---- PodResources ---- */

/* The outage is said once, when it starts; its end likewise. Under the
 * lock. */
static void podres_failed(const char *why)
{
	if (G.podres != -1)
		NVS_WARN("PodResources cannot say which Pod holds which devices (%s): Pod sockets "
			 "are OFF until it answers; containers connect on the shared socket and "
			 "the scheduler identifies them by their cgroup (mount the kubelet's "
			 "pod-resources directory into the plugin, --pod-resources-socket)",
			 why);
	G.podres = -1;
}

static void podres_answered(void)
{
	if (G.podres == -1)
		NVS_INFO("PodResources answers again (%s): Pod sockets on", G.cfg.podres_sock);
	G.podres = 1;
}

static int entry_of(const struct nvs_dp_podres_entry *e, const struct pod *p)
{
	return !strcmp(e->ns, p->ns) && !strcmp(e->pod, p->name);
}

static int entry_exact(const struct nvs_dp_podres_entry *e, const char *resource,
		       const char *const *sorted, size_t n)
{
	if (strcmp(e->resource, resource) || e->n_ids != n)
		return 0;
	const char **s = sorted_ids(e->ids, n);
	int same = s != NULL;
	for (size_t i = 0; same && i < n; i++)
		same = !strcmp(s[i], sorted[i]);
	free(s);
	return same;
}

/* Whether the container of e holds one of a's devices. */
static int entry_overlaps(const struct nvs_dp_podres_entry *e, const struct alloc *a)
{
	if (strcmp(e->resource, a->resource))
		return 0;
	for (size_t i = 0; i < e->n_ids; i++)
		if (bsearch(&e->ids[i], a->ids, a->n, sizeof *a->ids, cmp_str))
			return 1;
	return 0;
}

/* The Pod whose containers hold exactly these devices of this resource, and
 * how many of its containers do (*k): 1 (pod filled), 0 none, -1 more than
 * one Pod (why filled). */
static int find_pod(const struct nvs_dp_podres *pr, const char *resource, const char *const *sorted,
		    size_t n, struct pod *pod, size_t *k, char *why, size_t whycap)
{
	int found = 0;
	*k = 0;
	for (size_t i = 0; i < pr->n; i++) {
		const struct nvs_dp_podres_entry *e = &pr->e[i];
		if (!entry_exact(e, resource, sorted, n))
			continue;
		if (found && !entry_of(e, pod)) {
			snprintf(why, whycap, "both %s/%s and %s/%s hold them", pod->ns, pod->name,
				 e->ns, e->pod);
			return -1;
		}
		snprintf(pod->ns, sizeof pod->ns, "%s", e->ns);
		snprintf(pod->name, sizeof pod->name, "%s", e->pod);
		found = 1;
		(*k)++;
	}
	if (!found)
		snprintf(why, whycap, "no container in PodResources holds exactly them");
	return found;
}

/* Who holds a's devices now: bit 1 pod (may be NULL) holds one, bit 2
 * another Pod does, bit 4 pod is listed at all. */
#define HELD_BY_POD 1
#define HELD_BY_OTHER 2
#define POD_LISTED 4
static int holders(const struct nvs_dp_podres *pr, const struct alloc *a, const struct pod *pod)
{
	int r = 0;
	for (size_t i = 0; i < pr->n; i++) {
		const struct nvs_dp_podres_entry *e = &pr->e[i];
		int mine = pod && entry_of(e, pod);
		if (mine)
			r |= POD_LISTED;
		if (entry_overlaps(e, a))
			r |= mine ? HELD_BY_POD : HELD_BY_OTHER;
	}
	return r;
}

/* ---- binding ---- */

/* Binds a to pod (under the lock): the record first (the key is pod's for
 * good from then on), then the binding. Refused when the key is another
 * Pod's. Returns 1 written, 0 already there, -1 logged. */
static int bind_locked(struct alloc *a, const struct pod *pod, const char *how)
{
	char err[PATH_MAX + 128];
	if (a->bound && !same_pod(&a->pod, pod)) {
		NVS_ERROR("allocation %s is pod %s/%s's: never bound to %s/%s (%s)", a->key,
			  a->pod.ns, a->pod.name, pod->ns, pod->name, how);
		return -1;
	}
	if (make_pod_dir(a->key, err, sizeof err) < 0) {
		NVS_WARN("allocation %s: %s: not bound", a->key, err);
		return -1;
	}
	if (!a->bound) {
		a->bound = 1;
		a->pod = *pod;
		if (write_record(a, err, sizeof err) < 0) {
			a->bound = 0;
			NVS_WARN("allocation %s: %s: not bound", a->key, err);
			return -1;
		}
	}
	struct pod cur;
	int have = read_binding(a->key, &cur, NULL);
	if (have == 1 && same_pod(&cur, pod))
		return 0; /* already (a container restarted) */
	if (have == 1)
		NVS_WARN("allocation %s: its binding file named pod %s/%s, not %s/%s: rewritten",
			 a->key, cur.ns, cur.name, pod->ns, pod->name);
	else
		unlink_sock(a->key); /* the scheduler will not bind where our link answers */
	if (write_binding(a->key, pod, err, sizeof err) < 0) {
		NVS_WARN("allocation %s: %s: not bound", a->key, err);
		link_shared(a->key);
		return -1;
	}
	NVS_INFO("allocation %s bound to pod %s/%s (%s)", a->key, pod->ns, pod->name, how);
	return 1;
}

/* Waits until the scheduler listens on pods/<key>/scheduler.sock (a socket
 * that is not the shared one), at most until end. Returns the ms waited,
 * or -1. */
static long wait_sock(const char *key, uint64_t end)
{
	char path[PATH_MAX];
	sock_path(key, path, sizeof path);
	uint64_t t0 = mono_ms();
	for (;;) {
		struct stat st, sh;
		int have_sh = stat(G.shared, &sh) == 0;
		if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) &&
		    !(have_sh && st.st_dev == sh.st_dev && st.st_ino == sh.st_ino))
			return (long)(mono_ms() - t0);
		if (mono_ms() >= end)
			return -1;
		sleep_ms(POLL_MS);
	}
}

static void fmt_ids(const char *const *ids, size_t n, char *out, size_t cap)
{
	size_t off = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n && off < cap; i++)
		off += (size_t)snprintf(out + off, cap - off, "%s%s", i ? "," : "", ids[i]);
}

/* ---- the API ---- */

int nvs_dp_bind_init(const struct nvs_dp_bind_cfg *cfg)
{
	if (strlen(cfg->sock_dir) >= DIR_CAP ||
	    (cfg->state_dir && strlen(cfg->state_dir) >= DIR_CAP)) {
		NVS_ERROR("--host-socket-dir %s or --state-dir %s is longer than %d bytes",
			  cfg->sock_dir, cfg->state_dir ? cfg->state_dir : "", DIR_CAP - 1);
		return -1;
	}
	pthread_mutex_lock(&G.mu);
	G.cfg = *cfg;
	snprintf(G.bind_dir, sizeof G.bind_dir, "%s/%s", cfg->sock_dir, BIND_DIR);
	snprintf(G.pods_dir, sizeof G.pods_dir, "%s/%s", cfg->sock_dir, PODS_DIR);
	snprintf(G.shared, sizeof G.shared, "%s/%s", cfg->sock_dir, NVS_SOCK_NAME);
	snprintf(G.state_dir, sizeof G.state_dir, "%s", cfg->state_dir ? cfg->state_dir : "");
	char err[PATH_MAX + 128];
	int rc = ensure_dirs(err, sizeof err);
	if (rc == 0) {
		ensure_state_dir();
		struct allocs as;
		load_allocs(&as); /* G.seq; directories lost in a reboot made again */
		NVS_INFO("Pod sockets: %zu allocation(s) in %s, bindings in %s, records kept in "
			 "%s, PodResources %s",
			 as.n, G.pods_dir, G.bind_dir, G.state_dir[0] ? G.state_dir : "(nowhere)",
			 cfg->podres_sock);
		free_allocs(&as);
	}
	pthread_mutex_unlock(&G.mu);
	size_t longest = strlen(G.pods_dir) + 1 + NVS_DP_KEY_HEX + 1 + strlen(NVS_SOCK_NAME);
	if (longest >= NVS_SOCK_PATH_LEN)
		NVS_WARN("--host-socket-dir %s is too long for Pod sockets (%s/<key>/%s needs %zu "
			 "bytes, %zu fit): the scheduler cannot listen there",
			 cfg->sock_dir, G.pods_dir, NVS_SOCK_NAME, longest,
			 (size_t)NVS_SOCK_PATH_LEN - 1);
	return rc;
}

int nvs_dp_bind_allocate(const char *resource, const char *const *ids, size_t n, char *dir,
			 size_t cap, char *err, size_t errcap)
{
	struct alloc a = {.n = 0};
	a.resource = strdup(resource);
	a.ids = calloc(n + 1, sizeof *a.ids);
	int rc = a.resource && a.ids ? 0 : -1;
	for (size_t i = 0; rc == 0 && i < n; i++, a.n++)
		if (!(a.ids[i] = strdup(ids[i])))
			rc = -1;
	if (rc) {
		free_alloc(&a);
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	qsort(a.ids, a.n, sizeof *a.ids, cmp_str);
	pthread_mutex_lock(&G.mu);
	rc = ensure_dirs(err, errcap);
	if (rc == 0 && new_key(a.key) < 0) {
		snprintf(err, errcap, "cannot make an allocation key: %s", strerror(errno));
		rc = -1;
	}
	if (rc == 0) {
		a.seq = ++G.seq;
		rc = make_pod_dir(a.key, err, errcap) || write_record(&a, err, errcap) ? -1 : 0;
	}
	/* Unbound until PreStartContainer: the shared socket. */
	if (rc == 0)
		link_shared(a.key);
	pthread_mutex_unlock(&G.mu);
	if (rc == 0)
		snprintf(dir, cap, "%s/%s", G.pods_dir, a.key);
	free_alloc(&a);
	return rc;
}

void nvs_dp_bind_prestart(const char *resource, const char *const *ids, size_t n)
{
	char list[512], why[512] = "";
	const char **sorted = sorted_ids(ids, n);
	if (!sorted)
		return;
	fmt_ids(ids, n, list, sizeof list);
	/* Which Pod: PodResources, tried again briefly while it refuses (its
	 * rate limit) but not while its socket is missing. */
	struct pod pod = {{0}, {0}};
	size_t k = 0;
	int found = 0, answered = 0;
	uint64_t end = mono_ms() + G.cfg.wait_ms;
	for (int i = 0; i < LIST_TRIES; i++) {
		struct nvs_dp_podres pr;
		if (nvs_dp_podres_list(G.cfg.podres_sock, G.cfg.list_timeout_ms, &pr, why,
				       sizeof why) == 0) {
			answered = 1;
			found = find_pod(&pr, resource, sorted, n, &pod, &k, why, sizeof why);
			nvs_dp_podres_free(&pr);
			break;
		}
		if (access(G.cfg.podres_sock, F_OK) < 0 || mono_ms() + LIST_RETRY_MS >= end)
			break;
		sleep_ms(LIST_RETRY_MS);
	}
	pthread_mutex_lock(&G.mu);
	if (answered)
		podres_answered();
	else
		podres_failed(why);
	struct allocs as;
	load_allocs(&as);
	/* P's allocations of these devices are their k newest (bindings.h). */
	struct alloc *mine[8];
	size_t m = newest_of(&as, resource, sorted, n, found == 1 ? k : as.n, mine,
			     sizeof mine / sizeof mine[0]);
	char bound[8][NVS_DP_KEY_HEX + 1];
	size_t nbound = 0;
	for (size_t i = 0; i < m; i++) {
		if (found != 1)
			link_unbound(mine[i]->key);
		else if (bind_locked(mine[i], &pod, "PreStartContainer") >= 0)
			memcpy(bound[nbound++], mine[i]->key, sizeof bound[0]);
	}
	free_allocs(&as);
	pthread_mutex_unlock(&G.mu);
	free(sorted);
	for (size_t i = 0; i < nbound; i++) {
		long waited = wait_sock(bound[i], end);
		if (waited < 0)
			NVS_WARN(
			    "allocation %s (pod %s/%s): the scheduler has not opened its socket "
			    "within %llu ms (is it running?): the container starts without it "
			    "and reaches it once it does",
			    bound[i], pod.ns, pod.name, (unsigned long long)G.cfg.wait_ms);
		else
			NVS_INFO("allocation %s (pod %s/%s): socket ready after %ld ms", bound[i],
				 pod.ns, pod.name, waited);
	}
	if (nbound)
		return;
	if (found == 1)
		NVS_WARN("PreStartContainer %s [%s]: pod %s/%s holds them, but no allocation of "
			 "ours that is not another Pod's (see above, or its directory was lost "
			 "without --state-dir): not bound",
			 resource, list, pod.ns, pod.name);
	else if (answered)
		NVS_WARN("PreStartContainer %s [%s]: %s: not bound; the container connects on the "
			 "shared socket (identity by cgroup)",
			 resource, list, why);
	else
		NVS_INFO("PreStartContainer %s [%s]: not bound (PodResources cannot say); the "
			 "container connects on the shared socket (identity by cgroup)",
			 resource, list);
}

/* Our bindings whose allocation has no record left (removed by hand, or a
 * directory lost without --state-dir): nothing says they are right. */
static void remove_orphans(struct allocs *as)
{
	DIR *d = opendir(G.bind_dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char key[NVS_DP_KEY_HEX + 1];
		struct pod cur;
		int mine = 0;
		if (!json_name_key(e->d_name, key) || find_alloc(as, key) ||
		    read_binding(key, &cur, &mine) != 1 || !mine)
			continue;
		NVS_WARN("binding %s (pod %s/%s) has no allocation record: removed", key, cur.ns,
			 cur.name);
		remove_binding(key);
	}
	if (d)
		closedir(d);
}

/* One allocation, made before the list was asked for, against the list
 * (under the lock). */
static void reconcile_one(struct allocs *as, struct alloc *a, const struct nvs_dp_podres *pr)
{
	struct track *t = track(a->key);
	const char *reason = NULL;
	if (a->bound) {
		int h = holders(pr, a, &a->pod);
		if (h & HELD_BY_POD) {
			/* Its Pod runs: the binding file is there (restored after
			 * a reboot, or if it went). */
			bind_locked(a, &a->pod, "reconciliation");
			if (t)
				t->misses = 0;
			return;
		}
		if (h & POD_LISTED)
			reason = "its Pod is listed without its devices (a new Pod by that name)";
		else if (h & HELD_BY_OTHER)
			reason = "its devices are another Pod's now";
	} else {
		struct pod pod = {{0}, {0}};
		size_t k;
		char why[512];
		const char **sorted = (const char **)a->ids;
		if (find_pod(pr, a->resource, sorted, a->n, &pod, &k, why, sizeof why) == 1) {
			struct alloc *mine[8];
			size_t m = newest_of(as, a->resource, sorted, a->n, k, mine,
					     sizeof mine / sizeof mine[0]);
			for (size_t i = 0; i < m; i++)
				if (mine[i] == a) {
					bind_locked(a, &pod, "reconciliation");
					if (t)
						t->misses = 0;
					return;
				}
		}
		if (holders(pr, a, NULL) & HELD_BY_OTHER) {
			/* Held, maybe by its own Pod's containers while this
			 * one (an init container, which PodResources does not
			 * list) runs: kept until none holds them. */
			link_unbound(a->key);
			if (t)
				t->misses = 0;
			return;
		}
	}
	if (!reason) {
		if (t && ++t->misses < NVS_DP_STALE_LISTS) {
			link_unbound(a->key);
			return;
		}
		reason = "PodResources has not listed it for a while";
	}
	if (a->bound)
		NVS_INFO("allocation %s of pod %s/%s removed (binding, directory, record): %s",
			 a->key, a->pod.ns, a->pod.name, reason);
	else
		NVS_INFO("allocation %s removed (directory, record): %s", a->key, reason);
	remove_alloc(a->key);
}

int nvs_dp_bind_reconcile(void)
{
	pthread_mutex_lock(&G.mu);
	/* Allocations after this may be missing from the list. */
	uint64_t seq0 = G.seq;
	pthread_mutex_unlock(&G.mu);
	struct nvs_dp_podres pr;
	char why[512], err[PATH_MAX + 128];
	int answered =
	    nvs_dp_podres_list(G.cfg.podres_sock, G.cfg.list_timeout_ms, &pr, why, sizeof why) == 0;
	pthread_mutex_lock(&G.mu);
	struct allocs as = {0};
	if (ensure_dirs(err, sizeof err) < 0)
		goto out;
	load_allocs(&as);
	if (!answered) {
		podres_failed(why);
		/* Unbound allocations keep (or get) their link. */
		for (size_t i = 0; i < as.n; i++)
			link_unbound(as.a[i].key);
		goto out;
	}
	podres_answered();
	/* Only what the resources we serve hold. */
	size_t kept = 0;
	for (size_t i = 0; i < pr.n; i++) {
		const char *res = pr.e[i].resource;
		int ours = 0;
		for (int r = 0; r < 2; r++)
			ours |= G.cfg.resources[r] && !strcmp(G.cfg.resources[r], res);
		if (ours)
			pr.e[kept++] = pr.e[i];
	}
	pr.n = kept;
	for (size_t i = 0; i < as.n; i++)
		if (as.a[i].seq <= seq0)
			reconcile_one(&as, &as.a[i], &pr);
	remove_orphans(&as);
out:
	free_allocs(&as);
	pthread_mutex_unlock(&G.mu);
	if (answered)
		nvs_dp_podres_free(&pr);
	return answered ? 0 : -1;
}

void nvs_dp_bind_kubelet_restarted(void)
{
	pthread_mutex_lock(&G.mu);
	for (struct track *t = G.tracks; t; t = t->next)
		t->misses = 0;
	pthread_mutex_unlock(&G.mu);
}

void nvs_dp_bind_tick(void)
{
	struct stat sh;
	if (!G.bind_dir[0] || stat(G.shared, &sh) < 0 || !S_ISSOCK(sh.st_mode))
		return;
	pthread_mutex_lock(&G.mu);
	if (sh.st_dev == G.sh_dev && sh.st_ino == G.sh_ino) {
		pthread_mutex_unlock(&G.mu);
		return;
	}
	G.sh_dev = sh.st_dev;
	G.sh_ino = sh.st_ino;
	/* A new shared socket (the scheduler started or restarted): every
	 * unbound allocation of ours is linked to it. */
	struct allocs as;
	load_allocs(&as);
	size_t linked = 0;
	for (size_t i = 0; i < as.n; i++) {
		struct pod cur;
		if (read_binding(as.a[i].key, &cur, NULL) != 1 && link_shared(as.a[i].key) == 0)
			linked++;
	}
	free_allocs(&as);
	pthread_mutex_unlock(&G.mu);
	if (linked)
		NVS_INFO("shared socket %s (re)created: %zu unbound allocation(s) linked to it",
			 G.shared, linked);
}
