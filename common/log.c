#include "log.h"

#include "parse.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const char *component = "nvshare";
static int debug_enabled = -1; /* -1: not read yet */
static int json_format;	       /* NVSHARE_LOG_FORMAT=json */
static int journal_stream;     /* stderr is systemd's journal (JOURNAL_STREAM) */

/*
 * systemd sets JOURNAL_STREAM="DEV:INODE" of the stream it connected to
 * stderr. When stderr is still that stream (not redirected by a shell in
 * between), each line starts with a syslog priority "<N>", which journald
 * strips and stores as the entry's priority: `journalctl -p warning` then
 * shows the warnings (sd-daemon(3), SyslogLevelPrefix=).
 */
static int stderr_is_journal(void)
{
	const char *v = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	/* The system call, not fstat(): glibc's fstat symbol is new in 2.33,
	 * above the library's glibc floor (common/glibc_floor.h); the
	 * kernel's struct stat is glibc's on x86-64 and AArch64. */
	if (!v || sscanf(v, "%llu:%llu", &dev, &ino) != 2 || syscall(SYS_fstat, STDERR_FILENO, &st))
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void nvs_log_init(const char *name)
{
	component = name;
	nvs_log_reload_env();
}

void nvs_log_reload_env(void)
{
	const char *v = getenv("NVSHARE_DEBUG");
	int on = 0, bad = 0;
	/* Not nvs_env_bool: its warning would ask for the debug flag
	 * before it is set. The flag is set first, then the warning. */
	if (v && *v && nvs_parse_bool(v, &on)) {
		on = 0;
		bad = 1;
	}
	debug_enabled = on;
	/* Anything but "json" is the text format (the scheduler refuses a
	 * bad value at start; the library must not). */
	const char *f = getenv("NVSHARE_LOG_FORMAT");
	json_format = f && !strcmp(f, "json");
	journal_stream = stderr_is_journal();
	if (bad)
		nvs_log(NVS_LOG_WARN,
			"ignoring NVSHARE_DEBUG=\"%s\": expected 1 or 0 (debug stays off)", v);
}

void nvs_log_configure(int debug, int json)
{
	debug_enabled = debug != 0;
	json_format = json != 0;
}

/* NVSHARE_LOG_FORMAT=json: the text line's message as one JSON object per
 * line for log collectors, {"ts","level","component","msg"}. Control
 * characters, quotes and backslashes are escaped; other bytes pass. */
static size_t json_line(char *out, size_t cap, const char *ts, const char *level, const char *msg)
{
	int n =
	    snprintf(out, cap, "{\"ts\":\"%s\",\"level\":\"%s\",\"component\":\"%s\",\"msg\":\"",
		     ts, level, component);
	if (n < 0 || (size_t)n >= cap)
		return 0;
	size_t len = (size_t)n;
	for (const unsigned char *p = (const unsigned char *)msg; *p && len + 8 < cap; p++) {
		if (*p == '"' || *p == '\\') {
			out[len++] = '\\';
			out[len++] = (char)*p;
		} else if (*p < 0x20 || *p == 0x7f) {
			len += (size_t)snprintf(out + len, cap - len, "\\u%04x", *p);
		} else {
			out[len++] = (char)*p;
		}
	}
	memcpy(out + len, "\"}\n", 3);
	return len + 3;
}

int nvs_log_debug_enabled(void)
{
	if (debug_enabled < 0)
		nvs_log_reload_env();
	return debug_enabled;
}

/*
 * The scheduler's lines go through a bounded queue to a writer thread
 * (nvs_log_queue_start): its loop must never block on a slow stderr (a
 * pipe drained at 1 MB/s stalled it for tens of ms). A full queue drops
 * the line and counts it; the writer reports the drops once it catches
 * up. Without the queue (the client library, tools) each line is one
 * write(2), so concurrent lines do not interleave.
 */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *buf;
	size_t cap, head, len; /* ring: bytes [head, head+len) mod cap */
	int stop, done;
	pthread_t th;
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0, 0, 0, 0};
static _Atomic int q_on;
static _Atomic unsigned long long dropped;

unsigned long long nvs_log_dropped(void)
{
	return atomic_load(&dropped);
}

static void write_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(STDERR_FILENO, p, n);
		if (w <= 0)
			return; /* EINTR included: a log line is not worth a retry loop */
		p += w;
		n -= (size_t)w;
	}
}

static void emit(const char *line, size_t len)
{
	if (!atomic_load_explicit(&q_on, memory_order_acquire)) {
		ssize_t w = write(STDERR_FILENO, line, len);
		(void)w;
		return;
	}
	pthread_mutex_lock(&q.mu);
	if (q.cap - q.len < len) {
		atomic_fetch_add(&dropped, 1);
	} else {
		size_t tail = (q.head + q.len) % q.cap;
		size_t first = q.cap - tail < len ? q.cap - tail : len;
		memcpy(q.buf + tail, line, first);
		memcpy(q.buf, line + first, len - first);
		q.len += len;
		pthread_cond_signal(&q.cv);
	}
	pthread_mutex_unlock(&q.mu);
}

/* "N log lines dropped" once the queue is empty again (or at the end). */
static void report_drops(unsigned long long *reported)
{
	unsigned long long d = atomic_load(&dropped);
	if (d == *reported)
		return;
	char note[160];
	int k = snprintf(note, sizeof note,
			 "[nvshare][%s] %llu log line(s) dropped: stderr was not drained fast "
			 "enough\n",
			 component, d - *reported);
	if (k > 0)
		write_all(note, (size_t)k < sizeof note ? (size_t)k : sizeof note - 1);
	*reported = d;
}

static void *writer(void *arg)
{
	(void)arg;
	static char chunk[16384];
	unsigned long long reported = 0;
	pthread_mutex_lock(&q.mu);
	for (;;) {
		while (!q.len && !q.stop)
			pthread_cond_wait(&q.cv, &q.mu);
		if (!q.len && q.stop)
			break;
		size_t n = q.cap - q.head < q.len ? q.cap - q.head : q.len;
		if (n > sizeof chunk)
			n = sizeof chunk;
		memcpy(chunk, q.buf + q.head, n);
		q.head = (q.head + n) % q.cap;
		q.len -= n;
		int empty = !q.len;
		pthread_mutex_unlock(&q.mu);
		write_all(chunk, n);
		if (empty)
			report_drops(&reported);
		pthread_mutex_lock(&q.mu);
	}
	pthread_mutex_unlock(&q.mu);
	report_drops(&reported);
	pthread_mutex_lock(&q.mu);
	q.done = 1;
	pthread_cond_broadcast(&q.cv);
	pthread_mutex_unlock(&q.mu);
	return NULL;
}

int nvs_log_queue_start(unsigned long cap)
{
	if (atomic_load(&q_on) || !cap)
		return 0;
	q.buf = malloc(cap);
	if (!q.buf)
		return -1;
	q.cap = cap;
	q.head = q.len = 0;
	q.stop = q.done = 0;
	if (pthread_create(&q.th, NULL, writer, NULL)) {
		free(q.buf);
		q.buf = NULL;
		return -1;
	}
	atomic_store_explicit(&q_on, 1, memory_order_release);
	return 0;
}

void nvs_log_queue_stop(void)
{
	if (!atomic_load(&q_on))
		return;
	/* Drain what is queued, but do not hang on a stderr nobody reads:
	 * wait at most 2 s, then go on without the writer. */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	pthread_mutex_lock(&q.mu);
	q.stop = 1;
	pthread_cond_broadcast(&q.cv);
	while (!q.done)
		if (pthread_cond_timedwait(&q.cv, &q.mu, &until))
			break;
	int done = q.done;
	atomic_store_explicit(&q_on, 0, memory_order_release);
	pthread_mutex_unlock(&q.mu);
	if (done) {
		pthread_join(q.th, NULL);
		free(q.buf);
		q.buf = NULL;
	} else {
		pthread_detach(q.th);
	}
}

static void vlog(enum nvs_log_level level, unsigned suppressed, const char *fmt, va_list ap)
{
	static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
	static const char *jnames[] = {"debug", "info", "warn", "error"};
	static const char *prio[] = {"<7>", "<6>", "<4>", "<3>"}; /* syslog's levels */
	char line[1024];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm); /* ISO-8601 UTC: log collectors need no zone guess */
	char stamp[64];
	snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	int n = json_format
		    ? 0
		    : snprintf(line, sizeof line, "%s[nvshare][%s] %s %s ",
			       journal_stream ? prio[level] : "", component, stamp, names[level]);
	if (n < 0)
		return;
	int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof line - 2)
		len = sizeof line - 2;
	/* One event, one line: a field that came from a peer (a GPU UUID, a
	 * Pod name, a path) cannot end it and forge the next one. Control
	 * characters become '?' (the JSON format escapes them instead). */
	for (size_t i = (size_t)n; !json_format && i < len; i++)
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			line[i] = '?';
	if (suppressed && len < sizeof line - 1) {
		int k =
		    snprintf(line + len, sizeof line - len - 1, " (%u similar line%s suppressed)",
			     suppressed, suppressed == 1 ? "" : "s");
		len += k < 0 ? 0 : (size_t)k;
	}
	if (len > sizeof line - 2)
		len = sizeof line - 2;
	line[len++] = '\n';
	char jl[2 * sizeof line + 128];
	const char *out = line;
	if (json_format) {
		line[len - 1] = '\0';
		size_t pre = journal_stream ? 3 : 0; /* "<N>" */
		memcpy(jl, prio[level], pre);
		len = json_line(jl + pre, sizeof jl - pre, stamp, jnames[level], line);
		len = len ? len + pre : 0;
		out = jl;
	}
	emit(out, len);
}

static _Atomic(nvs_log_filter_fn) filter;

void nvs_log_set_filter(nvs_log_filter_fn f)
{
	atomic_store(&filter, f);
}

/* 0: the filter dropped the line. */
static int filtered(const char *fmt, enum nvs_log_level level, unsigned *suppressed)
{
	nvs_log_filter_fn f = atomic_load(&filter);
	if (!f || (level != NVS_LOG_INFO && level != NVS_LOG_WARN))
		return 1;
	unsigned n = 0;
	if (!f(fmt, level, &n))
		return 0;
	*suppressed += n;
	return 1;
}

void nvs_log(enum nvs_log_level level, const char *fmt, ...)
{
	if (level == NVS_LOG_DEBUG && !nvs_log_debug_enabled())
		return;
	unsigned suppressed = 0;
	if (!filtered(fmt, level, &suppressed))
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog(level, suppressed, fmt, ap);
	va_end(ap);
}

void nvs_log_n(enum nvs_log_level level, unsigned suppressed, const char *fmt, ...)
{
	if (level == NVS_LOG_DEBUG && !nvs_log_debug_enabled())
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog(level, suppressed, fmt, ap);
	va_end(ap);
}

static _Atomic unsigned long long warn_interval_ns;

void nvs_log_set_warn_interval(unsigned long long ns)
{
	atomic_store(&warn_interval_ns, ns);
}

void nvs_log_site(struct nvs_log_site *site, enum nvs_log_level level, const char *fmt, ...)
{
	unsigned long long iv = atomic_load(&warn_interval_ns);
	unsigned suppressed = 0;
	if (iv) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		unsigned long long now =
		    (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
		unsigned long long next = __atomic_load_n(&site->next_ns, __ATOMIC_RELAXED);
		/* One thread wins the slot; the others count themselves. */
		if (now < next ||
		    !__atomic_compare_exchange_n(&site->next_ns, &next, now + iv, 0,
						 __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			__atomic_fetch_add(&site->suppressed, 1, __ATOMIC_RELAXED);
			return;
		}
		suppressed = __atomic_exchange_n(&site->suppressed, 0, __ATOMIC_RELAXED);
	}
	if (!filtered(fmt, level, &suppressed))
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog(level, suppressed, fmt, ap);
	va_end(ap);
}
