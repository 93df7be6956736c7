# scheduler/: the nvshare-scheduler daemon (epoll loop, policy, control).
SCHED_SRCS := scheduler/main.c scheduler/server.c scheduler/conn.c scheduler/clients.c \
	scheduler/policy.c scheduler/control.c scheduler/gpus.c scheduler/settings.c \
	scheduler/status_json.c scheduler/quota.c scheduler/metrics.c scheduler/metrics_render.c \
	scheduler/metrics_tenant.c scheduler/pod_identity.c scheduler/peer.c scheduler/k8s_watch.c \
	scheduler/k8s_json.c scheduler/events.c scheduler/unmanaged.c \
	scheduler/state_file.c scheduler/health.c scheduler/config_check.c
SCHED_OBJS := $(SCHED_SRCS:%.c=$(B)/%.o)
TARGETS += $(B)/nvshare-scheduler

$(B)/nvshare-scheduler: $(SCHED_OBJS) $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) $(PIE_LDFLAGS) -o $@ $^ -lcjson -lcurl -lmicrohttpd -lpthread -ldl

# The benchmark lives in bench/ (the top-level Makefile has no line for it).
-include bench/module.mk
