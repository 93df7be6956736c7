# Unit tests of common/ (cmocka, TAP output via CMOCKA_MESSAGE_OUTPUT=TAP,
# which tests/run sets).
UNIT_TESTS := t_protocol t_messages t_parse t_log
TEST_TARGETS += $(UNIT_TESTS:%=$(B)/tests/unit/%)

$(B)/tests/unit/t_%: $(B)/tests/unit/t_%.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lcmocka

# The message table as docs/protocol.md must show it (make check-gen:
# scripts/check-messages-doc.sh).
TEST_TARGETS += $(B)/tests/unit/msg_table
$(B)/tests/unit/msg_table: $(B)/tests/unit/msg_table.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^

.PHONY: check-gen-messages
check-gen: check-gen-messages
check-gen-messages: $(B)/tests/unit/msg_table
	scripts/check-messages-doc.sh $(B)/tests/unit/msg_table docs/protocol.md
