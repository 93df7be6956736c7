/*
 * Unmanaged-process detection (scheduler/unmanaged.c, scheduler.md
 * "Unmanaged GPU processes") on the harness's virtual clock: the passes run
 * at the times the module asks for (nvs_unmanaged_next_deadline), NVML is
 * this file's fake (the processes a GPU lists, their memory, which ran
 * kernels), and the core is the real one behind the harness's port, so the
 * policy's times are asserted exactly: a process counts 1.5 s after it was
 * first seen (the extra check comes then), an owner of short-lived
 * processes is known after two left and counts for exactly the hold after
 * its last one, a client that runs kernels without the lock for two passes
 * counts at once, and NVSHARE_UNMANAGED=serialize serializes the GPU and
 * takes the memory out of its capacity while one counts.
 */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scheduler/peer.h"
#include "scheduler/unmanaged.h"

#define AT(b, type) (h_last((b), (type)) ? h_last((b), (type))->t : 0)

/* ---- the fake NVML: one GPU's compute processes ---- */

struct fproc {
	int pid;
	uint64_t mem;
	int active; /* ran kernels: shows in the utilization samples */
};
static struct fproc procs[16];
static unsigned nprocs;
static int dev_token;
static char proc_dir[] = "/tmp/nvs-t-unmanaged.XXXXXX";

static nvmlReturn_t f_by_uuid(const char *uuid, nvmlDevice_t *d)
{
	(void)uuid;
	*d = (nvmlDevice_t)&dev_token;
	return NVML_SUCCESS;
}

static nvmlReturn_t f_list(nvmlDevice_t d, unsigned *n, nvmlProcessInfo_v2_t *buf)
{
	(void)d;
	if (*n < nprocs) {
		*n = nprocs;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned i = 0; i < nprocs; i++) {
		memset(&buf[i], 0, sizeof buf[i]);
		buf[i].pid = (unsigned)procs[i].pid;
		buf[i].usedGpuMemory = procs[i].mem;
	}
	*n = nprocs;
	return NVML_SUCCESS;
}

static nvmlReturn_t f_mem(nvmlDevice_t d, nvmlMemory_t *m)
{
	(void)d;
	uint64_t used = 0;
	for (unsigned i = 0; i < nprocs; i++)
		used += procs[i].mem;
	m->total = 10 * GiB;
	m->used = used;
	m->free = m->total - used;
	return NVML_SUCCESS;
}

static nvmlReturn_t f_util(nvmlDevice_t d, nvmlProcessUtilizationSample_t *buf, unsigned *n,
			   unsigned long long since)
{
	(void)d;
	unsigned k = 0;
	for (unsigned i = 0; i < nprocs && k < *n; i++)
		if (procs[i].active) {
			memset(&buf[k], 0, sizeof buf[k]);
			buf[k].pid = (unsigned)procs[i].pid;
			buf[k].smUtil = 50;
			buf[k].timeStamp = since + 1;
			k++;
		}
	*n = k;
	return NVML_SUCCESS;
}

static const struct nvs_unmanaged_nvml fake = {
    .list_v2 = f_list, .by_uuid = f_by_uuid, .mem_info = f_mem, .proc_util = f_util};

/* A process appears on the GPU (owned by this test's uid: /proc/<pid> in
 * the fake proc root) or leaves it. */
static void appear(int pid, uint64_t mem, int active)
{
	char p[sizeof proc_dir + 16];
	snprintf(p, sizeof p, "%s/%d", proc_dir, pid);
	mkdir(p, 0755);
	procs[nprocs++] = (struct fproc){pid, mem, active};
}

static void leave(int pid)
{
	for (unsigned i = 0; i < nprocs; i++)
		if (procs[i].pid == pid) {
			procs[i] = procs[--nprocs];
			return;
		}
	fail_msg("pid %d is not on the GPU", pid);
}

/* A connection of its own for a bot (the shell's: the module counts only
 * connected clients' pids as managed). */
static char conn_token;
static void connected(struct bot *b)
{
	b->cl->conn = (struct conn *)&conn_token;
}

/* The next detection pass: the core's timers up to it, then the pass. */
static uint64_t pass(void)
{
	uint64_t t = nvs_unmanaged_next_deadline(h_now);
	assert_true(t >= h_now);
	h_run_until(t);
	nvs_unmanaged_tick(t);
	return t;
}

static void um_setup(unsigned policy, uint32_t interval_ms, unsigned mode)
{
	h_setup(1, 10 * GiB, mode, 1000);
	nvs_unmanaged_cfg.policy = policy;
	nvs_unmanaged_cfg.interval_ms = interval_ms;
	nprocs = 0;
	nvs_unmanaged_begin(&fake, h_now, 42);
}

static unsigned counted(void)
{
	return h_gpu(0)->unmanaged;
}

/* The status's reason for pid ("" not listed). */
static const char *reason_of(int pid)
{
	static char r[32];
	r[0] = '\0';
	cJSON *o = nvs_unmanaged_json(h_now);
	cJSON *ps = cJSON_GetObjectItem(o, "processes"), *p;
	cJSON_ArrayForEach(p, ps)
	{
		cJSON *id = cJSON_GetObjectItem(p, "pid"), *why = cJSON_GetObjectItem(p, "reason");
		if (cJSON_IsNumber(id) && id->valueint == pid && cJSON_IsString(why))
			snprintf(r, sizeof r, "%s", why->valuestring);
	}
	cJSON_Delete(o);
	return r;
}

/* A process without nvshare counts once seen so for 1.5 s: the extra
 * check comes exactly then; one gone before never counts. */
static void test_confirm_time(void **state)
{
	(void)state;
	um_setup(NVS_UNMANAGED_REPORT, 2000, NVS_MODE_AUTO);
	appear(501, GiB, 1);
	uint64_t seen = pass();
	assert_int_equal(counted(), 0);
	/* The regular pass would come 1.5-2.5 s later: the confirmation
	 * check is due at exactly seen + 1.5 s. */
	assert_int_equal(nvs_unmanaged_next_deadline(h_now), seen + 1500 * MS);
	h_run_until(seen + 1500 * MS - 1);
	assert_int_equal(counted(), 0);
	assert_int_equal(pass(), seen + 1500 * MS);
	assert_int_equal(counted(), 1);
	assert_string_equal(reason_of(501), "no-connection");
	/* One that leaves before its 1.5 s: never counted. */
	appear(502, GiB, 1);
	uint64_t t = pass();
	assert_int_equal(counted(), 1);
	leave(502);
	while (pass() < t + 1500 * MS)
		;
	assert_int_equal(counted(), 1);
	assert_string_equal(reason_of(502), "");
	/* The counted one leaves: the next pass forgets it. */
	leave(501);
	pass();
	assert_int_equal(counted(), 0);
	assert_string_equal(reason_of(501), "");
	h_teardown();
}

/* Passes come 3/4 to 5/4 of the interval apart (never in step with a
 * process that times its life), over many passes both ends are reached. */
static void test_pass_jitter(void **state)
{
	(void)state;
	um_setup(NVS_UNMANAGED_REPORT, 2000, NVS_MODE_AUTO);
	uint64_t last = h_now, lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < 400; i++) {
		uint64_t t = pass(), d = t - last;
		lo = d < lo ? d : lo;
		hi = d > hi ? d : hi;
		last = t;
	}
	assert_true(lo >= 1500 * MS && hi <= 2500 * MS);
	assert_true(lo < 1550 * MS && hi > 2450 * MS);
	h_teardown();
}

/* NVSHARE_UNMANAGED=serialize: while one counts, the GPU (mode auto, its
 * clients fitting) is serialized and the process's memory is out of the
 * capacity; concurrent again at the pass that sees it gone. */
static void test_serialize(void **state)
{
	(void)state;
	um_setup(NVS_UNMANAGED_SERIALIZE, 2000, NVS_MODE_AUTO);
	struct bot *a = h_client(1, 0, 2 * GiB, 0), *c = h_client(2, 0, 2 * GiB, 0);
	connected(a);
	connected(c);
	appear((int)a->cl->pid, 2 * GiB, 1);
	appear((int)c->cl->pid, 2 * GiB, 1);
	pass();
	assert_int_equal(h_gpu(0)->serialized, 0);
	appear(600, 3 * GiB, 1);
	uint64_t seen = pass();
	assert_int_equal(h_gpu(0)->serialized, 0);
	assert_int_equal(pass(), seen + 1500 * MS);
	assert_int_equal(counted(), 1);
	assert_int_equal(h_gpu(0)->unmanaged_force, 1);
	assert_int_equal(h_gpu(0)->unmanaged_pinned, 3 * GiB);
	assert_int_equal(nvs_gpu_capacity(h_gpu(0)), 7 * GiB);
	assert_int_equal(h_gpu(0)->serialized, 1);
	assert_int_equal(h_last(a, NVS_MSG_GPU_MODE)->value, NVS_GPU_MODE_SERIALIZED);
	assert_int_equal(AT(a, NVS_MSG_GPU_MODE), h_now);
	/* The managed clients are not reported. */
	assert_string_equal(reason_of((int)a->cl->pid), "");
	leave(600);
	pass();
	assert_int_equal(counted(), 0);
	assert_int_equal(h_gpu(0)->unmanaged_force, 0);
	assert_int_equal(nvs_gpu_capacity(h_gpu(0)), 10 * GiB);
	assert_int_equal(h_gpu(0)->serialized, 0);
	assert_int_equal(h_last(c, NVS_MSG_GPU_MODE)->value, NVS_GPU_MODE_CONCURRENT);
	h_teardown();
}

/* Short-lived processes (1.2 s each, under the 1.5 s a process must be
 * seen): two of one owner leaving the GPU make the owner known; its next
 * one counts at the first pass that sees it, and the owner counts for
 * exactly the hold (10 s, >= 4 intervals) after the last pass that saw one
 * of its processes. */
static void test_short_lived_owner(void **state)
{
	(void)state;
	um_setup(NVS_UNMANAGED_SERIALIZE, 500, NVS_MODE_AUTO);
	int pid = 700;
	for (int k = 0; k < 2; k++, pid++) {
		appear(pid, GiB, 1);
		uint64_t t0 = pass();
		while (pass() < t0 + 1200 * MS)
			assert_int_equal(counted(), 0);
		leave(pid);
	}
	pass(); /* sees the second one gone: the owner is known */
	appear(pid, GiB, 1);
	uint64_t last = pass();
	assert_int_equal(counted(), 1); /* at once */
	assert_int_equal(h_gpu(0)->serialized, 1);
	leave(pid);
	uint64_t t;
	while ((t = pass()) < last + NVS_UNMANAGED_OWNER_HOLD_MS * MS)
		assert_int_equal(counted(), 1); /* the owner, between processes */
	assert_int_equal(counted(), 0);
	assert_int_equal(h_gpu(0)->serialized, 0);
	h_teardown();
}

/* Claims against what NVML shows (scheduler.md "Client claims",
 * "Evidence"): a claim above the process's highest use there (plus the
 * GPU's unattributed memory) by more than max(256 MiB, an eighth) is
 * unproven, and counted as that evidence from the second pass in which
 * the client could run; a client whose process NVML does not list (once
 * it has listed any client's) has no context and counts 0. */
static void test_evidence(void **state)
{
	(void)state;
	um_setup(NVS_UNMANAGED_REPORT, 2000, NVS_MODE_AUTO);
	h_context = nvs_unmanaged_context;
	struct bot *a = h_client(1, 0, 8 * GiB, 0), *b = h_client(2, 0, GiB, 0);
	connected(a);
	connected(b);
	appear((int)a->cl->pid, GiB, 1);
	appear((int)b->cl->pid, GiB, 1);
	pass(); /* unproven, its first chance */
	assert_int_equal(a->cg->allocated, 8 * GiB);
	assert_int_equal(a->cg->ev.unproven, 1);
	pass(); /* the second: the evidence counts */
	assert_int_equal(a->cg->ev.clamped, 1);
	assert_int_equal(a->cg->allocated, GiB);
	assert_int_equal(b->cg->allocated, GiB); /* an honest claim is left alone */
	/* Its use catches up: the claim stands again. */
	procs[0].mem = 8 * GiB;
	pass();
	assert_int_equal(a->cg->ev.clamped, 0);
	assert_int_equal(a->cg->allocated, 8 * GiB);
	/* b's process leaves the GPU (its connection stays): no context, 0. */
	leave((int)b->cl->pid);
	pass();
	assert_int_equal(b->cg->allocated, 0);
	h_context = NULL;
	h_teardown();
}

/* A connected, attached client whose process runs kernels on the
 * serialized GPU without ever being granted the lock: counted (reason
 * ungated) at the second pass in a row that shows it running; one that
 * runs while it holds the lock never is. */
static void test_ungated(void **state)
{
	(void)state;
	um_setup(NVS_UNMANAGED_REPORT, 2000, NVS_MODE_ON);
	struct bot *e = h_client(1, 0, GiB, 0), *hon = h_client(2, 0, GiB, 0);
	connected(e);
	connected(hon);
	h_req(hon);
	assert_int_equal(hon->holding, 1);
	appear((int)e->cl->pid, GiB, 1);
	appear((int)hon->cl->pid, GiB, 1);
	pass(); /* the first look: utilization from here on */
	pass(); /* ran without the lock: 1 */
	assert_int_equal(counted(), 0);
	pass(); /* 2 in a row: ungated */
	assert_int_equal(counted(), 1);
	assert_string_equal(reason_of((int)e->cl->pid), "ungated");
	assert_string_equal(reason_of((int)hon->cl->pid), "");
	h_teardown();
}

int main(void)
{
	if (!mkdtemp(proc_dir))
		return 1;
	snprintf(nvs_proc_root, sizeof nvs_proc_root, "%s", proc_dir);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_confirm_time), cmocka_unit_test(test_pass_jitter),
	    cmocka_unit_test(test_serialize),	 cmocka_unit_test(test_short_lived_owner),
	    cmocka_unit_test(test_ungated),	 cmocka_unit_test(test_evidence),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	char cmd[sizeof proc_dir + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", proc_dir);
	if (system(cmd)) {
	}
	return rc;
}
