# scheduler/core/: the scheduler's decision core (lock turns, modes,
# co-scheduling, quotas, fairness, claims, limits) as a library with a
# port (core/port.h). It includes only its own and common/ headers
# (scripts/check-core.sh, make lint) and reads no clock: the scheduler
# (the shell) and tests/core/ link it.
CORE_SRCS := scheduler/core/policy.c scheduler/core/coschedule.c scheduler/core/quota.c \
	scheduler/core/claims.c scheduler/core/bounds.c scheduler/core/fairness.c scheduler/core/limits_apply.c \
	scheduler/core/limit_resolve.c scheduler/core/port.c scheduler/core/state.c \
	scheduler/core/registry.c
CORE_OBJS := $(CORE_SRCS:%.c=$(B)/%.o)
CORE_LIB := $(B)/scheduler/libnvscore.a

$(CORE_LIB): $(CORE_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

.PHONY: lint-core
lint: lint-core
lint-core:
	scripts/check-core.sh
