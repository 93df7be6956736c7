# libFuzzer targets (clang). Built only when clang can link -fsanitize=fuzzer.
# tests/fuzz/t_fuzz.sh runs each for a bounded time in CI; for a longer run:
#   make fuzz && build/fuzz/fuzz_protocol -max_total_time=3600 tests/fuzz/corpus/protocol
FUZZ_CC ?= clang
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 -D_GNU_SOURCE -Icommon
FUZZ_TARGETS := fuzz_protocol fuzz_parse fuzz_k8s_event
.PHONY: fuzz
fuzz: $(FUZZ_TARGETS:%=build/fuzz/%)

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(COMMON_SRCS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^

# The Pod watch's JSON/event handling (scheduler/k8s/k8s_json.c, cJSON).
build/fuzz/fuzz_k8s_event: tests/fuzz/fuzz_k8s_event.c scheduler/k8s/k8s_json.c \
		scheduler/k8s/annotations.c scheduler/k8s/k8s_jstream.c $(COMMON_SRCS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Ischeduler/k8s -o $@ $^ -lcjson

# The scheduler's connection input path (tests/fuzz/fuzz_conn.c): every
# scheduler source but main.c, logging stubbed. Its own line so that the
# target list above stays the parsers'.
FUZZ_SCHED_SRCS = $(filter-out scheduler/main.c,$(SCHED_SRCS)) $(CORE_SRCS) \
	$(filter-out common/log.c,$(COMMON_SRCS))
FUZZ_SCHED_LIBS ?= $(SCHED_LIBS)
fuzz: build/fuzz/fuzz_conn
# status_json.c includes the generated version header (common/module.mk).
build/fuzz/fuzz_conn: tests/fuzz/fuzz_conn.c $(FUZZ_SCHED_SRCS) | $(NVS_VERSION_H)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Ischeduler -Ischeduler/core -I$(dir $(NVS_VERSION_H)) -o $@ $^ $(FUZZ_SCHED_LIBS)
