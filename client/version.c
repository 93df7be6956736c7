/*
 * The library's version. `strings libnvshare.so | grep nvshare-version`
 * answers "which nvshare is preloaded here?" without running anything (a
 * library in a container image, a copy the device plugin put on a node);
 * `used` keeps the otherwise unreferenced array in the object.
 */
#include "client/internal.h"

#include "nvs_version.h" /* generated: scripts/gen-version.sh */

__attribute__((used)) static const char version_tag[] = "nvshare-version " NVS_VERSION_FULL;

void nvs_log_version(void)
{
	NVS_DEBUG("libnvshare %s", version_tag + sizeof "nvshare-version " - 1);
}
