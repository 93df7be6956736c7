/*
 * evade_conn.so: an LD_PRELOAD shim that gives a GPU process which does NOT
 * load libnvshare an nvshare connection of its own, as a tenant hiding from
 * unmanaged-process detection would (issue 31 items 3 and 6;
 * tests/security/t_unmanaged_evasion.sh, t_claims_evidence.sh). At load it
 * connects to $NVSHARE_SOCK_DIR/scheduler.sock from the process itself (so
 * the scheduler sees its pid) and, by NVS_EVADE:
 *   hello   sends HELLO only
 *   attach  HELLO, then ATTACH_GPU of NVS_EVADE_UUID claiming
 *           NVS_EVADE_CLAIM bytes (default 0)
 * and never asks for the lock. A thread reads and drops what the scheduler
 * sends, so the connection stays open for the life of the process.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static size_t frame(unsigned char *b, uint16_t type, const unsigned char *p, uint32_t len)
{
	uint32_t magic = 0x4853564Eu, seq = 1;
	uint16_t ver = 1;
	memcpy(b, &magic, 4);
	memcpy(b + 4, &ver, 2);
	memcpy(b + 6, &type, 2);
	memcpy(b + 8, &len, 4);
	memcpy(b + 12, &seq, 4);
	memcpy(b + 16, p, len);
	return 16 + len;
}

static size_t put_str(unsigned char *p, const char *s)
{
	uint16_t n = (uint16_t)strlen(s);
	memcpy(p, &n, 2);
	memcpy(p + 2, s, n);
	return 2 + (size_t)n;
}

static void *drain(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char b[4096];
	while (read(fd, b, sizeof b) > 0)
		;
	return NULL;
}

__attribute__((constructor)) static void evade(void)
{
	const char *mode = getenv("NVS_EVADE");
	if (!mode || !*mode)
		return;
	const char *dir = getenv("NVSHARE_SOCK_DIR");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof a.sun_path, "%s/scheduler.sock",
		 dir && *dir ? dir : "/var/run/nvshare");
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
		fprintf(stderr, "evade_conn: cannot connect to %s\n", a.sun_path);
		return;
	}
	unsigned char p[256], b[512];
	uint32_t pid = (uint32_t)getpid(), flags = 0, core = 100;
	uint64_t mem = UINT64_MAX;
	memcpy(p, &pid, 4);
	memcpy(p + 4, &flags, 4);
	memcpy(p + 8, &core, 4);
	memcpy(p + 12, &mem, 8);
	size_t n = 20 + put_str(p + 20, "evader");
	size_t len = frame(b, 1, p, (uint32_t)n);
	if (!strcmp(mode, "attach")) {
		const char *u = getenv("NVS_EVADE_UUID"), *c = getenv("NVS_EVADE_CLAIM");
		uint32_t local = 0;
		uint64_t total = 16ull << 30, claim = c ? strtoull(c, NULL, 10) : 0;
		memcpy(p, &local, 4);
		memcpy(p + 4, &total, 8);
		memcpy(p + 12, &claim, 8);
		n = 20 + put_str(p + 20, u ? u : "");
		len += frame(b + len, 2, p, (uint32_t)n);
	}
	if (write(fd, b, len) != (ssize_t)len)
		fprintf(stderr, "evade_conn: short write\n");
	pthread_t t;
	if (!pthread_create(&t, NULL, drain, (void *)(intptr_t)fd))
		pthread_detach(t);
	fprintf(stderr, "evade_conn: %s sent (pid %u)\n", mode, pid);
}
