/*
 * A CUDA IPC exporter/importer pair (run by t_ipc.sh), as NVIDIA's
 * simpleIPC does it with the driver API. Linked with -lcuda against the
 * simulated GPU; run under LD_PRELOAD=libnvshare.so or natively.
 *
 *   ipc_probe export HANDLE DONE   cuMemAlloc 4 MiB, fill a pattern, export
 *                                  it (cuIpcGetMemHandle; on failure twice
 *                                  more), write the handle to HANDLE, wait
 *                                  for DONE, check the importer's write
 *   ipc_probe import HANDLE DONE   wait for HANDLE, open it, check the
 *                                  pattern, write a marker, close, touch DONE
 *
 * Prints key=value lines for the script: managed=, over_limit=,
 * pitch_managed=, async_managed= (cuMemAllocPitch, cuMemAllocAsync), export=,
 * import=, data=, peer_write=, close=. Waits are bounded (30 s).
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SIZE (4u << 20)
#define MARKER 0xfeedfaceu

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 7 + 1);
}

/* Waits until path exists (1) or 30 s passed (0). */
static int wait_file(const char *path)
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	for (int i = 0; i < 3000; i++) {
		if (access(path, F_OK) == 0)
			return 1;
		nanosleep(&ts, NULL);
	}
	return 0;
}

static int setup(void)
{
	CUdevice d;
	CUcontext c;
	return cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) ||
	       cuCtxSetCurrent(c);
}

static int do_export(const char *hpath, const char *done)
{
	CUdeviceptr p;
	if (cuMemAlloc(&p, SIZE) != CUDA_SUCCESS) {
		printf("alloc=failed\n");
		return 1;
	}
	unsigned managed = 0;
	cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p);
	printf("managed=%u\n", managed);
	unsigned char *buf = malloc(SIZE);
	if (!buf)
		return 1;
	for (size_t i = 0; i < SIZE; i++)
		buf[i] = pattern(i);
	cuMemcpyHtoD(p, buf, SIZE);
	/* Still limited: 4 MiB more than what a limit of 8 MiB leaves. */
	CUdeviceptr q;
	CUresult over = cuMemAlloc(&q, 8u << 20);
	printf("over_limit=%d\n", (int)over);
	if (over == CUDA_SUCCESS)
		cuMemFree(q);

	/* The other converted allocation calls follow the same setting. */
	CUdeviceptr pp = 0, pa = 0;
	size_t pitch = 0;
	unsigned pm = 9, am = 9;
	if (cuMemAllocPitch(&pp, &pitch, 1000, 16, 4) == CUDA_SUCCESS) {
		cuPointerGetAttribute(&pm, CU_POINTER_ATTRIBUTE_IS_MANAGED, pp);
		cuMemFree(pp);
	}
	if (cuMemAllocAsync(&pa, 1u << 20, 0) == CUDA_SUCCESS) {
		cuPointerGetAttribute(&am, CU_POINTER_ATTRIBUTE_IS_MANAGED, pa);
		cuMemFreeAsync(pa, 0);
		cuStreamSynchronize(0);
	}
	printf("pitch_managed=%u\nasync_managed=%u\n", pm, am);

	CUipcMemHandle h;
	CUresult r = cuIpcGetMemHandle(&h, p);
	printf("export=%d\n", (int)r);
	fflush(stdout);
	if (r != CUDA_SUCCESS) {
		/* A program retrying (one export per tensor): still one hint. */
		cuIpcGetMemHandle(&h, p);
		cuIpcGetMemHandle(&h, p + 4096);
		cuMemFree(p);
		return 0;
	}
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", hpath);
	FILE *f = fopen(tmp, "wb");
	if (!f || fwrite(&h, sizeof h, 1, f) != 1 || fclose(f) != 0 || rename(tmp, hpath) != 0)
		return 1;
	if (!wait_file(done)) {
		printf("peer=timeout\n");
		return 1;
	}
	unsigned v = 0;
	cuMemcpyDtoH(&v, p, sizeof v);
	printf("peer_write=%d\n", v == MARKER);
	printf("free=%d\n", (int)cuMemFree(p));
	free(buf);
	return 0;
}

static int do_import(const char *hpath, const char *done)
{
	if (!wait_file(hpath)) {
		printf("handle=timeout\n");
		return 1;
	}
	CUipcMemHandle h;
	FILE *f = fopen(hpath, "rb");
	if (!f || fread(&h, sizeof h, 1, f) != 1)
		return 1;
	fclose(f);
	CUdeviceptr p = 0;
	CUresult r = cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	printf("import=%d\n", (int)r);
	if (r == CUDA_SUCCESS) {
		unsigned char *buf = malloc(SIZE);
		int good = buf && cuMemcpyDtoH(buf, p, SIZE) == CUDA_SUCCESS;
		for (size_t i = 0; good && i < SIZE; i++)
			good = buf[i] == pattern(i);
		printf("data=%s\n", good ? "ok" : "bad");
		free(buf);
		unsigned v = MARKER;
		cuMemcpyHtoD(p, &v, sizeof v);
		printf("close=%d\n", (int)cuIpcCloseMemHandle(p));
	}
	fflush(stdout);
	FILE *d = fopen(done, "w");
	if (d)
		fclose(d);
	return r != CUDA_SUCCESS;
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "export") && strcmp(argv[1], "import"))) {
		fprintf(stderr, "usage: ipc_probe export|import HANDLE DONE\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (setup()) {
		printf("setup=failed\n");
		return 1;
	}
	return strcmp(argv[1], "export") ? do_import(argv[2], argv[3])
					 : do_export(argv[2], argv[3]);
}
