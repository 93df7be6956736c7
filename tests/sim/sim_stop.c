/*
 * sim_stop: SIGSTOP a process that uses the simulated GPU, at a moment when
 * it does not hold the simulator's cross-process state lock.
 *
 *   sim_stop [--timeout-ms MS] PID
 *
 * Why: every simulated driver call takes one robust mutex in the shared
 * state file (sim_state.c). A process stopped inside it stops every other
 * process on the same state, a thing no real GPU does: tests that stop a
 * lock holder (or the scheduler, whose NVML calls take it too) then measure
 * the simulator, not nvshare. So: stop the process, wait until all its
 * threads are stopped, and probe the lock; if it stays held (the stopped
 * process has it), continue the process and try again.
 *
 * Exit 0 once PID is stopped outside the lock ("stopped PID after N tries"
 * on stdout); 1 if it kept the lock until the timeout (default 10 s; PID is
 * left running) or is gone; 2 for bad arguments.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim_api.h"

static long parse_pos(const char *what, const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0) {
		fprintf(stderr, "sim_stop: bad %s '%s' (a positive integer)\n", what, s);
		exit(2);
	}
	return v;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* 1: every thread of pid is stopped; 0: one is not (yet); -1: pid is gone
 * or a zombie. The state is the field after the last ')' of .../stat. */
static int all_stopped(long pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int res = 1, seen = 0;
	struct dirent *e;
	while ((e = readdir(d)) && res == 1) {
		if (e->d_name[0] == '.')
			continue;
		char sp[400], buf[512];
		snprintf(sp, sizeof(sp), "%s/%s/stat", path, e->d_name);
		FILE *f = fopen(sp, "r");
		if (!f)
			continue; /* the thread exited meanwhile */
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		const char *p = strrchr(buf, ')');
		if (!p || p[1] != ' ')
			continue;
		seen = 1;
		char st = p[2];
		if (st == 'Z' || st == 'X')
			res = -1;
		else if (st != 'T' && st != 't')
			res = 0;
	}
	closedir(d);
	return seen ? res : -1;
}

int main(int argc, char **argv)
{
	long timeout_ms = 10000;
	int i = 1;
	if (i + 1 < argc && !strcmp(argv[i], "--timeout-ms")) {
		timeout_ms = parse_pos("--timeout-ms", argv[i + 1]);
		i += 2;
	}
	if (i + 1 != argc) {
		fprintf(stderr, "usage: sim_stop [--timeout-ms MS] PID\n");
		return 2;
	}
	long pid = parse_pos("PID", argv[i]);
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	for (int tries = 1;; tries++) {
		if (kill((pid_t)pid, SIGSTOP)) {
			fprintf(stderr, "sim_stop: cannot stop %ld: %s\n", pid, strerror(errno));
			return 1;
		}
		int s;
		while ((s = all_stopped(pid)) == 0 && now_ms() < deadline)
			sleep_ms(1);
		if (s < 0) {
			fprintf(stderr, "sim_stop: process %ld is gone\n", pid);
			return 1;
		}
		/* All its threads stopped: if the lock is taken now and stays
		 * taken, the holder is most likely pid (others hold it for
		 * microseconds), so let pid run out of it. */
		if (s == 1 && nvshareSimLockFree(100)) {
			printf("stopped %ld after %d tries\n", pid, tries);
			return 0;
		}
		kill((pid_t)pid, SIGCONT);
		if (now_ms() >= deadline) {
			fprintf(stderr,
				"sim_stop: %ld still held the simulated GPU's lock after %d tries "
				"(%ld ms); left running\n",
				pid, tries, timeout_ms);
			return 1;
		}
		sleep_ms(1 + tries % 5);
	}
}
