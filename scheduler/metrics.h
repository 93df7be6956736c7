/*
 * Prometheus exporter (docs/metrics.md). Off unless enabled
 * (NVSHARE_METRICS_ENABLE=1 or --metrics): then an HTTP server with its own
 * thread (libmicrohttpd) serves /metrics and /healthz.
 *
 * The event loop never waits for a scrape: once per turn, after every other
 * timer (loop.h, NVS_LOOP_PUBLISH), the exporter's timer copies the numbers
 * it needs from the scheduler state into a fresh snapshot, at most every
 * NVS_METRICS_PUBLISH_MS, and swaps a pointer under a mutex held only for
 * the swap. The HTTP thread renders
 * text from the latest snapshot and queries NVML (utilization, memory) on
 * its own; the loop never calls NVML for metrics.
 *
 * Everything here except the HTTP thread's own work runs on the loop thread.
 */
#ifndef NVSHARE_SCHEDULER_METRICS_H
#define NVSHARE_SCHEDULER_METRICS_H

#include <stdint.h>

/* Snapshots are published at most this often (after state changes). */
#define NVS_METRICS_PUBLISH_MS 200u
/* ... and at least this often while some GPU has a lock holder, so hold
 * time counters advance without events. */
#define NVS_METRICS_REFRESH_MS 1000u

/* Rows of settings.def (defaults, ranges, variables, flags). */
struct nvs_metrics_config {
	int enable;
	unsigned port; /* 0: any free port (logged) */
	char addr[64]; /* IPv4 or IPv6 literal, without brackets */
	/* Client series per process (pid, host_pid, program name) instead of
	 * per tenant: NVSHARE_METRICS_PROCESS_LABELS=1, --metrics-process-labels.
	 * Off: those are tenants' private details, and their churn makes
	 * Prometheus's series count grow without bound. */
	int process_labels;
};

extern struct nvs_metrics_config nvs_metrics_cfg;

/* Starts the HTTP server when nvs_metrics_cfg.enable (after the GPUs are
 * discovered) and registers the snapshot's timer with the event loop. A
 * failure (address in use, bad address) is logged and the scheduler goes
 * on without metrics: returns -1; 0 when started or off. */
int nvs_metrics_start(void);
/* Stops the server and frees the snapshots. */
void nvs_metrics_stop(void);

#endif
