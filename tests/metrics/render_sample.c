/*
 * Renders a hand-made exporter snapshot (no scheduler, no GPU) to stdout:
 * t_render.sh feeds it to promtool and checks escaping and histogram
 * arithmetic. Covers label values with backslash, quote and newline, a GPU
 * learned from a client (no NVML sample), no-limit memory, and every
 * client state; two processes of one Pod on one GPU (one tenant series).
 *
 *   render_sample [--no-nvml] [--process-labels]
 */
#include "scheduler/metrics_snap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Normally from policy.c; the same bounds. */
const uint64_t nvs_wait_bucket_le_us[NVS_WAIT_BUCKETS - 1] = {
    100, 1000, 5000, 10000, 50000, 100000, 500000, 1000000, 5000000, 30000000, 120000000,
};

int main(int argc, char **argv)
{
	int with_samples = 1, process_labels = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--no-nvml"))
			with_samples = 0;
		else if (!strcmp(argv[i], "--process-labels"))
			process_labels = 1;
		else
			return 2;
	}
	struct msnap_gpu gpus[2];
	struct msnap_client clients[3];
	struct msnap_entry entries[4];
	struct msnap_tenant tenants[4];
	memset(gpus, 0, sizeof gpus);
	memset(clients, 0, sizeof clients);
	memset(entries, 0, sizeof entries);

	gpus[0].index = 0;
	snprintf(gpus[0].uuid, sizeof gpus[0].uuid, "GPU-00000000-1111-2222-3333-444444444444");
	snprintf(gpus[0].name, sizeof gpus[0].name, "Sim \"GPU\"\\0\nline2");
	gpus[0].total_mem = 16ull << 30;
	gpus[0].from_nvml = 1;
	gpus[0].mode = 2;
	gpus[0].serialized = 1;
	gpus[0].tq_ns = 30000000000ull;
	gpus[0].capacity = (16ull << 30) - (512ull << 20);
	gpus[0].qlen = 1;
	gpus[0].nattached = 2;
	gpus[0].running = 1;
	gpus[0].allocated_sum = 20ull << 30;
	gpus[0].held_ns = 1500000001ull;
	gpus[0].st.grants = 7;
	gpus[0].st.revocations = 1;
	gpus[0].st.waits = 6;
	gpus[0].st.wait_ns = 2500000000ull;
	gpus[0].st.wait_hist[0] = 2;
	gpus[0].st.wait_hist[3] = 3;
	gpus[0].st.wait_hist[NVS_WAIT_BUCKETS - 1] = 1;
	gpus[0].handoffs = 5;

	gpus[1].index = 1;
	snprintf(gpus[1].uuid, sizeof gpus[1].uuid, "GPU-learned");
	gpus[1].total_mem = 0; /* unknown */
	gpus[1].capacity = UINT64_MAX;
	gpus[1].mode = 0;

	/* Newest first, as the scheduler lists them. */
	clients[0].id = 3;
	clients[0].host_pid = 4242;
	clients[0].uid = 1000;
	clients[0].pid = 1;
	snprintf(clients[0].name, sizeof clients[0].name, "python3 \"train.py\" C:\\x\n");
	snprintf(clients[0].pod, sizeof clients[0].pod, "trainer-0");
	snprintf(clients[0].pod_namespace, sizeof clients[0].pod_namespace, "ml");
	clients[0].first_entry = 0;
	clients[0].nentries = 2;
	clients[1].id = 2;
	clients[1].host_pid = 4343;
	clients[1].pid = 4343;
	snprintf(clients[1].name, sizeof clients[1].name, "sim_app");
	clients[1].first_entry = 2;
	clients[1].nentries = 1;
	/* A second process of the Pod of clients[0]. */
	clients[2].id = 1;
	clients[2].host_pid = 4444;
	clients[2].uid = 1000;
	clients[2].pid = 7;
	snprintf(clients[2].name, sizeof clients[2].name, "helper");
	snprintf(clients[2].pod, sizeof clients[2].pod, "trainer-0");
	snprintf(clients[2].pod_namespace, sizeof clients[2].pod_namespace, "ml");
	clients[2].first_entry = 3;
	clients[2].nentries = 1;

	entries[0].client = 0;
	entries[0].gpu = 0;
	entries[0].allocated = 12ull << 30;
	entries[0].state = 2;
	entries[0].core_limit = 50;
	entries[0].mem_limit = 14ull << 30;
	entries[0].c.held_ns = 1000000000ull;
	entries[0].c.grants = 4;
	entries[0].c.swap_bytes_in = 1ull << 30;
	entries[0].c.swap_ns_in = 123456789;
	entries[1].client = 0;
	entries[1].gpu = 1;
	entries[1].state = 0;
	entries[1].core_limit = 100;
	entries[1].mem_limit = UINT64_MAX;
	entries[2].client = 1;
	entries[2].gpu = 0;
	entries[2].allocated = 8ull << 30;
	entries[2].state = 1;
	entries[2].core_limit = 100;
	entries[2].mem_limit = UINT64_MAX;
	entries[3].client = 2;
	entries[3].gpu = 0;
	entries[3].allocated = 2ull << 30;
	entries[3].state = 1;
	entries[3].core_limit = 50;
	entries[3].mem_limit = 4ull << 30;
	entries[3].c.held_ns = 500000000ull;
	entries[3].c.grants = 1;

	struct msnap s;
	memset(&s, 0, sizeof s);
	s.taken_ns = 1000;
	s.start_time_s = 1700000000.5;
	s.seq = 3;
	s.nclients = 3;
	s.conns_accepted = 9;
	s.ngpus = 2;
	s.nentries = 4;
	s.gpus = gpus;
	s.clients = clients;
	s.entries = entries;
	s.tenants = tenants;
	s.process_labels = process_labels;
	if (!process_labels)
		nvs_metrics_tenants(&s);

	struct msample samples[2];
	memset(samples, 0, sizeof samples);
	samples[0].have_util = 1;
	samples[0].util_gpu = 37;
	samples[0].have_mem = 1;
	samples[0].mem_used = 3ull << 30;
	samples[0].mem_total = 16ull << 30;

	struct mbuf b = {NULL, 0, 0, 0};
	nvs_metrics_render(&b, &s, with_samples ? samples : NULL, 250001000);
	if (b.failed || !b.p)
		return 1;
	fwrite(b.p, 1, b.len, stdout);
	free(b.p);
	return 0;
}
