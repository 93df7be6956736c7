/*
 * Parsers for the values users type: sizes, percentages, booleans,
 * durations, and the cgroup lines that identify a Kubernetes Pod.
 * All return 0 on success and -1 on bad input, leaving *out untouched.
 */
#ifndef NVSHARE_COMMON_PARSE_H
#define NVSHARE_COMMON_PARSE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Size with optional unit. Binary units Ki Mi Gi Ti (also KiB, MiB...), and
 * decimal-named units K M G T (also KB, MB...) which, as in nvshare, mean
 * powers of 1024 too (users write 4G and mean 4 GiB). A bare number is
 * multiplied by `bare_unit` (1 for bytes, 1<<20 where a bare number means MiB,
 * as in NVSHARE_GPU_MEMORY_LIMIT and the Pod annotation). Fractions such as
 * 1.5Gi are accepted. Overflow is an error.
 */
int nvs_parse_size(const char *s, uint64_t bare_unit, uint64_t *out);

/* Integer percentage lo..hi, optional trailing '%'. */
int nvs_parse_percent(const char *s, unsigned lo, unsigned hi, unsigned *out);

/* 1/0, true/false, yes/no, on/off (case-insensitive). */
int nvs_parse_bool(const char *s, int *out);

/* Non-negative integer milliseconds, optional unit ms, s (e.g. "30s"). */
int nvs_parse_duration_ms(const char *s, uint64_t *out);

/* TQ (time quantum, scheduler and nvsharectl): a bare number is seconds
 * (fractions allowed: "0.3"), or a duration with unit ("300ms", "30s",
 * "2m"). Range NVS_MIN_TQ_MS..NVS_MAX_TQ_MS. */
#define NVS_MIN_TQ_MS 1u
#define NVS_MAX_TQ_MS (24ull * 3600 * 1000)
int nvs_parse_tq_ms(const char *s, uint64_t *out);

/* Unsigned integer in range. */
int nvs_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* The position of s among the words "a|b|c" (0, 1, 2): the whole string,
 * exactly, or with icase case-insensitively. -1 when it is none of them. */
int nvs_parse_choice(const char *choices, const char *s, int icase);

/*
 * Extracts a Kubernetes Pod UID from one line of /proc/<pid>/cgroup (v1
 * "id:controllers:path" or v2 "0::path"), for the cgroupfs driver
 * (".../kubepods/burstable/pod<uid>/<container>") and the systemd driver
 * (".../kubepods-burstable-pod<uid with _>.slice/..."). Writes the UID with
 * dashes (36 chars + NUL) into out (cap >= 37). The Pod is the outermost
 * "pod<uid>" component after "kubepods" (a deeper one is a directory inside
 * the Pod's own cgroup, which its containers may name). Returns -1 if the
 * line names no Pod.
 */
int nvs_parse_cgroup_pod_uid(const char *line, char *out, size_t cap);

/* Kubernetes names as the API server takes them, for what a binding file
 * or the kubelet says (these two answer 1 for yes, 0 for no): a DNS label
 * (namespaces: lower-case letters, digits, '-') or, with dots, a DNS
 * subdomain (Pod and claim names), 1..max-1 characters; a UID (a UUID,
 * 36 characters, lower-case hex and dashes). */
int nvs_k8s_name_ok(const char *s, size_t max, int dots);
int nvs_k8s_uid_ok(const char *s);

/* Formats bytes as "512Mi", "4Gi", "1.5Gi" or "123" into buf. */
const char *nvs_format_size(uint64_t bytes, char *buf, size_t cap);

/* Reads an environment variable through the parsers above, logging a clear
 * warning naming the variable when the value is bad. Return 1 if set and
 * valid, 0 if unset, -1 if set but invalid (default kept). */
int nvs_env_size(const char *name, uint64_t bare_unit, uint64_t *out);
int nvs_env_bool(const char *name, int *out);
int nvs_env_percent(const char *name, unsigned lo, unsigned hi, unsigned *out);
int nvs_env_u64(const char *name, uint64_t lo, uint64_t hi, uint64_t *out);

#endif
