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
SCHED_LIBS := -lcjson $(K8S_LIBS) -lmicrohttpd -lpthread -ldl
# The whole scheduler but main(): what tests that run its shell in process
# link (tests/sched/t_settings, tests/core/t_unmanaged), with SCHED_LIBS.
SCHED_IN_PROCESS := $(filter-out $(B)/scheduler/main.o,$(SCHED_OBJS)) $(CORE_LIB) $(COMMON_OBJS)
TARGETS += $(B)/nvshare-scheduler

$(B)/nvshare-scheduler: $(SCHED_OBJS) $(CORE_LIB) $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) $(PIE_LDFLAGS) -o $@ $^ $(SCHED_LIBS)

# The scheduler's tables also write the docs' tables that describe them
# (make gen rewrites them, make check-gen (CI) fails when one is stale;
# scripts/gen-doc-table.sh): the settings (settings.def) docs/scheduler.md's
# through `nvshare-scheduler --help-table=md`, the Pod annotations
# (k8s/annotations.def) docs/kubernetes.md's and the metric families
# (metrics.def) docs/metrics.md's through table_doc. The man page
# is help2man's from --help, which the settings table writes
# (man/module.mk); `nvshare-scheduler --help-table=man` prints the table
# alone as man source.
TEST_TARGETS += $(B)/scheduler/table_doc
$(B)/scheduler/table_doc: $(B)/scheduler/table_doc.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^

# $(call doc_tables,[--check]): every generated table.
doc_tables = scripts/gen-doc-table.sh $(1) docs/scheduler.md settings-table \
		scheduler/settings.def $(B)/nvshare-scheduler --help-table=md && \
	scripts/gen-doc-table.sh $(1) docs/kubernetes.md annotations-table \
		scheduler/k8s/annotations.def $(B)/scheduler/table_doc annotations && \
	for t in sched gpu client; do \
		scripts/gen-doc-table.sh $(1) docs/metrics.md metrics-$$t-table \
			scheduler/metrics.def $(B)/scheduler/table_doc metrics $$t || exit 1; \
	done
.PHONY: gen-tables check-gen-tables
gen: gen-tables
check-gen: check-gen-tables
gen-tables: $(B)/nvshare-scheduler $(B)/scheduler/table_doc
	$(call doc_tables)
check-gen-tables: $(B)/nvshare-scheduler $(B)/scheduler/table_doc
	$(call doc_tables,--check)
