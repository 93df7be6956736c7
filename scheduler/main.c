/*
 * nvshare-scheduler: command line, environment, signals; then the parts
 * start, each registering its own descriptors and timers with the event
 * loop (loop.h), and the loop runs. Flags override the matching NVSHARE_*
 * variables.
 */
#include "claims.h"
#include "config_check.h"
#include "conn.h"
#include "events.h"
#include "gpus.h"
#include "k8s/k8s_watch.h"
#include "limits.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "parse.h"
#include "peer.h"
#include "k8s/pod_identity.h"
#include "plog.h"
#include "policy.h"
#include "quota.h"
#include "server.h"
#include "settings.h"
#include "sockpath.h"
#include "state_file.h"
#include "health.h"
#include "state.h"
#include "unmanaged.h"
#include "coschedule.h"

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvs_version.h" /* generated: scripts/gen-version.sh */

struct sched S;

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: nvshare-scheduler [options]\n"
	    "Hands each GPU to one nvshare client at a time when their memory does not fit.\n"
	    "\n"
	    "  -d, --sock-dir DIR        client socket directory    NVSHARE_SOCK_DIR "
	    "(" NVS_DEFAULT_SOCK_DIR ")\n"
	    "      --admin-sock-dir DIR  admin socket directory     NVSHARE_ADMIN_SOCK_DIR\n"
	    "                            (" NVS_DEFAULT_ADMIN_SOCK_DIR "; never mount it into "
	    "Pods)\n"
	    "  -m, --mode MODE           on | off | auto            NVSHARE_SCHED_MODE (auto)\n"
	    "  -t, --tq TIME             time quantum: seconds or   NVSHARE_TQ (30)\n"
	    "                            with unit (0.5, 300ms, 2m)\n"
	    "  -c, --capacity SIZE[,..]  schedulable memory per GPU NVSHARE_GPU_CAPACITY\n"
	    "                            (16Gi, or 16Gi,8Gi by index; default memory - reserve)\n"
	    "  -r, --reserve SIZE        memory kept free per GPU   NVSHARE_GPU_MEMORY_RESERVE "
	    "(512Mi)\n"
	    "  -i, --idle-release-ms MS  client idle release        NVSHARE_IDLE_RELEASE_MS (%u)\n"
	    "  -g, --drop-grace-ms MS    DROP_LOCK -> revocation    NVSHARE_DROP_GRACE_MS (%u)\n"
	    "      --oversubscription-factor N  a client's claimed allocation counts at most\n"
	    "                            N x capacity               "
	    "NVSHARE_OVERSUBSCRIPTION_FACTOR "
	    "(%u)\n"
	    "      --mode-dwell-ms MS    automatic mode switches:   NVSHARE_MODE_DWELL_MS (%u)\n"
	    "                            one per MS once the burst is spent (0: no limit)\n"
	    "      --mode-switch-burst N ... the burst              NVSHARE_MODE_SWITCH_BURST "
	    "(%u)\n"
	    "      --report-rate N       MEM_UPDATE + SWAP_STATS applied per second and\n"
	    "                            connection (more: only the latest kept)\n"
	    "                                                       NVSHARE_REPORT_RATE (%u)\n"
	    "      --swap-tq-max-factor N  swap-stretched quantum   NVSHARE_SWAP_TQ_MAX_FACTOR "
	    "(%u)\n"
	    "                            at most N x the TQ\n"
	    "      --no-nvml             do not load NVML; learn GPUs from clients\n"
	    "                                                       NVSHARE_SCHED_NVML=0\n"
	    "      --metrics             serve Prometheus /metrics  NVSHARE_METRICS_ENABLE=1 "
	    "(off)\n"
	    "      --metrics-port PORT   its port                   NVSHARE_METRICS_PORT (9402)\n"
	    "      --metrics-addr ADDR   its address                NVSHARE_METRICS_ADDR "
	    "(127.0.0.1)\n"
	    "      --metrics-process-labels  client series per process (pid, name)\n"
	    "                            instead of per tenant      "
	    "NVSHARE_METRICS_PROCESS_LABELS=1\n"
	    "      --unmanaged POLICY    GPU processes without      NVSHARE_UNMANAGED (report)\n"
	    "                            nvshare: report | serialize\n"
	    "      --unmanaged-interval MS  how often they are      NVSHARE_UNMANAGED_INTERVAL_MS\n"
	    "                            looked for (0: never)      (%u)\n"
	    "      --coschedule on|off   run the clients that fit   NVSHARE_COSCHEDULE (on)\n"
	    "                            together when memory is short (docs/scheduler.md)\n"
	    "      --preempt-ms MS       a burst waits this long    NVSHARE_PREEMPT_MS (50)\n"
	    "                            for room before batch is asked to drop (0..60000)\n"
	    "      --min-slice-ms MS     batch runs this long       NVSHARE_MIN_SLICE_MS (100)\n"
	    "                            before a burst may preempt it (0..60000)\n"
	    "      --batch-floor PCT     batch's share of GPU time  NVSHARE_BATCH_FLOOR_PERCENT\n"
	    "                            while it waits (0..100)    (50)\n"
	    "      --proc-root DIR       where peer cgroups are read NVSHARE_PROC_ROOT (/proc;\n"
	    "                            tests only: it decides every peer's identity)\n"
	    "      --node-name NAME      watch this node's Pods     NODE_NAME\n"
	    "      --kube-api URL        API server (default: in-cluster config)\n"
	    "                                                       NVSHARE_KUBE_API\n"
	    "      --kube-token-file F   bearer token file          NVSHARE_KUBE_TOKEN_FILE\n"
	    "      --kube-ca-file F      CA bundle (TLS verified)   NVSHARE_KUBE_CA_FILE\n"
	    "      --no-kube             no Pod watch               NVSHARE_KUBE=0\n"
	    "      --events FILE         append JSON-lines events   NVSHARE_EVENTS (off)\n"
	    "                            (docs/events.md)\n"
	    "Bounds on what peers may cost (docs/security.md, \"Hostile load\"):\n"
	    "      --max-conns-per-tenant N  connections of one Pod NVSHARE_MAX_CONNS_PER_TENANT\n"
	    "                            (or uid, or unknown; 0: no cap) (%u)\n"
	    "      --handshake-timeout-ms MS  client-socket peers   NVSHARE_HANDSHAKE_TIMEOUT_MS\n"
	    "                            must send HELLO within it (0: never) (%u)\n"
	    "      --conn-buffer-budget SIZE  buffered input and    NVSHARE_CONN_BUFFER_BUDGET\n"
	    "                            output of all client-socket peers (16Mi)\n"
	    "      --accept-rate N       client-socket connections  NVSHARE_ACCEPT_RATE (%u)\n"
	    "                            accepted a second (0: no cap)\n"
	    "      --log-rate N          log lines per second per   NVSHARE_LOG_RATE (%u)\n"
	    "                            tenant and kind (0: no limit)\n"
	    "      --state-file FILE     run-time settings kept     NVSHARE_STATE_FILE\n"
	    "                            across restarts (none: off) (" NVS_DEFAULT_STATE_FILE ")\n"
	    "      --health-stall-ms MS  /healthz fails when the     NVSHARE_HEALTH_STALL_MS\n"
	    "                            loop has not turned for MS (%u)\n"
	    "      --log-format FMT      text | json (one object     NVSHARE_LOG_FORMAT (text)\n"
	    "                            per line: ts, level, component, msg)\n"
	    "  -v, --debug               verbose logs               NVSHARE_DEBUG=1\n"
	    "\n"
	    "Each of these sets its variable (docs/quotas.md, docs/swap.md, docs/security.md):\n"
	    "      --unknown-tenant-core-limit PCT    NVSHARE_UNKNOWN_TENANT_CORE_LIMIT (10)\n"
	    "      --unknown-tenant-memory-limit SIZE NVSHARE_UNKNOWN_TENANT_MEMORY_LIMIT (1Gi)\n"
	    "      --compute-window-ms MS             NVSHARE_COMPUTE_WINDOW_MS (2000)\n"
	    "      --quota-sample-interval-ms MS      NVSHARE_QUOTA_SAMPLE_INTERVAL_MS (50)\n"
	    "      --quota-carryover-percent PCT      NVSHARE_QUOTA_CARRYOVER_PERCENT (25)\n"
	    "      --drop-tail-billing-percent PCT    NVSHARE_DROP_TAIL_BILLING_PERCENT (70)\n"
	    "      --quota-slice-ms MS                NVSHARE_QUOTA_SLICE_MS (window / 20)\n"
	    "      --gpu-memory-unit SIZE             NVSHARE_GPU_MEMORY_UNIT (1Gi)\n"
	    "      --swap-out needed|all|none         NVSHARE_SWAP_OUT (needed)\n"
	    "      --swap-tq-factor N                 NVSHARE_SWAP_TQ_FACTOR (33)\n"
	    "\n"
	    "  -V, --version             print the version\n"
	    "  -h, --help                this text\n"
	    "\n"
	    "Logs go to stderr. See docs/scheduler.md.\n",
	    NVS_DEFAULT_IDLE_RELEASE_MS, NVS_DEFAULT_DROP_GRACE_MS, NVS_DEFAULT_OVERSUB_FACTOR,
	    NVS_DEFAULT_MODE_DWELL_MS, NVS_DEFAULT_MODE_SWITCH_BURST, NVS_DEFAULT_REPORT_RATE,
	    NVS_DEFAULT_SWAP_TQ_MAX_FACTOR, NVS_UNMANAGED_DEFAULT_INTERVAL_MS,
	    NVS_DEFAULT_MAX_CONNS_PER_TENANT, NVS_DEFAULT_HANDSHAKE_MS, NVS_DEFAULT_ACCEPT_RATE,
	    NVS_DEFAULT_LOG_RATE, NVS_DEFAULT_HEALTH_STALL_MS);
}

static int bad_flag(const char *flag, const char *v, const char *what)
{
	fprintf(stderr, "nvshare-scheduler: bad value for %s: \"%s\" (expected %s)\n", flag, v,
		what);
	return 2;
}

/* "a/b/" -> "a/b": for comparing directories as typed. */
static size_t dir_len(const char *d)
{
	size_t n = strlen(d);
	while (n > 1 && d[n - 1] == '/')
		n--;
	return n;
}

/* Both socket paths; the admin directory must be neither the client
 * directory nor inside it: that one is mounted into Pods. */
static int socket_paths(void)
{
	const char *c = S.cfg.sock_dir, *a = S.cfg.admin_sock_dir;
	size_t cn = dir_len(c), an = dir_len(a);
	if (an >= cn && !strncmp(a, c, cn) && (an == cn || a[cn] == '/')) {
		fprintf(stderr,
			"nvshare-scheduler: the admin socket directory %s is (inside) the client "
			"socket directory %s, which is mounted into Pods: choose another one "
			"(--admin-sock-dir, NVSHARE_ADMIN_SOCK_DIR)\n",
			a, c);
		return -1;
	}
	static const size_t max = NVS_SOCK_PATH_LEN;
	int n = snprintf(S.sock_path, sizeof S.sock_path, "%s/%s", c, NVS_SOCK_NAME);
	int m =
	    snprintf(S.admin_sock_path, sizeof S.admin_sock_path, "%s/%s", a, NVS_ADMIN_SOCK_NAME);
	if (n < 0 || (size_t)n >= max || m < 0 || (size_t)m >= max) {
		fprintf(stderr, "nvshare-scheduler: socket path %s/%s or %s/%s is too long\n", c,
			NVS_SOCK_NAME, a, NVS_ADMIN_SOCK_NAME);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	nvs_log_init("scheduler");
	/* Block before anything exists so a SIGTERM during start-up is read
	 * by the loop and still removes the socket. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* Large buffers (a 256 KiB frame, a status) always come from mmap and
	 * go back to the system when freed: RSS follows the buffer budget
	 * instead of its high-water mark. Two arenas: the helper threads must
	 * not reserve 64 MiB of address space each (prlimit --as). */
	mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	mallopt(M_ARENA_MAX, 2);

	/* Every variable and flag checked before anything reads them: a bad
	 * value stops the start, it is never ignored (config_check.c). */
	if (nvs_config_env_flags(argc, argv) || nvs_config_check_env())
		return 2;
	nvs_log_reload_env(); /* --log-format */
	nvs_config_defaults(&S.cfg);
	nvs_config_from_env(&S.cfg);
	/* The hostile-load bounds are refused when bad, not ignored: a typo
	 * must not silently leave a bound off (the message names it). */
	if (nvs_claims_config_env() || nvs_limits_config_from_env())
		return 2;
	nvs_metrics_config_from_env(&nvs_metrics_cfg);
	nvs_k8s_config_from_env(&nvs_k8s_cfg);
	const char *events_path = getenv("NVSHARE_EVENTS");
	/* A policy nobody can read back is refused, not ignored: "serialize"
	 * misspelt must not silently leave a GPU unprotected. */
	if (nvs_unmanaged_config_from_env(&nvs_unmanaged_cfg))
		return 2;
	if (nvs_cosched_config_from_env(&nvs_cosched_cfg))
		return 2;
	const char *sf = getenv("NVSHARE_STATE_FILE");
	if (sf && nvs_state_file_set_path(sf)) {
		fprintf(stderr, "nvshare-scheduler: NVSHARE_STATE_FILE is too long\n");
		return 2;
	}
	const char *hs = getenv("NVSHARE_HEALTH_STALL_MS");
	if (hs && *hs && nvs_health_parse_stall(hs, &nvs_health_stall_ms)) {
		fprintf(
		    stderr,
		    "nvshare-scheduler: bad value for NVSHARE_HEALTH_STALL_MS: \"%s\" (expected "
		    "1500 .. 600000 ms)\n",
		    hs);
		return 2;
	}
	const char *proc_root = getenv("NVSHARE_PROC_ROOT");
	if (proc_root && *proc_root && nvs_peer_set_proc_root(proc_root))
		NVS_WARN("ignoring NVSHARE_PROC_ROOT: too long");
	if (nvs_sock_dir(S.cfg.sock_dir, sizeof S.cfg.sock_dir)) {
		fprintf(stderr, "nvshare-scheduler: NVSHARE_SOCK_DIR is too long\n");
		return 2;
	}
	if (nvs_admin_sock_dir(S.cfg.admin_sock_dir, sizeof S.cfg.admin_sock_dir)) {
		fprintf(stderr, "nvshare-scheduler: NVSHARE_ADMIN_SOCK_DIR is too long\n");
		return 2;
	}

	static struct option opts[64] = {
	    {"sock-dir", required_argument, 0, 'd'},
	    {"admin-sock-dir", required_argument, 0, 1006},
	    {"mode", required_argument, 0, 'm'},
	    {"tq", required_argument, 0, 't'},
	    {"capacity", required_argument, 0, 'c'},
	    {"reserve", required_argument, 0, 'r'},
	    {"idle-release-ms", required_argument, 0, 'i'},
	    {"drop-grace-ms", required_argument, 0, 'g'},
	    {"no-nvml", no_argument, 0, 'N'},
	    {"metrics", no_argument, 0, 'M'},
	    {"metrics-port", required_argument, 0, 'P'},
	    {"metrics-addr", required_argument, 0, 'A'},
	    {"proc-root", required_argument, 0, 1000},
	    {"node-name", required_argument, 0, 1001},
	    {"kube-api", required_argument, 0, 1002},
	    {"kube-token-file", required_argument, 0, 1003},
	    {"kube-ca-file", required_argument, 0, 1004},
	    {"no-kube", no_argument, 0, 1005},
	    {"events", required_argument, 0, 1007},
	    {"unmanaged", required_argument, 0, 1008},
	    {"metrics-process-labels", no_argument, 0, 1009},
	    {"unmanaged-interval", required_argument, 0, 1010},
	    /* claims.c's settings: 1100 + index in nvs_claims_flags */
	    {"oversubscription-factor", required_argument, 0, 1100},
	    {"mode-dwell-ms", required_argument, 0, 1101},
	    {"mode-switch-burst", required_argument, 0, 1102},
	    {"report-rate", required_argument, 0, 1103},
	    {"swap-tq-max-factor", required_argument, 0, 1104},
	    {"max-conns-per-tenant", required_argument, 0, 1011},
	    {"handshake-timeout-ms", required_argument, 0, 1012},
	    {"conn-buffer-budget", required_argument, 0, 1013},
	    {"log-rate", required_argument, 0, 1014},
	    {"accept-rate", required_argument, 0, 1015},
	    {"coschedule", required_argument, 0, 1020},
	    {"preempt-ms", required_argument, 0, 1021},
	    {"min-slice-ms", required_argument, 0, 1022},
	    {"batch-floor", required_argument, 0, 1023},
	    {"state-file", required_argument, 0, 1030},
	    {"health-stall-ms", required_argument, 0, 1031},
	    {"debug", no_argument, 0, 'v'},
	    {"version", no_argument, 0, 'V'},
	    {"help", no_argument, 0, 'h'},
	};
	unsigned nopts = 0;
	while (opts[nopts].name)
		nopts++;
	nvs_config_add_options(opts, &nopts, sizeof opts / sizeof opts[0] - 1);
	int o;
	while ((o = getopt_long(argc, argv, "d:m:t:c:r:i:g:vVh", opts, NULL)) != -1) {
		int m;
		switch (o) {
		case 'd':
			if (strlen(optarg) >= sizeof S.cfg.sock_dir)
				return bad_flag("--sock-dir", optarg, "a shorter path");
			snprintf(S.cfg.sock_dir, sizeof S.cfg.sock_dir, "%s", optarg);
			break;
		case 'm':
			if ((m = nvs_mode_parse(optarg)) < 0)
				return bad_flag("--mode", optarg, "on, off or auto");
			S.cfg.mode = (unsigned)m;
			break;
		case 't':
			if (nvs_parse_tq_ms(optarg, &S.cfg.tq_ms))
				return bad_flag("--tq", optarg, "seconds (30, 0.5) or 300ms");
			break;
		case 'c':
			if (nvs_parse_capacity_list(optarg, &S.cfg))
				return bad_flag("--capacity", optarg, "16Gi or 16Gi,8Gi");
			break;
		case 'r':
			if (nvs_parse_size(optarg, 1, &S.cfg.reserve))
				return bad_flag("--reserve", optarg, "a size such as 512Mi");
			break;
		case 'i':
			if (nvs_parse_ms32(optarg, &S.cfg.idle_release_ms))
				return bad_flag("--idle-release-ms", optarg, "milliseconds");
			break;
		case 'g':
			if (nvs_parse_ms32(optarg, &S.cfg.drop_grace_ms) || !S.cfg.drop_grace_ms)
				return bad_flag("--drop-grace-ms", optarg, "milliseconds > 0");
			break;
		case 'N':
			S.cfg.use_nvml = 0;
			break;
		case 'M':
			nvs_metrics_cfg.enable = 1;
			break;
		case 'P':
			if (nvs_metrics_set_port(&nvs_metrics_cfg, optarg))
				return bad_flag("--metrics-port", optarg, "0..65535");
			break;
		case 'A':
			if (nvs_metrics_set_addr(&nvs_metrics_cfg, optarg))
				return bad_flag("--metrics-addr", optarg, "an IP address");
			break;
		case 1000:
			if (nvs_peer_set_proc_root(optarg))
				return bad_flag("--proc-root", optarg, "a shorter path");
			break;
		case 1001:
		case 1002:
		case 1003:
		case 1004: {
			struct nvs_k8s_config *kc = &nvs_k8s_cfg;
			char *dst = o == 1001	? kc->node_name
				    : o == 1002 ? kc->api
				    : o == 1003 ? kc->token_file
						: kc->ca_file;
			size_t cap = o == 1001 ? sizeof kc->node_name : sizeof kc->api;
			if (!*optarg || strlen(optarg) >= cap)
				return bad_flag(o == 1001   ? "--node-name"
						: o == 1002 ? "--kube-api"
						: o == 1003 ? "--kube-token-file"
							    : "--kube-ca-file",
						optarg, "a non-empty, shorter value");
			snprintf(dst, cap, "%s", optarg);
			break;
		}
		case 1005:
			nvs_k8s_cfg.disabled = 1;
			break;
		case 1006:
			if (!*optarg || strlen(optarg) >= sizeof S.cfg.admin_sock_dir)
				return bad_flag("--admin-sock-dir", optarg,
						"a non-empty, shorter path");
			snprintf(S.cfg.admin_sock_dir, sizeof S.cfg.admin_sock_dir, "%s", optarg);
			break;
		case 1007:
			if (!*optarg)
				return bad_flag("--events", optarg, "a file path");
			events_path = optarg;
			break;
		case 1008:
			if ((m = nvs_unmanaged_parse_policy(optarg)) < 0)
				return bad_flag("--unmanaged", optarg, "report or serialize");
			nvs_unmanaged_cfg.policy = (unsigned)m;
			break;
		case 1009:
			nvs_metrics_cfg.process_labels = 1;
			break;
		case 1010:
			if (nvs_unmanaged_parse_interval(optarg, &nvs_unmanaged_cfg.interval_ms))
				return bad_flag("--unmanaged-interval", optarg,
						"0 (off) or 100 ms .. 1 h (2000, 2s, 500ms)");
			break;
		case 1100:
		case 1101:
		case 1102:
		case 1103:
		case 1104: {
			char flag[48];
			snprintf(flag, sizeof flag, "--%s", nvs_claims_flags[o - 1100]);
			if (nvs_claims_config_flag(flag, optarg))
				return 2;
			break;
		}
		case 1011:
			if (nvs_limits_set_max_conns("--max-conns-per-tenant", optarg))
				return 2;
			break;
		case 1012:
			if (nvs_limits_set_handshake("--handshake-timeout-ms", optarg))
				return 2;
			break;
		case 1013:
			if (nvs_limits_set_budget("--conn-buffer-budget", optarg))
				return 2;
			break;
		case 1014:
			if (nvs_plog_set_rate("--log-rate", optarg))
				return 2;
			break;
		case 1015:
			if (nvs_limits_set_accept_rate("--accept-rate", optarg))
				return 2;
			break;
		case 1020:
		case 1021:
		case 1022:
		case 1023: {
			static const char *const w[] = {"coschedule", "preempt-ms", "min-slice-ms",
							"batch-floor"};
			static const char *const valid[] = {"on or off", "milliseconds 0..60000",
							    "milliseconds 0..60000",
							    "a percent 0..100"};
			char flag[32];
			snprintf(flag, sizeof flag, "--%s", w[o - 1020]);
			if (nvs_cosched_parse(&nvs_cosched_cfg, w[o - 1020], optarg))
				return bad_flag(flag, optarg, valid[o - 1020]);
			break;
		}
		case 1030:
			if (nvs_state_file_set_path(optarg))
				return bad_flag("--state-file", optarg, "a shorter path, or none");
			break;
		case 1031:
			if (nvs_health_parse_stall(optarg, &nvs_health_stall_ms))
				return bad_flag("--health-stall-ms", optarg,
						"1500 .. 600000 ms (3s)");
			break;
		case NVS_CONFIG_ENV_FLAG: /* exported by nvs_config_env_flags() */
			break;
		case 'v':
			setenv("NVSHARE_DEBUG", "1", 1);
			nvs_log_reload_env();
			break;
		case 'V':
			printf("nvshare-scheduler %s (protocol %u)\n", NVS_VERSION_FULL,
			       NVS_PROTO_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "nvshare-scheduler: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (socket_paths())
		return 2;
	if (strcmp(nvs_proc_root, "/proc"))
		NVS_WARN("peer identities are read from %s, not /proc (--proc-root / "
			 "NVSHARE_PROC_ROOT): for tests only",
			 nvs_proc_root);
	S.start_ns = nvs_now_ns();
	S.euid = geteuid();
	/* From here on the loop never blocks on stderr (log.h). */
	if (nvs_log_queue_start(1ul << 20))
		NVS_WARN("cannot start the log writer: logging directly to stderr");
	else
		atexit(nvs_log_queue_stop); /* every exit path writes what is queued */
	nvs_plog_start();
	nvs_quota_start(); /* compute quotas layered on the lock (policy.h) */
	nvs_config_snapshot();
	/* The stream opens first: the state file's outcome is an event. */
	if (events_path && *events_path && nvs_events_open(events_path))
		return 1;
	nvs_event("start", "\"pid\":%d", (int)getpid());
	nvs_state_file_load(); /* run-time settings over the configuration */

	NVS_INFO("nvshare-scheduler %s starting: mode %s, tq %llu ms, reserve %llu, idle release "
		 "%u ms, drop grace %u ms",
		 NVS_VERSION_FULL, nvs_mode_name(S.cfg.mode), (unsigned long long)S.cfg.tq_ms,
		 (unsigned long long)S.cfg.reserve, S.cfg.idle_release_ms, S.cfg.drop_grace_ms);
	/* The loop first: each part below registers its own descriptors and
	 * timers. When a timer ticks in a turn is its phase's business
	 * (loop.h), not the order of these calls; within a phase, policy
	 * before limits, as before (they do not depend on each other). */
	if (nvs_loop_init() < 0) {
		NVS_ERROR("event loop setup failed: %s", strerror(errno));
		return 1;
	}
	nvs_health_start();
	nvs_policy_start();
	nvs_limits_start();
	conn_start();
	if (nvs_server_open())
		return 1;
	if (S.cfg.use_nvml) {
		nvs_gpus_discover();
		if (nvs_config_check_gpus()) {
			nvs_server_close();
			nvs_loop_close();
			return 2;
		}
	} else
		NVS_INFO("NVML disabled: GPUs will be learned from clients");
	nvs_unmanaged_start(); /* needs the GPUs; without NVML it is off */
	nvs_metrics_start();   /* a failure is logged; scheduling goes on */
	nvs_k8s_on_change(nvs_pod_changed, nvs_pod_removed);
	if (nvs_k8s_start()) {
		nvs_server_close();
		nvs_loop_close();
		return 1;
	}
	int rc = nvs_loop_run(); /* until SIGTERM/SIGINT (server.c) */
	nvs_k8s_stop();
	nvs_metrics_stop();
	nvs_server_close();
	nvs_loop_close();
	return rc;
}
