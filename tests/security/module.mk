# tests/security (docs/security.md): no_peerpidfd.so, an LD_PRELOAD shim
# that hides SO_PEERPIDFD so the identity fallback is tested on any kernel;
# evade_conn.so, one that gives a process without libnvshare a HELLO-only
# or attached connection of its own (t_unmanaged_evasion.sh).
# The tests are tests/security/t_*.sh.
TEST_TARGETS += $(B)/tests/security/no_peerpidfd.so $(B)/tests/security/evade_conn.so

# Not instrumented: it sits below the ASan runtime (as tests/reliability's).
$(B)/tests/security/%.so: tests/security/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -O2 -g -fPIC -shared -D_GNU_SOURCE -o $@ $< -ldl -lpthread
