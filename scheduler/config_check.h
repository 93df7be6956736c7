/*
 * Strict configuration (docs/scheduler.md, "Running"): the table of every
 * variable the scheduler reads with its flag and valid range. A bad value
 * or an impossible combination stops the start (exit 2) with a message
 * naming the variable or flag, the value and what is valid.
 */
#ifndef NVSHARE_SCHEDULER_CONFIG_CHECK_H
#define NVSHARE_SCHEDULER_CONFIG_CHECK_H

#include <getopt.h>

/* getopt val of the flags that only set their variable. */
#define NVS_CONFIG_ENV_FLAG 3000

/* Every long flag with a value is validated against the table (the same
 * message as its variable's); those that set a variable read later by its
 * module (--compute-window-ms ...) are exported before anything reads the
 * environment. -1 (reported) on a bad value. */
int nvs_config_env_flags(int argc, char **argv);
/* Appends those flags to a getopt table (they are then ignored there). */
void nvs_config_add_options(struct option *o, unsigned *n, unsigned cap);
/* Every variable in the environment: reports each bad one; returns their
 * number. */
int nvs_config_check_env(void);
/* Keeps the configured capacities (before the state file applies its own). */
void nvs_config_snapshot(void);
/* After GPU discovery: capacity list longer than the GPUs, capacity above
 * a GPU's memory, reserve not below it. Reports each; returns their
 * number. */
int nvs_config_check_gpus(void);

#endif
