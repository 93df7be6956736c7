# ctl/: nvsharectl, and the blocking scheduler connection it shares with the
# scheduler's test client and benchmark.
CTL_SRCS := ctl/nvsharectl.c ctl/status_view.c
TARGETS += $(B)/nvsharectl

$(B)/nvsharectl: $(CTL_SRCS:%.c=$(B)/%.o) $(B)/ctl/sched_conn.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) $(PIE_LDFLAGS) -o $@ $^ -lcjson
