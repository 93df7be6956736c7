# bench/: benchmarks (C parts; the Python harness is bench/run).
TARGETS += $(B)/bench/sched_latency

$(B)/bench/sched_latency: $(B)/bench/sched_latency.o $(B)/ctl/sched_conn.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^
