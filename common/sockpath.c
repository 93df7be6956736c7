#include "sockpath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int nvs_sock_dir(char *buf, size_t cap)
{
	const char *d = getenv("NVSHARE_SOCK_DIR");
	if (!d || !*d)
		d = NVS_DEFAULT_SOCK_DIR;
	int n = snprintf(buf, cap, "%s", d);
	return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

int nvs_sock_path(char *buf, size_t cap)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	if (nvs_sock_dir(dir, sizeof dir))
		return -1;
	size_t limit = cap < sizeof dir ? cap : sizeof dir;
	int n = snprintf(buf, limit, "%s/%s", dir, NVS_SOCK_NAME);
	return (n < 0 || (size_t)n >= limit) ? -1 : 0;
}

int nvs_sock_connect(void)
{
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	if (nvs_sock_path(sa.sun_path, sizeof sa.sun_path))
		return -ENAMETOOLONG;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}
