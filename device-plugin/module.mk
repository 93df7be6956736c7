# device-plugin/: nvshare-device-plugin, the Kubernetes device plugin.
# Needs Debian's libgrpc-dev (gRPC C core), libprotobuf-c-dev and
# protobuf-c-compiler. The protobuf-c code is generated from
# device-plugin/deviceplugin.proto and podresources.proto into
# $(B)/device-plugin/gen at build time.
# gRPC is linked into this program only, never into libnvshare.so.

DP_GEN := $(B)/device-plugin/gen
DP_SRCS := device-plugin/main.c device-plugin/plugin.c device-plugin/grpc_server.c \
	device-plugin/devices.c device-plugin/policy.c device-plugin/health.c device-plugin/cdi.c \
	device-plugin/bindings.c device-plugin/podres.c device-plugin/flags.c
DP_PROTOS := deviceplugin podresources
DP_OBJS := $(DP_SRCS:%.c=$(B)/%.o) $(DP_PROTOS:%=$(DP_GEN)/%.pb-c.o)
DP_PKGS := grpc libprotobuf-c
# Asked of pkg-config on first use, once (grpc's answer takes ~0.6 s of CPU,
# and most make runs, install and test included, need one of them or none:
# t_install runs make 26 times).
DP_CFLAGS = $(eval DP_CFLAGS := $$(shell pkg-config --cflags $(DP_PKGS) 2>/dev/null) \
	-Idevice-plugin -I$(DP_GEN))$(DP_CFLAGS)
DP_LIBS = $(eval DP_LIBS := $$(shell pkg-config --libs $(DP_PKGS) 2>/dev/null))$(DP_LIBS)

TARGETS += $(B)/nvshare-device-plugin

# One protoc-c run makes both files (a pattern rule with two targets).
$(DP_GEN)/%.pb-c.c $(DP_GEN)/%.pb-c.h: device-plugin/%.proto
	@mkdir -p $(DP_GEN)
	@command -v protoc-c >/dev/null || { echo "protoc-c not found: apt-get install protobuf-c-compiler" >&2; exit 1; }
	protoc-c --proto_path=device-plugin --c_out=$(DP_GEN) $<
.PRECIOUS: $(DP_GEN)/%.pb-c.c $(DP_GEN)/%.pb-c.h

$(DP_GEN)/%.pb-c.o: $(DP_GEN)/%.pb-c.c $(DP_GEN)/%.pb-c.h
	$(CC) $(ALL_CFLAGS) $(DP_CFLAGS) -fPIC -c $< -o $@

$(DP_SRCS:%.c=$(B)/%.o): ALL_CFLAGS += $(DP_CFLAGS)
$(B)/device-plugin/plugin.o: $(DP_GEN)/deviceplugin.pb-c.h
$(B)/device-plugin/podres.o: $(DP_GEN)/podresources.pb-c.h

$(B)/nvshare-device-plugin: $(DP_OBJS) $(COMMON_OBJS)
	@test -n "$(DP_LIBS)" || { echo "pkg-config finds no grpc/libprotobuf-c: apt-get install libgrpc-dev libprotobuf-c-dev" >&2; exit 1; }
	$(CC) $(LDFLAGS_ALL) $(PIE_LDFLAGS) -o $@ $^ -Wl,--as-needed $(DP_LIBS) -lcjson -ldl -lpthread
