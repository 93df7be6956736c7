/*
 * Command-line parts the device plugin and the DRA driver share (both
 * main.c's): the probe flags (health.h), the message for a bad value, and
 * the end of the parse (no operand, every path absolute).
 */
#ifndef NVSHARE_DP_FLAGS_H
#define NVSHARE_DP_FLAGS_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "health.h"

/* "FLAG: expected WANT, got \"GOT\"" on stderr. Returns -1 (the parse's
 * failure). */
int nvs_dp_bad_flag(const char *flag, const char *want, const char *got);

/* The options getopt_long returns that the program's switch does not
 * handle: 'V' (--version) prints "PROGRAM VERSION" and 'h' (--help) the
 * usage on stdout, both exit 0; anything else prints the usage on stderr
 * and returns -1. */
int nvs_dp_flag_other(int opt, const char *program, void (*usage)(FILE *out));

/* --cdi-driver-kind: a CDI kind, vendor/class (one '/', no '=' or ','),
 * into *kind, or "none" (*kind ""). 0, or -1 (said). */
int nvs_dp_cdi_kind_flag(const char *arg, const char **kind);

/* --health-file PATH, --probe live|ready, --probe-max-age DURATION. */
struct nvs_dp_probe_opts {
	const char *health_file;
	int probe; /* 0 none, 1 live, 2 ready */
	uint64_t max_age_ms;
};
#define NVS_DP_PROBE_OPTS_INIT                                                                     \
	{                                                                                          \
		NULL, 0, NVS_DP_PROBE_MAX_AGE_MS                                                   \
	}

/* Their struct option entries, with the ids base, base + 1, base + 2. */
#define NVS_DP_PROBE_OPTIONS(base)                                                                 \
	{"health-file", required_argument, 0, (base)},                                             \
	    {"probe", required_argument, 0, (base) + 1},                                           \
	{                                                                                          \
		"probe-max-age", required_argument, 0, (base) + 2                                  \
	}

/* Option base + which (0, 1, 2) with its argument. 0, or -1 (said). */
int nvs_dp_probe_flag(struct nvs_dp_probe_opts *p, int which, const char *arg);

/* After the parse: with --probe, checks the file and returns the exit
 * status (nvs_dp_health_probe; 2 without --health-file). -1: no probe
 * asked, the program runs. */
int nvs_dp_probe_run(const struct nvs_dp_probe_opts *p);

/* After getopt_long: no operand is left and each of the n paths (NULL:
 * unset) is absolute. 0, or -1 (said). */
int nvs_dp_flags_end(int argc, char **argv, const char *const *paths, size_t n);

#endif
