# tests/reliability: faults, bad input and load (docs/reliability.md).
# load_gen: many protocol clients in one process (load and fd tests);
# malloc_fail.so: LD_PRELOAD allocation-failure injector; slow_listen.so:
# listen() delayed (t_sock_ready.sh). The tests are
# tests/reliability/t_*.sh.
TEST_TARGETS += $(B)/tests/reliability/load_gen $(B)/tests/reliability/malloc_fail.so \
  $(B)/tests/reliability/slow_listen.so

$(B)/tests/reliability/load_gen: $(B)/tests/reliability/load_gen.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^

# The LD_PRELOAD shims are not instrumented: they sit below the ASan
# runtime (see malloc_fail.c's header).
$(B)/tests/reliability/%.so: tests/reliability/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -O2 -g -fPIC -shared -D_GNU_SOURCE -o $@ $< -ldl
