# tests/sched/: scheduler tests. fake_client is a scripted protocol client
# used by the t_*.sh scripts; t_* programs print TAP.
SCHED_TEST_COMMON := $(B)/ctl/sched_conn.o $(COMMON_OBJS)
TEST_TARGETS += $(B)/tests/sched/fake_client $(B)/tests/sched/t_kill_handoff \
	$(B)/tests/sched/t_slow_reader $(B)/tests/sched/t_settings $(B)/tests/sched/t_k8s_request \
	$(B)/tests/sched/t_plog $(B)/tests/sched/t_limits $(B)/tests/sched/t_annotations

$(B)/tests/sched/fake_client: $(B)/tests/sched/fake_client.o $(SCHED_TEST_COMMON)
	$(CC) $(LDFLAGS_ALL) -o $@ $^

$(B)/tests/sched/t_kill_handoff: $(B)/tests/sched/t_kill_handoff.o $(SCHED_TEST_COMMON)
	$(CC) $(LDFLAGS_ALL) -o $@ $^

$(B)/tests/sched/t_slow_reader: $(B)/tests/sched/t_slow_reader.o $(SCHED_TEST_COMMON)
	$(CC) $(LDFLAGS_ALL) -o $@ $^

# The settings table in process: every scheduler object but main.o (the
# rows name variables all over the scheduler).
$(B)/tests/sched/t_settings: $(B)/tests/sched/t_settings.o $(SCHED_IN_PROCESS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(SCHED_LIBS)

$(B)/tests/sched/t_plog: $(B)/tests/sched/t_plog.o $(B)/scheduler/plog.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^

# The precedence of limits: the pure resolver alone.
$(B)/tests/sched/t_limits: $(B)/tests/sched/t_limits.o $(B)/scheduler/core/limit_resolve.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^

$(B)/tests/sched/t_k8s_request: $(B)/tests/sched/t_k8s_request.o $(B)/scheduler/k8s/k8s_json.o \
		$(B)/scheduler/k8s/annotations.o $(B)/scheduler/k8s/k8s_jstream.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcjson

# The Pod annotations' table (scheduler/k8s/annotations.def), every row's
# good and bad values through the Pod reader.
$(B)/tests/sched/t_annotations: $(B)/tests/sched/t_annotations.o $(B)/scheduler/k8s/k8s_json.o \
		$(B)/scheduler/k8s/annotations.o $(B)/scheduler/k8s/k8s_jstream.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcjson
