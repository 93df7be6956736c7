# scheduler/: the nvshare-scheduler daemon (epoll loop, policy, control).
# The shell (this directory: sockets, connections, the loop, NVML, the
# Pod watch, status, metrics) around the decision core (scheduler/core/,
# libnvscore.a).
include scheduler/core/module.mk
SCHED_SRCS := scheduler/main.c scheduler/loop.c scheduler/server.c scheduler/conn.c scheduler/clients.c \
	scheduler/control.c scheduler/gpus.c scheduler/settings.c \
	scheduler/status_json.c scheduler/metrics.c scheduler/http_front.c \
	scheduler/metrics_render.c scheduler/metrics_tenant.c scheduler/peer.c scheduler/podsock.c \
	scheduler/events.c scheduler/unmanaged.c \
	scheduler/peer_limits.c scheduler/plog.c \
	scheduler/state_file.c scheduler/health.c scheduler/config_check.c scheduler/devmem.c \
	scheduler/sd_notify.c
# Kubernetes (K8S_SRCS, K8S_LIBS: the Pod watch and libcurl unless K8S=0).
include scheduler/k8s/module.mk
SCHED_SRCS += $(K8S_SRCS)
SCHED_OBJS := $(SCHED_SRCS:%.c=$(B)/%.o)
TARGETS += $(B)/nvshare-scheduler

$(B)/nvshare-scheduler: $(SCHED_OBJS) $(CORE_LIB) $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) $(PIE_LDFLAGS) -o $@ $^ -lcjson $(K8S_LIBS) -lmicrohttpd -lpthread -ldl

# The settings table (settings.def) also writes docs/scheduler.md's table
# (make gen rewrites the table, make check-gen (CI) fails when it is
# stale). The man page is help2man's from --help, which the table writes
# (man/module.mk); `nvshare-scheduler --help-table=man` prints the table
# alone as man source.
.PHONY: gen-settings check-gen-settings
gen: gen-settings
check-gen: check-gen-settings
gen-settings: $(B)/nvshare-scheduler
	scripts/gen-settings-doc.sh $(B)/nvshare-scheduler docs/scheduler.md
check-gen-settings: $(B)/nvshare-scheduler
	scripts/gen-settings-doc.sh --check $(B)/nvshare-scheduler docs/scheduler.md
