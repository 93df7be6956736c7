/*
 * Simulated GPU: copies and memsets.
 * Bytes move at call time. Synchronous forms first wait for the (legacy or
 * per-thread) default stream, as the real ones do; asynchronous forms return
 * at once. Copies take no simulated time.
 */
#include <string.h>

#include "sim_memory.h"

static CUresult sync_default(int pt)
{
	struct sim_stream *s = sim_stream_get(NULL, pt);
	if (!s)
		return CUDA_ERROR_INVALID_CONTEXT;
	sim_sleep_until(sim_stream_ready(s));
	return CUDA_SUCCESS;
}

static CUresult async_check(CUstream h, int pt)
{
	return sim_stream_get(h, pt) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult copy_bytes(uint64_t dst, int dst_dev, uint64_t src, int src_dev, size_t n)
{
	if (!n)
		return CUDA_SUCCESS;
	if ((dst_dev && !sim_range_ok(dst, n)) || (src_dev && !sim_range_ok(src, n)))
		return CUDA_ERROR_INVALID_VALUE;
	if (!dst || !src)
		return CUDA_ERROR_INVALID_VALUE;
	/* Device sides: an unmapped VMM range is an illegal address (never a
	 * fault in the simulator's process); reading discarded managed pages
	 * is a stray access, writing them defines them again. */
	CUresult r = src_dev ? sim_gpu_access(src, n, -1, 0) : CUDA_SUCCESS;
	if (r == CUDA_SUCCESS && dst_dev)
		r = sim_gpu_access(dst, n, -1, 1);
	if (r != CUDA_SUCCESS)
		return r;
	memmove(DP(dst), DP(src), n);
	return CUDA_SUCCESS;
}

/* Sync (pt: 0 legacy, 1 per-thread) or async (stream h) prologue. */
#define SYNC_PRE(pt)                                                                               \
	SIM_REQUIRE_INIT();                                                                        \
	{                                                                                          \
		CUresult r_ = sync_default(pt);                                                    \
		if (r_ != CUDA_SUCCESS)                                                            \
			return r_;                                                                 \
	}
#define ASYNC_PRE(h, pt)                                                                           \
	SIM_REQUIRE_INIT();                                                                        \
	{                                                                                          \
		CUresult r_ = async_check(h, pt);                                                  \
		if (r_ != CUDA_SUCCESS)                                                            \
			return r_;                                                                 \
	}

#define COPY_FUNCS(name, dsttype, dexpr, srctype, sexpr, dflag, sflag)                             \
	CUresult name##_v2(dsttype dst, srctype src, size_t n)                                     \
	{                                                                                          \
		SYNC_PRE(0);                                                                       \
		return copy_bytes(dexpr, dflag, sexpr, sflag, n);                                  \
	}                                                                                          \
	CUresult name##_v2_ptds(dsttype dst, srctype src, size_t n)                                \
	{                                                                                          \
		SYNC_PRE(1);                                                                       \
		return copy_bytes(dexpr, dflag, sexpr, sflag, n);                                  \
	}                                                                                          \
	CUresult name##Async_v2(dsttype dst, srctype src, size_t n, CUstream h)                    \
	{                                                                                          \
		ASYNC_PRE(h, 0);                                                                   \
		return copy_bytes(dexpr, dflag, sexpr, sflag, n);                                  \
	}                                                                                          \
	CUresult name##Async_v2_ptsz(dsttype dst, srctype src, size_t n, CUstream h)               \
	{                                                                                          \
		ASYNC_PRE(h, 1);                                                                   \
		return copy_bytes(dexpr, dflag, sexpr, sflag, n);                                  \
	}

COPY_FUNCS(cuMemcpyHtoD, CUdeviceptr, dst, const void *, (uint64_t)(uintptr_t)src, 1, 0)
COPY_FUNCS(cuMemcpyDtoH, void *, (uint64_t)(uintptr_t)dst, CUdeviceptr, src, 0, 1)
COPY_FUNCS(cuMemcpyDtoD, CUdeviceptr, dst, CUdeviceptr, src, 1, 1)

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	SYNC_PRE(0);
	return copy_bytes(dst, 0, src, 0, n);
}

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	SYNC_PRE(1);
	return copy_bytes(dst, 0, src, 0, n);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h)
{
	ASYNC_PRE(h, 0);
	return copy_bytes(dst, 0, src, 0, n);
}

CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h)
{
	ASYNC_PRE(h, 1);
	return copy_bytes(dst, 0, src, 0, n);
}

CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n)
{
	SYNC_PRE(0);
	return copy_bytes(dst, 1, src, 1, n);
}

CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n)
{
	SYNC_PRE(1);
	return copy_bytes(dst, 1, src, 1, n);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n,
			   CUstream h)
{
	ASYNC_PRE(h, 0);
	return copy_bytes(dst, 1, src, 1, n);
}

CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc,
				size_t n, CUstream h)
{
	ASYNC_PRE(h, 1);
	return copy_bytes(dst, 1, src, 1, n);
}

/* Array <-> linear copies. */
static CUresult array_span(CUarray h, size_t off, size_t n, char **p)
{
	struct sim_array *a = sim_array_check(h);
	if (!a || off + n > a->bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*p = a->data + off;
	return CUDA_SUCCESS;
}

#define ARRAY_COPY(name, pre, params, body)                                                        \
	CUresult name params                                                                       \
	{                                                                                          \
		pre;                                                                               \
		char *ap;                                                                          \
		body                                                                               \
	}

ARRAY_COPY(cuMemcpyHtoA_v2, SYNC_PRE(0), (CUarray dstArray, size_t off, const void *src, size_t n),
	   CUresult r = array_span(dstArray, off, n, &ap);
	   if (r) return r; memcpy(ap, src, n); return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyHtoA_v2_ptds, SYNC_PRE(1),
	   (CUarray dstArray, size_t off, const void *src, size_t n),
	   CUresult r = array_span(dstArray, off, n, &ap);
	   if (r) return r; memcpy(ap, src, n); return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyAtoH_v2, SYNC_PRE(0), (void *dst, CUarray srcArray, size_t off, size_t n),
	   CUresult r = array_span(srcArray, off, n, &ap);
	   if (r) return r; memcpy(dst, ap, n); return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyAtoH_v2_ptds, SYNC_PRE(1), (void *dst, CUarray srcArray, size_t off, size_t n),
	   CUresult r = array_span(srcArray, off, n, &ap);
	   if (r) return r; memcpy(dst, ap, n); return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyHtoAAsync_v2, ASYNC_PRE(h, 0),
	   (CUarray dstArray, size_t off, const void *src, size_t n, CUstream h),
	   CUresult r = array_span(dstArray, off, n, &ap);
	   if (r) return r; memcpy(ap, src, n); return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyHtoAAsync_v2_ptsz, ASYNC_PRE(h, 1),
	   (CUarray dstArray, size_t off, const void *src, size_t n, CUstream h),
	   CUresult r = array_span(dstArray, off, n, &ap);
	   if (r) return r; memcpy(ap, src, n); return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyAtoHAsync_v2, ASYNC_PRE(h, 0),
	   (void *dst, CUarray srcArray, size_t off, size_t n, CUstream h),
	   CUresult r = array_span(srcArray, off, n, &ap);
	   if (r) return r; memcpy(dst, ap, n); return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyAtoHAsync_v2_ptsz, ASYNC_PRE(h, 1),
	   (void *dst, CUarray srcArray, size_t off, size_t n, CUstream h),
	   CUresult r = array_span(srcArray, off, n, &ap);
	   if (r) return r; memcpy(dst, ap, n); return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyDtoA_v2, SYNC_PRE(0), (CUarray dstArray, size_t off, CUdeviceptr src, size_t n),
	   CUresult r = array_span(dstArray, off, n, &ap);
	   if (r) return r; if (!sim_range_ok(src, n)) return CUDA_ERROR_INVALID_VALUE;
	   memcpy(ap, DP(src), n); return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyDtoA_v2_ptds, SYNC_PRE(1),
	   (CUarray dstArray, size_t off, CUdeviceptr src, size_t n),
	   CUresult r = array_span(dstArray, off, n, &ap);
	   if (r) return r; if (!sim_range_ok(src, n)) return CUDA_ERROR_INVALID_VALUE;
	   memcpy(ap, DP(src), n); return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyAtoD_v2, SYNC_PRE(0), (CUdeviceptr dst, CUarray srcArray, size_t off, size_t n),
	   CUresult r = array_span(srcArray, off, n, &ap);
	   if (r) return r; if (!sim_range_ok(dst, n)) return CUDA_ERROR_INVALID_VALUE;
	   memcpy(DP(dst), ap, n); return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyAtoD_v2_ptds, SYNC_PRE(1),
	   (CUdeviceptr dst, CUarray srcArray, size_t off, size_t n),
	   CUresult r = array_span(srcArray, off, n, &ap);
	   if (r) return r; if (!sim_range_ok(dst, n)) return CUDA_ERROR_INVALID_VALUE;
	   memcpy(DP(dst), ap, n); return CUDA_SUCCESS;)

static CUresult atoa(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n)
{
	char *d, *s;
	CUresult r = array_span(dst, doff, n, &d);
	if (!r)
		r = array_span(src, soff, n, &s);
	if (r)
		return r;
	memmove(d, s, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyAtoA_v2(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n)
{
	SYNC_PRE(0);
	return atoa(dst, doff, src, soff, n);
}

CUresult cuMemcpyAtoA_v2_ptds(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n)
{
	SYNC_PRE(1);
	return atoa(dst, doff, src, soff, n);
}

/* 2D/3D copies, every memory type. */
struct side {
	char *base;
	size_t pitch, height;
};

static CUresult resolve_side(CUmemorytype t, const void *host, CUdeviceptr dev, CUarray arr,
			     size_t pitch, size_t height, struct side *s)
{
	switch (t) {
	case CU_MEMORYTYPE_HOST:
		s->base = (char *)host;
		break;
	case CU_MEMORYTYPE_DEVICE:
	case CU_MEMORYTYPE_UNIFIED:
		s->base = (char *)DP(dev);
		break;
	case CU_MEMORYTYPE_ARRAY: {
		struct sim_array *a = sim_array_check(arr);
		if (!a)
			return CUDA_ERROR_INVALID_VALUE;
		s->base = a->data;
		s->pitch = a->row;
		s->height = a->d.Height ? a->d.Height : 1;
		return CUDA_SUCCESS;
	}
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!s->base)
		return CUDA_ERROR_INVALID_VALUE;
	s->pitch = pitch;
	s->height = height;
	return CUDA_SUCCESS;
}

static CUresult copy3d(const CUDA_MEMCPY3D *c)
{
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	struct side s, d;
	size_t depth = c->Depth ? c->Depth : 1, h = c->Height ? c->Height : 1;
	CUresult r = resolve_side(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray,
				  c->srcPitch ? c->srcPitch : c->WidthInBytes,
				  c->srcHeight ? c->srcHeight : h, &s);
	if (!r)
		r = resolve_side(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray,
				 c->dstPitch ? c->dstPitch : c->WidthInBytes,
				 c->dstHeight ? c->dstHeight : h, &d);
	if (r)
		return r;
	for (size_t z = 0; z < depth; z++)
		for (size_t y = 0; y < h; y++) {
			char *dp = d.base + ((c->dstZ + z) * d.height + c->dstY + y) * d.pitch +
				   c->dstXInBytes;
			const char *sp = s.base +
					 ((c->srcZ + z) * s.height + c->srcY + y) * s.pitch +
					 c->srcXInBytes;
			memmove(dp, sp, c->WidthInBytes);
		}
	return CUDA_SUCCESS;
}

static CUresult copy2d(const CUDA_MEMCPY2D *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	CUDA_MEMCPY3D c = {
	    .srcXInBytes = p->srcXInBytes,
	    .srcY = p->srcY,
	    .srcMemoryType = p->srcMemoryType,
	    .srcHost = p->srcHost,
	    .srcDevice = p->srcDevice,
	    .srcArray = p->srcArray,
	    .srcPitch = p->srcPitch,
	    .srcHeight = p->Height + p->srcY,
	    .dstXInBytes = p->dstXInBytes,
	    .dstY = p->dstY,
	    .dstMemoryType = p->dstMemoryType,
	    .dstHost = p->dstHost,
	    .dstDevice = p->dstDevice,
	    .dstArray = p->dstArray,
	    .dstPitch = p->dstPitch,
	    .dstHeight = p->Height + p->dstY,
	    .WidthInBytes = p->WidthInBytes,
	    .Height = p->Height,
	    .Depth = 1,
	};
	return copy3d(&c);
}

static CUresult copy3d_peer(const CUDA_MEMCPY3D_PEER *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	CUDA_MEMCPY3D c = {
	    .srcXInBytes = p->srcXInBytes,
	    .srcY = p->srcY,
	    .srcZ = p->srcZ,
	    .srcMemoryType = p->srcMemoryType,
	    .srcHost = p->srcHost,
	    .srcDevice = p->srcDevice,
	    .srcArray = p->srcArray,
	    .srcPitch = p->srcPitch,
	    .srcHeight = p->srcHeight,
	    .dstXInBytes = p->dstXInBytes,
	    .dstY = p->dstY,
	    .dstZ = p->dstZ,
	    .dstMemoryType = p->dstMemoryType,
	    .dstHost = p->dstHost,
	    .dstDevice = p->dstDevice,
	    .dstArray = p->dstArray,
	    .dstPitch = p->dstPitch,
	    .dstHeight = p->dstHeight,
	    .WidthInBytes = p->WidthInBytes,
	    .Height = p->Height,
	    .Depth = p->Depth,
	};
	return copy3d(&c);
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p)
{
	SYNC_PRE(0);
	return copy2d(p);
}
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p)
{
	SYNC_PRE(1);
	return copy2d(p);
}
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p)
{
	SYNC_PRE(0);
	return copy2d(p);
}
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p)
{
	SYNC_PRE(1);
	return copy2d(p);
}
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream h)
{
	ASYNC_PRE(h, 0);
	return copy2d(p);
}
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream h)
{
	ASYNC_PRE(h, 1);
	return copy2d(p);
}
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *p)
{
	SYNC_PRE(0);
	return copy3d(p);
}
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *p)
{
	SYNC_PRE(1);
	return copy3d(p);
}
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream h)
{
	ASYNC_PRE(h, 0);
	return copy3d(p);
}
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *p, CUstream h)
{
	ASYNC_PRE(h, 1);
	return copy3d(p);
}
CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *p)
{
	SYNC_PRE(0);
	return copy3d_peer(p);
}
CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *p)
{
	SYNC_PRE(1);
	return copy3d_peer(p);
}
CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *p, CUstream h)
{
	ASYNC_PRE(h, 0);
	return copy3d_peer(p);
}
CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *p, CUstream h)
{
	ASYNC_PRE(h, 1);
	return copy3d_peer(p);
}

/* Memsets: width elements of `size` bytes, height rows `pitch` apart. */
static CUresult set2d(CUdeviceptr dst, size_t pitch, unsigned v, size_t size, size_t w, size_t h)
{
	if (!w || !h)
		return CUDA_SUCCESS;
	if (h > 1 && pitch < w * size)
		return CUDA_ERROR_INVALID_VALUE;
	if (!sim_range_ok(dst, (h - 1) * pitch + w * size))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = sim_gpu_access(dst, (h - 1) * pitch + w * size, -1, 1);
	if (r != CUDA_SUCCESS)
		return r;
	for (size_t y = 0; y < h; y++) {
		char *row = (char *)DP(dst) + y * pitch;
		if (size == 1) {
			memset(row, (int)v, w);
		} else if (size == 2) {
			uint16_t x = (uint16_t)v;
			for (size_t i = 0; i < w; i++)
				memcpy(row + 2 * i, &x, 2);
		} else {
			uint32_t x = v;
			for (size_t i = 0; i < w; i++)
				memcpy(row + 4 * i, &x, 4);
		}
	}
	return CUDA_SUCCESS;
}

#define SET_FUNCS(bits, T, size)                                                                   \
	CUresult cuMemsetD##bits##_v2(CUdeviceptr d, T v, size_t n)                                \
	{                                                                                          \
		SYNC_PRE(0);                                                                       \
		return set2d(d, 0, v, size, n, 1);                                                 \
	}                                                                                          \
	CUresult cuMemsetD##bits##_v2_ptds(CUdeviceptr d, T v, size_t n)                           \
	{                                                                                          \
		SYNC_PRE(1);                                                                       \
		return set2d(d, 0, v, size, n, 1);                                                 \
	}                                                                                          \
	CUresult cuMemsetD##bits##Async(CUdeviceptr d, T v, size_t n, CUstream h)                  \
	{                                                                                          \
		ASYNC_PRE(h, 0);                                                                   \
		return set2d(d, 0, v, size, n, 1);                                                 \
	}                                                                                          \
	CUresult cuMemsetD##bits##Async_ptsz(CUdeviceptr d, T v, size_t n, CUstream h)             \
	{                                                                                          \
		ASYNC_PRE(h, 1);                                                                   \
		return set2d(d, 0, v, size, n, 1);                                                 \
	}                                                                                          \
	CUresult cuMemsetD2D##bits##_v2(CUdeviceptr d, size_t p, T v, size_t w, size_t h)          \
	{                                                                                          \
		SYNC_PRE(0);                                                                       \
		return set2d(d, p, v, size, w, h);                                                 \
	}                                                                                          \
	CUresult cuMemsetD2D##bits##_v2_ptds(CUdeviceptr d, size_t p, T v, size_t w, size_t h)     \
	{                                                                                          \
		SYNC_PRE(1);                                                                       \
		return set2d(d, p, v, size, w, h);                                                 \
	}                                                                                          \
	CUresult cuMemsetD2D##bits##Async(CUdeviceptr d, size_t p, T v, size_t w, size_t h,        \
					  CUstream s)                                              \
	{                                                                                          \
		ASYNC_PRE(s, 0);                                                                   \
		return set2d(d, p, v, size, w, h);                                                 \
	}                                                                                          \
	CUresult cuMemsetD2D##bits##Async_ptsz(CUdeviceptr d, size_t p, T v, size_t w, size_t h,   \
					       CUstream s)                                         \
	{                                                                                          \
		ASYNC_PRE(s, 1);                                                                   \
		return set2d(d, p, v, size, w, h);                                                 \
	}

SET_FUNCS(8, unsigned char, 1)
SET_FUNCS(16, unsigned short, 2)
SET_FUNCS(32, unsigned int, 4)
