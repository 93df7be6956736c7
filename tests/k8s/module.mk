# tests/k8s/: device-plugin and DRA driver unit tests (cmocka) and the
# fake NVML the fake-kubelet tests (t_device_plugin.sh, t_dra.sh) use to
# make a GPU unhealthy.
K8S_T := $(B)/tests/k8s
TEST_TARGETS += $(K8S_T)/t_dp_policy $(K8S_T)/fakenvml/libnvidia-ml.so.1 $(K8S_T)/t_dra_unit

$(K8S_T)/t_dp_policy.o: ALL_CFLAGS += -Idevice-plugin

$(K8S_T)/t_dp_policy: $(K8S_T)/t_dp_policy.o $(B)/device-plugin/policy.o \
		$(B)/device-plugin/devices.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcmocka -ldl -lpthread

$(K8S_T)/fakenvml/libnvidia-ml.so.1: $(K8S_T)/fake_nvml.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -shared -Wl,-soname,libnvidia-ml.so.1 -o $@ $^

# nvshare-dra-plugin's pure parts (quantities, claims, slices, checkpoint).
$(K8S_T)/t_dra_unit.o: ALL_CFLAGS += -Idra-plugin -Idevice-plugin

$(K8S_T)/t_dra_unit: $(K8S_T)/t_dra_unit.o $(B)/dra-plugin/claim.o $(B)/dra-plugin/slice.o \
		$(B)/dra-plugin/files.o $(B)/dra-plugin/checkpoint.o $(B)/device-plugin/cdi.o \
		$(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcmocka -lcjson
