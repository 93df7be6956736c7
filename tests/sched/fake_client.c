/*
 * fake_client: a scripted nvshare client for scheduler tests. It speaks
 * the wire protocol like libnvshare would and prints one line per event,
 * "<CLOCK_MONOTONIC us> EVENT key=value...", so tests can check order and
 * latency across processes.
 *
 *   fake_client --gpu-uuid GPU-a --alloc 2Gi --script 'lock;hold 200ms;release'
 *
 * Script commands (';'-separated, g = local GPU index, default 0):
 *   req [g]            send REQ_LOCK
 *   lock [g]           REQ_LOCK, then wait for LOCK_OK (or GPU_MODE 0)
 *   release [g]        send LOCK_RELEASED (flags 0)
 *   idle_release [g]   send LOCK_RELEASED (flags 1)
 *   wait EVENT [TIME]  wait for LOCK_OK, DROP_LOCK, GPU_MODE, WAITERS,
 *                      SET_LIMITS, mode0, mode1, waiters>0, revoked
 *                      (DROP_LOCK with grace 0) or CLOSED
 *                      (default 10s; exit 3 on timeout)
 *   hold TIME          handle messages for TIME (alias: sleep)
 *   until FILE         handle messages until FILE exists (a test's go-ahead)
 *   stay               handle messages until killed: a client that must be
 *                      there for the rest of the test (the test's cleanup
 *                      ends it). A fixed hold would end it early when a
 *                      loaded machine stops the test's shell for longer.
 *   work TIME [g]      run TIME worth of lock holding: request, hold,
 *                      give the lock back on DROP_LOCK, request again...
 *   work_until FILE [g]  the same until FILE exists
 *   mem SIZE [g]       send MEM_UPDATE
 *   memflap N SIZE [g] send N MEM_UPDATEs alternating SIZE and 0, as fast
 *                      as the socket takes them (reading what comes back)
 *   memflap_until FILE SIZE [g]  the same until FILE exists (a flood that
 *                      outlasts whatever the test measures beside it)
 *   swap IN OUT [g]    send SWAP_STATS adding IN and OUT (durations) of
 *                      swap time to its running totals, and the bytes the
 *                      longer of the two moves at 10 GB/s each way
 *   pingflood N        send up to N PINGs without reading the PONGs (fills
 *                      the scheduler's output buffer for this client); stops
 *                      early once the socket took nothing for 2 s (the
 *                      scheduler stopped reading: back-pressure)
 *   block FILE         wait for FILE without reading anything (a client
 *                      that stopped reading), then go on
 *   hog TIME [g]       hold the lock for TIME and never give it back:
 *                      request it, keep it (use --ignore-drop), request
 *                      it again whenever revoked (prints HOG_DONE grants=N)
 *   attach UUID [SIZE] attach one more GPU
 *   raw KIND           send a bad frame: garbage badmagic badversion hugelen
 *                      trunc unknown ctl server_type notattached hello2
 *   mark TEXT          print MARK TEXT
 *   exit               close and exit 0
 * Options: --ignore-drop (never answer DROP_LOCK), --drain TIME (delay
 * before answering), --name, --core-limit, --mem-limit, --total SIZE,
 * --priority interactive|batch (HELLO's class flag), --hello-flag NAME (one more
 * HELLO flag, repeatable: swap-hint, device-memory, memory-mode),
 * --no-hello (connect only: for protocol-violation tests), --fd N (use the
 * connected socket N it inherited instead of connecting: a connection
 * opened by another process, tests/security/t_identity.sh).
 * Exit: 0 ok, 1 connection error, 2 usage, 3 wait timeout, 4 closed by the
 * scheduler unexpectedly.
 */
#include "ctl/sched_conn.h"
#include "parse.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXG 16

static struct nvs_sconn C;
static int ngpus;
static char uuids[MAXG][NVS_UUID_LEN];
static uint64_t alloc_bytes = 0, total_bytes = 16ull << 30;
static int holding[MAXG], serialized[MAXG], mode_known[MAXG];
static unsigned waiters[MAXG];
static int ignore_drop;
static uint64_t drain_ms;
static int closed;

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

#define EV(...)                                                                                    \
	do {                                                                                       \
		printf("%llu ", (unsigned long long)now_us());                                     \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
	} while (0)

static void die(int code, const char *what)
{
	EV("EXIT code=%d %s", code, what);
	exit(code);
}

static void send_msg(struct nvs_msg *m)
{
	if (nvs_sconn_send(&C, m) && !closed)
		die(4, "send failed");
}

static void send_gpu(uint16_t type, int g, uint32_t v)
{
	struct nvs_msg m;
	nvs_msg_gpu(&m, type, (uint32_t)g, v);
	send_msg(&m);
}

static void send_release(int g, uint32_t flags)
{
	struct nvs_msg m;
	nvs_msg_released(&m, (uint32_t)g, flags, 0);
	/* Printed first: the scheduler may grant the next holder before
	 * this process runs again. */
	EV("SENT LOCK_RELEASED gpu=%d flags=%u", g, flags);
	send_msg(&m);
	holding[g] = 0;
}

static void attach(const char *uuid, uint64_t alloc)
{
	if (ngpus >= MAXG)
		die(2, "too many GPUs");
	int g = ngpus++;
	snprintf(uuids[g], sizeof uuids[g], "%s", uuid);
	struct nvs_msg m;
	nvs_msg_attach(&m, (uint32_t)g, uuid, total_bytes, alloc);
	send_msg(&m);
	EV("SENT ATTACH_GPU gpu=%d uuid=%s allocated=%llu", g, uuid, (unsigned long long)alloc);
}

static const char *want_ev;
static int want_seen;

/* Marks a "wait" as satisfied when m is the awaited event. */
static void match(const struct nvs_msg *m)
{
	if (!want_ev)
		return;
	const char *name = nvs_msg_type_name(m->type);
	if (!strcmp(want_ev, name))
		want_seen = 1;
	else if (m->type == NVS_MSG_GPU_MODE &&
		 !strcmp(want_ev, m->u.gpu.value ? "mode1" : "mode0"))
		want_seen = 1;
	else if (m->type == NVS_MSG_WAITERS && m->u.gpu.value && !strcmp(want_ev, "waiters>0"))
		want_seen = 1;
	else if (m->type == NVS_MSG_DROP_LOCK && !m->u.drop.grace_ms && !strcmp(want_ev, "revoked"))
		want_seen = 1;
}

/* Handles one message: prints it and keeps the lock state. */
static void handle(const struct nvs_msg *m)
{
	match(m);
	switch (m->type) {
	case NVS_MSG_WELCOME:
		EV("WELCOME id=%u idle_release_ms=%u", m->u.welcome.client_id,
		   m->u.welcome.idle_release_ms);
		break;
	case NVS_MSG_LOCK_OK: {
		unsigned g = m->u.lock_ok.local_gpu;
		EV("LOCK_OK gpu=%u flags=%u quantum_ms=%u", g, m->u.lock_ok.flags,
		   m->u.lock_ok.quantum_ms);
		if (g < MAXG)
			holding[g] = 1, waiters[g] = 0;
		break;
	}
	case NVS_MSG_DROP_LOCK: {
		unsigned g = m->u.drop.local_gpu;
		EV("DROP_LOCK gpu=%u flags=%u grace_ms=%u", g, m->u.drop.flags, m->u.drop.grace_ms);
		if (g >= MAXG)
			break;
		if (m->u.drop.grace_ms == 0) {
			/* Revoked: we no longer hold it. */
			EV("REVOKED gpu=%u", g);
			holding[g] = 0;
			break;
		}
		if (holding[g] && !ignore_drop) {
			if (drain_ms)
				usleep((useconds_t)(drain_ms * 1000));
			send_release((int)g, 0);
		}
		break;
	}
	case NVS_MSG_GPU_MODE: {
		unsigned g = m->u.gpu.local_gpu;
		EV("GPU_MODE gpu=%u value=%u", g, m->u.gpu.value);
		if (g < MAXG) {
			serialized[g] = (int)m->u.gpu.value;
			mode_known[g] = 1;
			if (!serialized[g])
				holding[g] = 0;
		}
		break;
	}
	case NVS_MSG_WAITERS:
		EV("WAITERS gpu=%u count=%u", m->u.gpu.local_gpu, m->u.gpu.value);
		if (m->u.gpu.local_gpu < MAXG)
			waiters[m->u.gpu.local_gpu] = m->u.gpu.value;
		break;
	case NVS_MSG_SET_LIMITS:
		EV("SET_LIMITS gpu=%u core_limit=%u mem_limit=%llu", m->u.limits.local_gpu,
		   m->u.limits.core_limit, (unsigned long long)m->u.limits.mem_limit);
		break;
	default:
		EV("MSG %s", nvs_msg_type_name(m->type));
	}
}

/* Handles messages until `until_us`, or until pred() holds. Returns 1 if
 * pred held, 0 on timeout. pred may be NULL (just pass time). */
static int pump(uint64_t until_us, int (*pred)(int), int arg)
{
	for (;;) {
		if (pred && pred(arg))
			return 1;
		uint64_t now = now_us();
		if (now >= until_us)
			return 0;
		if (closed) {
			usleep((useconds_t)(until_us - now < 10000 ? until_us - now : 10000));
			continue;
		}
		struct nvs_msg m;
		int r = nvs_sconn_recv(&C, &m, (int)((until_us - now + 999) / 1000));
		if (r == 1) {
			handle(&m);
		} else if (r < 0) {
			closed = 1;
			EV("CLOSED %s", r == -EPIPE ? "by scheduler" : strerror(-r));
		}
	}
}

static int p_lock_ok(int g)
{
	return holding[g] || (mode_known[g] && !serialized[g]);
}
static int p_closed(int g)
{
	(void)g;
	return closed;
}
static int p_lock_ok_or_closed(int g)
{
	return p_lock_ok(g) || closed;
}
static int p_mode_known(int g)
{
	return mode_known[g];
}
static int p_mode_known_or_closed(int g)
{
	return mode_known[g] || closed;
}

static int p_seen(int g)
{
	(void)g;
	return want_seen;
}

static uint64_t dur_us(const char *s)
{
	uint64_t ms;
	if (!s || nvs_parse_duration_ms(s, &ms))
		die(2, "bad duration");
	return ms * 1000;
}

static int gpu_arg(const char *s)
{
	if (!s)
		return 0;
	int g = atoi(s);
	if (g < 0 || g >= ngpus)
		die(2, "bad gpu index");
	return g;
}

static void raw(const char *kind)
{
	uint8_t b[64];
	memset(b, 0, sizeof b);
	size_t n = 16;
	memcpy(b, "NVSH", 4);
	b[4] = NVS_PROTO_VERSION;
	b[6] = NVS_MSG_REQ_LOCK;
	if (!strcmp(kind, "garbage")) {
		const char *g = "GET / HTTP/1.0\r\n\r\n";
		nvs_sconn_send_raw(&C, g, strlen(g));
	} else if (!strcmp(kind, "badmagic")) {
		memcpy(b, "XVSH", 4);
		nvs_sconn_send_raw(&C, b, n);
	} else if (!strcmp(kind, "badversion")) {
		b[4] = 99;
		nvs_sconn_send_raw(&C, b, n);
	} else if (!strcmp(kind, "hugelen")) {
		b[8] = b[9] = b[10] = b[11] = 0xff;
		nvs_sconn_send_raw(&C, b, n);
	} else if (!strcmp(kind, "trunc")) {
		b[8] = 8; /* REQ_LOCK with an 8-byte payload: send 4 of them */
		nvs_sconn_send_raw(&C, b, 20);
	} else if (!strcmp(kind, "unknown")) {
		b[6] = 0xe7;
		b[7] = 0x03;
		nvs_sconn_send_raw(&C, b, n);
	} else if (!strcmp(kind, "ctl")) {
		struct nvs_msg m;
		memset(&m, 0, sizeof m);
		m.type = NVS_MSG_CTL_STATUS;
		send_msg(&m);
	} else if (!strcmp(kind, "server_type")) {
		struct nvs_msg m;
		memset(&m, 0, sizeof m);
		m.type = NVS_MSG_LOCK_OK;
		send_msg(&m);
	} else if (!strcmp(kind, "notattached")) {
		send_gpu(NVS_MSG_REQ_LOCK, 77, 0);
	} else if (!strcmp(kind, "hello2")) {
		struct nvs_msg m;
		memset(&m, 0, sizeof m);
		m.type = NVS_MSG_HELLO;
		m.u.hello.core_limit = 100;
		send_msg(&m);
	} else {
		die(2, "unknown raw kind");
	}
	EV("SENT RAW %s", kind);
}

/* Runs until total_us of holding are done or, with stop_file, until that
 * file exists: a test's go-ahead, for a holder that must outlast whatever
 * the test does beside it however late the test gets to it. */
static void work(uint64_t total_us, const char *stop_file, int g)
{
	uint64_t done = 0;
	while (stop_file ? access(stop_file, F_OK) != 0 : done < total_us) {
		if (mode_known[g] && serialized[g] && !holding[g]) {
			send_gpu(NVS_MSG_REQ_LOCK, g, 0);
			EV("SENT REQ_LOCK gpu=%d", g);
			if (!pump(now_us() + 600000000ull, p_lock_ok, g) || closed)
				die(4, "lock wait failed");
		}
		/* "Run" in slices; a DROP_LOCK handled meanwhile ends the hold. */
		uint64_t slice = stop_file || total_us - done >= 1000 ? 1000 : total_us - done;
		uint64_t t0 = now_us();
		pump(t0 + slice, NULL, 0);
		if (!serialized[g] || holding[g])
			done += now_us() - t0;
	}
	if (holding[g])
		send_release(g, 0);
	EV("WORK_DONE gpu=%d", g);
}

/* Never releases: asks again whenever the lock is taken back. */
static void hog(uint64_t total_us, int g)
{
	uint64_t end = now_us() + total_us;
	unsigned grants = 0;
	while (now_us() < end && !closed) {
		if (mode_known[g] && serialized[g] && !holding[g]) {
			send_gpu(NVS_MSG_REQ_LOCK, g, 0);
			EV("SENT REQ_LOCK gpu=%d", g);
			if (!pump(end, p_lock_ok, g))
				break;
			grants += holding[g];
		}
		/* Hold until revoked (holding[g] drops) or the time is up. */
		while (now_us() < end && !closed && (holding[g] || !serialized[g]))
			pump(now_us() + 5000 < end ? now_us() + 5000 : end, NULL, 0);
	}
	EV("HOG_DONE gpu=%d grants=%u", g, grants);
}

static uint64_t swap_in_ns, swap_out_ns, swap_bytes;

static void run_cmd(char *cmd)
{
	char *argv[4] = {0};
	int argc = 0;
	for (char *t = strtok(cmd, " \t"); t && argc < 4; t = strtok(NULL, " \t"))
		argv[argc++] = t;
	if (!argc)
		return;
	const char *c = argv[0];
	if (!strcmp(c, "req")) {
		int g = gpu_arg(argv[1]);
		send_gpu(NVS_MSG_REQ_LOCK, g, 0);
		EV("SENT REQ_LOCK gpu=%d", g);
	} else if (!strcmp(c, "lock")) {
		int g = gpu_arg(argv[1]);
		send_gpu(NVS_MSG_REQ_LOCK, g, 0);
		EV("SENT REQ_LOCK gpu=%d", g);
		/* A closed connection never brings LOCK_OK (this tool does not
		 * reconnect): exit 4 at once rather than wait out the 600 s. */
		if (!pump(now_us() + 600000000ull, p_lock_ok_or_closed, g))
			die(3, "timeout waiting for LOCK_OK");
		if (!p_lock_ok(g))
			die(4, "closed while waiting for LOCK_OK");
	} else if (!strcmp(c, "release")) {
		send_release(gpu_arg(argv[1]), 0);
	} else if (!strcmp(c, "idle_release")) {
		send_release(gpu_arg(argv[1]), 1);
	} else if (!strcmp(c, "hold") || !strcmp(c, "sleep")) {
		pump(now_us() + dur_us(argv[1]), NULL, 0);
	} else if (!strcmp(c, "stay")) {
		for (;;)
			pump(now_us() + 3600000000ull, NULL, 0);
	} else if (!strcmp(c, "until")) {
		if (!argv[1])
			die(2, "until needs a file");
		while (access(argv[1], F_OK) != 0)
			pump(now_us() + 10000, NULL, 0);
	} else if (!strcmp(c, "work")) {
		work(dur_us(argv[1]), NULL, gpu_arg(argv[2]));
	} else if (!strcmp(c, "work_until")) {
		if (!argv[1])
			die(2, "work_until needs a file");
		work(0, argv[1], gpu_arg(argv[2]));
	} else if (!strcmp(c, "wait")) {
		if (!argv[1])
			die(2, "wait needs an event");
		uint64_t until = now_us() + (argv[2] ? dur_us(argv[2]) : 10000000ull);
		int ok;
		if (!strcmp(argv[1], "CLOSED")) {
			ok = pump(until, p_closed, 0);
		} else {
			want_ev = argv[1];
			want_seen = 0;
			ok = pump(until, p_seen, 0);
			want_ev = NULL;
		}
		if (!ok) {
			EV("TIMEOUT %s", argv[1]);
			exit(3);
		}
	} else if (!strcmp(c, "mem")) {
		uint64_t v;
		if (!argv[1] || nvs_parse_size(argv[1], 1, &v))
			die(2, "bad size");
		struct nvs_msg m;
		memset(&m, 0, sizeof m);
		m.type = NVS_MSG_MEM_UPDATE;
		m.u.mem.local_gpu = (uint32_t)gpu_arg(argv[2]);
		m.u.mem.allocated = v;
		send_msg(&m);
		EV("SENT MEM_UPDATE gpu=%u allocated=%llu", m.u.mem.local_gpu,
		   (unsigned long long)v);
	} else if (!strcmp(c, "memflap") || !strcmp(c, "memflap_until")) {
		uint64_t n = UINT64_MAX, v;
		const char *stop = NULL;
		if (!strcmp(c, "memflap_until"))
			stop = argv[1];
		if (!argv[1] || !argv[2] || (!stop && nvs_parse_u64(argv[1], 1, 100000000, &n)) ||
		    nvs_parse_size(argv[2], 1, &v))
			die(2, "memflap N SIZE [g] | memflap_until FILE SIZE [g]");
		struct nvs_msg m;
		memset(&m, 0, sizeof m);
		m.type = NVS_MSG_MEM_UPDATE;
		m.u.mem.local_gpu = (uint32_t)gpu_arg(argv[3]);
		uint64_t i;
		for (i = 0; i < n && !closed; i++) {
			m.u.mem.allocated = i & 1 ? 0 : v;
			send_msg(&m);
			/* Drain replies now and then: the flood is not a slow reader. */
			if (!(i & 63)) {
				pump(now_us() + 1, NULL, 0);
				if (stop && access(stop, F_OK) == 0)
					n = i + 1;
			}
		}
		m.u.mem.allocated = 0;
		send_msg(&m);
		EV("SENT MEMFLAP gpu=%u n=%llu size=%llu", m.u.mem.local_gpu, (unsigned long long)i,
		   (unsigned long long)v);
	} else if (!strcmp(c, "swap")) {
		if (!argv[1] || !argv[2])
			die(2, "swap IN OUT [g]");
		uint64_t in = dur_us(argv[1]) * 1000, out = dur_us(argv[2]) * 1000;
		swap_in_ns += in;
		swap_out_ns += out;
		swap_bytes += 10 * (in > out ? in : out); /* 10 GB/s: a PCIe path */
		struct nvs_msg m;
		memset(&m, 0, sizeof m);
		m.type = NVS_MSG_SWAP_STATS;
		m.u.swap.local_gpu = (uint32_t)gpu_arg(argv[3]);
		m.u.swap.bytes_in = m.u.swap.bytes_out = swap_bytes;
		m.u.swap.ns_in = swap_in_ns;
		m.u.swap.ns_out = swap_out_ns;
		send_msg(&m);
		EV("SENT SWAP_STATS gpu=%u ns_in=%llu ns_out=%llu", m.u.swap.local_gpu,
		   (unsigned long long)swap_in_ns, (unsigned long long)swap_out_ns);
	} else if (!strcmp(c, "pingflood")) {
		uint64_t n;
		if (!argv[1] || nvs_parse_u64(argv[1], 1, 10000000, &n))
			die(2, "pingflood N");
		uint64_t i;
		for (i = 0; i < n && !closed; i++) {
			/* Writable (a quarter of the send buffer free) means a
			 * 24-byte frame goes whole; not writable for 2 s means
			 * the scheduler stopped reading this connection. */
			struct pollfd pf = {.fd = C.fd, .events = POLLOUT};
			if (poll(&pf, 1, 2000) != 1)
				break;
			send_gpu(NVS_MSG_PING, 0, (uint32_t)i);
		}
		EV("SENT PINGFLOOD n=%llu", (unsigned long long)i);
	} else if (!strcmp(c, "block")) {
		if (!argv[1])
			die(2, "block needs a file");
		while (access(argv[1], F_OK) != 0)
			usleep(10000);
	} else if (!strcmp(c, "hog")) {
		hog(dur_us(argv[1]), gpu_arg(argv[2]));
	} else if (!strcmp(c, "attach")) {
		uint64_t v = 0;
		if (!argv[1] || (argv[2] && nvs_parse_size(argv[2], 1, &v)))
			die(2, "attach UUID [SIZE]");
		attach(argv[1], v);
		pump(now_us() + 5000000, p_mode_known, ngpus - 1);
	} else if (!strcmp(c, "raw")) {
		if (!argv[1])
			die(2, "raw needs a kind");
		raw(argv[1]);
	} else if (!strcmp(c, "mark")) {
		EV("MARK %s", argv[1] ? argv[1] : "");
	} else if (!strcmp(c, "exit")) {
		EV("EXIT code=0");
		exit(0);
	} else {
		fprintf(stderr, "fake_client: unknown command \"%s\"\n", c);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	static const struct option opts[] = {
	    {"gpu-uuid", required_argument, 0, 'u'},
	    {"alloc", required_argument, 0, 'a'},
	    {"total", required_argument, 0, 't'},
	    {"name", required_argument, 0, 'n'},
	    {"core-limit", required_argument, 0, 'c'},
	    {"mem-limit", required_argument, 0, 'm'},
	    {"ignore-drop", no_argument, 0, 'I'},
	    {"drain", required_argument, 0, 'd'},
	    {"script", required_argument, 0, 's'},
	    {"no-hello", no_argument, 0, 'H'},
	    {"fd", required_argument, 0, 'F'},
	    {"priority", required_argument, 0, 'P'},
	    {"hello-flag", required_argument, 0, 'f'}, /* repeatable */
	    {0, 0, 0, 0},
	};
	const char *gpu_list[MAXG];
	int ng = 0;
	const char *script = "";
	const char *name = "fake_client";
	int no_hello = 0;
	uint64_t core = 100, memlim = NVS_NO_LIMIT, fd = UINT64_MAX;
	uint32_t hello_flags = 0;
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'u':
			if (ng < MAXG)
				gpu_list[ng++] = optarg;
			break;
		case 'a':
			if (nvs_parse_size(optarg, 1, &alloc_bytes))
				die(2, "bad --alloc");
			break;
		case 't':
			if (nvs_parse_size(optarg, 1, &total_bytes))
				die(2, "bad --total");
			break;
		case 'n':
			name = optarg;
			break;
		case 'c':
			if (nvs_parse_u64(optarg, 0, 1000, &core))
				die(2, "bad --core-limit");
			break;
		case 'm':
			if (nvs_parse_size(optarg, 1, &memlim))
				die(2, "bad --mem-limit");
			break;
		case 'I':
			ignore_drop = 1;
			break;
		case 'd':
			drain_ms = dur_us(optarg) / 1000;
			break;
		case 's':
			script = optarg;
			break;
		case 'H':
			no_hello = 1;
			break;
		case 'P':
			if (!strcmp(optarg, "interactive"))
				hello_flags |= NVS_HELLO_PRIO_INTERACTIVE;
			else if (!strcmp(optarg, "batch"))
				hello_flags |= NVS_HELLO_PRIO_BATCH;
			else
				die(2, "bad --priority");
			break;
		case 'f':
			if (!strcmp(optarg, "swap-hint"))
				hello_flags |= NVS_HELLO_SWAP_HINT;
			else if (!strcmp(optarg, "device-memory"))
				hello_flags |= NVS_HELLO_DEVICE_MEMORY;
			else if (!strcmp(optarg, "memory-mode"))
				hello_flags |= NVS_HELLO_MEMORY_MODE;
			else
				die(2, "bad --hello-flag");
			break;
		case 'F':
			if (nvs_parse_u64(optarg, 0, 1 << 20, &fd))
				die(2, "bad --fd");
			break;
		default:
			fprintf(stderr, "usage: fake_client [--gpu-uuid U]... [--alloc SIZE] "
					"[--script CMDS] (see the source)\n");
			return 2;
		}
	}
	int r = 0;
	/* From here to WELCOME is what a new client waits to be served
	 * (t_hostile_churn): connect() included, which waits while the
	 * scheduler's backlog is full. */
	EV("CONNECTING");
	if (fd != UINT64_MAX) {
		memset(&C, 0, sizeof C);
		C.fd = (int)fd;
	} else {
		r = nvs_sconn_open(&C);
	}
	if (r) {
		EV("CONNECT_FAILED %s", strerror(-r));
		return 1;
	}
	EV("CONNECTED");
	if (no_hello)
		goto script;
	struct nvs_msg m;
	nvs_msg_hello(&m, name, (uint32_t)core, memlim);
	m.u.hello.flags |= hello_flags;
	send_msg(&m);
	for (int i = 0; i < ng; i++)
		attach(gpu_list[i], alloc_bytes);
	/* Ready once welcomed and every GPU's mode is known; a connection
	 * the scheduler closed meanwhile will not tell it (exit at once,
	 * not after the 5 s wait). */
	for (int i = 0; i < ng; i++) {
		if (!pump(now_us() + 5000000, p_mode_known_or_closed, i))
			die(3, "no GPU_MODE after ATTACH_GPU");
		if (!mode_known[i])
			die(4, "closed before GPU_MODE");
	}
script:
	EV("READY pid=%d", (int)getpid());

	char *s = strdup(script);
	char *save = NULL;
	for (char *cmd = strtok_r(s, ";", &save); cmd; cmd = strtok_r(NULL, ";", &save))
		run_cmd(cmd);
	free(s);
	EV("EXIT code=0");
	nvs_sconn_close(&C);
	return 0;
}
