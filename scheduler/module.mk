# scheduler/: the nvshare-scheduler daemon (epoll loop, policy, control).
SCHED_SRCS := scheduler/main.c scheduler/loop.c scheduler/server.c scheduler/conn.c scheduler/clients.c \
	scheduler/policy.c scheduler/control.c scheduler/gpus.c scheduler/settings.c \
	scheduler/status_json.c scheduler/quota.c scheduler/metrics.c scheduler/metrics_render.c \
	scheduler/metrics_tenant.c scheduler/pod_identity.c scheduler/peer.c \
	scheduler/k8s_config.c scheduler/events.c scheduler/unmanaged.c scheduler/fairness.c \
	scheduler/claims.c scheduler/limits.c scheduler/plog.c scheduler/coschedule.c \
	scheduler/state_file.c scheduler/health.c scheduler/config_check.c scheduler/devmem.c
# The Pod watch (libcurl, its own thread): K8S=0 builds the scheduler
# without it (k8s_off.c: never on; refuses to start when asked for).
# cJSON stays: the status view (status_json.c) is JSON.
ifeq ($(K8S),0)
SCHED_SRCS += scheduler/k8s_off.c
SCHED_K8S_LIBS :=
else
SCHED_SRCS += scheduler/k8s_watch.c scheduler/k8s_json.c
SCHED_K8S_LIBS := -lcurl
endif
SCHED_OBJS := $(SCHED_SRCS:%.c=$(B)/%.o)
TARGETS += $(B)/nvshare-scheduler

$(B)/nvshare-scheduler: $(SCHED_OBJS) $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) $(PIE_LDFLAGS) -o $@ $^ -lcjson $(SCHED_K8S_LIBS) -lmicrohttpd -lpthread -ldl
