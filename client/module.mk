# client/: libnvshare.so, the LD_PRELOAD library (see docs/interposition.md).
# Every client/*.c and client/*.S is part of it (the scheduler-client file
# included). Nothing links libcuda or libnvidia-ml at build time.
CLIENT_SRCS := $(wildcard client/*.c)
CLIENT_ASMS := $(wildcard client/*.S)
CLIENT_OBJS := $(CLIENT_SRCS:%.c=$(B)/%.o) $(CLIENT_ASMS:%.S=$(B)/%.o)
CLIENT_MAP := $(B)/client/libnvshare.map
# The scheduler client (client/sched_*.c) and the swap engine it drives
# (client/swap_*.c), which tests/e2e/client_probe links on its own with a
# fake driver table.
CLIENT_SCHED_OBJS := $(patsubst %.c,$(B)/%.o,$(wildcard client/sched_*.c client/swap_*.c))

$(CLIENT_OBJS): ALL_CFLAGS += -fvisibility=hidden
# The glibc floor (common/glibc_floor.h): every object of the library binds
# libdl and libpthread calls to their pre-2.34 versions. The common objects
# are the scheduler's too, which does not mind.
$(CLIENT_SRCS:%.c=$(B)/%.o) $(COMMON_OBJS): ALL_CFLAGS += -include common/glibc_floor.h
$(CLIENT_SRCS:%.c=$(B)/%.o) $(COMMON_OBJS): common/glibc_floor.h
$(CLIENT_OBJS): client/entry_points.def

$(CLIENT_MAP): client/libnvshare.map.in client/entry_points.def
	@mkdir -p $(dir $@)
	$(CC) -E -P -x c -I. $< -o $@

$(B)/libnvshare.so: $(CLIENT_OBJS) $(COMMON_OBJS) $(CLIENT_MAP)
	$(CC) -shared $(LDFLAGS_ALL) -o $@ $(CLIENT_OBJS) $(COMMON_OBJS) \
	  -Wl,--version-script=$(CLIENT_MAP) -Wl,-z,defs -Wl,-Bsymbolic-functions \
	  -Wl,--push-state,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0 -Wl,--pop-state

# The glibc floor: no symbol version above GLIBC_$(GLIBC_FLOOR) (objdump -T).
# Part of every build, so CI and make test fail on a call that needs more.
GLIBC_FLOOR := 2.17
$(B)/client/glibc.checked: $(B)/libnvshare.so client/check_glibc.sh
	client/check_glibc.sh $(B)/libnvshare.so $(GLIBC_FLOOR)
	@touch $@

# Build-time consistency check: table vs exports vs the toolkit's stub.
$(B)/client/exports.checked: $(B)/libnvshare.so client/check_exports.sh client/entry_points.def
	client/check_exports.sh $(B)/libnvshare.so $(CUDA_HOME)/lib64/stubs/libcuda.so
	@touch $@

# (Not for the sanitizer build, which is never shipped: the ASan runtime
# it preloads needs the build machine's glibc anyway.)
TARGETS += $(B)/libnvshare.so $(B)/client/exports.checked $(if $(SANFLAGS),,$(B)/client/glibc.checked)

# make gen: regenerate the mechanical parts of the client from the table
# and the toolkit's cudaTypedefs.h (client/tools/gen_hooks.py; the output is
# committed, the build needs no Python). make check-gen (CI) regenerates into
# a temporary directory and fails when a committed file is stale.
CLIENT_GEN := hooks_launch.inc hooks_memcpy.inc hooks_legacy.inc cuda_compat.h
.PHONY: gen check-gen
gen:
	python3 client/tools/gen_hooks.py $(CUDA_HOME)
	clang-format -i client/cuda_compat.h

check-gen:
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	python3 client/tools/gen_hooks.py $(CUDA_HOME) "$$d" >/dev/null && \
	clang-format --assume-filename=client/cuda_compat.h <"$$d/cuda_compat.h" >"$$d/f.h" && \
	mv "$$d/f.h" "$$d/cuda_compat.h" && \
	for f in $(CLIENT_GEN); do \
	  cmp -s "$$d/$$f" "client/$$f" || { echo "client/$$f is stale: run make gen" >&2; exit 1; }; \
	done && echo "generated client files are up to date"
