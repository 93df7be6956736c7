/*
 * The scheduler's settings (settings.def is the table; docs/scheduler.md
 * "Running" and "Where a setting comes from"): defaults, environment and
 * flags read at start, one validation per setting for every way a value
 * arrives (flag, variable, nvsharectl at run time, the state file), where
 * each value came from, and the settings' status, --help, docs table and
 * man page.
 *
 * Precedence at start: default < environment < flag. A value nvsharectl set
 * at run time and kept in the state file then applies over it, unless the
 * configuration changed since (state_file.h).
 *
 * Everything runs on the loop thread (or before the loop starts).
 */
#ifndef NVSHARE_SCHEDULER_SETTINGS_H
#define NVSHARE_SCHEDULER_SETTINGS_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct gpu;
struct sched_config;

enum nvs_setting_id {
#define NVS_SETTING(id, ...) NVS_SET_##id,
#include "settings.def"
#undef NVS_SETTING
	NVS_SET_COUNT
};

/* Row flags (settings.def). */
enum {
	SF_RUNTIME = 1u << 0, /* nvsharectl may change it (for all GPUs) */
	SF_GPU = 1u << 1,     /* ... and for one GPU */
	SF_ZERO_OFF = 1u << 2,
	SF_NONE = 1u << 3,
	SF_INVERT = 1u << 4,
	SF_DERIVED = 1u << 5,
};

/* Where a value in force came from (status "source"). */
enum nvs_setting_src {
	NVS_SRC_DEFAULT = 0,
	NVS_SRC_ENV,	 /* its NVSHARE_* variable */
	NVS_SRC_FLAG,	 /* its command-line flag */
	NVS_SRC_SAVED,	 /* the state file: set by nvsharectl before a restart */
	NVS_SRC_RUNTIME, /* nvsharectl, since this start */
	NVS_SRC_INHERIT, /* a GPU's value: the one for all GPUs (per-GPU only) */
};
const char *nvs_setting_src_name(enum nvs_setting_src src);

/* Start: the defaults, then the environment (every bad variable is
 * reported), then the flags (the first bad one is). Returns -1 to go on,
 * else the exit status: 0 after --help, --version (prints `version`) or
 * --help-table=md|man, 2 after a bad value (message on stderr naming the
 * flag or variable, the value and what is valid). */
int nvs_settings_load(int argc, char **argv, const char *version);
/* Only the table's defaults, into every variable (tests, fuzzing). */
void nvs_settings_defaults(void);

/* Lookups: the index, or -1. */
int nvs_setting_by_name(const char *name);
int nvs_setting_by_ctl(uint32_t field);
const char *nvs_setting_name(int id);
/* The CTL_SET field of a run-time setting (0: none) and its flags. */
uint32_t nvs_setting_ctl(int id);
unsigned nvs_setting_flags(int id);

/* A value for setting id arriving at run time (nvsharectl) or from the
 * state file, for GPU `gpu` (-1: all GPUs): the same range check as a
 * configured value, and for the capacity the GPU check of the start (not
 * above a known GPU's memory). 0, or -1 with why (names the setting, the
 * value and what is valid). */
int nvs_setting_check(int id, uint64_t v, int gpu, char *why, size_t cap);
/* Capacity `cap` (0: auto) for GPU g: 0, or -1 with why. Used at start,
 * at run time and for the state file, with the same words. */
int nvs_capacity_check(const struct gpu *g, uint64_t cap, char *why, size_t n);

/* Puts a checked number into the setting's variable (a capacity: for
 * every GPU); the caller notes its source and applies it to the GPUs. */
void nvs_setting_apply(int id, uint64_t v);

/* Provenance. A value set for all GPUs (gpu -1) makes every GPU follow it
 * (NVS_SRC_INHERIT); one set for a GPU is that GPU's own. */
void nvs_setting_note(int id, int gpu, enum nvs_setting_src src);
enum nvs_setting_src nvs_setting_source(int id, int gpu);
/* The value in force back to the configured one (default, environment or
 * flag) for all GPUs; every GPU follows it again. The caller applies the
 * variable to the GPUs. */
void nvs_setting_reset(int id);
/* The value in force differs from the configured one. */
int nvs_setting_changed(int id);
/* Text of the value in force / the configured value: human ("30s",
 * "512Mi") or exact (decimal numbers, for comparing: the state file). */
void nvs_setting_text(int id, char *buf, size_t cap);
void nvs_setting_configured_text(int id, int exact, char *buf, size_t cap);
/* A number as setting id shows it ("30s", "16Gi", "auto"). */
void nvs_setting_format(int id, uint64_t v, char *buf, size_t cap);
/* Where the configured value came from. */
enum nvs_setting_src nvs_setting_configured_source(int id);
/* "the flag --tq", "NVSHARE_TQ", "the default": for log lines. */
const char *nvs_setting_origin(int id, char *buf, size_t cap);

/* Status: {"<name>": {"value", "text", "source", "env", ...}, ...} and a
 * GPU's {"<name>": source} of its per-GPU settings. */
cJSON *nvs_settings_json(void);
cJSON *nvs_settings_gpu_sources(int gpu);

/* Generated texts: --help; the docs' table ("md") or the man page
 * ("man"). -1 for an unknown format. */
void nvs_settings_usage(FILE *f);
int nvs_settings_print_table(FILE *f, const char *format, const char *version);

/* Capacity: "16Gi" for every GPU, or a comma list per GPU index
 * ("16Gi,8Gi"; an empty item or "auto" leaves that GPU automatic). Fills
 * cfg->capacity_all or cfg->capacity[]. Returns 0 or -1. */
int nvs_parse_capacity_list(const char *s, struct sched_config *cfg);

/* Milliseconds: bare number is ms, or with unit ms/s/m. */
int nvs_parse_ms32(const char *s, uint32_t *out);

#endif
