/*
 * Pod sockets, the device plugin's side (see bindings.h).
 *
 * Files, all under --host-socket-dir (the scheduler's socket directory,
 * which the plugin sees at the node's path):
 *   bindings/<key>.json     the binding (0600, directory 0700): read by the
 *                           scheduler, which wants both owned by its user;
 *   pods/<key>/             mounted into the container (0755);
 *   pods/<key>/.device-plugin.json  our record of the allocation (0644);
 *   pods/<key>/scheduler.sock  the scheduler's Pod socket once bound, else
 *                           our hard link to the shared socket.
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
/* How long unbinding waits for the scheduler to close the Pod socket
 * before putting the link in its place. */
#define UNBIND_WAIT_MS 1000
/* PodResources is rate-limited by the kubelet (burst 10, 100/s): a
 * PreStartContainer tries List this many times within its wait. */
#define LIST_TRIES 3
#define LIST_RETRY_MS 100
#define POLL_MS 10
/* --host-socket-dir at most (nvs_dp_bind_init refuses a longer one). */
#define DIR_CAP 256

/* What we know of one allocation between lists. */
struct track {
	char key[NVS_DP_KEY_HEX + 1];
	uint64_t alloc_gen; /* Allocate's generation (see reconcile) */
	unsigned misses;    /* lists in a row that did not show it */
	struct track *next;
};

struct pod {
	char ns[64], name[256];
};

static struct {
	struct nvs_dp_bind_cfg cfg;
	/* The socket directory is short (a socket path must fit in 108
	 * bytes), which keeps every path below PATH_MAX. */
	char bind_dir[DIR_CAP + 16], pods_dir[DIR_CAP + 16], shared[DIR_CAP + 16];
	pthread_mutex_t mu;
	int podres;   /* 1 answered last time, -1 failed (said once), 0 not asked */
	uint64_t gen; /* Allocate calls so far */
	dev_t sh_dev; /* the shared socket the links point at */
	ino_t sh_ino;
	int dirs_logged; /* the directories' problem, said once */
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

/* ---- the key ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static uint64_t fnv1a(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

int nvs_dp_bind_key(const char *resource, const char *const *ids, size_t n,
		    char key[NVS_DP_KEY_HEX + 1])
{
	const char **s = malloc((n ? n : 1) * sizeof *s);
	if (!s)
		return -1;
	memcpy(s, ids, n * sizeof *s);
	qsort(s, n, sizeof *s, cmp_str);
	/* resource "\n" id "\n" id "\n" ...: no ID holds a newline. */
	uint64_t h = 0xcbf29ce484222325ull;
	h = fnv1a(h, resource, strlen(resource));
	h = fnv1a(h, "\n", 1);
	for (size_t i = 0; i < n; i++) {
		h = fnv1a(h, s[i], strlen(s[i]));
		h = fnv1a(h, "\n", 1);
	}
	free(s);
	snprintf(key, NVS_DP_KEY_HEX + 1, "%016llx", (unsigned long long)h);
	return 0;
}

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

/* The socket directory and ours in it; called under the lock before every
 * change (someone may have removed them). */
static int ensure_dirs(char *err, size_t errcap)
{
	if (!G.bind_dir[0]) {
		snprintf(err, errcap, "Pod sockets are not set up (--host-socket-dir)");
		return -1;
	}
	/* The socket directory's parents, as the scheduler makes them. */
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", G.cfg.sock_dir);
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
	int rc = own_dir(G.cfg.sock_dir, 0755, err, errcap) ||
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
	int rc = write_atomic(G.bind_dir, name, text, 0600, err, errcap);
	free(text);
	return rc;
}

static void remove_binding(const char *key)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s.json", G.bind_dir, key);
	unlink(path);
}

/* pods/<key>/.device-plugin.json (the directory exists). Readable by the
 * container, which sees its own devices in it, nothing else. */
static int write_record(const char *key, const char *resource, const char *const *ids, size_t n,
			char *err, size_t errcap)
{
	char dir[DIR_CAP + 64], path[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/%s", G.pods_dir, key);
	snprintf(path, sizeof path, "%s/%s", dir, NVS_DP_RECORD);
	struct stat st;
	if (lstat(path, &st) == 0)
		return 0; /* the key is the content's hash */
	cJSON *j = cJSON_CreateObject();
	int ok = j && cJSON_AddStringToObject(j, "origin", NVS_DP_BIND_ORIGIN) &&
		 cJSON_AddStringToObject(j, "resource", resource);
	cJSON *a = ok ? cJSON_AddArrayToObject(j, "devices") : NULL;
	ok = a != NULL;
	for (size_t i = 0; ok && i < n; i++) {
		cJSON *s = cJSON_CreateString(ids[i]);
		ok = s && cJSON_AddItemToArray(a, s);
	}
	char *text = ok ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	if (!text) {
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	int rc = write_atomic(dir, NVS_DP_RECORD, text, 0644, err, errcap);
	free(text);
	return rc;
}

/* The record of key: its JSON, or NULL (not ours, or gone). */
static cJSON *read_record(const char *key)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/%s", G.pods_dir, key);
	cJSON *j = read_json(dir, NVS_DP_RECORD);
	const char *o = j ? jstr(j, "origin") : NULL;
	if (j && (!o || strcmp(o, NVS_DP_BIND_ORIGIN))) {
		cJSON_Delete(j);
		j = NULL;
	}
	return j;
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

/* Takes key's binding away (under the lock): the binding goes, the
 * scheduler closes its socket (waited for, bounded: it would not bind
 * again where our link answers, and says so), and the link takes its
 * place. The record keeps the directory from being removed meanwhile. */
static void unbind_locked(const char *key)
{
	remove_binding(key);
	char path[PATH_MAX];
	sock_path(key, path, sizeof path);
	struct stat sh, st;
	int have_sh = stat(G.shared, &sh) == 0;
	uint64_t end = mono_ms() + UNBIND_WAIT_MS;
	while (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) &&
	       !(have_sh && st.st_dev == sh.st_dev && st.st_ino == sh.st_ino) && mono_ms() < end)
		sleep_ms(POLL_MS);
	link_shared(key);
}

/* Removes an allocation: binding, socket, record, directory. */
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

static int ours(const char *resource)
{
	for (int i = 0; i < 2; i++)
		if (G.cfg.resources[i] && !strcmp(G.cfg.resources[i], resource))
			return 1;
	return 0;
}

static int same_ids(const struct nvs_dp_podres_entry *e, const char *const *sorted, size_t n)
{
	if (e->n_ids != n)
		return 0;
	const char **s = malloc((n ? n : 1) * sizeof *s);
	if (!s)
		return 0;
	memcpy(s, e->ids, n * sizeof *s);
	qsort(s, n, sizeof *s, cmp_str);
	int same = 1;
	for (size_t i = 0; same && i < n; i++)
		same = !strcmp(s[i], sorted[i]);
	free(s);
	return same;
}

/* The Pod whose container holds exactly these devices of this resource:
 * 1 (pod filled), 0 none, -1 more than one Pod (why filled). An init
 * container and an app container of one Pod may hold the same devices. */
static int find_pod(const struct nvs_dp_podres *pr, const char *resource, const char *const *ids,
		    size_t n, struct pod *pod, char *why, size_t whycap)
{
	const char **sorted = malloc((n ? n : 1) * sizeof *sorted);
	if (!sorted) {
		snprintf(why, whycap, "out of memory");
		return -1;
	}
	memcpy(sorted, ids, n * sizeof *sorted);
	qsort(sorted, n, sizeof *sorted, cmp_str);
	int found = 0;
	for (size_t i = 0; i < pr->n; i++) {
		const struct nvs_dp_podres_entry *e = &pr->e[i];
		if (strcmp(e->resource, resource) || !same_ids(e, sorted, n))
			continue;
		if (found && (strcmp(pod->ns, e->ns) || strcmp(pod->name, e->pod))) {
			snprintf(why, whycap, "both %s/%s and %s/%s hold them", pod->ns, pod->name,
				 e->ns, e->pod);
			found = -1;
			break;
		}
		snprintf(pod->ns, sizeof pod->ns, "%s", e->ns);
		snprintf(pod->name, sizeof pod->name, "%s", e->pod);
		found = 1;
	}
	free(sorted);
	if (!found)
		snprintf(why, whycap, "no Pod in PodResources holds them");
	return found;
}

/* ---- binding ---- */

/* Binds key to pod (under the lock). Returns 0 with *old_ino the inode of
 * the socket the scheduler must replace (0: none), -1 logged. */
static int bind_locked(const char *key, const struct pod *pod, const char *how, ino_t *old_ino)
{
	char err[PATH_MAX + 128], path[PATH_MAX];
	*old_ino = 0;
	if (make_pod_dir(key, err, sizeof err) < 0) {
		NVS_WARN("allocation %s: %s: not bound", key, err);
		return -1;
	}
	struct pod cur;
	int have = read_binding(key, &cur, NULL);
	sock_path(key, path, sizeof path);
	struct stat st;
	if (have == 1 && !strcmp(cur.ns, pod->ns) && !strcmp(cur.name, pod->name))
		return 0; /* already (a container restarted) */
	if (have == 1) {
		/* Another Pod holds these devices now: the scheduler closes its
		 * socket and opens a new one. */
		if (lstat(path, &st) == 0)
			*old_ino = st.st_ino;
	} else {
		/* Our link must go first: the scheduler will not bind over a
		 * path where a socket answers. */
		unlink_sock(key);
	}
	if (write_binding(key, pod, err, sizeof err) < 0) {
		/* Neither the new Pod nor the old one: the shared socket. */
		NVS_WARN("allocation %s: %s: not bound", key, err);
		unbind_locked(key);
		return -1;
	}
	NVS_INFO("allocation %s bound to pod %s/%s (%s)", key, pod->ns, pod->name, how);
	return 0;
}

/* Waits (bounded) until the scheduler listens on pods/<key>/scheduler.sock
 * with a socket other than old_ino. Returns the ms waited, or -1. */
static long wait_sock(const char *key, ino_t old_ino, uint64_t ms)
{
	char path[PATH_MAX];
	sock_path(key, path, sizeof path);
	uint64_t t0 = mono_ms(), end = t0 + ms;
	for (;;) {
		struct stat st;
		if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino != old_ino)
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

/* Keys of the allocations that are ours: a directory pods/<key> with our
 * record, or a binding we wrote (its record lost). Returns how many, the
 * keys in *out (malloc()ed). */
static size_t our_keys(char (**out)[NVS_DP_KEY_HEX + 1])
{
	char(*keys)[NVS_DP_KEY_HEX + 1] = NULL;
	size_t n = 0;
	const char *dirs[] = {G.pods_dir, G.bind_dir};
	for (int pass = 0; pass < 2; pass++) {
		DIR *d = opendir(dirs[pass]);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			char key[NVS_DP_KEY_HEX + 1];
			int mine = 0;
			struct pod pod;
			if (pass == 0) {
				if (strlen(e->d_name) != NVS_DP_KEY_HEX || !is_key(e->d_name))
					continue;
				snprintf(key, sizeof key, "%s", e->d_name);
				cJSON *r = read_record(key);
				mine = r != NULL;
				cJSON_Delete(r);
			} else {
				if (!json_name_key(e->d_name, key))
					continue;
				int dup = 0;
				for (size_t i = 0; i < n && !dup; i++)
					dup = !strcmp(keys[i], key);
				mine = !dup && read_binding(key, &pod, &mine) == 1 && mine;
			}
			if (!mine)
				continue;
			void *grown = realloc(keys, (n + 1) * sizeof *keys);
			if (!grown)
				break;
			keys = grown;
			memcpy(keys[n++], key, sizeof key);
		}
		closedir(d);
	}
	*out = keys;
	return n;
}

/* One allocation PodResources lists. */
struct live {
	char key[NVS_DP_KEY_HEX + 1];
	struct pod pod;
	const struct nvs_dp_podres_entry *e;
};

static int is_live(const struct live *l, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(l[i].key, key))
			return 1;
	return 0;
}

/* Whether a listed allocation holds one of the devices of key's record:
 * key's allocation then surely ended (the kubelet gives a device to one
 * container at a time). */
static int devices_taken(const char *key, const struct live *l, size_t n)
{
	cJSON *r = read_record(key);
	const char *res = r ? jstr(r, "resource") : NULL;
	const cJSON *devs = r ? cJSON_GetObjectItemCaseSensitive(r, "devices") : NULL;
	int taken = 0;
	const cJSON *d;
	cJSON_ArrayForEach(d, devs)
	{
		if (!cJSON_IsString(d) || !res)
			continue;
		for (size_t i = 0; i < n && !taken; i++) {
			if (strcmp(l[i].e->resource, res))
				continue;
			for (size_t k = 0; k < l[i].e->n_ids && !taken; k++)
				taken = !strcmp(l[i].e->ids[k], d->valuestring);
		}
		if (taken)
			break;
	}
	cJSON_Delete(r);
	return taken;
}

/* ---- the API ---- */

int nvs_dp_bind_init(const struct nvs_dp_bind_cfg *cfg)
{
	if (strlen(cfg->sock_dir) >= DIR_CAP) {
		NVS_ERROR("--host-socket-dir %s is longer than %d bytes", cfg->sock_dir,
			  DIR_CAP - 1);
		return -1;
	}
	pthread_mutex_lock(&G.mu);
	G.cfg = *cfg;
	snprintf(G.bind_dir, sizeof G.bind_dir, "%s/%s", cfg->sock_dir, BIND_DIR);
	snprintf(G.pods_dir, sizeof G.pods_dir, "%s/%s", cfg->sock_dir, PODS_DIR);
	snprintf(G.shared, sizeof G.shared, "%s/%s", cfg->sock_dir, NVS_SOCK_NAME);
	char err[PATH_MAX + 128];
	int rc = ensure_dirs(err, sizeof err);
	pthread_mutex_unlock(&G.mu);
	size_t longest = strlen(G.pods_dir) + 1 + NVS_DP_KEY_HEX + 1 + strlen(NVS_SOCK_NAME);
	if (longest >= NVS_SOCK_PATH_LEN)
		NVS_WARN("--host-socket-dir %s is too long for Pod sockets (%s/<key>/%s needs %zu "
			 "bytes, %zu fit): the scheduler cannot listen there",
			 cfg->sock_dir, G.pods_dir, NVS_SOCK_NAME, longest,
			 (size_t)NVS_SOCK_PATH_LEN - 1);
	if (rc == 0)
		NVS_INFO("Pod sockets: allocations in %s, bindings in %s, PodResources %s",
			 G.pods_dir, G.bind_dir, cfg->podres_sock);
	return rc;
}

/* pods/<key>/ and its record (under the lock). */
static int make_alloc(const char *key, const char *resource, const char *const *ids, size_t n,
		      char *err, size_t errcap)
{
	if (ensure_dirs(err, errcap) || make_pod_dir(key, err, errcap) ||
	    write_record(key, resource, ids, n, err, errcap))
		return -1;
	return 0;
}

int nvs_dp_bind_allocate(const char *resource, const char *const *ids, size_t n, char *dir,
			 size_t cap, char *err, size_t errcap)
{
	char key[NVS_DP_KEY_HEX + 1];
	if (nvs_dp_bind_key(resource, ids, n, key)) {
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	pthread_mutex_lock(&G.mu);
	int rc = make_alloc(key, resource, ids, n, err, errcap);
	if (!rc) {
		struct track *t = track(key);
		if (t) {
			t->alloc_gen = ++G.gen;
			t->misses = 0;
		}
		/* Unbound until PreStartContainer: the shared socket, unless a
		 * binding is there (the same devices, allocated again). */
		struct pod cur;
		if (read_binding(key, &cur, NULL) != 1)
			link_shared(key);
	}
	pthread_mutex_unlock(&G.mu);
	if (rc)
		return -1;
	snprintf(dir, cap, "%s/%s", G.pods_dir, key);
	return 0;
}

void nvs_dp_bind_prestart(const char *resource, const char *const *ids, size_t n)
{
	char key[NVS_DP_KEY_HEX + 1], list[512], why[512] = "";
	if (nvs_dp_bind_key(resource, ids, n, key))
		return;
	fmt_ids(ids, n, list, sizeof list);
	/* Which Pod: PodResources, tried again briefly while it refuses (its
	 * rate limit) but not while its socket is missing. */
	struct pod pod;
	int found = 0, answered = 0;
	uint64_t end = mono_ms() + G.cfg.wait_ms;
	for (int i = 0; i < LIST_TRIES; i++) {
		struct nvs_dp_podres pr;
		if (nvs_dp_podres_list(G.cfg.podres_sock, G.cfg.list_timeout_ms, &pr, why,
				       sizeof why) == 0) {
			answered = 1;
			found = find_pod(&pr, resource, ids, n, &pod, why, sizeof why);
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
	/* The directory and record again: after a node's reboot the kubelet
	 * starts containers of its checkpoint without Allocate. */
	char err[PATH_MAX + 128];
	if (make_alloc(key, resource, ids, n, err, sizeof err) < 0) {
		pthread_mutex_unlock(&G.mu);
		NVS_WARN("PreStartContainer %s [%s]: %s: not bound", resource, list, err);
		return;
	}
	if (found == 1) {
		ino_t old = 0;
		int rc = bind_locked(key, &pod, "PreStartContainer", &old);
		pthread_mutex_unlock(&G.mu);
		if (rc < 0)
			return;
		long waited = wait_sock(key, old, G.cfg.wait_ms);
		if (waited < 0)
			NVS_WARN(
			    "allocation %s (pod %s/%s): the scheduler has not opened its socket "
			    "within %llu ms (is it running?): the container starts without "
			    "it and reaches it once it does",
			    key, pod.ns, pod.name, (unsigned long long)G.cfg.wait_ms);
		else
			NVS_INFO("allocation %s (pod %s/%s): socket ready after %ld ms", key,
				 pod.ns, pod.name, waited);
		return;
	}
	/* Not bound: a binding left from before (the same devices, another
	 * Pod or the same one) cannot be confirmed, and a wrong one would be
	 * another Pod's identity. The shared socket instead. */
	struct pod cur;
	if (read_binding(key, &cur, NULL) == 1) {
		NVS_WARN("allocation %s: its binding to pod %s/%s cannot be confirmed: removed",
			 key, cur.ns, cur.name);
		unbind_locked(key);
	} else {
		link_shared(key);
	}
	pthread_mutex_unlock(&G.mu);
	if (answered)
		NVS_WARN("PreStartContainer %s [%s]: %s: not bound; the container connects on the "
			 "shared socket (identity by cgroup)",
			 resource, list, why);
	else
		NVS_INFO("PreStartContainer %s [%s]: not bound (PodResources cannot say); the "
			 "container connects on the shared socket (identity by cgroup)",
			 resource, list);
}

int nvs_dp_bind_reconcile(void)
{
	pthread_mutex_lock(&G.mu);
	uint64_t gen0 = G.gen; /* Allocate calls after this may be missing from the list */
	pthread_mutex_unlock(&G.mu);
	struct nvs_dp_podres pr;
	char why[512], err[PATH_MAX + 128];
	int answered =
	    nvs_dp_podres_list(G.cfg.podres_sock, G.cfg.list_timeout_ms, &pr, why, sizeof why) == 0;
	struct live *live = NULL;
	size_t nlive = 0;
	if (answered) {
		live = calloc(pr.n + 1, sizeof *live);
		for (size_t i = 0; live && i < pr.n; i++) {
			const struct nvs_dp_podres_entry *e = &pr.e[i];
			struct live *l = &live[nlive];
			if (!ours(e->resource) ||
			    nvs_dp_bind_key(e->resource, e->ids, e->n_ids, l->key))
				continue;
			snprintf(l->pod.ns, sizeof l->pod.ns, "%s", e->ns);
			snprintf(l->pod.name, sizeof l->pod.name, "%s", e->pod);
			l->e = e;
			nlive++;
		}
		if (!live) {
			nvs_dp_podres_free(&pr);
			answered = 0;
			snprintf(why, sizeof why, "out of memory");
		}
	}
	pthread_mutex_lock(&G.mu);
	char(*keys)[NVS_DP_KEY_HEX + 1] = NULL;
	size_t nkeys = 0;
	if (ensure_dirs(err, sizeof err) < 0)
		goto out;
	nkeys = our_keys(&keys);
	if (!answered) {
		podres_failed(why);
		/* Unbound allocations keep (or get) their link. */
		for (size_t i = 0; i < nkeys; i++) {
			struct pod cur;
			if (read_binding(keys[i], &cur, NULL) != 1)
				link_shared(keys[i]);
		}
		goto out;
	}
	podres_answered();
	/* What PodResources lists: bound, with a directory and a record. */
	for (size_t i = 0; i < nlive; i++) {
		const struct live *l = &live[i];
		ino_t old;
		if (make_alloc(l->key, l->e->resource, l->e->ids, l->e->n_ids, err, sizeof err) <
		    0) {
			NVS_WARN("allocation %s (pod %s/%s): %s", l->key, l->pod.ns, l->pod.name,
				 err);
			continue;
		}
		bind_locked(l->key, &l->pod, "reconciliation", &old);
		struct track *t = track(l->key);
		if (t)
			t->misses = 0;
	}
	/* What it does not list. */
	for (size_t i = 0; i < nkeys; i++) {
		const char *key = keys[i];
		if (is_live(live, nlive, key))
			continue;
		struct track *t = track(key);
		if (!t || t->alloc_gen > gen0)
			continue;
		t->misses++;
		struct pod cur;
		int have = read_binding(key, &cur, NULL);
		int taken = devices_taken(key, live, nlive);
		if (!taken && t->misses < NVS_DP_STALE_LISTS) {
			if (have != 1)
				link_shared(key);
			continue;
		}
		const char *reason = taken ? "its devices are another container's now"
					   : "PodResources has not listed it for a while";
		if (have == 1)
			NVS_INFO(
			    "allocation %s of pod %s/%s removed (binding, directory, record): %s",
			    key, cur.ns, cur.name, reason);
		else
			NVS_INFO("allocation %s removed (directory, record): %s", key, reason);
		remove_alloc(key);
		untrack(key);
	}
out:
	free(keys);
	pthread_mutex_unlock(&G.mu);
	free(live);
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
	if (stat(G.shared, &sh) < 0 || !S_ISSOCK(sh.st_mode))
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
	char(*keys)[NVS_DP_KEY_HEX + 1] = NULL;
	size_t nkeys = our_keys(&keys), linked = 0;
	for (size_t i = 0; i < nkeys; i++) {
		struct pod cur;
		if (read_binding(keys[i], &cur, NULL) != 1 && link_shared(keys[i]) == 0)
			linked++;
	}
	free(keys);
	pthread_mutex_unlock(&G.mu);
	if (linked)
		NVS_INFO("shared socket %s (re)created: %zu unbound allocation(s) linked to it",
			 G.shared, linked);
}
