# tests/e2e: end-to-end tests with the real scheduler, libnvshare.so under
# LD_PRELOAD and the simulated GPU. The tests are shell scripts
# (tests/e2e/t_*.sh); sim_app is the CUDA application they (and the demo) run.
# It links nothing of ours: it finds the driver as libcudart does.
TEST_TARGETS += $(B)/tests/e2e/sim_app

$(B)/tests/e2e/sim_app: $(B)/tests/e2e/sim_app.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -ldl
