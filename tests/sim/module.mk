# tests/sim: the simulated GPU. A fake libcuda.so.1 and libnvidia-ml.so.1
# built from our sources, behaving like a driver with N GPUs (README.md).
# Every other area's tests run against them (tests/lib.sh puts
# $(B)/tests/sim first on LD_LIBRARY_PATH).

SIM_SRCS := $(addprefix tests/sim/,sim_state.c sim_device.c sim_alloc.c sim_residency.c \
	sim_managed.c sim_pool.c sim_vmm.c sim_array.c sim_copy.c sim_pointer_attr.c \
	sim_stream.c sim_launch.c sim_procaddr.c sim_export.c sim_ipc.c sim_stubs.c)
SIM_COMMON_OBJS := $(B)/common/parse.o $(B)/common/log.o
SIM_CUDA_OBJS := $(SIM_SRCS:%.c=$(B)/%.o) $(SIM_COMMON_OBJS)
SIM_NVML_OBJS := $(B)/tests/sim/sim_state.o $(B)/tests/sim/sim_nvml.o $(SIM_COMMON_OBJS)

# Every exported driver function must keep its own address (cuGetProcAddress
# results are identified by dladdr), so identical stub bodies must not be
# folded together.
$(B)/tests/sim/%.o: CFLAGS += -fno-ipa-icf

# -Bsymbolic-functions: like the real driver, the addresses the simulator
# hands out (cuGetProcAddress, export tables) are its own functions, never a
# preloaded library's definitions of the same names. Without it, a preloaded
# libnvshare.so would get its own wrappers back from the "driver" and its
# substitution would never be exercised.
$(B)/tests/sim/libcuda.so.1: $(SIM_CUDA_OBJS) tests/sim/libcuda.map tests/sim/module.mk
	$(CC) $(LDFLAGS_ALL) -shared -Wl,-Bsymbolic-functions -Wl,-soname,libcuda.so.1 \
	  -Wl,--version-script=tests/sim/libcuda.map -o $@ $(SIM_CUDA_OBJS) -lpthread
	ln -sf libcuda.so.1 $(B)/tests/sim/libcuda.so

$(B)/tests/sim/libnvidia-ml.so.1: $(SIM_NVML_OBJS) tests/sim/libnvml.map tests/sim/module.mk
	$(CC) $(LDFLAGS_ALL) -shared -Wl,-Bsymbolic-functions -Wl,-soname,libnvidia-ml.so.1 \
	  -Wl,--version-script=tests/sim/libnvml.map -o $@ $(SIM_NVML_OBJS) -lpthread
	ln -sf libnvidia-ml.so.1 $(B)/tests/sim/libnvidia-ml.so

SIM_LIBS := $(B)/tests/sim/libcuda.so.1 $(B)/tests/sim/libnvidia-ml.so.1

# Test programs (TAP), linked to the fake libraries, found next to them.
SIM_TESTS := $(patsubst tests/sim/%.c,$(B)/tests/sim/%,$(wildcard tests/sim/t_*.c))
$(SIM_TESTS): $(B)/tests/sim/t_%: $(B)/tests/sim/t_%.o $(SIM_LIBS)
	$(CC) $(LDFLAGS_ALL) -o $@ $< -L$(B)/tests/sim -l:libcuda.so.1 -l:libnvidia-ml.so.1 \
	  -ldl -lpthread -Wl,-rpath,'$$ORIGIN'

# sim_stop: SIGSTOPs a process outside the simulator's state lock (for the
# tests that stop a lock holder or the scheduler).
$(B)/tests/sim/sim_stop: $(B)/tests/sim/sim_stop.o $(SIM_LIBS)
	$(CC) $(LDFLAGS_ALL) -o $@ $< -L$(B)/tests/sim -l:libcuda.so.1 -Wl,-rpath,'$$ORIGIN'

TEST_TARGETS += $(B)/tests/sim/sim_stop

# The real CUDA runtime on the fake driver (run by t_cudart.sh).
CUDART_SO := $(CUDA_HOME)/lib64/libcudart.so.13
$(B)/tests/sim/cudart_boot: $(B)/tests/sim/cudart_boot.o $(SIM_LIBS)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(CUDART_SO) -Wl,-rpath,$(CUDA_HOME)/lib64

SIM_EXTRA := $(if $(wildcard $(CUDART_SO)),$(B)/tests/sim/cudart_boot)

TEST_TARGETS += $(SIM_LIBS) $(SIM_TESTS) $(SIM_EXTRA)
