# Unit tests of common/ (cmocka, TAP output via CMOCKA_MESSAGE_OUTPUT=TAP,
# which tests/run sets).
UNIT_TESTS := t_protocol t_parse t_log
TEST_TARGETS += $(UNIT_TESTS:%=$(B)/tests/unit/%)

$(B)/tests/unit/t_%: $(B)/tests/unit/t_%.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcmocka
