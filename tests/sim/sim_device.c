/*
 * Simulated GPU: initialisation, devices, contexts, errors.
 *
 * Device ordinals honour CUDA_VISIBLE_DEVICES (indices or UUIDs, as the real
 * driver does in cuInit), so nvshare tests can hide GPUs; everything shared
 * (stats, NVML, the state file) uses physical indices. Contexts are plain
 * structs; the current-context stack is per thread.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_internal.h"

static atomic_int sim_init_done;
static int nvis;	      /* visible devices */
static int vis[SIM_MAX_GPUS]; /* ordinal -> physical */

#define TLS_STACK 32
static __thread struct sim_ctx *ctx_stack[TLS_STACK];
static __thread int ctx_depth;

static struct sim_ctx primary[SIM_MAX_GPUS];
static int dev_ctx_count[SIM_MAX_GPUS]; /* live contexts per physical GPU */

int sim_initialized(void)
{
	return atomic_load(&sim_init_done);
}

/* CUDA_VISIBLE_DEVICES: comma list of indices or (prefixes of) UUIDs; the
 * list stops at the first entry that names no device, as with the driver. */
static void parse_visible(void)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	nvis = 0;
	if (!v) {
		for (uint32_t i = 0; i < sim_sh->ngpus; i++)
			vis[nvis++] = (int)i;
		return;
	}
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", v);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t && nvis < SIM_MAX_GPUS;
	     t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		int phys = -1;
		if (strncmp(t, "GPU-", 4) == 0) {
			for (uint32_t i = 0; i < sim_sh->ngpus; i++)
				if (strncmp(sim_sh->gpu[i].uuid, t, strlen(t)) == 0)
					phys = (int)i;
		} else {
			char *end;
			long n = strtol(t, &end, 10);
			if (end != t && *end == 0 && n >= 0 && n < (long)sim_sh->ngpus)
				phys = (int)n;
		}
		if (phys < 0)
			break;
		vis[nvis++] = phys;
	}
}

CUresult cuInit(unsigned int Flags)
{
	sim_state_init();
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	if (!sim_initialized()) {
		parse_visible();
		atomic_store(&sim_init_done, 1);
	}
	pthread_mutex_unlock(&sim_mu);
	sim_log("call cuInit flags=%u -> 0", Flags);
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = SIM_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

int sim_dev_valid(CUdevice d)
{
	return sim_initialized() && d >= 0 && d < nvis;
}

/* Ordinal -> physical index, -1 if invalid. */
int sim_phys(CUdevice d)
{
	return sim_dev_valid(d) ? vis[d] : -1;
}

CUdevice sim_ordinal(int phys)
{
	for (int i = 0; i < nvis; i++)
		if (vis[i] == phys)
			return i;
	return -1;
}

#define DEV_OR_FAIL(ord, phys)                                                                     \
	SIM_REQUIRE_INIT();                                                                        \
	int phys = sim_phys(ord);                                                                  \
	if (phys < 0)                                                                              \
	return CUDA_ERROR_INVALID_DEVICE

CUresult cuDeviceGetCount(int *count)
{
	SIM_REQUIRE_INIT();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = nvis;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	SIM_REQUIRE_INIT();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= nvis)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	DEV_OR_FAIL(dev, p);
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "%s", sim_sh->gpu[p].name);
	return CUDA_SUCCESS;
}

/* "GPU-5e1f0000-0000-4000-8000-000000000000" -> 16 bytes. */
static void uuid_bytes(const char *s, unsigned char out[16])
{
	memset(out, 0, 16);
	if (strncmp(s, "GPU-", 4) == 0)
		s += 4;
	int n = 0;
	for (; *s && n < 32; s++) {
		int v;
		if (*s >= '0' && *s <= '9')
			v = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			v = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			v = *s - 'A' + 10;
		else
			continue;
		out[n / 2] |= (unsigned char)(n % 2 ? v : v << 4);
		n++;
	}
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	DEV_OR_FAIL(dev, p);
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	uuid_bytes(sim_sh->gpu[p].uuid, (unsigned char *)uuid->bytes);
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	return cuDeviceGetUuid(uuid, dev);
}

CUresult cuDeviceGetLuid(char *luid, unsigned int *mask, CUdevice dev)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	DEV_OR_FAIL(dev, p);
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = sim_sh->gpu[p].total;
	return CUDA_SUCCESS;
}

static int attr_value(CUdevice_attribute a, int phys)
{
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
		return 1024;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
		return 1024;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
		return 1024;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
		return 64;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
		return 2147483647;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
		return 65535;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
		return 65535;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
		return 49152;
	case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
		return 65536;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
		return 32;
	case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
		return 2147483647;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
		return 65536;
	case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
		return 1980000;
	case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
		return 512;
	case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
		return 1;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		return 132;
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
		return 1;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH:
		return 131072;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH:
		return 131072;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT:
		return 65536;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH:
		return 16384;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT:
		return 16384;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH:
		return 16384;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH:
		return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT:
		return 32768;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS:
		return 2048;
	case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT:
		return 512;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
		return 1;
	case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
		return 0x18 + phys;
	case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
		return 0;
	case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
		return 0;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
		return 2619000;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
		return 6144;
	case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
		return 52428800;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
		return 2048;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
		return 3;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
		return 1;
	case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
		return 32;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH:
		return 268435456;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH:
		return 131072;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT:
		return 65000;
	case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH:
		return 2097120;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		return 9;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		return 0;
	case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
		return 233472;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
		return 65536;
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
		return 1;
	case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
		return phys;
	case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
		return 0;
	case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO:
		return 2;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
		return 1;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
		return 1;
	case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
		return 1;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
		return 232448;
	case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES:
		return 0;
	case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
		return 32;
	case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
		return 32505856;
	case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE:
		return 134213632;
	case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
		return 1024;
	case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
		return 1;
	case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
		return 1;
	case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
		return 1;
	case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR:
		return 1;
	case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT:
		return 4;
	case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED:
		return 1;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS:
		return 1;
	case CU_DEVICE_ATTRIBUTE_NUMA_ID:
		return -1;
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
		return 0;
	case CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID:
		return 0x233510de;
	case CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID:
		return 0x18a810de;
	default:
		return 0;
	}
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	DEV_OR_FAIL(dev, p);
	if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	*pi = attr_value(attrib, p);
	return CUDA_SUCCESS;
}

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
	DEV_OR_FAIL(dev, p);
	(void)p;
	if (!major || !minor)
		return CUDA_ERROR_INVALID_VALUE;
	*major = 9;
	*minor = 0;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetProperties(CUdevprop *prop, CUdevice dev)
{
	DEV_OR_FAIL(dev, p);
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	prop->maxThreadsPerBlock = 1024;
	prop->maxThreadsDim[0] = 1024;
	prop->maxThreadsDim[1] = 1024;
	prop->maxThreadsDim[2] = 64;
	prop->maxGridSize[0] = 2147483647;
	prop->maxGridSize[1] = 65535;
	prop->maxGridSize[2] = 65535;
	prop->sharedMemPerBlock = 49152;
	prop->totalConstantMemory = 65536;
	prop->SIMDWidth = 32;
	prop->memPitch = 2147483647;
	prop->regsPerBlock = 65536;
	prop->clockRate = attr_value(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, p);
	prop->textureAlign = 512;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	DEV_OR_FAIL(dev, p);
	if (!pciBusId || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(pciBusId, (size_t)len, "0000:%02X:00.0", 0x18 + p);
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
	SIM_REQUIRE_INIT();
	if (!dev || !pciBusId)
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < nvis; i++) {
		char b[32];
		snprintf(b, sizeof(b), "0000:%02X:00.0", 0x18 + vis[i]);
		if (strcasecmp(b, pciBusId) == 0 || strcasecmp(b + 5, pciBusId) == 0) {
			*dev = i;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	DEV_OR_FAIL(dev, p);
	(void)p;
	if (!canAccessPeer || !sim_dev_valid(peerDev))
		return CUDA_ERROR_INVALID_DEVICE;
	*canAccessPeer = dev != peerDev;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice src,
				 CUdevice dst)
{
	SIM_REQUIRE_INIT();
	if (!value || !sim_dev_valid(src) || !sim_dev_valid(dst) || src == dst)
		return CUDA_ERROR_INVALID_DEVICE;
	*value = attrib == CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK ? 0 : 1;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetExecAffinitySupport(int *pi, CUexecAffinityType type, CUdevice dev)
{
	DEV_OR_FAIL(dev, p);
	(void)p;
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	*pi = 0;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetTexture1DLinearMaxWidth(size_t *maxWidth, CUarray_format format,
					    unsigned numChannels, CUdevice dev)
{
	DEV_OR_FAIL(dev, p);
	(void)p;
	if (!maxWidth)
		return CUDA_ERROR_INVALID_VALUE;
	*maxWidth = 268435456;
	return CUDA_SUCCESS;
}

/* ---- contexts ---- */

struct sim_ctx *sim_ctx_check(CUcontext c)
{
	struct sim_ctx *x = (struct sim_ctx *)c;
	return x && x->magic == SIM_CTX_MAGIC && x->active ? x : NULL;
}

struct sim_ctx *sim_ctx_current(void)
{
	return ctx_depth > 0 ? sim_ctx_check((CUcontext)ctx_stack[ctx_depth - 1]) : NULL;
}

/* The process table says which GPUs this process has a context on (NVML's
 * process list). */
static void ctx_opened(int phys)
{
	pthread_mutex_lock(&sim_mu);
	int first = dev_ctx_count[phys]++ == 0;
	pthread_mutex_unlock(&sim_mu);
	if (first) {
		sim_lock();
		sim_self_locked()->ctx_mask |= 1u << phys;
		sim_unlock();
	}
}

static void ctx_closed(int phys)
{
	pthread_mutex_lock(&sim_mu);
	int last = dev_ctx_count[phys] > 0 && --dev_ctx_count[phys] == 0;
	pthread_mutex_unlock(&sim_mu);
	if (last) {
		sim_lock();
		sim_self_locked()->ctx_mask &= ~(1u << phys);
		sim_unlock();
	}
}

static CUresult ctx_new(CUcontext *pctx, unsigned flags, CUdevice dev)
{
	DEV_OR_FAIL(dev, p);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c->magic = SIM_CTX_MAGIC;
	c->dev = p;
	c->flags = flags;
	c->active = 1;
	sim_keep(c);
	ctx_opened(p);
	if (ctx_depth < TLS_STACK)
		ctx_stack[ctx_depth++] = c;
	*pctx = (CUcontext)c;
	sim_log("call cuCtxCreate dev=%d -> %p", dev, (void *)c);
	return CUDA_SUCCESS;
}

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_new(pctx, flags, dev);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_new(pctx, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
			unsigned int flags, CUdevice dev)
{
	return ctx_new(pctx, flags, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
			CUdevice dev)
{
	return ctx_new(pctx, flags, dev);
}

/* Removes c from this thread's stack (other threads keep a dangling entry
 * that sim_ctx_check() rejects: destroyed contexts are never freed). */
static void unstack(struct sim_ctx *c)
{
	int j = 0;
	for (int i = 0; i < ctx_depth; i++)
		if (ctx_stack[i] != c)
			ctx_stack[j++] = ctx_stack[i];
	ctx_depth = j;
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	SIM_REQUIRE_INIT();
	struct sim_ctx *c = sim_ctx_check(ctx);
	if (!c || c->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	uint64_t t = 0;
	sim_ctx_tail_all(c, &t);
	sim_sleep_until(t);
	c->active = 0;
	unstack(c);
	sim_streams_forget_ctx(c);
	ctx_closed(c->dev);
	return CUDA_SUCCESS;
}

CUresult cuCtxDestroy(CUcontext ctx)
{
	return cuCtxDestroy_v2(ctx);
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	SIM_REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = (CUcontext)sim_ctx_current();
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	SIM_REQUIRE_INIT();
	if (!ctx) {
		if (ctx_depth > 0)
			ctx_depth--;
		return CUDA_SUCCESS;
	}
	struct sim_ctx *c = sim_ctx_check(ctx);
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (ctx_depth == 0)
		ctx_depth = 1;
	ctx_stack[ctx_depth - 1] = c;
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	SIM_REQUIRE_INIT();
	struct sim_ctx *c = sim_ctx_check(ctx);
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (ctx_depth >= TLS_STACK)
		return CUDA_ERROR_INVALID_VALUE;
	ctx_stack[ctx_depth++] = c;
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
	return cuCtxPushCurrent_v2(ctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	SIM_REQUIRE_INIT();
	if (ctx_depth == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	struct sim_ctx *c = ctx_stack[--ctx_depth];
	if (pctx)
		*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *pctx)
{
	return cuCtxPopCurrent_v2(pctx);
}

static CUresult ctx_device(CUdevice *device, struct sim_ctx *c)
{
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	*device = sim_ordinal(c->dev);
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
	SIM_REQUIRE_INIT();
	return ctx_device(device, sim_ctx_current());
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
	SIM_REQUIRE_INIT();
	return ctx_device(device, ctx ? sim_ctx_check(ctx) : sim_ctx_current());
}

static CUresult ctx_sync(struct sim_ctx *c)
{
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	/* A device-wide sync during stream capture is illegal and breaks the
	 * capture, as on real GPUs (nvshare must not do it in launch paths). */
	if (sim_ctx_capture_violation(c))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	uint64_t t = 0;
	sim_ctx_tail_all(c, &t);
	sim_sleep_until(t);
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
	SIM_REQUIRE_INIT();
	return ctx_sync(sim_ctx_current());
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	SIM_REQUIRE_INIT();
	return ctx_sync(ctx ? sim_ctx_check(ctx) : sim_ctx_current());
}

CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
	SIM_REQUIRE_INIT();
	struct sim_ctx *c = ctx ? sim_ctx_check(ctx) : sim_ctx_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = 3020;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned int *flags)
{
	SIM_REQUIRE_INIT();
	struct sim_ctx *c = sim_ctx_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = c->flags;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetFlags(unsigned int flags)
{
	SIM_REQUIRE_INIT();
	struct sim_ctx *c = sim_ctx_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	c->flags = flags;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
	SIM_REQUIRE_INIT();
	struct sim_ctx *c = ctx ? sim_ctx_check(ctx) : sim_ctx_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!ctxId)
		return CUDA_ERROR_INVALID_VALUE;
	*ctxId = (unsigned long long)(uintptr_t)c;
	return CUDA_SUCCESS;
}

static size_t limits[0x10];

CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
	SIM_REQUIRE_INIT();
	if (!pvalue || (unsigned)limit >= 0x10)
		return CUDA_ERROR_INVALID_VALUE;
	static const size_t defaults[0x10] = {1024, 1048576, 8388608, 2, 2048, 64, 0};
	*pvalue = limits[limit] ? limits[limit] : defaults[limit];
	return CUDA_SUCCESS;
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
	SIM_REQUIRE_INIT();
	if ((unsigned)limit >= 0x10)
		return CUDA_ERROR_INVALID_VALUE;
	limits[limit] = value;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
	if (!pconfig)
		return CUDA_ERROR_INVALID_VALUE;
	*pconfig = CU_FUNC_CACHE_PREFER_NONE;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCacheConfig(CUfunc_cache config)
{
	return CUDA_SUCCESS;
}

CUresult cuCtxGetSharedMemConfig(CUsharedconfig *pConfig)
{
	if (!pConfig)
		return CUDA_ERROR_INVALID_VALUE;
	*pConfig = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetSharedMemConfig(CUsharedconfig config)
{
	return CUDA_SUCCESS;
}

CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	if (leastPriority)
		*leastPriority = 0;
	if (greatestPriority)
		*greatestPriority = -5;
	return CUDA_SUCCESS;
}

CUresult cuCtxResetPersistingL2Cache(void)
{
	return CUDA_SUCCESS;
}

CUresult cuCtxGetExecAffinity(CUexecAffinityParam *pExecAffinity, CUexecAffinityType type)
{
	return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
}

/* ---- primary contexts ---- */

static struct sim_ctx *prim(int phys)
{
	struct sim_ctx *c = &primary[phys];
	c->magic = SIM_CTX_MAGIC;
	c->dev = phys;
	c->primary = 1;
	return c;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	DEV_OR_FAIL(dev, p);
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_ctx *c = prim(p);
	int opened = c->refs++ == 0;
	c->active = 1;
	pthread_mutex_unlock(&sim_mu);
	if (opened)
		ctx_opened(p);
	*pctx = (CUcontext)c;
	sim_log("call cuDevicePrimaryCtxRetain dev=%d -> %p", dev, (void *)c);
	return CUDA_SUCCESS;
}

static CUresult prim_release(CUdevice dev, int reset)
{
	DEV_OR_FAIL(dev, p);
	pthread_mutex_lock(&sim_mu);
	struct sim_ctx *c = prim(p);
	int closed = 0;
	if (reset) {
		closed = c->refs > 0;
		c->refs = 0;
	} else if (c->refs > 0) {
		closed = --c->refs == 0;
	} else {
		pthread_mutex_unlock(&sim_mu);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	pthread_mutex_unlock(&sim_mu);
	if (closed) {
		uint64_t t = 0;
		sim_ctx_tail_all(c, &t);
		sim_sleep_until(t);
		/* Stays "active" so that threads that still have it current do
		 * not fail; real drivers keep the handle valid too. */
		ctx_closed(p);
	}
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	return prim_release(dev, 0);
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return prim_release(dev, 0);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	return prim_release(dev, 1);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	return prim_release(dev, 1);
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	DEV_OR_FAIL(dev, p);
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	*flags = primary[p].flags;
	*active = primary[p].refs > 0;
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	DEV_OR_FAIL(dev, p);
	pthread_mutex_lock(&sim_mu);
	primary[p].flags = flags;
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

/* ---- errors ---- */

struct err_name {
	int code;
	const char *name;
};
static const struct err_name err_names[] = {
#define SIM_ERR(name, code) {code, #name},
#include "sim_errors.h"
#undef SIM_ERR
};

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(err_names) / sizeof(err_names[0]); i++)
		if (err_names[i].code == (int)error) {
			*pStr = err_names[i].name;
			return CUDA_SUCCESS;
		}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* The description: the name without its prefix, lower case ("invalid
 * value"); static strings built once. */
CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	static char strs[sizeof(err_names) / sizeof(err_names[0])][64];
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(err_names) / sizeof(err_names[0]); i++) {
		if (err_names[i].code != (int)error)
			continue;
		pthread_mutex_lock(&sim_mu);
		if (!strs[i][0]) {
			const char *n = err_names[i].name;
			n += strncmp(n, "CUDA_ERROR_", 11) == 0 ? 11 : 5;
			size_t k = 0;
			for (; k < 63 && n[k]; k++)
				strs[i][k] = n[k] == '_' ? ' ' : (char)(n[k] | 0x20);
			strs[i][k] = 0;
			if (error == CUDA_SUCCESS)
				snprintf(strs[i], sizeof(strs[i]), "no error");
		}
		pthread_mutex_unlock(&sim_mu);
		*pStr = strs[i];
		return CUDA_SUCCESS;
	}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuFlushGPUDirectRDMAWrites(CUflushGPUDirectRDMAWritesTarget target,
				    CUflushGPUDirectRDMAWritesScope scope)
{
	return CUDA_SUCCESS;
}

CUresult cuProfilerStart(void)
{
	return CUDA_SUCCESS;
}

CUresult cuProfilerStop(void)
{
	return CUDA_SUCCESS;
}
