/*
 * slow_listen.so: an LD_PRELOAD shim for tests/reliability/t_sock_ready.sh.
 * listen() sleeps NVS_SLOW_LISTEN_MS (default 1000) before calling the real
 * one, widening the window between a socket's bind() and its listen() so a
 * test can see whether the socket path is visible to clients before it
 * accepts connections.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

int listen(int fd, int backlog)
{
	static int (*real_listen)(int, int);
	if (!real_listen)
		real_listen = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
	const char *e = getenv("NVS_SLOW_LISTEN_MS");
	long ms = e ? atol(e) : 1000;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
	return real_listen(fd, backlog);
}
