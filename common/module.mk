# common/: wire protocol, parsers, logging, socket path. Linked into every
# component (PIC, so the client library can take it too).
COMMON_SRCS := common/protocol.c common/parse.c common/log.c common/sockpath.c
COMMON_OBJS := $(COMMON_SRCS:%.c=$(B)/%.o)
