/*
 * Strict configuration (docs/scheduler.md, "Running"): what one setting
 * cannot check alone. Every value was validated by its row of the table
 * (settings.def) already; here impossible combinations stop the start
 * (exit 2) with a message naming the settings and what is valid.
 */
#ifndef NVSHARE_SCHEDULER_CONFIG_CHECK_H
#define NVSHARE_SCHEDULER_CONFIG_CHECK_H

/* After the settings are read: a quota slice longer than the compute
 * window. Reports each; returns their number. */
int nvs_config_check_combinations(void);
/* Keeps the configured capacities (before the state file applies its own). */
void nvs_config_snapshot(void);
/* After GPU discovery: capacity list longer than the GPUs, capacity above
 * a GPU's memory, reserve not below it. Reports each; returns their
 * number. */
int nvs_config_check_gpus(void);

#endif
