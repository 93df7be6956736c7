/*
 * Logging shared by every component: one line per event on stderr,
 * "[nvshare][component] LEVEL message". NVSHARE_DEBUG=1 enables DEBUG.
 * Safe to call from any thread; never allocates.
 */
#ifndef NVSHARE_COMMON_LOG_H
#define NVSHARE_COMMON_LOG_H

enum nvs_log_level {
	NVS_LOG_DEBUG = 0,
	NVS_LOG_INFO = 1,
	NVS_LOG_WARN = 2,
	NVS_LOG_ERROR = 3,
};

/* Sets the component name shown in each line (a string literal). */
void nvs_log_init(const char *component);
/* Re-reads NVSHARE_DEBUG (and NVSHARE_LOG_FORMAT). */
void nvs_log_reload_env(void);
/* Sets both from a program's own settings instead (the scheduler). */
void nvs_log_configure(int debug, int json);
int nvs_log_debug_enabled(void);

void nvs_log(enum nvs_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* As nvs_log, with " (N similar lines suppressed)" appended when N > 0
 * (callers that rate-limit lines themselves). */
void nvs_log_n(enum nvs_log_level level, unsigned suppressed, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * A filter asked before each INFO or WARN line is formatted (not for
 * nvs_log_n, whose callers limit themselves): 0 drops the line, 1 logs it
 * with " (N similar lines suppressed)" when it sets *suppressed. The
 * scheduler rate-limits the lines a peer provokes with it (plog.h). NULL:
 * none (the default).
 */
typedef int (*nvs_log_filter_fn)(const char *fmt, enum nvs_log_level level, unsigned *suppressed);
void nvs_log_set_filter(nvs_log_filter_fn f);

/*
 * Non-blocking logging for a daemon's event loop: from nvs_log_queue_start
 * on, lines go into a bounded queue (cap bytes) that a writer thread
 * drains to stderr; a line that does not fit is dropped and counted
 * (nvs_log_dropped). nvs_log_queue_stop drains it (2 s at most). Without
 * it (the client library) every line is written directly.
 */
int nvs_log_queue_start(unsigned long cap);
void nvs_log_queue_stop(void);
unsigned long long nvs_log_dropped(void);

/*
 * Repeated warnings. Each NVS_WARN call site keeps its own limiter: once
 * nvs_log_set_warn_interval(ns) is set (the client library sets 10 s), a
 * site logs at most once per interval and its next line says how many were
 * suppressed meanwhile. An application's stderr must not fill because a
 * scheduler (or anything else) misbehaves in a loop. 0 (the default): every
 * warning is logged.
 */
struct nvs_log_site {
	unsigned long long next_ns; /* atomic */
	unsigned suppressed;	    /* atomic */
};
void nvs_log_set_warn_interval(unsigned long long ns);
void nvs_log_site(struct nvs_log_site *site, enum nvs_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define NVS_DEBUG(...)                                                                             \
	do {                                                                                       \
		if (nvs_log_debug_enabled())                                                       \
			nvs_log(NVS_LOG_DEBUG, __VA_ARGS__);                                       \
	} while (0)
#define NVS_INFO(...) nvs_log(NVS_LOG_INFO, __VA_ARGS__)
#define NVS_WARN(...)                                                                              \
	do {                                                                                       \
		static struct nvs_log_site nvs_site_;                                              \
		nvs_log_site(&nvs_site_, NVS_LOG_WARN, __VA_ARGS__);                               \
	} while (0)
#define NVS_ERROR(...) nvs_log(NVS_LOG_ERROR, __VA_ARGS__)

#endif
