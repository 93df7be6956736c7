# tests/common: helpers shared by every area's tests. speed_probe times a
# fixed piece of work; tests/lib.sh turns it into the factor that scales
# the few wall-clock bounds (docs/testing.md). rtt_probe measures what a
# round trip between two processes costs meanwhile (hostile_lib.sh).
TEST_TARGETS += $(B)/tests/common/speed_probe $(B)/tests/common/rtt_probe

$(B)/tests/common/%: $(B)/tests/common/%.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^
