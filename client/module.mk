# client/: libnvshare.so, the LD_PRELOAD library (see docs/interposition.md).
# Every client/*.c and client/*.S is part of it (the scheduler-client file
# included). Nothing links libcuda or libnvidia-ml at build time.
CLIENT_SRCS := $(wildcard client/*.c)
CLIENT_ASMS := $(wildcard client/*.S)
CLIENT_OBJS := $(CLIENT_SRCS:%.c=$(B)/%.o) $(CLIENT_ASMS:%.S=$(B)/%.o)
CLIENT_MAP := $(B)/client/libnvshare.map
# The scheduler client (client/sched_*.c), which tests/e2e/client_probe links
# on its own with a fake driver table.
CLIENT_SCHED_OBJS := $(patsubst %.c,$(B)/%.o,$(wildcard client/sched_*.c))

$(CLIENT_OBJS): ALL_CFLAGS += -fvisibility=hidden
$(CLIENT_OBJS): client/entry_points.def

$(CLIENT_MAP): client/libnvshare.map.in client/entry_points.def
	@mkdir -p $(dir $@)
	$(CC) -E -P -x c -I. $< -o $@

$(B)/libnvshare.so: $(CLIENT_OBJS) $(COMMON_OBJS) $(CLIENT_MAP)
	$(CC) -shared $(LDFLAGS_ALL) -o $@ $(CLIENT_OBJS) $(COMMON_OBJS) \
	  -Wl,--version-script=$(CLIENT_MAP) -Wl,-z,defs -Wl,-Bsymbolic-functions \
	  -ldl -lpthread

# Build-time consistency check: table vs exports vs the toolkit's stub.
$(B)/client/exports.checked: $(B)/libnvshare.so client/check_exports.sh client/entry_points.def
	client/check_exports.sh $(B)/libnvshare.so $(CUDA_HOME)/lib64/stubs/libcuda.so
	@touch $@

TARGETS += $(B)/libnvshare.so $(B)/client/exports.checked
