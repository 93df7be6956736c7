/*
 * Renders a hand-made exporter snapshot (no scheduler, no GPU) to stdout:
 * t_render.sh feeds it to promtool and checks escaping and histogram
 * arithmetic. Covers label values with backslash, quote and newline, a GPU
 * learned from a client (no NVML sample), no-limit memory, and every
 * client state.
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
	int with_samples = !(argc > 1 && !strcmp(argv[1], "--no-nvml"));
	struct msnap_gpu gpus[2];
	struct msnap_client clients[2];
	struct msnap_entry entries[3];
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

	clients[0].id = 1;
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

	entries[0].client = 0;
	entries[0].gpu = 0;
	entries[0].allocated = 12ull << 30;
	entries[0].state = 2;
	entries[0].core_limit = 50;
	entries[0].mem_limit = 14ull << 30;
	entries[0].held_ns = 1000000000ull;
	entries[0].grants = 4;
	entries[0].swap_bytes_in = 1ull << 30;
	entries[0].swap_ns_in = 123456789;
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

	struct msnap s;
	memset(&s, 0, sizeof s);
	s.taken_ns = 1000;
	s.start_time_s = 1700000000.5;
	s.seq = 3;
	s.nclients = 2;
	s.conns_accepted = 9;
	s.ngpus = 2;
	s.nentries = 3;
	s.gpus = gpus;
	s.clients = clients;
	s.entries = entries;

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
