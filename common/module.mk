# common/: wire protocol, parsers, logging, socket path. Linked into every
# component (PIC, so the client library can take it too).
COMMON_SRCS := common/protocol.c common/parse.c common/log.c common/sockpath.c
COMMON_OBJS := $(COMMON_SRCS:%.c=$(B)/%.o)

# The version header (scripts/gen-version.sh: VERSION plus git describe).
# Regenerated on every make, rewritten only when it changes; the objects
# that include it name it as a prerequisite so the first build has it.
NVS_VERSION_H := $(B)/gen/nvs_version.h
VERSION_USERS := $(B)/scheduler/main.o $(B)/scheduler/status_json.o $(B)/scheduler/metrics_render.o $(B)/ctl/nvsharectl.o \
	$(B)/device-plugin/flags.o $(B)/client/version.o
$(VERSION_USERS): $(NVS_VERSION_H)
$(VERSION_USERS): ALL_CFLAGS += -I$(B)/gen

.PHONY: nvs-version-force
$(NVS_VERSION_H): nvs-version-force
	@scripts/gen-version.sh $@
