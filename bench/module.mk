# bench/: benchmarks. The top-level Makefile does not include this file;
# scheduler/module.mk does.
TARGETS += $(B)/bench/sched_latency

$(B)/bench/sched_latency: $(B)/bench/sched_latency.o $(B)/ctl/sched_conn.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^
