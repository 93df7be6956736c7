# tests/common: helpers shared by every area's tests. speed_probe times a
# fixed piece of work; tests/lib.sh turns it into the factor that scales
# the few wall-clock bounds (docs/testing.md).
TEST_TARGETS += $(B)/tests/common/speed_probe

$(B)/tests/common/speed_probe: $(B)/tests/common/speed_probe.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^
