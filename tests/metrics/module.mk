# tests/metrics: the Prometheus exporter. render_sample prints a rendered
# hand-made snapshot for t_render.sh (promtool, escaping); the t_*.sh
# scripts scrape a running scheduler.
TEST_TARGETS += $(B)/tests/metrics/render_sample

$(B)/tests/metrics/render_sample: $(B)/tests/metrics/render_sample.o \
		$(B)/scheduler/metrics_render.o $(B)/scheduler/metrics_tenant.o $(COMMON_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^
