# bench/: benchmarks (C parts; the Python harness is bench/run).
TARGETS += $(B)/bench/sched_latency

$(B)/bench/sched_latency: $(B)/bench/sched_latency.o $(B)/ctl/sched_conn.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^

# bench/micro: libnvshare's cost per launch against a stub driver
# (bench/micro/run; tests/bench/t_launch_overhead.sh checks it).
TARGETS += $(B)/bench/micro/launch_overhead $(B)/bench/micro/stub/libcuda.so.1

$(B)/bench/micro/launch_overhead: $(B)/bench/micro/launch_overhead.o
	$(CC) $(LDFLAGS_ALL) $(PIE_LDFLAGS) -o $@ $^ -ldl

$(B)/bench/micro/stub/libcuda.so.1: $(B)/bench/micro/stub_cuda.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -shared -Wl,-soname,libcuda.so.1 -o $@ $^
