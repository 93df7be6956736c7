#include "sockpath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int dir_from(const char *var, const char *def, char *buf, size_t cap)
{
	const char *d = getenv(var);
	if (!d || !*d)
		d = def;
	int n = snprintf(buf, cap, "%s", d);
	return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

/* <dir>/<name>, limited to what sun_path holds. */
static int path_in(const char *dir, const char *name, char *buf, size_t cap)
{
	size_t limit = cap < NVS_SOCK_PATH_LEN ? cap : NVS_SOCK_PATH_LEN;
	int n = snprintf(buf, limit, "%s/%s", dir, name);
	return (n < 0 || (size_t)n >= limit) ? -1 : 0;
}

int nvs_sock_dir(char *buf, size_t cap)
{
	return dir_from("NVSHARE_SOCK_DIR", NVS_DEFAULT_SOCK_DIR, buf, cap);
}

int nvs_admin_sock_dir(char *buf, size_t cap)
{
	return dir_from("NVSHARE_ADMIN_SOCK_DIR", NVS_DEFAULT_ADMIN_SOCK_DIR, buf, cap);
}

int nvs_sock_path(char *buf, size_t cap)
{
	char dir[NVS_SOCK_PATH_LEN];
	if (nvs_sock_dir(dir, sizeof dir))
		return -1;
	return path_in(dir, NVS_SOCK_NAME, buf, cap);
}

int nvs_admin_sock_path(char *buf, size_t cap)
{
	char dir[NVS_SOCK_PATH_LEN];
	if (nvs_admin_sock_dir(dir, sizeof dir))
		return -1;
	return path_in(dir, NVS_ADMIN_SOCK_NAME, buf, cap);
}

int nvs_sock_connect_path(const char *path)
{
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (n < 0 || (size_t)n >= sizeof sa.sun_path)
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

int nvs_sock_connect(void)
{
	char path[NVS_SOCK_PATH_LEN];
	if (nvs_sock_path(path, sizeof path))
		return -ENAMETOOLONG;
	return nvs_sock_connect_path(path);
}
