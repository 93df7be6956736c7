/*
 * Stream capture: the scheduler client must never synchronize a context
 * while a capture is active (it would invalidate the capture), so it is told
 * when a capture begins and ends. A begin that fails is not reported; an end
 * is reported whenever the stream was capturing (the capture is over even
 * when EndCapture returns an error such as an invalidated capture).
 */
#include "client/internal.h"

#define BEGIN(member, call)                                                                        \
	do {                                                                                       \
		nvs_init();                                                                        \
		if (!nvs_real.member)                                                              \
			return nvs_unresolved(#member);                                            \
		CUresult r_ = nvs_real.member call;                                                \
		if (r_ == CUDA_SUCCESS && !nvs_cfg.disable) {                                      \
			NVS_DEBUG("%s: capture begins", #member);                                  \
			nvs_sched_capture_begin();                                                 \
		}                                                                                  \
		return r_;                                                                         \
	} while (0)

CUresult CUDAAPI nvs_wrap_cuStreamBeginCapture(CUstream hStream)
{
	BEGIN(abi_cuStreamBeginCapture, (hStream));
}

CUresult CUDAAPI nvs_wrap_cuStreamBeginCapture_ptsz(CUstream hStream)
{
	BEGIN(cuStreamBeginCapture_ptsz, (hStream));
}

CUresult CUDAAPI nvs_wrap_cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	BEGIN(cuStreamBeginCapture_v2, (hStream, mode));
}

CUresult CUDAAPI nvs_wrap_cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
	BEGIN(cuStreamBeginCapture_v2_ptsz, (hStream, mode));
}

CUresult CUDAAPI nvs_wrap_cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
						      const CUgraphNode *dependencies,
						      const CUgraphEdgeData *dependencyData,
						      size_t numDependencies,
						      CUstreamCaptureMode mode)
{
	BEGIN(cuStreamBeginCaptureToGraph,
	      (hStream, hGraph, dependencies, dependencyData, numDependencies, mode));
}

CUresult CUDAAPI nvs_wrap_cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
							   const CUgraphNode *dependencies,
							   const CUgraphEdgeData *dependencyData,
							   size_t numDependencies,
							   CUstreamCaptureMode mode)
{
	BEGIN(cuStreamBeginCaptureToGraph_ptsz,
	      (hStream, hGraph, dependencies, dependencyData, numDependencies, mode));
}

typedef CUresult (*end_fn)(CUstream, CUgraph *);
typedef CUresult (*is_capturing_fn)(CUstream, CUstreamCaptureStatus *);

static CUresult end_capture(end_fn real, is_capturing_fn is_cap, const char *name, CUstream s,
			    CUgraph *g)
{
	nvs_init();
	if (!real)
		return nvs_unresolved(name);
	if (nvs_cfg.disable)
		return real(s, g);
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	int was =
	    !is_cap || (is_cap(s, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE);
	CUresult r = real(s, g);
	if (was && (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
		    r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED)) {
		NVS_DEBUG("%s: capture ends (%d)", name, (int)r);
		nvs_sched_capture_end();
	}
	return r;
}

CUresult CUDAAPI nvs_wrap_cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	return end_capture(nvs_real.cuStreamEndCapture, nvs_real.cuStreamIsCapturing,
			   "cuStreamEndCapture", hStream, phGraph);
}

CUresult CUDAAPI nvs_wrap_cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
	return end_capture(nvs_real.cuStreamEndCapture_ptsz, nvs_real.cuStreamIsCapturing_ptsz,
			   "cuStreamEndCapture_ptsz", hStream, phGraph);
}
