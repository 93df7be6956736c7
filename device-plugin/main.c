/*
 * nvshare-device-plugin: advertises every GPU of the node to the kubelet as
 * N virtual devices of nvshare.com/gpu and as memory units of
 * nvshare.com/gpu-memory (one endpoint and registration each), and hands
 * containers that get either the nvshare library (LD_PRELOAD) and the
 * scheduler's socket directory.
 *
 * Main thread: flags, GPU discovery, then a poll() loop over a signalfd and
 * an inotify watch of the kubelet's device-plugin directory, with timers for
 * registration retries and health checks. The gRPC thread (grpc_server.c)
 * serves the kubelet. See docs/kubernetes.md.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bindings.h"
#include "devices.h"
#include "grpc_server.h"
#include "flags.h"
#include "health.h"
#include "log.h"
#include "parse.h"
#include "plugin.h"
#include "podres.h"
#include "policy.h"
#include "sockpath.h"

#define KUBELET_SOCK "kubelet.sock"
#define REGISTER_TIMEOUT_MS 15000
#define RETRY_MS 1000

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: nvshare-device-plugin [options]\n"
		"\n"
		"Kubernetes device plugin of nvshare: advertises each GPU of the node as\n"
		"N virtual devices <GPU UUID>__<k> of one extended resource, and its memory\n"
		"as units <GPU UUID>__<k> of a second one (nvshare.com/gpu-memory), and\n"
		"makes the containers that get either load libnvshare.so and reach\n"
		"nvshare-scheduler.\n"
		"GPUs come from NVML (libnvidia-ml.so.1), else from NVIDIA_VISIBLE_DEVICES.\n"
		"\n"
		"Options:\n"
		"  --kubelet-dir DIR          kubelet device-plugin directory\n"
		"                             (default /var/lib/kubelet/device-plugins)\n"
		"  --resource-name NAME       extended resource (default nvshare.com/gpu)\n"
		"  --socket-name NAME         our socket in DIR (default nvshare.sock)\n"
		"  --replicas N               virtual devices per GPU, 1..%d (default 10)\n"
		"  --allocation-policy P      spread (default) or pack: which GPU\n"
		"                             GetPreferredAllocation suggests first\n"
		"  --health-interval T        NVML health check period, e.g. 5s, 500ms;\n"
		"                             0 disables (default 5s)\n"
		"  --health-file PATH         rewrite PATH every loop turn (at most 1/s) for\n"
		"                             the kubelet's exec probes\n"
		"  --probe live|ready         check PATH of --health-file and exit: live when\n"
		"                             the loop ran within --probe-max-age (30s),\n"
		"                             ready when also registered with the kubelet\n"
		"  --host-lib-dir DIR         node directory holding libnvshare.so\n"
		"                             (default /var/lib/nvshare/lib)\n"
		"  --container-lib-dir DIR    where containers see it\n"
		"                             (default /usr/local/nvshare/lib)\n"
		"  --library-name NAME        default libnvshare.so\n"
		"  --no-library-check         do not fail Allocate when DIR/NAME is not\n"
		"                             readable by the plugin\n"
		"  --host-socket-dir DIR      scheduler socket directory on the node\n"
		"                             (default /var/run/nvshare)\n"
		"  --container-socket-dir DIR where containers see it (default the same;\n"
		"                             a non-default value is passed as\n"
		"                             NVSHARE_SOCK_DIR). Each container gets\n"
		"                             only its allocation's DIR/pods/<key>\n"
		"                             there, bound to its Pod (Pod sockets)\n"
		"  --pod-resources-socket PATH  the kubelet's PodResources API, which\n"
		"                             names the Pod of each allocation (default\n"
		"                             %s)\n"
		"  --pod-resources-interval T reconcile the Pod bindings with it every T\n"
		"                             (default 30s; 100ms..1h)\n"
		"  --pod-socket-wait T        PreStartContainer waits up to T for the\n"
		"                             scheduler's Pod socket (default 3s; 0..20s)\n"
		"  --state-dir DIR            copies of the allocation records on the\n"
		"                             node's disk, so that a reboot, which empties\n"
		"                             the socket directory, does not lose the\n"
		"                             mounts the kubelet checkpointed (default\n"
		"                             %s; \"none\": not kept)\n"
		"  --memory-unit SIZE         bytes per unit of nvshare.com/gpu-memory\n"
		"                             (default 1Gi; at least 1Mi)\n"
		"  --memory-oversubscription F  units advertised per GPU = its memory x F /\n"
		"                             unit (default 1.0; up to 64)\n"
		"  --gpu-memory-size SIZE     GPU memory when NVML cannot tell (GPUs from\n"
		"                             NVIDIA_VISIBLE_DEVICES); default: no units\n"
		"  --memory-socket-name NAME  its socket in DIR (default nvshare-memory.sock)\n"
		"  --no-memory-resource       advertise nvshare.com/gpu only\n"
		"  --device-list-strategy L   how containers are told their GPUs, a comma\n"
		"                             list of envvar (default), volume-mounts,\n"
		"                             cdi-annotations, cdi-cri (docs/kubernetes.md);\n"
		"                             also NVSHARE_DEVICE_LIST_STRATEGY\n"
		"  --cdi-spec-dir DIR         where the CDI spec nvshare.com-gpu.json is\n"
		"                             written for cdi-* (default /var/run/cdi)\n"
		"  --cdi-driver-kind KIND     CDI kind of the driver's devices named beside\n"
		"                             ours (default nvidia.com/gpu, from nvidia-ctk's\n"
		"                             spec on the node; none: only ours)\n"
		"  --cdi-dev-root DIR         where the node's /dev is seen (default /)\n"
		"  --require-scheduler        containers get NVSHARE_REQUIRE_SCHEDULER=1: CUDA\n"
		"                             work fails instead of running ungated when\n"
		"                             the scheduler cannot be reached\n"
		"  -V, --version              print the version\n"
		"  -h, --help                 this text\n"
		"\n"
		"Environment: NVIDIA_VISIBLE_DEVICES (GPUs without NVML), NVSHARE_DEBUG=1.\n",
		NVS_DP_MAX_REPLICAS, NVS_DP_PODRES_SOCKET, NVS_DP_STATE_DIR);
}

/* Probes (health.h, flags.h): --health-file, --probe live|ready,
 * --probe-max-age. */
static struct nvs_dp_probe_opts probe = NVS_DP_PROBE_OPTS_INIT;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int path_exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

/* One resource: its own socket, server and registration. */
struct endpoint {
	struct nvs_dp_plugin plugin;
	struct nvs_rpc_ops ops;
	struct nvs_rpc_server *server;
	char sock_path[PATH_MAX];
	int registered;
	uint64_t next_server, next_register;
};

struct state {
	struct nvs_dp_config cfg;
	struct endpoint ep[2]; /* nvshare.com/gpu, nvshare.com/gpu-memory */
	unsigned nep;
	char kubelet_sock[PATH_MAX];
	int inotify_fd, watch;
	int sock_watch; /* the scheduler's socket directory: its socket re-created */
	int waiting_logged;
};

static int start_server(struct endpoint *e)
{
	e->server = nvs_rpc_server_start(e->sock_path, &e->ops);
	if (!e->server)
		return -1;
	/* Dial ourselves once, as the kubelet will, before registering. */
	struct nvs_rpc_buf resp;
	char msg[256];
	int rc = nvs_rpc_call(e->sock_path, NVS_DP_METHOD_OPTIONS, (const uint8_t *)"", 0, &resp,
			      5000, msg, sizeof msg);
	if (rc != NVS_RPC_OK || nvs_dp_check_options(resp.data, resp.len)) {
		NVS_ERROR("self-check on %s failed (status %d %s)", e->sock_path, rc, msg);
		free(resp.data);
		nvs_rpc_server_stop(e->server);
		e->server = NULL;
		return -1;
	}
	free(resp.data);
	return 0;
}

static void stop_server(struct endpoint *e)
{
	if (e->server) {
		nvs_rpc_server_stop(e->server);
		e->server = NULL;
	}
	e->registered = 0;
}

static void try_register(struct state *st, struct endpoint *e)
{
	if (!path_exists(st->kubelet_sock)) {
		if (!st->waiting_logged)
			NVS_INFO("waiting for the kubelet (%s)", st->kubelet_sock);
		st->waiting_logged = 1;
		e->next_register = now_ms() + RETRY_MS;
		return;
	}
	struct nvs_rpc_buf req, resp;
	char msg[512];
	if (nvs_dp_register_request(&e->plugin, &req)) {
		e->next_register = now_ms() + RETRY_MS;
		return;
	}
	int rc = nvs_rpc_call(st->kubelet_sock, NVS_DP_METHOD_REGISTER, req.data, req.len, &resp,
			      REGISTER_TIMEOUT_MS, msg, sizeof msg);
	free(req.data);
	free(resp.data);
	if (rc == NVS_RPC_OK) {
		NVS_INFO("registered %s with the kubelet (endpoint %s, %u GPU(s))",
			 e->plugin.resource_name, e->plugin.socket_name, e->plugin.dev->n);
		e->registered = 1;
		st->waiting_logged = 0;
		return;
	}
	NVS_WARN("registration of %s with %s failed: status %d %s; retrying",
		 e->plugin.resource_name, st->kubelet_sock, rc, msg);
	e->next_register = now_ms() + (rc == NVS_RPC_UNAVAILABLE ? RETRY_MS : 5 * RETRY_MS);
}

static void add_watch(struct state *st)
{
	if (st->sock_watch < 0)
		st->sock_watch = inotify_add_watch(st->inotify_fd, st->cfg.host_sock_dir,
						   IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF);
	if (st->watch >= 0)
		return;
	st->watch = inotify_add_watch(st->inotify_fd, st->cfg.kubelet_dir,
				      IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM |
					  IN_DELETE_SELF | IN_MOVE_SELF);
	if (st->watch < 0 && !st->waiting_logged)
		NVS_WARN("cannot watch %s: %s", st->cfg.kubelet_dir, strerror(errno));
}

/* Returns 1 when the kubelet came back (or the directory changed under us)
 * and we must listen and register again. */
static int read_inotify(struct state *st)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int restart = 0;
	for (;;) {
		ssize_t n = read(st->inotify_fd, buf, sizeof buf);
		if (n <= 0)
			break;
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof *ev + ev->len;
			if (ev->wd == st->sock_watch) {
				/* Only a wake-up: the loop's nvs_dp_bind_tick looks. */
				if (ev->mask & (IN_DELETE_SELF | IN_IGNORED))
					st->sock_watch = -1;
				continue;
			}
			if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
				NVS_WARN("%s went away", st->cfg.kubelet_dir);
				st->watch = -1;
				restart = 1;
				continue;
			}
			if (!ev->len)
				continue;
			if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) &&
			    !strcmp(ev->name, KUBELET_SOCK)) {
				NVS_INFO("%s created: the kubelet (re)started", KUBELET_SOCK);
				restart = 1;
			}
		}
	}
	return restart;
}

static int parse_args(int argc, char **argv, struct nvs_dp_config *c)
{
	enum {
		O_KDIR = 256,
		O_RES,
		O_SOCK,
		O_REPL,
		O_POL,
		O_HEALTH,
		O_HLIB,
		O_CLIB,
		O_LIBNAME,
		O_NOCHECK,
		O_HSOCK,
		O_CSOCK,
		O_MUNIT,
		O_MOVER,
		O_GMEM,
		O_MSOCK,
		O_NOMEM,
		O_HFILE,
		O_PROBE,
		O_PROBE_AGE,
		O_LIST,
		O_CDI_DIR,
		O_CDI_DRIVER,
		O_CDI_DEV,
		O_REQUIRE,
		O_PODRES,
		O_PODRES_INT,
		O_POD_WAIT,
		O_STATE_DIR
	};
	static const struct option opts[] = {
	    {"kubelet-dir", required_argument, 0, O_KDIR},
	    {"resource-name", required_argument, 0, O_RES},
	    {"socket-name", required_argument, 0, O_SOCK},
	    {"replicas", required_argument, 0, O_REPL},
	    {"allocation-policy", required_argument, 0, O_POL},
	    {"health-interval", required_argument, 0, O_HEALTH},
	    {"host-lib-dir", required_argument, 0, O_HLIB},
	    {"container-lib-dir", required_argument, 0, O_CLIB},
	    {"library-name", required_argument, 0, O_LIBNAME},
	    {"no-library-check", no_argument, 0, O_NOCHECK},
	    {"host-socket-dir", required_argument, 0, O_HSOCK},
	    {"container-socket-dir", required_argument, 0, O_CSOCK},
	    {"memory-unit", required_argument, 0, O_MUNIT},
	    {"memory-oversubscription", required_argument, 0, O_MOVER},
	    {"gpu-memory-size", required_argument, 0, O_GMEM},
	    {"memory-socket-name", required_argument, 0, O_MSOCK},
	    {"no-memory-resource", no_argument, 0, O_NOMEM},
	    NVS_DP_PROBE_OPTIONS(O_HFILE),
	    {"device-list-strategy", required_argument, 0, O_LIST},
	    {"cdi-spec-dir", required_argument, 0, O_CDI_DIR},
	    {"cdi-driver-kind", required_argument, 0, O_CDI_DRIVER},
	    {"cdi-dev-root", required_argument, 0, O_CDI_DEV},
	    {"require-scheduler", no_argument, 0, O_REQUIRE},
	    {"pod-resources-socket", required_argument, 0, O_PODRES},
	    {"pod-resources-interval", required_argument, 0, O_PODRES_INT},
	    {"pod-socket-wait", required_argument, 0, O_POD_WAIT},
	    {"state-dir", required_argument, 0, O_STATE_DIR},
	    {"version", no_argument, 0, 'V'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	int o;
	uint64_t v;
	while ((o = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
		switch (o) {
		case O_KDIR:
			c->kubelet_dir = optarg;
			break;
		case O_RES:
			c->resource_name = optarg;
			break;
		case O_SOCK:
			c->socket_name = optarg;
			break;
		case O_REPL:
			if (nvs_parse_u64(optarg, 1, NVS_DP_MAX_REPLICAS, &v)) {
				fprintf(stderr, "--replicas: expected 1..%d, got \"%s\"\n",
					NVS_DP_MAX_REPLICAS, optarg);
				return -1;
			}
			c->replicas = (unsigned)v;
			break;
		case O_POL:
			if (nvs_dp_policy_parse(optarg, &c->policy))
				return nvs_dp_bad_flag("--allocation-policy", "spread or pack",
						       optarg);
			break;
		case O_HEALTH:
			if (nvs_parse_duration_ms(optarg, &c->health_interval_ms))
				return nvs_dp_bad_flag("--health-interval", "a duration such as 5s",
						       optarg);
			break;
		case O_HFILE:
		case O_PROBE:
		case O_PROBE_AGE:
			if (nvs_dp_probe_flag(&probe, o - O_HFILE, optarg))
				return -1;
			break;
		case O_HLIB:
			c->host_lib_dir = optarg;
			break;
		case O_CLIB:
			c->container_lib_dir = optarg;
			break;
		case O_LIBNAME:
			c->lib_name = optarg;
			break;
		case O_NOCHECK:
			c->check_library = 0;
			break;
		case O_HSOCK:
			c->host_sock_dir = optarg;
			break;
		case O_CSOCK:
			c->container_sock_dir = optarg;
			break;
		case O_MUNIT:
			/* A bare number is bytes; at most 1 TiB so that units x
			 * unit cannot overflow. */
			if (nvs_parse_size(optarg, 1, &v) || v < (1ull << 20) || v > (1ull << 40))
				return nvs_dp_bad_flag(
				    "--memory-unit", "a size from 1Mi to 1Ti such as 1Gi or 512Mi",
				    optarg);
			c->mem_unit = v;
			break;
		case O_MOVER: {
			char *end = NULL;
			double f = strtod(optarg, &end);
			if (end == optarg || *end || !(f > 0 && f <= 64))
				return nvs_dp_bad_flag("--memory-oversubscription",
						       "a factor in (0, 64] such as 1.5", optarg);
			c->mem_oversubscription = f;
			break;
		}
		case O_GMEM:
			if (nvs_parse_size(optarg, 1, &v) || v == 0)
				return nvs_dp_bad_flag("--gpu-memory-size", "a size such as 80Gi",
						       optarg);
			c->gpu_memory_size = v;
			break;
		case O_MSOCK:
			c->mem_socket_name = optarg;
			break;
		case O_NOMEM:
			c->mem_resource_name = NULL;
			break;
		case O_LIST:
			if (nvs_dp_list_parse(optarg, &c->cdi.strategies))
				return nvs_dp_bad_flag("--device-list-strategy",
						       "a comma list of envvar, volume-mounts, "
						       "cdi-annotations, cdi-cri",
						       optarg);
			break;
		case O_CDI_DIR:
			c->cdi.spec_dir = optarg;
			break;
		case O_CDI_DRIVER:
			if (nvs_dp_cdi_kind_flag(optarg, &c->cdi.driver_kind))
				return -1;
			break;
		case O_CDI_DEV:
			c->cdi.dev_root = optarg;
			break;
		case O_REQUIRE:
			c->require_scheduler = 1;
			break;
		case O_PODRES:
			c->podres_socket = optarg;
			break;
		case O_PODRES_INT:
			if (nvs_parse_duration_ms(optarg, &c->podres_interval_ms) ||
			    c->podres_interval_ms < 100 || c->podres_interval_ms > 3600000)
				return nvs_dp_bad_flag("--pod-resources-interval",
						       "100ms .. 1h such as 30s", optarg);
			break;
		case O_STATE_DIR:
			c->state_dir = strcmp(optarg, "none") ? optarg : NULL;
			break;
		case O_POD_WAIT:
			/* Below the kubelet's 30 s PreStartContainer timeout, with
			 * room for the PodResources calls before it. */
			if (nvs_parse_duration_ms(optarg, &c->pod_socket_wait_ms) ||
			    c->pod_socket_wait_ms > 20000)
				return nvs_dp_bad_flag("--pod-socket-wait", "0 .. 20s such as 3s",
						       optarg);
			break;
		default:
			return nvs_dp_flag_other(o, "nvshare-device-plugin", usage);
		}
	}
	if (!c->container_sock_dir)
		c->container_sock_dir = c->host_sock_dir;
	const char *paths[] = {c->host_lib_dir,	      c->container_lib_dir, c->host_sock_dir,
			       c->container_sock_dir, c->kubelet_dir,	    c->cdi.spec_dir,
			       c->cdi.dev_root,	      c->podres_socket};
	if (nvs_dp_flags_end(argc, argv, paths, sizeof paths / sizeof paths[0]))
		return -1;
	if (strlen(c->host_sock_dir) > NVS_SOCK_DIR_MAX) {
		fprintf(stderr,
			"--host-socket-dir: at most %zu bytes (the scheduler's socket path in it "
			"must fit in a UNIX socket address)\n",
			(size_t)NVS_SOCK_DIR_MAX);
		return -1;
	}
	if (strchr(c->socket_name, '/') || !strcmp(c->socket_name, KUBELET_SOCK)) {
		fprintf(stderr, "--socket-name: a plain file name other than %s\n", KUBELET_SOCK);
		return -1;
	}
	if (c->mem_resource_name &&
	    (strchr(c->mem_socket_name, '/') || !strcmp(c->mem_socket_name, KUBELET_SOCK) ||
	     !strcmp(c->mem_socket_name, c->socket_name))) {
		fprintf(stderr,
			"--memory-socket-name: a plain file name other than %s and the "
			"--socket-name\n",
			KUBELET_SOCK);
		return -1;
	}
	if (c->mem_resource_name && !strcmp(c->mem_resource_name, c->resource_name)) {
		fprintf(stderr, "--resource-name: %s is the memory resource's name\n",
			c->resource_name);
		return -1;
	}
	if (!strchr(c->resource_name, '/')) {
		fprintf(stderr, "--resource-name: an extended resource such as nvshare.com/gpu\n");
		return -1;
	}
	if (c->state_dir && (c->state_dir[0] != '/' || strlen(c->state_dir) > 200)) {
		fprintf(stderr,
			"--state-dir: an absolute path of at most 200 bytes, or \"none\": "
			"\"%s\"\n",
			c->state_dir);
		return -1;
	}
	return 0;
}

/* The CDI spec of the node's GPUs (cdi.h), once at start: the GPUs do not
 * change while the plugin runs (a new GPU means a restart, as for the
 * advertised devices). */
static int write_cdi_spec(const struct nvs_dp_config *c, struct nvs_dp_devices *dev)
{
	struct nvs_dp_cdi_gpu g[NVS_MAX_GPUS];
	for (unsigned i = 0; i < dev->n; i++)
		g[i] = (struct nvs_dp_cdi_gpu){dev->gpu[i].uuid, dev->gpu[i].minor};
	char err[600];
	if (nvs_dp_cdi_write_spec(&c->cdi, g, dev->n, err, sizeof err)) {
		NVS_ERROR("CDI spec: %s (--cdi-spec-dir; the runtime reads CDI specs there)", err);
		return -1;
	}
	NVS_INFO("CDI spec %s/%s written: kind %s, %u GPU(s)", c->cdi.spec_dir,
		 NVS_DP_CDI_SPEC_FILE, NVS_DP_CDI_KIND, dev->n);
	return 0;
}

/* Fills endpoint e for a resource; -1 when its socket path is too long. */
static int endpoint_init(struct state *st, struct endpoint *e, struct nvs_dp_devices *dev,
			 enum nvs_dp_kind kind, const char *resource, const char *socket)
{
	memset(e, 0, sizeof *e);
	e->plugin.cfg = &st->cfg;
	e->plugin.dev = dev;
	e->plugin.kind = kind;
	e->plugin.resource_name = resource;
	e->plugin.socket_name = socket;
	nvs_dp_plugin_ops(&e->plugin, &e->ops);
	int n = snprintf(e->sock_path, sizeof e->sock_path, "%s/%s", st->cfg.kubelet_dir, socket);
	return n < 0 || (size_t)n >= 100 ? -1 : 0;
}

int main(int argc, char **argv)
{
	static struct state st;
	struct nvs_dp_devices dev;
	nvs_log_init("device-plugin");
	st.cfg = (struct nvs_dp_config){
	    .kubelet_dir = "/var/lib/kubelet/device-plugins",
	    .resource_name = "nvshare.com/gpu",
	    .socket_name = "nvshare.sock",
	    .replicas = 10,
	    .policy = NVS_DP_SPREAD,
	    .health_interval_ms = 5000,
	    .host_lib_dir = "/var/lib/nvshare/lib",
	    .container_lib_dir = "/usr/local/nvshare/lib",
	    .lib_name = "libnvshare.so",
	    .host_sock_dir = NVS_DEFAULT_SOCK_DIR,
	    .container_sock_dir = NULL,
	    .podres_socket = NVS_DP_PODRES_SOCKET,
	    .podres_interval_ms = 30000,
	    .pod_socket_wait_ms = 3000,
	    .state_dir = NVS_DP_STATE_DIR,
	    .check_library = 1,
	    .mem_resource_name = "nvshare.com/gpu-memory",
	    .mem_socket_name = "nvshare-memory.sock",
	    .mem_unit = 1ull << 30,
	    .mem_oversubscription = 1.0,
	    .cdi = {.strategies = NVS_DP_LIST_ENVVAR,
		    .spec_dir = NVS_DP_CDI_SPEC_DIR,
		    .driver_kind = NVS_DP_CDI_DRIVER_KIND,
		    .dev_root = "/"},
	};
	/* The environment first, flags over it (the DaemonSet sets the
	 * variable, so that a kustomize component can change it). */
	const char *ls = getenv("NVSHARE_DEVICE_LIST_STRATEGY");
	if (ls && *ls && nvs_dp_list_parse(ls, &st.cfg.cdi.strategies)) {
		fprintf(stderr,
			"NVSHARE_DEVICE_LIST_STRATEGY: expected a comma list of envvar, "
			"volume-mounts, cdi-annotations, cdi-cri, got \"%s\"\n",
			ls);
		return 2;
	}
	if (parse_args(argc, argv, &st.cfg))
		return 2;
	int rc = nvs_dp_probe_run(&probe);
	if (rc >= 0)
		return rc;
	int n2 = snprintf(st.kubelet_sock, sizeof st.kubelet_sock, "%s/%s", st.cfg.kubelet_dir,
			  KUBELET_SOCK);
	if (n2 < 0 || (size_t)n2 >= 100 ||
	    endpoint_init(&st, &st.ep[0], &dev, NVS_DP_KIND_GPU, st.cfg.resource_name,
			  st.cfg.socket_name) ||
	    (st.cfg.mem_resource_name &&
	     endpoint_init(&st, &st.ep[1], &dev, NVS_DP_KIND_MEMORY, st.cfg.mem_resource_name,
			   st.cfg.mem_socket_name))) {
		fprintf(stderr, "--kubelet-dir is too long for a UNIX socket path\n");
		return 2;
	}
	st.nep = st.cfg.mem_resource_name ? 2 : 1;

	/* Signals go to the signalfd; block them before gRPC starts threads. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	st.inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (sfd < 0 || st.inotify_fd < 0) {
		NVS_ERROR("signalfd/inotify: %s", strerror(errno));
		return 1;
	}
	st.watch = st.sock_watch = -1;

	if (nvs_dp_devices_init(&dev, st.cfg.replicas) < 0)
		return 1;
	if (dev.n == 0)
		NVS_WARN("no GPU found: registering %s with no devices", st.cfg.resource_name);
	char lib[PATH_MAX];
	snprintf(lib, sizeof lib, "%s/%s", st.cfg.host_lib_dir, st.cfg.lib_name);
	if (st.cfg.check_library && access(lib, R_OK))
		NVS_WARN("%s not found yet; Allocate fails until it is installed", lib);
	NVS_INFO("%s: %u GPU(s) x %u virtual devices, policy %s, health check %s",
		 st.cfg.resource_name, dev.n, st.cfg.replicas, nvs_dp_policy_name(st.cfg.policy),
		 dev.nvml_lib && st.cfg.health_interval_ms ? "on" : "off");
	if (st.cfg.mem_resource_name) {
		int units = nvs_dp_devices_set_memory(
		    &dev, st.cfg.mem_unit, st.cfg.mem_oversubscription, st.cfg.gpu_memory_size);
		if (units < 0)
			return 1;
		char b[32];
		NVS_INFO("%s: %d unit(s) of %s (oversubscription %.2f)", st.cfg.mem_resource_name,
			 units, nvs_format_size(st.cfg.mem_unit, b, sizeof b),
			 st.cfg.mem_oversubscription);
		for (unsigned i = 0; i < dev.n; i++) {
			char t[32];
			NVS_INFO("GPU %u: %s memory, %u unit(s)", i,
				 nvs_format_size(dev.gpu[i].mem_total, t, sizeof t),
				 dev.gpu[i].units);
		}
	}
	char names[64];
	NVS_INFO("device list strategy %s%s%s",
		 nvs_dp_list_names(st.cfg.cdi.strategies, names, sizeof names),
		 st.cfg.cdi.strategies & NVS_DP_LIST_CDI ? ", CDI driver kind " : "",
		 st.cfg.cdi.strategies & NVS_DP_LIST_CDI
		     ? (*st.cfg.cdi.driver_kind ? st.cfg.cdi.driver_kind : "none")
		     : "");
	if (st.cfg.cdi.strategies & NVS_DP_LIST_CDI && write_cdi_spec(&st.cfg, &dev))
		return 1;
	nvs_rpc_init();
	/* Pod sockets: a directory that cannot be used is logged and makes
	 * Allocate fail saying why; the plugin still serves. */
	struct nvs_dp_bind_cfg bind = {
	    .sock_dir = st.cfg.host_sock_dir,
	    .podres_sock = st.cfg.podres_socket,
	    .state_dir = st.cfg.state_dir,
	    .resources = {st.cfg.resource_name, st.cfg.mem_resource_name},
	    .wait_ms = st.cfg.pod_socket_wait_ms,
	    .list_timeout_ms = 5000,
	};
	nvs_dp_bind_init(&bind);
	uint64_t next_reconcile = 0;

	uint64_t next_health = now_ms() + st.cfg.health_interval_ms;
	int exit_code = 0;
	for (;;) {
		uint64_t now = now_ms();
		unsigned nreg = 0;
		for (unsigned i = 0; i < st.nep; i++)
			nreg += st.ep[i].registered != 0;
		nvs_dp_health_stamp(probe.health_file, now, nreg, st.nep);
		add_watch(&st);
		nvs_dp_bind_tick();
		if (now >= next_reconcile) {
			nvs_dp_bind_reconcile();
			next_reconcile = now_ms() + st.cfg.podres_interval_ms;
		}
		for (unsigned i = 0; i < st.nep; i++) {
			struct endpoint *e = &st.ep[i];
			if (!e->server && now >= e->next_server) {
				if (!path_exists(st.cfg.kubelet_dir)) {
					if (!st.waiting_logged)
						NVS_INFO("waiting for %s", st.cfg.kubelet_dir);
					st.waiting_logged = 1;
					e->next_server = now + RETRY_MS;
				} else if (start_server(e)) {
					e->next_server = now + RETRY_MS;
				} else {
					e->next_register = now;
				}
			}
			if (e->server && !e->registered && now >= e->next_register)
				try_register(&st, e);
		}

		now = now_ms();
		uint64_t wake = now + 5000;
		for (unsigned i = 0; i < st.nep; i++) {
			struct endpoint *e = &st.ep[i];
			if (!e->server && e->next_server < wake)
				wake = e->next_server;
			if (e->server && !e->registered && e->next_register < wake)
				wake = e->next_register;
		}
		if (st.cfg.health_interval_ms && next_health < wake)
			wake = next_health;
		if (next_reconcile < wake)
			wake = next_reconcile;
		int timeout = wake > now ? (int)(wake - now) : 0;
		struct pollfd pf[2] = {{sfd, POLLIN, 0}, {st.inotify_fd, POLLIN, 0}};
		int pr = poll(pf, 2, timeout);
		if (pr < 0 && errno != EINTR) {
			NVS_ERROR("poll: %s", strerror(errno));
			exit_code = 1;
			break;
		}
		if (pr > 0 && (pf[0].revents & POLLIN)) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				NVS_INFO("signal %u: shutting down", si.ssi_signo);
				break;
			}
		}
		int kubelet_back = 0;
		if (pr > 0 && (pf[1].revents & POLLIN))
			kubelet_back = read_inotify(&st);
		if (kubelet_back)
			nvs_dp_bind_kubelet_restarted();
		for (unsigned i = 0; i < st.nep; i++) {
			struct endpoint *e = &st.ep[i];
			int restart = kubelet_back;
			/* Our socket gone (the kubelet deletes every socket when
			 * it restarts): listen again. Checked on every wake-up,
			 * so a missed inotify event only delays this. */
			if (e->server && !path_exists(e->sock_path)) {
				NVS_INFO("%s was removed: listening and registering again",
					 e->sock_path);
				restart = 2;
			}
			if (restart == 2 || (restart && e->registered)) {
				/* A kubelet that restarted has dropped our
				 * endpoint and its streams: start from scratch. */
				stop_server(e);
				e->next_server = 0;
			} else if (restart) {
				/* Not registered yet: the kubelet just appeared. */
				e->next_register = 0;
			}
		}
		now = now_ms();
		if (st.cfg.health_interval_ms && now >= next_health) {
			nvs_dp_devices_poll_health(&dev);
			next_health = now + st.cfg.health_interval_ms;
		}
	}
	for (unsigned i = 0; i < st.nep; i++)
		stop_server(&st.ep[i]);
	nvs_rpc_fini();
	nvs_dp_devices_fini(&dev);
	close(sfd);
	close(st.inotify_fd);
	NVS_INFO("stopped");
	return exit_code;
}
