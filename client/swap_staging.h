/*
 * Pinned host staging for the fast swap path (client/swap_staging.c;
 * docs/swap.md "Host staging").
 *
 * Copies between the GPU and pinned (page-locked) host memory run at the
 * link's speed; pinning itself is slow (~0.7 s per GiB on an H200 host), so
 * it happens lazily and off the critical path: a background thread
 * ("nvshare-stage") pins chunks of anonymous memory with cuMemHostRegister
 * once the scheduler first says memory is short, growing each GPU's staging
 * toward what a full swap-out of its fast-path memory needs
 * (nvs_stage_want), within NVSHARE_SWAP_STAGING_MAX for the whole process.
 * Chunks are kept and reused across hand-offs until the process exits.
 *
 * A swap-out takes staging with a bump allocator (nvs_stage_take) and the
 * swap-in that restores everything gives it all back (nvs_stage_reset): a
 * GPU's memory goes out at most once per hold and always comes back whole
 * before its gate opens, so no free list is needed. What does not fit in
 * the pinned chunks at swap time takes the slower paths (prefetch for
 * managed memory, a pageable buffer for VMM memory); the swap never waits
 * for pinning.
 *
 * If pinning fails (memlock limit, memory cgroup), one warning says so and
 * the staging stays as it is; nothing fails.
 */
#ifndef NVSHARE_CLIENT_SWAP_STAGING_H
#define NVSHARE_CLIENT_SWAP_STAGING_H

#include <cuda.h>
#include <stdint.h>

/* The engine's driver calls (pinning, copies, prefetches, synchronizes)
 * are "potentially unsafe" while a stream capture is under way: made from a
 * thread in the default (global) capture mode while the application
 * captures a CUDA graph in global mode (PyTorch's torch.cuda.graph) they
 * fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the
 * application's capture. None of them joins a capture (they use the
 * engine's own streams), so the engine's calls are made in relaxed mode:
 * nvs_capture_relax() switches the calling thread, nvs_capture_restore()
 * gives it back its mode (application threads, at the gate). */
CUstreamCaptureMode nvs_capture_relax(void);
void nvs_capture_restore(CUstreamCaptureMode m);

/* Asks for dev's staging to grow toward `bytes` in the background, pinning
 * in context ctx (any context of the process: the chunks are portable).
 * ctx NULL: the one given before; none yet: the target is only noted (the
 * allocations grew, but nothing says memory is short). */
void nvs_stage_want(int dev, uint64_t bytes, CUcontext ctx);

/* Takes `bytes` of dev's pinned staging: 0 and *off, or -1 (not enough
 * pinned yet, or none). */
int nvs_stage_take(int dev, uint64_t bytes, uint64_t *off);
/* Everything taken on dev came back: the whole staging is free again. */
void nvs_stage_reset(int dev);
/* Calls fn for each pinned piece of [off, off+bytes): its host address,
 * where it starts within the range, and its length. */
void nvs_stage_pieces(int dev, uint64_t off, uint64_t bytes,
		      void (*fn)(void *host, uint64_t at, uint64_t len, void *arg), void *arg);

struct nvs_stage_stats {
	uint64_t pinned; /* bytes pinned for dev */
	uint64_t used;	 /* bytes of it holding swapped-out data now */
	uint64_t limit;	 /* NVSHARE_SWAP_STAGING_MAX, for the whole process */
	int failed;	 /* pinning was refused once: no more growth */
};
void nvs_stage_stats(int dev, struct nvs_stage_stats *out);

/* In a forked child: the parent's chunks are not pinned here. */
void nvs_stage_atfork_child(void);

#endif
