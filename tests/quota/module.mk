# tests/quota: compute and memory limits end to end on the simulated GPU
# (t_quota.sh runs the cases in parallel); quota_app is their application.
TEST_TARGETS += $(B)/tests/quota/quota_app

$(B)/tests/quota/quota_app: $(B)/tests/quota/quota_app.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -ldl -lpthread
