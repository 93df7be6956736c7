# scheduler/: the nvshare-scheduler daemon (epoll loop, policy, control).
SCHED_SRCS := scheduler/main.c scheduler/server.c scheduler/conn.c scheduler/clients.c \
	scheduler/policy.c scheduler/control.c scheduler/gpus.c scheduler/settings.c \
	scheduler/status_json.c
SCHED_OBJS := $(SCHED_SRCS:%.c=$(B)/%.o)
TARGETS += $(B)/nvshare-scheduler

$(B)/nvshare-scheduler: $(SCHED_OBJS) $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcjson -ldl
