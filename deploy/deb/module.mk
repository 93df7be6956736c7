# deploy/deb: `make deb` builds $(B)/deb/nvshare_<VERSION>_<arch>.deb from
# `make install` (PREFIX=/usr, the unit in /lib/systemd/system, stripped)
# plus /etc/default/nvshare-scheduler (a conffile) and the maintainer
# scripts here: installing enables and starts nvshare-scheduler.service,
# removing stops it, purging removes its state. Depends computed by
# dpkg-shlibdeps. Needs dpkg-dev (build-essential has it) and help2man.
# Tested by installing it into a systemd container: tests/system/t_deb.sh.
DEB_VERSION = $(shell tr -d ' \t\r\n' <VERSION)
DEB_ARCH = $(shell dpkg --print-architecture 2>/dev/null)
DEB_DIR = $(B)/deb
DEB_FILE = $(DEB_DIR)/nvshare_$(DEB_VERSION)_$(DEB_ARCH).deb

deb: $(B)/libnvshare.so $(B)/nvshare-scheduler $(B)/nvsharectl $(if $(DP_BUILDABLE),$(B)/nvshare-device-plugin $(B)/nvshare-dra-plugin) man
	@command -v dpkg-deb >/dev/null && command -v dpkg-shlibdeps >/dev/null || \
	  { echo "make deb: dpkg-deb and dpkg-shlibdeps needed (apt-get install dpkg-dev)" >&2; exit 1; }
	rm -rf $(DEB_DIR)/root
	$(MAKE) --no-print-directory install DESTDIR=$(abspath $(DEB_DIR)/root) PREFIX=/usr \
	  SYSTEMD_UNIT_DIR=/lib/systemd/system STRIP=1
	deploy/deb/build.sh $(DEB_DIR)/root $(DEB_VERSION) $(DEB_ARCH) $(DEB_FILE)
