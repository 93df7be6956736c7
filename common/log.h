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
/* Re-reads NVSHARE_DEBUG. */
void nvs_log_reload_env(void);
int nvs_log_debug_enabled(void);

void nvs_log(enum nvs_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define NVS_DEBUG(...)                                                                             \
	do {                                                                                       \
		if (nvs_log_debug_enabled())                                                       \
			nvs_log(NVS_LOG_DEBUG, __VA_ARGS__);                                       \
	} while (0)
#define NVS_INFO(...) nvs_log(NVS_LOG_INFO, __VA_ARGS__)
#define NVS_WARN(...) nvs_log(NVS_LOG_WARN, __VA_ARGS__)
#define NVS_ERROR(...) nvs_log(NVS_LOG_ERROR, __VA_ARGS__)

#endif
