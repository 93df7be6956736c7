# dra-plugin/: nvshare-dra-plugin, the Kubernetes DRA driver (docs/dra.md).
# Same stack as the device plugin (Debian's libgrpc-dev, libprotobuf-c-dev,
# protobuf-c-compiler), whose gRPC transport, GPU discovery, CDI device
# nodes, probe file and shared flags it reuses (device-plugin/*.o), plus libcurl and
# cJSON for the API server. The protobuf-c code is generated from
# dra-plugin/dra.proto into $(B)/dra-plugin/gen at build time.

DRA_GEN := $(B)/dra-plugin/gen
DRA_SRCS := dra-plugin/main.c dra-plugin/rpc.c dra-plugin/driver.c dra-plugin/files.c \
	dra-plugin/checkpoint.c dra-plugin/claim.c dra-plugin/slice.c dra-plugin/gpus.c \
	dra-plugin/kube.c dra-plugin/publish.c
# The device plugin's parts it shares (built by device-plugin/module.mk).
DRA_DP_OBJS := $(B)/device-plugin/grpc_server.o $(B)/device-plugin/devices.o \
	$(B)/device-plugin/policy.o $(B)/device-plugin/cdi.o $(B)/device-plugin/health.o \
	$(B)/device-plugin/flags.o
DRA_OBJS := $(DRA_SRCS:%.c=$(B)/%.o) $(DRA_GEN)/dra.pb-c.o
# On first use, as the device plugin's (device-plugin/module.mk); the
# libraries are the device plugin's.
DRA_CFLAGS = $(eval DRA_CFLAGS := $$(shell pkg-config --cflags grpc libprotobuf-c libcurl 2>/dev/null) \
	-Idra-plugin -Idevice-plugin -I$(DRA_GEN))$(DRA_CFLAGS)
DRA_LIBS = $(DP_LIBS)

TARGETS += $(B)/nvshare-dra-plugin

$(DRA_GEN)/dra.pb-c.c $(DRA_GEN)/dra.pb-c.h &: dra-plugin/dra.proto
	@mkdir -p $(DRA_GEN)
	@command -v protoc-c >/dev/null || { echo "protoc-c not found: apt-get install protobuf-c-compiler" >&2; exit 1; }
	protoc-c --proto_path=dra-plugin --c_out=$(DRA_GEN) dra-plugin/dra.proto

$(DRA_GEN)/dra.pb-c.o: $(DRA_GEN)/dra.pb-c.c $(DRA_GEN)/dra.pb-c.h
	$(CC) $(ALL_CFLAGS) $(DRA_CFLAGS) -fPIC -c $< -o $@

$(DRA_SRCS:%.c=$(B)/%.o): ALL_CFLAGS += $(DRA_CFLAGS)
$(B)/dra-plugin/rpc.o: $(DRA_GEN)/dra.pb-c.h

$(B)/nvshare-dra-plugin: $(DRA_OBJS) $(DRA_DP_OBJS) $(COMMON_OBJS)
	@test -n "$(DRA_LIBS)" || { echo "pkg-config finds no grpc/libprotobuf-c: apt-get install libgrpc-dev libprotobuf-c-dev" >&2; exit 1; }
	$(CC) $(LDFLAGS_ALL) $(PIE_LDFLAGS) -o $@ $^ -Wl,--as-needed $(DRA_LIBS) -lcurl -lcjson -ldl -lpthread
