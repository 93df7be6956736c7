# nvshare build. Plain GNU make: the project is C only, the parts are few and
# a fragment per component (*/module.mk) keeps each one's rules beside its
# sources. See README.md "Building".
#
#   make                 build everything into build/
#   make SAN=1           ASan+UBSan build into build-san/
#   make K8S=0           no Kubernetes Pod watch (no libcurl), into build-nok8s/
#   make test            build and run the fast test tier (tests/run)
#   make test-slow | test-long | test-all   the other tiers (docs/testing.md)
#   make demo            two clients sharing a GPU (demo/run-demo.sh)
#   make install         PREFIX=/usr/local DESTDIR= STRIP=1 SYSTEMD_UNIT_DIR=
#   make man             the man pages into build/man (help2man)
#   make deb             a Debian package of it all (deploy/deb)
#   make uninstall       the same variables
#   make format | lint

PREFIX ?= /usr/local
DESTDIR ?=
CUDA_HOME ?= /usr/local/cuda
CC ?= gcc

# K8S=0: the scheduler without the Kubernetes Pod watch (no libcurl), into
# build-nok8s/ unless B says otherwise (scheduler/module.mk).
K8S ?= 1
ifeq ($(K8S),0)
B ?= build-nok8s
endif

SAN ?= 0
ifeq ($(SAN),1)
B ?= build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
B ?= build
SANFLAGS :=
endif

# One compile per CPU unless the caller chose -j (make 4.3 shows no -j in
# MAKEFLAGS here, but a -j on the command line still wins): a fresh clone's
# `make test` builds in ~11 s instead of ~20 s on 2 CPUs (docs/testing.md).
ifeq ($(filter -j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif

# Warnings are errors only where we choose the compiler (CI, make dev):
# WERROR=1. A user's newer compiler may warn about something new; that
# must not stop the build.
WERROR ?= 0
WARN := -Wall -Wextra -Wshadow -Wformat=2 -Wno-unused-parameter $(if $(filter 1,$(WERROR)),-Werror)
CFLAGS ?= -O2 -g
# Hardening: the scheduler runs as root, parses JSON from the API server
# and listens on a socket every Pod can reach. Stack protector and fortified
# libc calls everywhere (FORTIFY is left to ASan in the sanitizer build);
# full RELRO and immediate binding for every binary and the library; the
# daemons and tools are linked as PIE (PIE_LDFLAGS), everything is -fPIC.
HARDEN_CFLAGS := -fstack-protector-strong $(if $(SANFLAGS),,-D_FORTIFY_SOURCE=2)
HARDEN_LDFLAGS := -Wl,-z,relro,-z,now
PIE_LDFLAGS := -pie
BASE_CFLAGS := -std=gnu11 $(WARN) $(SANFLAGS) $(HARDEN_CFLAGS) -D_GNU_SOURCE -I. -Icommon \
	-I$(CUDA_HOME)/include
LDFLAGS_ALL := $(SANFLAGS) $(HARDEN_LDFLAGS)

ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS)

TARGETS :=
TEST_TARGETS :=

.PHONY: all dev clean install uninstall man deb test test-slow test-long test-all test-san format lint lint-cppcheck lint-format lint-shell demo
all: targets

# make dev: the build developers and CI use (warnings are errors).
dev:
	$(MAKE) WERROR=1

include common/module.mk
include client/module.mk
include scheduler/module.mk
include ctl/module.mk
include bench/module.mk
-include device-plugin/module.mk
-include dra-plugin/module.mk
-include deploy/module.mk
include man/module.mk
include deploy/deb/module.mk
include tests/module.mk

targets: $(TARGETS) $(TEST_TARGETS) $(B)/.san-marker

# tests/lib.sh reads $(B)/.san to preload the ASan runtime before libnvshare.
$(B)/.san-marker:
	@mkdir -p $(B)
	@if [ "$(SAN)" = 1 ]; then touch $(B)/.san; else rm -f $(B)/.san; fi
	@touch $@

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(B)/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -c $< -o $@

-include $(shell find $(B) -name '*.d' 2>/dev/null)

# make test: the fast tier, in parallel (tests/run -j, default three jobs
# per CPU): unit and in-process tests and one end-to-end test per feature,
# about a minute; make test-slow: the heavier process-level tests
# (hostile-load scenarios, install paths, big loads); make test-long:
# fuzzing, the bench self-test, image and package builds, systemd; make
# test-all: the three (docs/testing.md "Tiers").
# The tests and the demo run with MAKEFLAGS cleared: the tests that run
# make themselves (t_install, t_fuzz) start from a plain environment, not
# from this make's job server.
RUN_ENV = MAKEFLAGS= NVS_BUILD=$(B)
test: targets
	$(RUN_ENV) tests/run $(if $(J),-j $(J))

test-slow: targets
	$(RUN_ENV) tests/run --tier slow $(if $(J),-j $(J))

test-long: targets
	$(RUN_ENV) tests/run --tier long $(if $(J),-j $(J))

test-all: targets
	$(RUN_ENV) tests/run --tier all $(if $(J),-j $(J))

# The README's main job: two clients sharing a GPU (real or simulated).
demo: targets
	$(RUN_ENV) demo/run-demo.sh

test-san:
	$(MAKE) SAN=1 test

# make install: the library, the scheduler, nvsharectl, the device plugin
# (when its dependencies let it be built: it is then built first; otherwise
# the install says so), the scheduler's systemd unit and the documents.
# STRIP=1 strips the installed programs (install -s); SYSTEMD_UNIT_DIR
# moves the unit (default $(PREFIX)/lib/systemd/system; /etc/systemd/system
# or /usr/lib/systemd/system are the usual alternatives). make uninstall
# removes exactly what install puts there, with the same variables.
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
STRIP ?= 0
INSTALL_PROG = install -m 0755 $(if $(filter 1 yes true,$(STRIP)),-s)
DOC_DIR = $(PREFIX)/share/doc/nvshare
UNIT := nvshare-scheduler.service
# Buildable when pkg-config finds gRPC and protobuf-c (device-plugin/module.mk).
DP_BUILDABLE := $(if $(DP_LIBS),1)
MAN_DIR = $(PREFIX)/share/man
DOCS := $(wildcard docs/*.md)
INSTALLED = $(PREFIX)/lib/libnvshare.so $(PREFIX)/sbin/nvshare-scheduler \
	$(PREFIX)/bin/nvsharectl $(PREFIX)/sbin/nvshare-device-plugin $(PREFIX)/sbin/nvshare-dra-plugin \
	$(SYSTEMD_UNIT_DIR)/$(UNIT) $(addprefix $(DOC_DIR)/,README.md LICENSE NOTICE CHANGELOG.md) \
	$(addprefix $(DOC_DIR)/,$(DOCS)) $(DOC_DIR)/examples/nvshare-scheduler.default \
	$(MAN_DIR)/man8/nvshare-scheduler.8 $(MAN_DIR)/man1/nvsharectl.1 \
	$(MAN_DIR)/man8/nvshare-device-plugin.8 $(MAN_DIR)/man8/nvshare-dra-plugin.8 \
	$(MAN_DIR)/man7/libnvshare.7

install: $(B)/libnvshare.so $(B)/nvshare-scheduler $(B)/nvsharectl \
		$(if $(DP_BUILDABLE),$(B)/nvshare-device-plugin $(B)/nvshare-dra-plugin) \
		$(if $(HAVE_HELP2MAN),man)
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/bin \
		$(DESTDIR)$(SYSTEMD_UNIT_DIR) $(DESTDIR)$(DOC_DIR)/docs $(DESTDIR)$(DOC_DIR)/examples \
		$(addprefix $(DESTDIR)$(MAN_DIR)/man,1 7 8)
	$(INSTALL_PROG) $(B)/libnvshare.so $(DESTDIR)$(PREFIX)/lib/libnvshare.so
	$(INSTALL_PROG) $(B)/nvshare-scheduler $(DESTDIR)$(PREFIX)/sbin/nvshare-scheduler
	$(INSTALL_PROG) $(B)/nvsharectl $(DESTDIR)$(PREFIX)/bin/nvsharectl
	@if [ -f $(B)/nvshare-device-plugin ]; then \
		echo "$(INSTALL_PROG) $(B)/nvshare-device-plugin $(DESTDIR)$(PREFIX)/sbin/nvshare-device-plugin"; \
		$(INSTALL_PROG) $(B)/nvshare-device-plugin $(DESTDIR)$(PREFIX)/sbin/nvshare-device-plugin; \
	else \
		echo "make install: nvshare-device-plugin NOT installed: it was not built (pkg-config" \
		     "finds no grpc/libprotobuf-c; apt-get install libgrpc-dev libprotobuf-c-dev" \
		     "protobuf-c-compiler, or scripts/install-deps.sh, then make install again)." \
		     "Only Kubernetes nodes need it." >&2; \
	fi
	@if [ -f $(B)/nvshare-dra-plugin ]; then \
		echo "$(INSTALL_PROG) $(B)/nvshare-dra-plugin $(DESTDIR)$(PREFIX)/sbin/nvshare-dra-plugin"; \
		$(INSTALL_PROG) $(B)/nvshare-dra-plugin $(DESTDIR)$(PREFIX)/sbin/nvshare-dra-plugin; \
	fi
	sed -e 's#/usr/local/sbin/#$(PREFIX)/sbin/#' -e 's#/usr/local/share/doc/#$(PREFIX)/share/doc/#' \
		deploy/systemd/$(UNIT) >$(DESTDIR)$(SYSTEMD_UNIT_DIR)/$(UNIT).tmp
	install -m 0644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/$(UNIT).tmp $(DESTDIR)$(SYSTEMD_UNIT_DIR)/$(UNIT)
	rm -f $(DESTDIR)$(SYSTEMD_UNIT_DIR)/$(UNIT).tmp
	install -m 0644 README.md LICENSE NOTICE CHANGELOG.md $(DESTDIR)$(DOC_DIR)/
	install -m 0644 $(DOCS) $(DESTDIR)$(DOC_DIR)/docs/
	install -m 0644 deploy/systemd/nvshare-scheduler.default \
		$(DESTDIR)$(DOC_DIR)/examples/nvshare-scheduler.default
	install -m 0644 man/libnvshare.7 $(DESTDIR)$(MAN_DIR)/man7/
	@if [ -z "$(HAVE_HELP2MAN)" ]; then \
		echo "make install: the programs' man pages NOT installed: help2man is missing" \
		     "(apt-get install help2man, or scripts/install-deps.sh, then make install again)" >&2; \
	else \
		set -e; \
		echo "install -m 0644 $(MAN_BUILD)/nvshare-scheduler.8 $(DESTDIR)$(MAN_DIR)/man8/"; \
		install -m 0644 $(MAN_BUILD)/nvshare-scheduler.8 $(DESTDIR)$(MAN_DIR)/man8/; \
		echo "install -m 0644 $(MAN_BUILD)/nvsharectl.1 $(DESTDIR)$(MAN_DIR)/man1/"; \
		install -m 0644 $(MAN_BUILD)/nvsharectl.1 $(DESTDIR)$(MAN_DIR)/man1/; \
		if [ -f $(B)/nvshare-device-plugin ] && [ -f $(MAN_BUILD)/nvshare-device-plugin.8 ]; then \
			echo "install -m 0644 $(MAN_BUILD)/nvshare-device-plugin.8 $(DESTDIR)$(MAN_DIR)/man8/"; \
			install -m 0644 $(MAN_BUILD)/nvshare-device-plugin.8 $(DESTDIR)$(MAN_DIR)/man8/; \
		fi; \
		if [ -f $(B)/nvshare-dra-plugin ] && [ -f $(MAN_BUILD)/nvshare-dra-plugin.8 ]; then \
			echo "install -m 0644 $(MAN_BUILD)/nvshare-dra-plugin.8 $(DESTDIR)$(MAN_DIR)/man8/"; \
			install -m 0644 $(MAN_BUILD)/nvshare-dra-plugin.8 $(DESTDIR)$(MAN_DIR)/man8/; \
		fi; \
	fi
	@echo "installed under $(DESTDIR)$(PREFIX); start the scheduler with:" \
	      "systemctl daemon-reload && systemctl enable --now nvshare-scheduler"

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(DOC_DIR)/docs $(DESTDIR)$(DOC_DIR)/examples $(DESTDIR)$(DOC_DIR) 2>/dev/null

SOURCES := $(shell git ls-files '*.c' '*.h' 2>/dev/null)
# Every bash script in the tree: *.sh (libraries that tests source say
# "# shellcheck shell=bash" instead of a #! line), the run scripts,
# scripts/, .ci/run.
SHELL_SCRIPTS := $(sort $(shell git ls-files '*.sh' 2>/dev/null) \
	$(shell git ls-files 'scripts/*' '*/run' '.ci/run' 2>/dev/null | \
	xargs -r grep -lE '^\#!.*(ba)?sh' 2>/dev/null))

format:
	clang-format -i $(SOURCES)

# make lint: what CI enforces. cppcheck, clang-format (no file may differ
# from .clang-format's layout) and shellcheck (warnings and errors; style
# notes are not enforced). .shellcheckrc holds shellcheck's settings.
lint: lint-cppcheck lint-format lint-shell

lint-cppcheck:
	cppcheck --quiet --error-exitcode=1 --std=c11 --enable=warning,portability \
	  --inline-suppr --suppress=missingIncludeSystem -I common -I client \
	  common client scheduler ctl device-plugin dra-plugin bench tests

lint-format:
	clang-format --dry-run -Werror $(SOURCES)

lint-shell:
	shellcheck -x -S warning $(SHELL_SCRIPTS)

clean:
	rm -rf build build-san
