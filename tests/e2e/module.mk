# tests/e2e: end-to-end tests with the real scheduler, libnvshare.so under
# LD_PRELOAD and the simulated GPU. The tests are shell scripts
# (tests/e2e/t_*.sh); sim_app is the CUDA application they (and the demo) run.
# It links nothing of ours: it finds the driver as libcudart does.
TEST_TARGETS += $(B)/tests/e2e/sim_app

$(B)/tests/e2e/sim_app: $(B)/tests/e2e/sim_app.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -ldl

# client_probe: the scheduler client (client/sched_*.c) and accounting,
# no stubs, with a fake driver table, to test the lock protocol against the real scheduler without
# interposition or a GPU.
TEST_TARGETS += $(B)/tests/e2e/client_probe

$(B)/tests/e2e/client_probe: $(B)/tests/e2e/client_probe.o $(CLIENT_SCHED_OBJS) \
		$(B)/client/accounting.o $(B)/client/config.o $(B)/client/version.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lpthread
