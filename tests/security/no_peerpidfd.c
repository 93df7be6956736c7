/*
 * no_peerpidfd.so: an LD_PRELOAD shim for tests/security/t_identity.sh.
 * getsockopt(SOL_SOCKET, SO_PEERPIDFD) fails with ENOPROTOOPT, as on a
 * kernel older than 6.5, so the scheduler's fallback (SO_PEERCRED, an
 * immediate cgroup read, kill(pid, 0)) runs on any kernel.
 */
#include <dlfcn.h>
#include <errno.h>
#include <sys/socket.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	static int (*real)(int, int, int, void *, socklen_t *);
	if (level == SOL_SOCKET && name == SO_PEERPIDFD) {
		errno = ENOPROTOOPT;
		return -1;
	}
	if (!real)
		real = (int (*)(int, int, int, void *, socklen_t *))dlsym(RTLD_NEXT, "getsockopt");
	return real(fd, level, name, val, len);
}
