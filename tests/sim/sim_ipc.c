/*
 * Simulated GPU: CUDA IPC memory handles (cuIpcGetMemHandle,
 * cuIpcOpenMemHandle[_v2], cuIpcCloseMemHandle), so that tests can run an
 * exporter/importer pair of processes the way CUDA IPC programs do
 * (NVIDIA's simpleIPC, torch.multiprocessing).
 *
 * As the real driver: only ordinary device memory (cuMemAlloc*) can be
 * exported; managed, host, pool and graph memory answer
 * CUDA_ERROR_INVALID_VALUE (the failure a program under nvshare meets when
 * its cuMemAlloc became managed memory). The importer sees the exporter's
 * live bytes: the first export moves the allocation's backing, in place and
 * with its content, from anonymous memory to a file in NVSHARE_SIM_STATE_DIR
 * (shared mapping at the same address); the handle names that file and the
 * importer maps it. Imported memory costs no GPU memory (the exporter's
 * allocation is counted), is not freed by cuMemFree, only closed; the file
 * goes when the exporter frees the allocation. Without a state directory
 * there is nothing both processes can reach: CUDA_ERROR_NOT_SUPPORTED.
 * Simplifications: the copy at the first export is not atomic with respect
 * to the exporter's other threads; an importer in the exporting process is
 * refused with CUDA_ERROR_INVALID_CONTEXT (the real driver refuses it too).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim_memory.h"

#define IPC_MAGIC 0x43504953u /* "SIPC" */

/* The 64 opaque bytes of a CUipcMemHandle, as this driver fills them. */
struct ipc_handle {
	uint32_t magic;
	int32_t pid; /* exporter */
	uint64_t size;
	int32_t dev; /* physical GPU */
	char name[44];
};
_Static_assert(sizeof(struct ipc_handle) <= sizeof(CUipcMemHandle), "IPC handle too big");

static const char *state_dir(void)
{
	const char *d = getenv("NVSHARE_SIM_STATE_DIR");
	return d && *d ? d : NULL;
}

/* Moves a's bytes into a shared file mapped at the same address. sim_mu
 * held. Returns 0 or a CUresult. */
static CUresult make_shared_locked(struct sim_alloc *a, const char *dir)
{
	char name[44], path[4096];
	snprintf(name, sizeof name, "ipc-%d-%llx", (int)getpid(),
		 (unsigned long long)(a->id & 0xffffffffu));
	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
		return CUDA_ERROR_NOT_SUPPORTED;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return CUDA_ERROR_OPERATING_SYSTEM;
	const char *src = a->map;
	size_t done = 0;
	while (done < a->maplen) {
		ssize_t w = write(fd, src + done, a->maplen - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	void *m = done == a->maplen ? mmap(a->map, a->maplen, PROT_READ | PROT_WRITE,
					   MAP_SHARED | MAP_FIXED, fd, 0)
				    : MAP_FAILED;
	close(fd);
	if (m == MAP_FAILED) {
		unlink(path);
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	a->ipc_path = strdup(path);
	return CUDA_SUCCESS;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	SIM_REQUIRE_INIT();
	if (!pHandle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(dptr);
	if (!a || a->kind != A_DEVICE || a->pool || a->graph || a->ipc_imported) {
		int kind = a ? a->kind : 0;
		pthread_mutex_unlock(&sim_mu);
		sim_log("call cuIpcGetMemHandle 0x%llx kind=%d -> CUDA_ERROR_INVALID_VALUE",
			(unsigned long long)dptr, kind);
		return CUDA_ERROR_INVALID_VALUE;
	}
	const char *dir = state_dir();
	CUresult r = CUDA_SUCCESS;
	if (!a->ipc_path)
		r = dir ? make_shared_locked(a, dir) : CUDA_ERROR_NOT_SUPPORTED;
	if (r == CUDA_SUCCESS) {
		struct ipc_handle h = {
		    .magic = IPC_MAGIC, .pid = (int32_t)getpid(), .size = a->size, .dev = a->dev};
		const char *slash = strrchr(a->ipc_path, '/');
		snprintf(h.name, sizeof h.name, "%s", slash ? slash + 1 : a->ipc_path);
		memset(pHandle, 0, sizeof *pHandle);
		memcpy(pHandle, &h, sizeof h);
	}
	pthread_mutex_unlock(&sim_mu);
	sim_log("call cuIpcGetMemHandle 0x%llx -> %d", (unsigned long long)dptr, (int)r);
	return r;
}

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
	SIM_NEED_CTX(d);
	struct ipc_handle h;
	memcpy(&h, &handle, sizeof h);
	if (!pdptr || (flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) || h.magic != IPC_MAGIC ||
	    !memchr(h.name, '\0', sizeof h.name) || strchr(h.name, '/'))
		return CUDA_ERROR_INVALID_VALUE;
	if (h.pid == (int32_t)getpid())
		return CUDA_ERROR_INVALID_CONTEXT;
	const char *dir = state_dir();
	char path[4096];
	if (!dir || (size_t)snprintf(path, sizeof path, "%s/%s", dir, h.name) >= sizeof path)
		return CUDA_ERROR_INVALID_HANDLE;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_INVALID_HANDLE; /* freed by the exporter */
	struct stat st;
	void *m = MAP_FAILED;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && (uint64_t)st.st_size >= h.size)
		m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	struct sim_alloc *a = m == MAP_FAILED ? NULL : calloc(1, sizeof(*a));
	if (!a) {
		if (m != MAP_FAILED)
			munmap(m, (size_t)st.st_size);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	a->base = (uint64_t)(uintptr_t)m;
	a->size = h.size;
	a->kind = A_DEVICE;
	a->dev = h.dev >= 0 ? h.dev : d;
	a->map = m;
	a->maplen = (size_t)st.st_size;
	a->ctx = sim_ctx_current();
	a->last_prefetch = -2;
	a->ipc_imported = 1;
	pthread_mutex_lock(&sim_mu);
	int r = sim_alloc_insert_locked(a);
	pthread_mutex_unlock(&sim_mu);
	if (r != 0) {
		munmap(m, a->maplen);
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*pdptr = a->base;
	sim_log("call cuIpcOpenMemHandle %s -> 0x%llx", h.name, (unsigned long long)a->base);
	return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
	return ipc_open(pdptr, handle, Flags);
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
	return ipc_open(pdptr, handle, Flags);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	SIM_REQUIRE_INIT();
	return sim_free_kind(dptr, 1u << A_DEVICE | SIM_FREE_IPC);
}
