/*
 * Pod sockets (podsock.h): one listening socket per binding file.
 *
 * The bindings directory is read whole (a scan): on start, when inotify
 * says something changed in it, and once a second in any case (a missed
 * event, a directory re-created). A scan costs one fstatat() per file; a
 * file is read again only when its inode, size or ctime (contents, mode,
 * owner) changed. Binders write a temporary name and rename() it into
 * place, so a scan never sees half a file; a name that is not
 * <16 hex>.json is not a binding.
 */
#include "clock.h"
#include "podsock.h"

#include "events.h"
#include "log.h"
#include "loop.h"
#include "parse.h"
#include "server.h"
#include "core/state.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

/* A binding file is small; anything larger is not one of ours. */
#define BIND_FILE_MAX 4096
#define SCAN_NS (1000ull * 1000000ull)

struct podsock {
	struct nvs_binding b;
	struct nvs_listener *l;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec ctime; /* changes with the contents, mode and owner */
	int seen;	       /* found by the scan under way */
	int bad;	       /* this version of the file was refused (logged once) */
	struct podsock *next;
};

static struct podsock *socks;
static unsigned nsocks;
static char bind_dir[NVS_SOCK_PATH_LEN + 16], pods_dir[NVS_SOCK_PATH_LEN + 16];
static int ino_fd = -1, ino_wd = -1;
static uint64_t next_scan_ns;
static int started, full_logged;

static int make_dirs(void);

/* ---- the binding file ---- */

static int is_key(const char *s, size_t n)
{
	if (n != NVS_BIND_KEY_HEX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void set_binding(struct nvs_binding *b, const char *ns, const char *name, const char *uid,
			const char *origin)
{
	snprintf(b->ns, sizeof b->ns, "%s", ns);
	snprintf(b->name, sizeof b->name, "%s", name);
	snprintf(b->uid, sizeof b->uid, "%s", uid);
	snprintf(b->origin, sizeof b->origin, "%s", origin);
}

/* An optional integer field in lo..hi: 0 absent (*v = 0), 1 present, -1
 * anything else (a string, a fraction, out of range). JSON numbers are
 * doubles: exact up to 2^53, more than any GPU's memory. */
static int int_field(const cJSON *o, const char *k, uint64_t lo, uint64_t hi, uint64_t *v)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, k);
	*v = 0;
	if (!n)
		return 0;
	if (!cJSON_IsNumber(n) || n->valuedouble < (double)lo || n->valuedouble > (double)hi ||
	    n->valuedouble != (double)(uint64_t)n->valuedouble)
		return -1;
	*v = (uint64_t)n->valuedouble;
	return 1;
}

/* Parses text into b (key already set). NULL, or why it is refused. */
static const char *parse(const char *text, struct nvs_binding *b)
{
	cJSON *j = cJSON_Parse(text);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return "not a JSON object";
	}
	const char *ns = str(j, "namespace"), *name = str(j, "name"), *uid = str(j, "uid"),
		   *origin = str(j, "origin");
	const char *why = NULL;
	uint64_t core = 0, mem = 0;
	int has_core = int_field(j, "core_limit", 1, 100, &core);
	int has_mem = int_field(j, "memory_limit", 1, 1ull << 53, &mem);
	int has_name = cJSON_GetObjectItemCaseSensitive(j, "name") != NULL;
	if (!ns || !nvs_k8s_name_ok(ns, sizeof b->ns, 0))
		why = "\"namespace\" missing or not a namespace name";
	else if (has_name && (!name || !nvs_k8s_name_ok(name, sizeof b->name, 1)))
		why = "\"name\" not a Pod name";
	else if (uid && *uid && !nvs_k8s_uid_ok(uid))
		why = "\"uid\" is not a Pod UID";
	else if (!has_name && uid)
		why = "\"uid\" without \"name\"";
	else if (origin && !nvs_k8s_name_ok(origin, sizeof b->origin, 1))
		why = "\"origin\" is not a plain name";
	else if (has_core < 0)
		why = "\"core_limit\" is not an integer percent 1..100";
	else if (has_mem < 0)
		why = "\"memory_limit\" is not a whole number of bytes > 0";
	else if (!has_name && !has_core && !has_mem)
		why = "\"name\" missing (a binding without a Pod must carry a ceiling)";
	if (!why) {
		set_binding(b, ns, name ? name : "", uid ? uid : "", origin ? origin : "");
		b->core_limit = (uint32_t)core;
		b->mem_limit = mem;
	}
	cJSON_Delete(j);
	return why;
}

/* Reads bindings/<name> into b. NULL, or why not. Never follows a
 * symlink, never blocks (a FIFO), reads only a regular file of ours that
 * nobody else may write. */
static const char *read_binding(int dfd, const char *name, struct nvs_binding *b)
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return strerror(errno);
	struct stat st;
	const char *why = NULL;
	char buf[BIND_FILE_MAX + 1];
	ssize_t n = 0;
	if (fstat(fd, &st) < 0)
		why = strerror(errno);
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (st.st_uid != geteuid() || (st.st_mode & 022))
		why = "not the scheduler user's, or writable by others";
	else if (st.st_size > BIND_FILE_MAX)
		why = "larger than 4 KiB";
	else if ((n = read(fd, buf, BIND_FILE_MAX)) < 0)
		why = strerror(errno);
	close(fd);
	if (why)
		return why;
	buf[n] = '\0';
	return parse(buf, b);
}

/* ---- sockets ---- */

static void sock_event(const char *name, const struct podsock *p, const char *reason)
{
	/* The ceiling, when the binding has one (pod_socket only). */
	char ceil[64] = "";
	if (!reason && (p->b.core_limit || p->b.mem_limit))
		snprintf(ceil, sizeof ceil, ",\"core_limit\":%u,\"memory_limit\":%llu",
			 p->b.core_limit, (unsigned long long)p->b.mem_limit);
	nvs_event(name, "\"key\":\"%s\",\"namespace\":\"%s\",\"pod\":\"%s\"%s%s%s%s", p->b.key,
		  p->b.ns, p->b.name, reason ? ",\"reason\":\"" : "", reason ? reason : "",
		  reason ? "\"" : "", ceil);
}

static void drop(struct podsock *p, const char *why)
{
	NVS_INFO("pod %s/%s: binding %s %s: closing its socket", p->b.ns, p->b.name, p->b.key, why);
	if (p->l)
		nvs_server_unlisten_pod(p->l);
	sock_event("pod_socket_closed", p, why);
	/* The directory is the binder's; an empty one we may tidy. */
	char dir[sizeof pods_dir + 32];
	snprintf(dir, sizeof dir, "%s/%s", pods_dir, p->b.key);
	rmdir(dir);
	free(p);
	nsocks--;
}

static struct podsock *find(const char *key)
{
	for (struct podsock *p = socks; p; p = p->next)
		if (!strcmp(p->b.key, key))
			return p;
	return NULL;
}

static void open_sock(struct podsock *p)
{
	char dir[sizeof pods_dir + 32];
	snprintf(dir, sizeof dir, "%s/%s", pods_dir, p->b.key);
	p->l = nvs_server_listen_pod(dir, &p->b);
	if (p->l)
		sock_event("pod_socket", p, NULL);
}

/* One directory entry of the scan. */
static void scan_one(int dfd, const char *name)
{
	size_t n = strlen(name);
	if (n != NVS_BIND_KEY_HEX + 5 || strcmp(name + NVS_BIND_KEY_HEX, ".json") ||
	    !is_key(name, NVS_BIND_KEY_HEX))
		return;
	char key[NVS_BIND_KEY_HEX + 1];
	memcpy(key, name, NVS_BIND_KEY_HEX);
	key[NVS_BIND_KEY_HEX] = '\0';
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	struct podsock *p = find(key);
	if (p && p->dev == st.st_dev && p->ino == st.st_ino && p->size == st.st_size &&
	    p->ctime.tv_sec == st.st_ctim.tv_sec && p->ctime.tv_nsec == st.st_ctim.tv_nsec) {
		p->seen = 1; /* unchanged (or unchanged and refused) */
		return;
	}
	struct nvs_binding b;
	memset(&b, 0, sizeof b);
	memcpy(b.key, key, sizeof b.key);
	const char *why = read_binding(dfd, name, &b);
	if (!p) {
		if (nsocks >= NVS_MAX_POD_SOCKETS) {
			if (!full_logged)
				NVS_ERROR("%u Pod sockets already: ignoring binding %s/%s and any "
					  "more until some go",
					  nsocks, bind_dir, name);
			full_logged = 1;
			return;
		}
		p = calloc(1, sizeof *p);
		if (!p)
			return;
		p->next = socks;
		socks = p;
		nsocks++;
		memcpy(p->b.key, key, sizeof p->b.key);
	}
	p->seen = 1;
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	p->size = st.st_size;
	p->ctime = st.st_ctim;
	if (why) {
		/* A bad file binds nothing: a socket it had stays closed. */
		NVS_WARN("%s/%s: not a usable binding (%s): no Pod socket for it", bind_dir, name,
			 why);
		char wq[160]; /* why names fields in quotes: escaped */
		nvs_event("pod_binding_refused", "\"key\":\"%s\",\"why\":%s", key,
			  nvs_json_str(why, wq, sizeof wq));
		if (p->l) {
			nvs_server_unlisten_pod(p->l);
			p->l = NULL;
		}
		p->bad = 1;
		return;
	}
	p->bad = 0;
	if (p->l && (strcmp(p->b.ns, b.ns) || strcmp(p->b.name, b.name))) {
		/* Another Pod now (the devices were allocated again): the old
		 * socket goes, with its backlog; connected peers keep the
		 * identity they were accepted with. */
		nvs_server_unlisten_pod(p->l);
		p->l = NULL;
	}
	int had = p->l != NULL;
	p->b = b;
	if (!had)
		open_sock(p);
	else
		NVS_INFO("pod %s/%s: binding %s updated (uid %s, ceiling %u %%, %llu bytes; "
			 "for new connections)",
			 b.ns, b.name, key, b.uid[0] ? b.uid : "not given", b.core_limit,
			 (unsigned long long)b.mem_limit);
}

/* timed: the once-a-second scan, which may re-create a directory that
 * was removed (an inotify-woken scan never does: it would race with
 * whoever is removing the tree, and the client socket's own check puts
 * the socket directory back first). */
static void scan(uint64_t now, int timed)
{
	if (timed)
		next_scan_ns = now + SCAN_NS;
	int dfd = open(bind_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		/* Gone (someone removed it): made again, empty, once the
		 * socket directory is back. The sockets stay until their
		 * bindings are seen to be gone: an empty directory says so on
		 * the next scan. */
		struct stat st;
		if (timed && stat(S.cfg.sock_dir, &st) == 0)
			make_dirs();
		return;
	}
	struct stat st;
	if (fstat(dfd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
		closedir(d);
		NVS_ERROR("%s is no longer the scheduler user's own directory: bindings ignored",
			  bind_dir);
		return;
	}
	for (struct podsock *p = socks; p; p = p->next)
		p->seen = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		scan_one(dfd, e->d_name);
	closedir(d);
	for (struct podsock **pp = &socks; *pp;) {
		struct podsock *p = *pp;
		if (p->seen) {
			/* A socket that could not be opened is tried again. */
			if (!p->l && !p->bad)
				open_sock(p);
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		drop(p, "removed");
	}
	if (nsocks < NVS_MAX_POD_SOCKETS)
		full_logged = 0;
}

/* ---- directories, inotify, the loop ---- */

static void watch_dir(void)
{
	if (ino_fd < 0)
		return;
	if (ino_wd >= 0)
		inotify_rm_watch(ino_fd, ino_wd);
	ino_wd = inotify_add_watch(ino_fd, bind_dir,
				   IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM |
				       IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_ONLYDIR);
}

static int make_dirs(void)
{
	if (mkdir(bind_dir, 0700) == 0)
		chmod(bind_dir, 0700);
	if (mkdir(pods_dir, 0755) == 0)
		chmod(pods_dir, 0755);
	if (nvs_server_own_dir(bind_dir, 0700, "Pod bindings") ||
	    nvs_server_own_dir(pods_dir, 0755, "Pod sockets"))
		return -1;
	watch_dir();
	return 0;
}

static void on_inotify(void *ctx, uint32_t events)
{
	char buf[4096];
	int again = 0;
	ssize_t n;
	while ((n = read(ino_fd, buf, sizeof buf)) > 0)
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			if (ev->mask & (IN_DELETE_SELF | IN_IGNORED | IN_Q_OVERFLOW))
				again = 1;
			p += sizeof *ev + ev->len;
		}
	if (again)
		ino_wd = -1;
	/* Scanned now: the binder is waiting for its socket. */
	scan(nvs_now_ns(), 0);
}

static void podsock_tick(uint64_t now)
{
	if (now >= next_scan_ns)
		scan(now, 1);
}

static uint64_t podsock_next_deadline(uint64_t now)
{
	return next_scan_ns;
}

int nvs_podsock_start(void)
{
	int a = snprintf(bind_dir, sizeof bind_dir, "%s/%s", S.cfg.sock_dir, NVS_BIND_DIR);
	int b = snprintf(pods_dir, sizeof pods_dir, "%s/%s", S.cfg.sock_dir, NVS_PODS_DIR);
	if (a < 0 || (size_t)a >= sizeof bind_dir || b < 0 || (size_t)b >= sizeof pods_dir)
		return -1;
	ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ino_fd < 0 || nvs_loop_add(ino_fd, EPOLLIN, on_inotify, NULL) < 0) {
		NVS_WARN("inotify: %s: Pod bindings are found by the once-a-second scan only",
			 strerror(errno));
		if (ino_fd >= 0)
			close(ino_fd);
		ino_fd = -1;
	}
	if (make_dirs())
		return -1;
	size_t longest = strlen(pods_dir) + 1 + NVS_BIND_KEY_HEX + 1 + strlen(NVS_SOCK_NAME);
	if (longest >= NVS_SOCK_PATH_LEN)
		NVS_WARN("socket directory %s is too long for Pod sockets (%s/<key>/%s needs %zu "
			 "bytes, %zu fit): Pods will connect on the shared socket only",
			 S.cfg.sock_dir, pods_dir, NVS_SOCK_NAME, longest,
			 (size_t)NVS_SOCK_PATH_LEN - 1);
	nvs_loop_timer(NVS_LOOP_ACCEPT, podsock_tick, podsock_next_deadline);
	started = 1;
	scan(nvs_now_ns(), 1);
	return 0;
}

void nvs_podsock_stop(void)
{
	if (!started)
		return;
	while (socks) {
		struct podsock *p = socks;
		socks = p->next;
		if (p->l)
			nvs_server_unlisten_pod(p->l);
		free(p);
	}
	nsocks = 0;
	if (ino_fd >= 0) {
		nvs_loop_remove(ino_fd);
		close(ino_fd);
	}
	ino_fd = ino_wd = -1;
	started = 0;
}

unsigned nvs_podsock_count(void)
{
	unsigned n = 0;
	for (const struct podsock *p = socks; p; p = p->next)
		n += p->l != NULL;
	return n;
}
