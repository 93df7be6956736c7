# man/: the man pages. The three programs' pages are generated from their
# own --help and --version by help2man (Debian package help2man), so they
# cannot drift from the programs; man/<program>.h2m adds what --help does
# not say (description, files, exit status, see also). The library has no
# --help: man/libnvshare.7 is written by hand (tests/k8s/t_install.sh checks
# it names every client variable of the README). Dated by the last commit
# (SOURCE_DATE_EPOCH), not by the build.
HELP2MAN ?= help2man
# make install leaves the programs' pages out (saying so) without it;
# make man and make deb need it.
HAVE_HELP2MAN := $(shell command -v $(HELP2MAN) 2>/dev/null)
# Where the generated pages go (tests give each install their own).
MAN_BUILD ?= $(B)/man
# The device plugin's and DRA driver's pages only where they can be built
# (device-plugin/module.mk, dra-plugin/module.mk).
MAN_PAGES := $(MAN_BUILD)/nvshare-scheduler.8 $(MAN_BUILD)/nvsharectl.1 \
	$(if $(DP_LIBS),$(MAN_BUILD)/nvshare-device-plugin.8 $(MAN_BUILD)/nvshare-dra-plugin.8)
MAN_EPOCH := $(or $(SOURCE_DATE_EPOCH),$(shell git log -1 --format=%ct 2>/dev/null))

man: $(MAN_PAGES)

# help2man PROGRAM SECTION DESCRIPTION-FILE OUT
define man_rule
	@command -v $(HELP2MAN) >/dev/null || { echo "help2man not found: apt-get install help2man (scripts/install-deps.sh)" >&2; exit 1; }
	@mkdir -p $(dir $@)
	SOURCE_DATE_EPOCH=$(MAN_EPOCH) $(HELP2MAN) --no-info --section=$(2) --include=$(3) \
	  --manual="nvshare" --source="nvshare $(shell tr -d ' \t\r\n' <VERSION)" $(1) >$@.tmp
	mv $@.tmp $@
endef

$(MAN_BUILD)/nvshare-scheduler.8: $(B)/nvshare-scheduler man/nvshare-scheduler.h2m
	$(call man_rule,$(B)/nvshare-scheduler,8,man/nvshare-scheduler.h2m)
$(MAN_BUILD)/nvsharectl.1: $(B)/nvsharectl man/nvsharectl.h2m
	$(call man_rule,$(B)/nvsharectl,1,man/nvsharectl.h2m)
$(MAN_BUILD)/nvshare-device-plugin.8: $(B)/nvshare-device-plugin man/nvshare-device-plugin.h2m
	$(call man_rule,$(B)/nvshare-device-plugin,8,man/nvshare-device-plugin.h2m)
$(MAN_BUILD)/nvshare-dra-plugin.8: $(B)/nvshare-dra-plugin man/nvshare-dra-plugin.h2m
	$(call man_rule,$(B)/nvshare-dra-plugin,8,man/nvshare-dra-plugin.h2m)
