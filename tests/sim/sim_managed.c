/*
 * Simulated GPU: the managed-memory API. Advice is checked and logged only;
 * a prefetch migrates pages (sim_residency.c) on its stream's time line and
 * is recorded in the shared prefetch log; range attributes report the last
 * prefetch target.
 */
#include <string.h>
#include <unistd.h>

#include "sim_memory.h"

static int managed_range(uint64_t p, size_t n)
{
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(p);
	int ok = a && a->kind == A_MANAGED && p + n <= a->base + a->size;
	pthread_mutex_unlock(&sim_mu);
	return ok;
}

CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
	SIM_REQUIRE_INIT();
	if (!managed_range(devPtr, count))
		return CUDA_ERROR_INVALID_VALUE;
	sim_log("call cuMemAdvise 0x%llx %zu advice=%d dev=%d", (unsigned long long)devPtr, count,
		(int)advice, device);
	return CUDA_SUCCESS;
}

CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
			CUmemLocation location)
{
	SIM_REQUIRE_INIT();
	if (!managed_range(devPtr, count))
		return CUDA_ERROR_INVALID_VALUE;
	sim_log("call cuMemAdvise_v2 0x%llx %zu advice=%d loc=%d/%d", (unsigned long long)devPtr,
		count, (int)advice, (int)location.type, location.id);
	return CUDA_SUCCESS;
}

/* dst_ord: device ordinal or CU_DEVICE_CPU. */
static CUresult prefetch(CUdeviceptr p, size_t n, int dst_ord, CUstream h, int pt)
{
	SIM_REQUIRE_INIT();
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	int dst = -1;
	if (dst_ord != CU_DEVICE_CPU) {
		dst = sim_phys(dst_ord);
		if (dst < 0)
			return CUDA_ERROR_INVALID_DEVICE;
	}
	if (!managed_range(p, n))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(p);
	if (a)
		a->last_prefetch = dst_ord;
	pthread_mutex_unlock(&sim_mu);
	sim_stream_admit(s);
	uint64_t start = sim_stream_ready(s), moved = 0;
	uint64_t end = sim_migrate(p, n, dst, start, 0, &moved);
	sim_stream_enqueue(s, end, 1);
	sim_lock();
	uint64_t seq = ++sim_sh->prefetch_seq;
	struct nvshare_sim_prefetch *r = &sim_sh->prefetch[(seq - 1) % SIM_PREFETCH_LOG];
	r->seq = seq;
	r->pid = (int32_t)getpid();
	r->dst = dst;
	r->ptr = p;
	r->bytes = n;
	r->moved = moved;
	r->start_ns = start;
	r->end_ns = end;
	sim_unlock();
	sim_log("call cuMemPrefetchAsync 0x%llx %zu dst=%d moved=%llu ns=%llu",
		(unsigned long long)p, n, dst, (unsigned long long)moved,
		(unsigned long long)(end - start));
	return CUDA_SUCCESS;
}

CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
	return prefetch(devPtr, count, dstDevice, hStream, 0);
}

CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
				 CUstream hStream)
{
	return prefetch(devPtr, count, dstDevice, hStream, 1);
}

static int loc_ordinal(CUmemLocation l)
{
	return l.type == CU_MEM_LOCATION_TYPE_DEVICE ? l.id : CU_DEVICE_CPU;
}

CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
			       unsigned int flags, CUstream hStream)
{
	return prefetch(devPtr, count, loc_ordinal(location), hStream, 0);
}

CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
				    unsigned int flags, CUstream hStream)
{
	return prefetch(devPtr, count, loc_ordinal(location), hStream, 1);
}

/* ---- discard (CUDA 13): the contents of a range are dropped ----
 * cuMemDiscardBatchAsync gives the pages up without writing them back (the
 * range then reads as zeros here; indeterminate on a real GPU, and a kernel
 * that reads a discarded page before anything wrote or prefetched it is
 * counted as a stray access). cuMemDiscardAndPrefetchBatchAsync also places
 * the pages on the target GPU, moving nothing. Both need a stream other
 * than the legacy default one, as the driver says. Stream time: none. */
static CUresult discard_batch(CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *locs,
			      size_t *loc_idx, size_t nlocs, CUstream h, int pt)
{
	SIM_REQUIRE_INIT();
	if (!dptrs || !sizes || !count || (!pt && (h == NULL || h == CU_STREAM_LEGACY)))
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	if (locs && (!loc_idx || !nlocs || nlocs > count || loc_idx[0] != 0))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++)
		if (!managed_range(dptrs[i], sizes[i]))
			return CUDA_ERROR_INVALID_VALUE;
	size_t li = 0;
	for (size_t i = 0; i < count; i++) {
		pthread_mutex_lock(&sim_mu);
		struct sim_alloc *a = sim_alloc_find_locked(dptrs[i]);
		if (a)
			sim_discard_locked(a, dptrs[i], sizes[i]);
		pthread_mutex_unlock(&sim_mu);
		if (!locs)
			continue;
		while (li + 1 < nlocs && loc_idx[li + 1] <= i)
			li++;
		int dst = locs[li].type == CU_MEM_LOCATION_TYPE_DEVICE ? sim_phys(locs[li].id) : -1;
		if (locs[li].type == CU_MEM_LOCATION_TYPE_DEVICE && dst < 0)
			return CUDA_ERROR_INVALID_DEVICE;
		sim_migrate(dptrs[i], sizes[i], dst, sim_stream_ready(s), 2, NULL);
	}
	sim_log("call %s count=%zu",
		locs ? "cuMemDiscardAndPrefetchBatchAsync" : "cuMemDiscardBatchAsync", count);
	return CUDA_SUCCESS;
}

CUresult cuMemDiscardBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
				unsigned long long flags, CUstream hStream)
{
	return flags ? CUDA_ERROR_INVALID_VALUE
		     : discard_batch(dptrs, sizes, count, NULL, NULL, 0, hStream, 0);
}

CUresult cuMemDiscardBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
				     unsigned long long flags, CUstream hStream)
{
	return flags ? CUDA_ERROR_INVALID_VALUE
		     : discard_batch(dptrs, sizes, count, NULL, NULL, 0, hStream, 1);
}

CUresult cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
					   CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs,
					   size_t numPrefetchLocs, unsigned long long flags,
					   CUstream hStream)
{
	if (flags || !prefetchLocs)
		return CUDA_ERROR_INVALID_VALUE;
	return discard_batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs,
			     hStream, 0);
}

CUresult cuMemDiscardAndPrefetchBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
						CUmemLocation *prefetchLocs,
						size_t *prefetchLocIdxs, size_t numPrefetchLocs,
						unsigned long long flags, CUstream hStream)
{
	if (flags || !prefetchLocs)
		return CUDA_ERROR_INVALID_VALUE;
	return discard_batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs,
			     hStream, 1);
}

CUresult cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
				CUdeviceptr devPtr, size_t count)
{
	SIM_REQUIRE_INIT();
	if (!data || !managed_range(devPtr, count))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(devPtr);
	int lp = a->last_prefetch == -2 ? CU_DEVICE_INVALID : a->last_prefetch;
	pthread_mutex_unlock(&sim_mu);
	switch (attribute) {
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
		*(int *)data = lp;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
		*(int *)data = CU_DEVICE_INVALID;
		break;
	default:
		memset(data, 0, dataSize);
	}
	return CUDA_SUCCESS;
}

CUresult cuMemRangeGetAttributes(void **data, size_t *dataSizes, CUmem_range_attribute *attributes,
				 size_t numAttributes, CUdeviceptr devPtr, size_t count)
{
	for (size_t i = 0; i < numAttributes; i++) {
		CUresult r =
		    cuMemRangeGetAttribute(data[i], dataSizes[i], attributes[i], devPtr, count);
		if (r)
			return r;
	}
	return CUDA_SUCCESS;
}
