/*
 * nvsharectl: shows and changes the scheduler's settings.
 * Exit codes: 0 ok, 1 error (scheduler unreachable, refused, failed), 2 usage.
 */
#include "log.h"
#include "parse.h"
#include "sched_conn.h"
#include "sockpath.h"
#include "status_view.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "nvs_version.h" /* generated: scripts/gen-version.sh */

#include <signal.h>
#include <sys/time.h>
#include <time.h>

/* The whole run's wait for the scheduler (connect to last reply): a
 * stopped or hung scheduler accepts connections in the kernel and never
 * answers. NVSHARE_CTL_TIMEOUT_MS / --timeout. */
#define DEFAULT_TIMEOUT_MS 5000
static int timeout_ms = DEFAULT_TIMEOUT_MS;
static int64_t deadline_ms;

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "nvsharectl: scheduler not answering (connect or reply timed out; "
				"--timeout or NVSHARE_CTL_TIMEOUT_MS changes the wait)\n";
	ssize_t w = write(2, m, sizeof m - 1);
	(void)w;
	_exit(1);
}

static int parse_timeout(const char *s, int *out)
{
	uint64_t v;
	if (nvs_parse_duration_ms(s, &v) || v < 100 || v > 3600000)
		return -1;
	*out = (int)v;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(
	    f, "Usage: nvsharectl [options]\n"
	       "With no option: show the scheduler's GPUs and clients.\n"
	       "\n"
	       "  -j, --json                 print the raw JSON status\n"
	       "      --tenant               use the client socket: what a Pod may see\n"
	       "                             (its own clients only); changes are refused\n"
	       "      --socket PATH          use this socket\n"
	       "      --timeout MS           give up when the scheduler has not answered\n"
	       "                             within MS (5000; NVSHARE_CTL_TIMEOUT_MS)\n"
	       "      --settings             every setting: its value and where it comes from\n"
	       "                             (default, environment, flag, state-file,\n"
	       "                             nvsharectl); with --json, as JSON\n"
	       "  -S, --anti-thrash MODE     on (one job at a time), off (all at once),\n"
	       "                             auto (together while memory fits)\n"
	       "  -T, --set-tq TIME          time quantum: seconds (30, 0.5) or 300ms\n"
	       "      --capacity SIZE|auto   schedulable memory (16Gi; auto = memory - reserve)\n"
	       "      --idle-release MS      idle release for clients connecting from now on\n"
	       "                             Each of these four takes \"default\": back to the\n"
	       "                             configured value (with -g N: GPU N back to the\n"
	       "                             value for all GPUs)\n"
	       "      --reset NAME|all       the same for a setting by name (mode, tq, capacity,\n"
	       "                             idle-release-ms: see --settings) or all of them\n"
	       "  -g, --gpu N                apply to GPU N only (default: all GPUs)\n"
	       "      --set-client PID       change a running client's limits:\n"
	       "      --core-limit N|default   compute limit 1..100 %%\n"
	       "      --memory-limit SIZE|none memory limit (bare number = MiB)\n"
	       "  -V, --version\n"
	       "  -h, --help\n"
	       "\n"
	       "nvsharectl talks to the admin socket, $NVSHARE_ADMIN_SOCK_DIR/" NVS_ADMIN_SOCK_NAME
	       "\n(default " NVS_DEFAULT_ADMIN_SOCK_DIR "): run it as the scheduler's user on the\n"
	       "node, or in Kubernetes with kubectl exec in the nvshare-scheduler Pod.\n"
	       "--tenant uses the client socket, $NVSHARE_SOCK_DIR/" NVS_SOCK_NAME
	       " (default\n" NVS_DEFAULT_SOCK_DIR "). See docs/security.md.\n");
}

static int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "nvsharectl: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'nvsharectl --help'.\n");
	return 2;
}

/* Which socket, for the connection and for messages that name it. */
static char sock_path[128];
static int admin_sock; /* the default: the admin socket */

static int open_conn(struct nvs_sconn *c)
{
	int r = nvs_sconn_open_path(c, sock_path);
	if (r == 0)
		return 0;
	const char *var = admin_sock ? "NVSHARE_ADMIN_SOCK_DIR" : "NVSHARE_SOCK_DIR";
	if (r == -ENOENT || r == -ECONNREFUSED)
		fprintf(stderr,
			"nvsharectl: the scheduler is not running: cannot connect to %s: %s\n"
			"(start nvshare-scheduler, or set %s to its socket directory)\n",
			sock_path, strerror(-r), var);
	else if (r == -EACCES || r == -EPERM)
		fprintf(
		    stderr,
		    "nvsharectl: permission denied: cannot connect to %s\n"
		    "%s",
		    sock_path,
		    admin_sock
			? "The admin socket is only for the scheduler's user: run nvsharectl as "
			  "root on the node,\nor in Kubernetes: kubectl exec -n nvshare-system "
			  "<nvshare-scheduler pod> -- nvsharectl ...\n(nvsharectl --tenant shows "
			  "what a Pod may see, through the client socket.)\n"
			: "");
	else
		fprintf(stderr, "nvsharectl: cannot connect to the scheduler at %s: %s\n",
			sock_path, strerror(-r));
	return -1;
}

/* Sends one request; prints the reply text. Returns the exit code. */
/* A request's outcome r (1: a reply; 0: none in time; < 0: -errno):
 * 1 (reported) when there is no reply, else 0. */
static int no_reply(int r)
{
	if (r == 0)
		fprintf(stderr,
			"nvsharectl: scheduler not answering: no reply on %s within %d ms (is it "
			"stopped or hung? --timeout or NVSHARE_CTL_TIMEOUT_MS changes the wait)\n",
			sock_path, timeout_ms);
	else if (r < 0)
		fprintf(stderr, "nvsharectl: lost the connection to the scheduler: %s\n",
			r == -EPROTO ? "malformed reply" : strerror(-r));
	return r <= 0;
}

static int request(struct nvs_sconn *c, struct nvs_msg *req, int quiet_ok, struct nvs_msg *out)
{
	struct nvs_msg rep;
	int64_t left = deadline_ms - mono_ms();
	int r = left > 0 ? nvs_sconn_request(c, req, &rep, (int)left) : 0;
	if (no_reply(r))
		return 1;
	if (rep.reply_status != 0) {
		/* The scheduler's text names the socket and what to do. */
		fprintf(stderr, "nvsharectl: %s%.*s\n",
			rep.reply_status == -EPERM ? "" : "refused: ", (int)rep.reply_len,
			rep.reply_text);
		return 1;
	}
	if (out)
		*out = rep;
	else if (!quiet_ok)
		printf("%.*s\n", (int)rep.reply_len, rep.reply_text);
	return 0;
}

/* The whole status (streamed: any size). 0, or the exit code (reported). */
static int fetch_status(struct nvs_sconn *c, char **text, size_t *len)
{
	int32_t st = 0;
	int64_t left = deadline_ms - mono_ms();
	int r = left > 0 ? nvs_sconn_status(c, (int)left, &st, text, len) : 0;
	if (no_reply(r))
		return 1;
	if (st != 0) {
		fprintf(stderr, "nvsharectl: %s%s\n", st == -EPERM ? "" : "refused: ", *text);
		free(*text);
		return 1;
	}
	return 0;
}

/* --reset NAME|all: the CTL_SET fields of the run-time settings named,
 * from the scheduler's own table (its status), so that every run-time
 * setting it has can be reset by name. 0, or the exit code (reported). */
static int reset_fields(struct nvs_sconn *c, const char *name, int gpu, uint32_t *fields,
			unsigned *n, unsigned cap)
{
	char *text;
	size_t len;
	int rc = fetch_status(c, &text, &len);
	if (rc)
		return rc;
	cJSON *root = cJSON_ParseWithLength(text, len);
	free(text);
	const cJSON *set = cJSON_GetObjectItemCaseSensitive(root, "settings"), *e;
	char names[256] = "";
	*n = 0;
	cJSON_ArrayForEach(e, set)
	{
		const cJSON *ctl = cJSON_GetObjectItemCaseSensitive(e, "ctl");
		const cJSON *rt = cJSON_GetObjectItemCaseSensitive(e, "runtime");
		if (!cJSON_IsNumber(ctl) || !cJSON_IsString(rt))
			continue;
		if (strlen(names) + strlen(e->string) + 3 < sizeof names)
			snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
				 *names ? ", " : "", e->string);
		int per_gpu = !strcmp(rt->valuestring, "gpu");
		if (strcmp(name, "all") ? strcmp(name, e->string) != 0 : (gpu >= 0 && !per_gpu))
			continue;
		if (gpu >= 0 && !per_gpu) {
			fprintf(stderr, "nvsharectl: %s is one setting for all GPUs: no -g\n",
				e->string);
			cJSON_Delete(root);
			return 2;
		}
		if (*n < cap)
			fields[(*n)++] = (uint32_t)ctl->valuedouble;
	}
	cJSON_Delete(root);
	if (!set) {
		fprintf(stderr, "nvsharectl: the scheduler's status has no settings (it is older "
				"than this nvsharectl: no --reset)\n");
		return 1;
	}
	if (!*n) {
		fprintf(stderr,
			"nvsharectl: --reset: no run-time setting \"%s\" (expected one of %s, or "
			"all)\n",
			name, names);
		return 2;
	}
	return 0;
}

static int set(struct nvs_sconn *c, int gpu, uint32_t field, uint64_t value)
{
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = NVS_MSG_CTL_SET;
	m.u.ctl_set.gpu = gpu;
	m.u.ctl_set.field = field;
	m.u.ctl_set.value = value;
	return request(c, &m, 0, NULL);
}

int main(int argc, char **argv)
{
	nvs_log_init("nvsharectl");
	enum {
		O_CAPACITY = 256,
		O_IDLE,
		O_SET_CLIENT,
		O_CORE,
		O_MEM,
		O_TENANT,
		O_SOCKET,
		O_TIMEOUT,
		O_SETTINGS,
		O_RESET
	};
	static const struct option opts[] = {
	    {"json", no_argument, 0, 'j'},
	    {"tenant", no_argument, 0, O_TENANT},
	    {"socket", required_argument, 0, O_SOCKET},
	    {"timeout", required_argument, 0, O_TIMEOUT},
	    {"anti-thrash", required_argument, 0, 'S'},
	    {"set-tq", required_argument, 0, 'T'},
	    {"gpu", required_argument, 0, 'g'},
	    {"capacity", required_argument, 0, O_CAPACITY},
	    {"idle-release", required_argument, 0, O_IDLE},
	    {"set-client", required_argument, 0, O_SET_CLIENT},
	    {"settings", no_argument, 0, O_SETTINGS},
	    {"reset", required_argument, 0, O_RESET},
	    {"core-limit", required_argument, 0, O_CORE},
	    {"memory-limit", required_argument, 0, O_MEM},
	    {"version", no_argument, 0, 'V'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	int json = 0, mode = -1, gpu = -1;
	int have_tq = 0, have_cap = 0, have_idle = 0, have_client = 0, have_core = 0, have_mem = 0;
	int clear_core = 0, tenant = 0, settings = 0;
	/* "default" for -S, -T, --capacity, --idle-release: reset that field */
	uint32_t resets[8];
	unsigned nresets = 0;
	const char *reset_name = NULL, *socket_arg = NULL;
	uint64_t tq = 0, cap = 0, idle = 0, pid = 0, core = 0, mem = 0;
	const char *te = getenv("NVSHARE_CTL_TIMEOUT_MS");
	if (te && *te && parse_timeout(te, &timeout_ms))
		return usage_err("bad NVSHARE_CTL_TIMEOUT_MS=\"%s\": expected 100 .. 3600000 ms",
				 te);
	int o;
	while ((o = getopt_long(argc, argv, "jS:T:g:Vh", opts, NULL)) != -1) {
		uint64_t v;
		switch (o) {
		case 'j':
			json = 1;
			break;
		case O_TENANT:
			tenant = 1;
			break;
		case O_SOCKET:
			socket_arg = optarg;
			break;
		case O_TIMEOUT:
			if (parse_timeout(optarg, &timeout_ms))
				return usage_err("bad --timeout \"%s\": expected 100 .. 3600000 ms",
						 optarg);
			break;
		case O_SETTINGS:
			settings = 1;
			break;
		case O_RESET:
			reset_name = optarg;
			break;
		case 'S':
			if (!strcasecmp(optarg, "default")) {
				resets[nresets++] = NVS_CTL_MODE;
				break;
			}
			if ((mode = nvs_mode_parse(optarg)) < 0)
				return usage_err("bad mode \"%s\": expected on, off or auto",
						 optarg);
			break;
		case 'T':
			if (!strcasecmp(optarg, "default")) {
				resets[nresets++] = NVS_CTL_TQ_MS;
				break;
			}
			if (nvs_parse_tq_ms(optarg, &tq))
				return usage_err(
				    "bad time quantum \"%s\": expected seconds (30, 0.5) "
				    "or a duration (300ms), at least 1 ms",
				    optarg);
			have_tq = 1;
			break;
		case 'g':
			if (nvs_parse_u64(optarg, 0, 1023, &v))
				return usage_err("bad GPU index \"%s\"", optarg);
			gpu = (int)v;
			break;
		case O_CAPACITY:
			if (!strcasecmp(optarg, "default")) {
				resets[nresets++] = NVS_CTL_CAPACITY;
				break;
			}
			if (!strcasecmp(optarg, "auto"))
				cap = 0;
			else if (nvs_parse_size(optarg, 1, &cap) || !cap)
				return usage_err(
				    "bad capacity \"%s\": expected a size (16Gi) or auto", optarg);
			have_cap = 1;
			break;
		case O_IDLE:
			if (!strcasecmp(optarg, "default")) {
				resets[nresets++] = NVS_CTL_IDLE_RELEASE_MS;
				break;
			}
			if (nvs_parse_duration_ms(optarg, &idle) || idle > UINT32_MAX)
				return usage_err("bad idle release \"%s\": expected milliseconds",
						 optarg);
			have_idle = 1;
			break;
		case O_SET_CLIENT:
			if (nvs_parse_u64(optarg, 1, UINT32_MAX, &pid))
				return usage_err("bad pid \"%s\"", optarg);
			have_client = 1;
			break;
		case O_CORE:
			if (!strcasecmp(optarg, "default") || !strcasecmp(optarg, "none"))
				clear_core = 1;
			else if (nvs_parse_u64(optarg, 1, 100, &core))
				return usage_err(
				    "bad core limit \"%s\": expected 1..100 or default", optarg);
			have_core = 1;
			break;
		case O_MEM:
			if (!strcasecmp(optarg, "none"))
				mem = NVS_NO_LIMIT;
			else if (nvs_parse_size(optarg, 1ull << 20, &mem) == 0 && !mem)
				return usage_err(
				    "--memory-limit 0 is not a limit: use none to remove "
				    "the limit, or a size (4Gi, 512 = 512Mi)");
			else if (nvs_parse_size(optarg, 1ull << 20, &mem))
				return usage_err(
				    "bad memory limit \"%s\": expected a size (4Gi, 512 = "
				    "512Mi) or none",
				    optarg);
			have_mem = 1;
			break;
		case 'V':
			printf("nvsharectl %s (protocol %u)\n", NVS_VERSION_FULL,
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
	if (optind < argc)
		return usage_err("unexpected argument \"%s\"", argv[optind]);
	if ((have_core || have_mem) && !have_client)
		return usage_err("--core-limit and --memory-limit need --set-client PID");
	if (have_client && !have_core && !have_mem)
		return usage_err("--set-client needs --core-limit and/or --memory-limit");
	if (nresets > 4)
		return usage_err("each of -S, -T, --capacity and --idle-release once");
	int changes =
	    mode >= 0 || have_tq || have_cap || have_idle || have_client || nresets || reset_name;
	if (json && changes)
		return usage_err("--json shows the status; it does not combine with changes");
	if (settings && changes)
		return usage_err("--settings shows the settings; it does not combine with changes");
	if (settings && tenant)
		return usage_err("--settings needs the admin socket (not --tenant)");

	if (tenant && socket_arg)
		return usage_err("--tenant and --socket both choose the socket: give one");
	int too_long;
	if (socket_arg) {
		too_long = snprintf(sock_path, sizeof sock_path, "%s", socket_arg) >=
			   (int)sizeof sock_path;
	} else {
		admin_sock = !tenant;
		too_long = admin_sock ? nvs_admin_sock_path(sock_path, sizeof sock_path)
				      : nvs_sock_path(sock_path, sizeof sock_path);
	}
	if (too_long) {
		fprintf(stderr, "nvsharectl: the socket path is too long\n");
		return 2;
	}

	/* One deadline for the whole run; the alarm is the backstop for a
	 * connect() that blocks (a stopped scheduler's full backlog). */
	deadline_ms = mono_ms() + timeout_ms;
	signal(SIGALRM, on_alarm);
	struct itimerval it = {.it_value = {.tv_sec = timeout_ms / 1000 + 1}};
	setitimer(ITIMER_REAL, &it, NULL);
	struct nvs_sconn c;
	if (open_conn(&c))
		return 1;
	int rc = 0;
	if (!changes) {
		/* Streamed: a status of any size (1,000 clients: ~1 MB). */
		char *text;
		size_t len;
		rc = fetch_status(&c, &text, &len);
		if (rc)
			;
		else if (settings)
			rc = nvs_settings_print(stdout, text, len, json) ? 1 : 0;
		else if (json)
			printf("%s\n", text);
		else if (nvs_status_print(stdout, text, len))
			rc = 1;
		if (!rc)
			free(text);
		nvs_sconn_close(&c);
		return rc;
	}
	if (reset_name) {
		unsigned n = 0;
		rc = reset_fields(&c, reset_name, gpu, resets + nresets, &n,
				  sizeof resets / sizeof resets[0] - nresets);
		nresets += n;
	}
	for (unsigned i = 0; !rc && i < nresets; i++)
		rc = set(&c, resets[i] == NVS_CTL_IDLE_RELEASE_MS ? -1 : gpu,
			 resets[i] | NVS_CTL_RESET, 0);
	if (!rc && mode >= 0)
		rc = set(&c, gpu, NVS_CTL_MODE, (uint64_t)mode);
	if (!rc && have_tq)
		rc = set(&c, gpu, NVS_CTL_TQ_MS, tq);
	if (!rc && have_cap)
		rc = set(&c, gpu, NVS_CTL_CAPACITY, cap);
	if (!rc && have_idle)
		rc = set(&c, -1, NVS_CTL_IDLE_RELEASE_MS, idle);
	if (!rc && have_client) {
		struct nvs_msg m;
		memset(&m, 0, sizeof m);
		m.type = NVS_MSG_CTL_SET_CLIENT;
		m.u.ctl_client.pid = (uint32_t)pid;
		m.u.ctl_client.gpu = gpu;
		m.u.ctl_client.core_limit = clear_core ? 0 : (uint32_t)core;
		m.u.ctl_client.flags = (clear_core ? NVS_CTL_CLIENT_CLEAR_CORE : 0) |
				       (have_mem ? NVS_CTL_CLIENT_SET_MEM : 0);
		m.u.ctl_client.mem_limit = have_mem ? mem : 0;
		rc = request(&c, &m, 0, NULL);
	}
	nvs_sconn_close(&c);
	return rc;
}
