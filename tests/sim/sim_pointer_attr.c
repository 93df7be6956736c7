/*
 * Simulated GPU: pointer attributes, answered from the allocation that
 * holds the address.
 */
#include "sim_memory.h"

static CUresult attr_one(void *data, CUpointer_attribute attr, uint64_t p, struct sim_alloc *a)
{
	int managed = a->kind == A_MANAGED;
	int hostmem = a->kind == A_HOST || a->kind == A_HOSTREG;
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = (CUcontext)a->ctx;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned *)data = hostmem ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = p;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (!hostmem && !managed)
			return CUDA_ERROR_INVALID_VALUE;
		*(void **)data = DP(p);
		break;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(int *)data = 1;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = a->id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(int *)data = managed;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: {
		int d = a->dev >= 0 ? sim_ordinal(a->dev) : (a->ctx ? sim_ordinal(a->ctx->dev) : 0);
		*(int *)data = d;
		break;
	}
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*(int *)data = a->kind == A_DEVICE && !a->pool;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(void **)data = DP(a->base);
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = a->size;
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
		*(int *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(unsigned *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = (CUmemoryPool)a->pool;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*(size_t *)data = a->size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*(void **)data = DP(a->base);
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		*(unsigned long long *)data = a->id;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	SIM_REQUIRE_INIT();
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(ptr);
	CUresult r = a ? attr_one(data, attribute, ptr, a) : CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_unlock(&sim_mu);
	return r;
}

/* Unlike the single form, unknown pointers are not an error: attributes get
 * zero values (documented driver behaviour). */
CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
				void **data, CUdeviceptr ptr)
{
	SIM_REQUIRE_INIT();
	if (!attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(ptr);
	for (unsigned i = 0; i < numAttributes; i++) {
		if (!data[i])
			continue;
		if (!a || attr_one(data[i], attributes[i], ptr, a) != CUDA_SUCCESS) {
			switch (attributes[i]) {
			case CU_POINTER_ATTRIBUTE_CONTEXT:
			case CU_POINTER_ATTRIBUTE_HOST_POINTER:
			case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
			case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
			case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
				*(void **)data[i] = NULL;
				break;
			case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
			case CU_POINTER_ATTRIBUTE_BUFFER_ID:
			case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
			case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
			case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
			case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
				*(unsigned long long *)data[i] = 0;
				break;
			case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
				*(int *)data[i] = -2;
				break;
			default:
				*(unsigned *)data[i] = 0;
			}
		}
	}
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	SIM_REQUIRE_INIT();
	return sim_range_ok(ptr, 1) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
