# tests/client: libnvshare.so's interposition, allocation and limit tests.
# Shell tests (tests/client/t_*.sh) run the probes below under LD_PRELOAD
# with the simulated GPU (tests/sim) first on the library path.
TC := $(B)/tests/client
NVS_SIM_LIBDIR ?= $(B)/tests/sim

TEST_TARGETS += $(TC)/probe_lookup $(TC)/libforeign.so $(TC)/libnextprobe.so $(TC)/libnexttarget.so

$(TC)/lib%.so: $(TC)/%.o
	$(CC) -shared $(LDFLAGS_ALL) -o $@ $<

$(TC)/libforeign.so: $(TC)/foreign_lib.o
	$(CC) -shared $(LDFLAGS_ALL) -o $@ $<
$(TC)/libnextprobe.so: $(TC)/next_probe.o
	$(CC) -shared $(LDFLAGS_ALL) -o $@ $< -ldl
$(TC)/libnexttarget.so: $(TC)/next_target.o
	$(CC) -shared $(LDFLAGS_ALL) -o $@ $<

$(TC)/probe_lookup: $(TC)/probe_lookup.o $(TC)/libnexttarget.so
	$(CC) $(LDFLAGS_ALL) -o $@ $< -L$(TC) -Wl,--no-as-needed -lnexttarget -Wl,-rpath,'$$ORIGIN' -ldl

# The plain-link probe links the simulated libcuda.so.1 at build time, so
# it is built only once the simulated GPU is part of the build.
ifneq ($(wildcard tests/sim/module.mk),)
TEST_TARGETS += $(TC)/probe_alloc $(TC)/ipc_probe
$(TC)/probe_alloc: $(TC)/probe_alloc.o $(NVS_SIM_LIBDIR)/libcuda.so.1
	$(CC) $(LDFLAGS_ALL) -o $@ $< -L$(NVS_SIM_LIBDIR) -l:libcuda.so.1 -lpthread -ldl
# CUDA IPC exporter/importer pair (t_ipc.sh).
$(TC)/ipc_probe: $(TC)/ipc_probe.o $(NVS_SIM_LIBDIR)/libcuda.so.1
	$(CC) $(LDFLAGS_ALL) -o $@ $< -L$(NVS_SIM_LIBDIR) -l:libcuda.so.1
endif

TEST_TARGETS += $(TC)/fakedrv/libcuda.so.1 $(TC)/probe_unknown
$(TC)/fakedrv/libcuda.so.1: $(TC)/fakedrv.o
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS_ALL) -Wl,-soname,libcuda.so.1 -o $@ $<
$(TC)/probe_unknown: $(TC)/probe_unknown.o
	$(CC) $(LDFLAGS_ALL) -o $@ $< -ldl

# Real CUDA runtime (by path, as CUDA 13 ships it) and NVML probes.
ifneq ($(wildcard tests/sim/module.mk),)
TEST_TARGETS += $(TC)/probe_cudart $(TC)/probe_nvml
$(TC)/probe_cudart: $(TC)/probe_cudart.o $(NVS_SIM_LIBDIR)/libcuda.so.1
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(CUDA_HOME)/lib64/libcudart.so.13 \
	  -Wl,-rpath,$(CUDA_HOME)/lib64 -L$(NVS_SIM_LIBDIR) -l:libcuda.so.1 -ldl
$(TC)/probe_nvml: $(TC)/probe_nvml.o $(NVS_SIM_LIBDIR)/libcuda.so.1
	$(CC) $(LDFLAGS_ALL) -o $@ $< -L$(NVS_SIM_LIBDIR) -l:libcuda.so.1 -ldl
endif
