# tests/swap: swap on hand-off and prefetch of fresh allocations, on the
# simulated GPU (docs/swap.md). swap_app is the job the t_*.sh scripts run.
TEST_TARGETS += $(B)/tests/swap/swap_app

$(B)/tests/swap/swap_app: $(B)/tests/swap/swap_app.o $(SIM_LIBS)
	$(CC) $(LDFLAGS_ALL) -o $@ $< -L$(B)/tests/sim -l:libcuda.so.1 -lpthread
# The swap engine's probe (t_swap_engine.sh): every kind of memory it handles.
TEST_TARGETS += $(B)/tests/swap/swap_vmm
$(B)/tests/swap/swap_vmm: $(B)/tests/swap/swap_vmm.o $(SIM_LIBS)
	$(CC) $(LDFLAGS_ALL) -o $@ $< -L$(B)/tests/sim -l:libcuda.so.1 -lpthread
