/*
 * nvshare-dra-plugin: the Kubernetes Dynamic Resource Allocation driver of
 * nvshare (docs/dra.md). Publishes the node's GPUs as shareable devices
 * (one ResourceSlice: capacities memory and cores), and at NodePrepare
 * turns what each claim consumed into a ceiling nvshare-scheduler enforces
 * on the claim's processes, through a Pod-socket binding.
 *
 * Main thread: flags, GPU discovery, then a poll() loop over a signalfd
 * with timers for the sockets' presence, GPU health and the ResourceSlice.
 * Two gRPC threads (device-plugin/grpc_server.c): the registration socket
 * the kubelet's plugin watcher finds, and the DRA socket it then calls.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cdi.h"
#include "driver.h"
#include "gpus.h"
#include "grpc_server.h"
#include "flags.h"
#include "health.h"
#include "kube.h"
#include "clock.h"
#include "log.h"
#include "parse.h"
#include "publish.h"
#include "rpc.h"
#include "sockpath.h"

#define DEFAULT_DRIVER "gpu.nvshare.com"
#define RETRY_MS 1000
#define SELF_CHECK_MS 5000

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: nvshare-dra-plugin [options]\n"
	    "\n"
	    "Kubernetes DRA driver of nvshare: publishes each GPU of the node as a device\n"
	    "several claims share (capacities memory and cores), and makes what each claim\n"
	    "consumed a ceiling nvshare-scheduler enforces on the claim's processes.\n"
	    "GPUs come from NVML (libnvidia-ml.so.1), else from NVIDIA_VISIBLE_DEVICES.\n"
	    "\n"
	    "Options:\n"
	    "  --driver-name NAME         DRA driver name (default " DEFAULT_DRIVER ")\n"
	    "  --node-name NAME           this node (default $NODE_NAME); the pool's name\n"
	    "  --registry-dir DIR         the kubelet's plugin registry\n"
	    "                             (default /var/lib/kubelet/plugins_registry)\n"
	    "  --plugin-dir DIR           holds dra.sock and the checkpoint\n"
	    "                             (default /var/lib/kubelet/plugins/<driver>)\n"
	    "  --checkpoint FILE          prepared claims (default <plugin-dir>/checkpoint.json)\n"
	    "  --kube-api URL             API server (default: in cluster)\n"
	    "  --kube-token-file FILE     bearer token (default: the service account's)\n"
	    "  --kube-ca-file FILE        CA of the API server (default: the service account's)\n"
	    "  --host-socket-dir DIR      the scheduler's socket directory on the node\n"
	    "                             (default /var/run/nvshare)\n"
	    "  --container-socket-dir DIR where containers see their Pod socket (default\n"
	    "                             the same; another is passed as NVSHARE_SOCK_DIR)\n"
	    "  --host-lib-dir DIR         node directory holding libnvshare.so\n"
	    "                             (default /var/lib/nvshare/lib)\n"
	    "  --container-lib-dir DIR    where containers see it (default\n"
	    "                             /usr/local/nvshare/lib)\n"
	    "  --library-name NAME        default libnvshare.so\n"
	    "  --no-library-check         do not refuse claims while DIR/NAME is missing\n"
	    "  --cdi-spec-dir DIR         where claims' CDI specs go (default /var/run/cdi)\n"
	    "  --cdi-driver-kind KIND     CDI kind of the driver's devices named beside ours\n"
	    "                             (default nvidia.com/gpu; none: only ours)\n"
	    "  --cdi-dev-root DIR         where the node's /dev is seen (default /)\n"
	    "  --memory-oversubscription F  memory capacity published = GPU memory x F\n"
	    "                             (default 1.0; up to 64; swapping makes up the rest)\n"
	    "  --gpu-memory-size SIZE     GPU memory when NVML cannot tell (default: such a\n"
	    "                             GPU is not published)\n"
	    "  --scheduler-wait T         how long Prepare waits for the scheduler to open\n"
	    "                             a claim's Pod socket (default 10s)\n"
	    "  --health-interval T        NVML health check period (default 5s; 0 off)\n"
	    "  --slice-resync T           re-read the ResourceSlice this often (default 5m)\n"
	    "  --health-file PATH         rewrite PATH every loop turn for exec probes\n"
	    "  --probe live|ready         check --health-file and exit: live when the loop\n"
	    "                             ran within --probe-max-age (30s), ready when also\n"
	    "                             registered with the kubelet\n"
	    "  --require-scheduler        containers get NVSHARE_REQUIRE_SCHEDULER=1\n"
	    "  -V, --version              print the version\n"
	    "  -h, --help                 this text\n"
	    "\n"
	    "Environment: NODE_NAME, NVIDIA_VISIBLE_DEVICES (GPUs without NVML),\n"
	    "NVSHARE_DEBUG=1.\n");
}

struct opts {
	const char *driver, *node, *registry_dir, *plugin_dir, *checkpoint;
	const char *kube_api, *kube_token, *kube_ca;
	double oversub;
	uint64_t gpu_mem, health_ms, resync_ms;
	struct nvs_dp_probe_opts probe; /* flags.h */
	struct nvs_dra_cfg cfg;
};

/* A DNS subdomain of at most max characters that starts and ends with a
 * letter or digit (a driver or node name). */
static int dns_subdomain(const char *s, size_t max)
{
	size_t n = strlen(s);
	return nvs_k8s_name_ok(s, max + 1, 1) && s[0] != '-' && s[0] != '.' && s[n - 1] != '-' &&
	       s[n - 1] != '.';
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	enum {
		O_DRIVER = 256,
		O_NODE,
		O_REG,
		O_PDIR,
		O_CKPT,
		O_API,
		O_TOKEN,
		O_CA,
		O_HSOCK,
		O_CSOCK,
		O_HLIB,
		O_CLIB,
		O_LIBNAME,
		O_NOCHECK,
		O_CDI_DIR,
		O_CDI_KIND,
		O_CDI_DEV,
		O_OVER,
		O_GMEM,
		O_WAIT,
		O_HEALTH,
		O_RESYNC,
		O_HFILE,
		O_PROBE,
		O_PROBE_AGE,
		O_REQUIRE,
	};
	static const struct option opts[] = {
	    {"driver-name", required_argument, 0, O_DRIVER},
	    {"node-name", required_argument, 0, O_NODE},
	    {"registry-dir", required_argument, 0, O_REG},
	    {"plugin-dir", required_argument, 0, O_PDIR},
	    {"checkpoint", required_argument, 0, O_CKPT},
	    {"kube-api", required_argument, 0, O_API},
	    {"kube-token-file", required_argument, 0, O_TOKEN},
	    {"kube-ca-file", required_argument, 0, O_CA},
	    {"host-socket-dir", required_argument, 0, O_HSOCK},
	    {"container-socket-dir", required_argument, 0, O_CSOCK},
	    {"host-lib-dir", required_argument, 0, O_HLIB},
	    {"container-lib-dir", required_argument, 0, O_CLIB},
	    {"library-name", required_argument, 0, O_LIBNAME},
	    {"no-library-check", no_argument, 0, O_NOCHECK},
	    {"cdi-spec-dir", required_argument, 0, O_CDI_DIR},
	    {"cdi-driver-kind", required_argument, 0, O_CDI_KIND},
	    {"cdi-dev-root", required_argument, 0, O_CDI_DEV},
	    {"memory-oversubscription", required_argument, 0, O_OVER},
	    {"gpu-memory-size", required_argument, 0, O_GMEM},
	    {"scheduler-wait", required_argument, 0, O_WAIT},
	    {"health-interval", required_argument, 0, O_HEALTH},
	    {"slice-resync", required_argument, 0, O_RESYNC},
	    NVS_DP_PROBE_OPTIONS(O_HFILE),
	    {"require-scheduler", no_argument, 0, O_REQUIRE},
	    {"version", no_argument, 0, 'V'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	struct nvs_dra_files_cfg *f = &o->cfg.files;
	int c;
	uint64_t v;
	while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
		switch (c) {
		case O_DRIVER:
			if (!dns_subdomain(optarg, 63) || !strchr(optarg, '.'))
				return nvs_dp_bad_flag(
				    "--driver-name",
				    "a DNS subdomain of at most 63 characters with a dot, "
				    "such as gpu.nvshare.com",
				    optarg);
			o->driver = optarg;
			break;
		case O_NODE:
			o->node = optarg;
			break;
		case O_REG:
			o->registry_dir = optarg;
			break;
		case O_PDIR:
			o->plugin_dir = optarg;
			break;
		case O_CKPT:
			o->checkpoint = optarg;
			break;
		case O_API:
			o->kube_api = optarg;
			break;
		case O_TOKEN:
			o->kube_token = optarg;
			break;
		case O_CA:
			o->kube_ca = optarg;
			break;
		case O_HSOCK:
			f->host_sock_dir = optarg;
			break;
		case O_CSOCK:
			f->container_sock_dir = optarg;
			break;
		case O_HLIB:
			f->host_lib_dir = optarg;
			break;
		case O_CLIB:
			f->container_lib_dir = optarg;
			break;
		case O_LIBNAME:
			if (!*optarg || strchr(optarg, '/'))
				return nvs_dp_bad_flag("--library-name", "a file name", optarg);
			f->lib_name = optarg;
			break;
		case O_NOCHECK:
			o->cfg.check_library = 0;
			break;
		case O_CDI_DIR:
			f->cdi_dir = optarg;
			break;
		case O_CDI_KIND:
			if (nvs_dp_cdi_kind_flag(optarg, &o->cfg.cdi_driver_kind))
				return -1;
			break;
		case O_CDI_DEV:
			f->dev_root = optarg;
			break;
		case O_OVER: {
			char *end = NULL;
			double x = strtod(optarg, &end);
			if (end == optarg || *end || !(x >= 1 && x <= 64))
				return nvs_dp_bad_flag("--memory-oversubscription",
						       "a factor in [1, 64] such as 1.5", optarg);
			o->oversub = x;
			break;
		}
		case O_GMEM:
			if (nvs_parse_size(optarg, 1, &v) || v < NVS_DRA_MIB)
				return nvs_dp_bad_flag("--gpu-memory-size", "a size such as 80Gi",
						       optarg);
			o->gpu_mem = v;
			break;
		case O_WAIT:
			if (nvs_parse_duration_ms(optarg, &o->cfg.scheduler_wait_ms) ||
			    o->cfg.scheduler_wait_ms < 100 || o->cfg.scheduler_wait_ms > 120000)
				return nvs_dp_bad_flag("--scheduler-wait",
						       "a duration from 100ms to 2m such as 10s",
						       optarg);
			break;
		case O_HEALTH:
			if (nvs_parse_duration_ms(optarg, &o->health_ms))
				return nvs_dp_bad_flag("--health-interval",
						       "a duration such as 5s, or 0", optarg);
			break;
		case O_RESYNC:
			if (nvs_parse_duration_ms(optarg, &o->resync_ms) || o->resync_ms < 1000)
				return nvs_dp_bad_flag("--slice-resync",
						       "a duration of at least 1s such as 5m",
						       optarg);
			break;
		case O_HFILE:
		case O_PROBE:
		case O_PROBE_AGE:
			if (nvs_dp_probe_flag(&o->probe, c - O_HFILE, optarg))
				return -1;
			break;
		case O_REQUIRE:
			f->require_scheduler = 1;
			break;
		default:
			return nvs_dp_flag_other(c, "nvshare-dra-plugin", usage);
		}
	}
	if (!f->container_sock_dir)
		f->container_sock_dir = f->host_sock_dir;
	const char *paths[] = {o->registry_dir, f->host_sock_dir,     f->container_sock_dir,
			       f->host_lib_dir, f->container_lib_dir, f->cdi_dir,
			       f->dev_root,	o->plugin_dir,	      o->checkpoint};
	return nvs_dp_flags_end(argc, argv, paths, sizeof paths / sizeof paths[0]);
}

/* One gRPC server and the socket it listens on. */
struct endpoint {
	const char *what;
	char path[PATH_MAX];
	struct nvs_rpc_ops ops;
	struct nvs_rpc_server *server;
	uint64_t next_try;
};

static int path_exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

static void start_endpoint(struct endpoint *e, const char *driver, uint64_t now)
{
	if (e->server || now < e->next_try)
		return;
	e->server = nvs_rpc_server_start(e->path, &e->ops);
	if (e->server && !strcmp(e->what, "registration")) {
		/* Dial ourselves, as the kubelet's plugin watcher will. */
		struct nvs_rpc_buf resp;
		char msg[256];
		int rc = nvs_rpc_call(e->path, NVS_DRA_METHOD_GETINFO, (const uint8_t *)"", 0,
				      &resp, SELF_CHECK_MS, msg, sizeof msg);
		if (rc != NVS_RPC_OK || nvs_dra_rpc_check_info(resp.data, resp.len, driver)) {
			NVS_ERROR("self-check on %s failed (status %d %s)", e->path, rc, msg);
			nvs_rpc_server_stop(e->server);
			e->server = NULL;
		}
		free(resp.data);
	}
	if (!e->server)
		e->next_try = now + RETRY_MS;
	else
		NVS_INFO("%s socket %s listening", e->what, e->path);
}

static void stop_endpoint(struct endpoint *e)
{
	if (e->server) {
		nvs_rpc_server_stop(e->server);
		e->server = NULL;
	}
}

int main(int argc, char **argv)
{
	static struct opts o;
	static char plugin_dir[PATH_MAX], checkpoint[PATH_MAX];
	nvs_log_init("dra-plugin");
	o.driver = DEFAULT_DRIVER;
	o.node = getenv("NODE_NAME");
	o.registry_dir = "/var/lib/kubelet/plugins_registry";
	o.oversub = 1.0;
	o.health_ms = 5000;
	o.resync_ms = 300000;
	o.probe = (struct nvs_dp_probe_opts)NVS_DP_PROBE_OPTS_INIT;
	o.cfg = (struct nvs_dra_cfg){
	    .check_library = 1,
	    .cdi_driver_kind = "nvidia.com/gpu",
	    .scheduler_wait_ms = 10000,
	    .files = {.host_sock_dir = NVS_DEFAULT_SOCK_DIR,
		      .host_lib_dir = "/var/lib/nvshare/lib",
		      .container_lib_dir = "/usr/local/nvshare/lib",
		      .lib_name = "libnvshare.so",
		      .cdi_dir = "/var/run/cdi",
		      .dev_root = "/"},
	};
	if (parse_args(argc, argv, &o))
		return 2;
	int rc = nvs_dp_probe_run(&o.probe);
	if (rc >= 0)
		return rc;
	if (!o.node || !dns_subdomain(o.node, 253)) {
		fprintf(stderr,
			"--node-name (or NODE_NAME): expected this node's name, got \"%s\"\n",
			o.node ? o.node : "");
		return 2;
	}
	snprintf(plugin_dir, sizeof plugin_dir, "%s",
		 o.plugin_dir ? o.plugin_dir : "/var/lib/kubelet/plugins/");
	if (!o.plugin_dir)
		strncat(plugin_dir, o.driver, sizeof plugin_dir - strlen(plugin_dir) - 1);
	snprintf(checkpoint, sizeof checkpoint, "%s%s%s", o.checkpoint ? o.checkpoint : plugin_dir,
		 o.checkpoint ? "" : "/", o.checkpoint ? "" : "checkpoint.json");
	o.cfg.driver = o.driver;
	o.cfg.node = o.node;
	o.cfg.checkpoint = checkpoint;

	struct endpoint reg = {.what = "registration"}, dra = {.what = "DRA"};
	int a = snprintf(reg.path, sizeof reg.path, "%s/%s-reg.sock", o.registry_dir, o.driver);
	int b = snprintf(dra.path, sizeof dra.path, "%s/dra.sock", plugin_dir);
	if (a < 0 || b < 0 || (size_t)a >= NVS_SOCK_PATH_LEN || (size_t)b >= NVS_SOCK_PATH_LEN) {
		fprintf(stderr,
			"--registry-dir or --plugin-dir is too long for a UNIX socket path\n");
		return 2;
	}
	char kerr[600];
	struct nvs_kube_cfg kc;
	if (nvs_kube_config(&kc, o.kube_api, o.kube_token, o.kube_ca, kerr, sizeof kerr)) {
		fprintf(stderr, "API server: %s\n", kerr);
		return 2;
	}

	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		NVS_ERROR("signalfd: %s", strerror(errno));
		return 1;
	}
	if (nvs_dp_mkdir_p(plugin_dir, 0750)) {
		NVS_ERROR("cannot create %s: %s", plugin_dir, strerror(errno));
		return 1;
	}
	if (nvs_dp_mkdir_p(o.cfg.files.cdi_dir, 0755))
		NVS_WARN("cannot create %s: %s (Prepare fails until it can)", o.cfg.files.cdi_dir,
			 strerror(errno));

	static struct nvs_dra_gpus gpus;
	if (nvs_dra_gpus_init(&gpus, o.oversub, o.gpu_mem) < 0)
		return 1;
	if (gpus.n == 0)
		NVS_WARN("no GPU found: the ResourceSlice will have no device");
	curl_global_init(CURL_GLOBAL_DEFAULT);
	struct nvs_kube *k_rpc = nvs_kube_new(&kc), *k_main = nvs_kube_new(&kc);
	static struct nvs_dra_driver drv;
	if (!k_rpc || !k_main || nvs_dra_driver_init(&drv, &o.cfg, &gpus, k_rpc) < 0)
		return 1;
	static struct nvs_dra_rpc rpc;
	rpc.driver = &drv;
	rpc.dra_socket = dra.path;
	rpc.health_timeout_s = o.health_ms ? (3 * o.health_ms + 999) / 1000 : 0;
	nvs_dra_rpc_registration_ops(&rpc, &reg.ops);
	nvs_dra_rpc_dra_ops(&rpc, &dra.ops);
	struct nvs_dra_publisher pub;
	nvs_dra_publish_init(&pub, o.driver, o.node, k_main, &gpus, o.resync_ms);
	NVS_INFO("driver %s on node %s: %u GPU(s), API %s, scheduler sockets %s, checkpoint %s",
		 o.driver, o.node, gpus.n, kc.api, o.cfg.files.host_sock_dir, checkpoint);
	nvs_rpc_init();

	uint64_t next_health = nvs_dra_now_ms() + o.health_ms;
	int exit_code = 0, waiting_logged = 0;
	for (;;) {
		uint64_t now = nvs_dra_now_ms();
		nvs_dp_health_stamp(o.probe.health_file, now, atomic_load(&rpc.registered) == 1, 1);
		/* The DRA socket first: GetInfo names it. */
		start_endpoint(&dra, o.driver, now);
		if (dra.server) {
			if (!path_exists(o.registry_dir)) {
				if (!waiting_logged)
					NVS_INFO("waiting for the kubelet's %s", o.registry_dir);
				waiting_logged = 1;
			} else {
				start_endpoint(&reg, o.driver, now);
			}
		}
		uint64_t wake = nvs_dra_publish_step(&pub, now);
		now = nvs_dra_now_ms();
		if (wake > now + RETRY_MS)
			wake = now + RETRY_MS; /* the sockets' presence, once a second */
		if (o.health_ms && next_health < wake)
			wake = next_health;
		int timeout = wake > now ? (int)(wake - now) : 0;
		struct pollfd pf = {sfd, POLLIN, 0};
		int pr = poll(&pf, 1, timeout);
		if (pr < 0 && errno != EINTR) {
			NVS_ERROR("poll: %s", strerror(errno));
			exit_code = 1;
			break;
		}
		if (pr > 0) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				NVS_INFO("signal %u: shutting down (prepared claims stay: %u)",
					 si.ssi_signo, nvs_dra_prepared_count(&drv));
				break;
			}
		}
		/* A socket removed under us (someone cleaned the directory):
		 * listen again; the plugin watcher sees the new socket. */
		struct endpoint *eps[] = {&dra, &reg};
		for (size_t i = 0; i < 2; i++)
			if (eps[i]->server && !path_exists(eps[i]->path)) {
				NVS_WARN("%s was removed: listening again", eps[i]->path);
				stop_endpoint(eps[i]);
				eps[i]->next_try = 0;
				if (eps[i] == &reg)
					atomic_store(&rpc.registered, 0);
			}
		now = nvs_dra_now_ms();
		if (o.health_ms && now >= next_health) {
			nvs_dra_gpus_poll(&gpus);
			next_health = now + o.health_ms;
		}
	}
	stop_endpoint(&reg);
	stop_endpoint(&dra);
	nvs_rpc_fini();
	nvs_dra_publish_fini(&pub);
	nvs_dra_driver_fini(&drv);
	nvs_kube_free(k_rpc);
	nvs_kube_free(k_main);
	curl_global_cleanup();
	nvs_dra_gpus_fini(&gpus);
	close(sfd);
	NVS_INFO("stopped");
	return exit_code;
}
