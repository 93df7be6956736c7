# tests/core/: the scheduler's decision core in process, on a virtual
# clock, behind a fake port (harness.c); cmocka, TAP via tests/run. Each
# program runs in milliseconds: the fast tier.
CORE_TESTS := t_lock t_quota t_cosched t_fair t_random t_handoff
TEST_TARGETS += $(CORE_TESTS:%=$(B)/tests/core/%)

$(B)/tests/core/t_%: $(B)/tests/core/t_%.o $(B)/tests/core/harness.o $(CORE_LIB) $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcmocka -lpthread

# Unmanaged-process detection, a shell module (it reads NVML and /proc),
# driven on the virtual clock with a fake NVML: every scheduler object but
# main.o, as tests/sched/t_settings links them.
TEST_TARGETS += $(B)/tests/core/t_unmanaged
$(B)/tests/core/t_unmanaged: $(B)/tests/core/t_unmanaged.o $(B)/tests/core/harness.o \
		$(SCHED_IN_PROCESS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcmocka $(SCHED_LIBS)
