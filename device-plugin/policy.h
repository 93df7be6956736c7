/*
 * Virtual device IDs and the allocation policy of nvshare-device-plugin.
 * Pure functions: no I/O, no globals, no protobuf; unit-tested in
 * tests/k8s/t_dp_policy.c.
 *
 * Two resources, both with IDs "<UUID>__<k>" (the kubelet keeps device IDs
 * per resource, so the two ranges do not clash):
 *  - nvshare.com/gpu: each physical GPU is N slices, k = 1..N. A container
 *    gets at most one slice of any GPU: two slices of the same GPU would
 *    give it nothing more (nvshare time-slices whole GPUs) and would only
 *    take a slot from another Pod.
 *  - nvshare.com/gpu-memory: each GPU is M memory units, k = 1..M. A
 *    container's units belong on one GPU (its memory is on one GPU).
 */
#ifndef NVSHARE_DP_POLICY_H
#define NVSHARE_DP_POLICY_H

#include <stddef.h>

/* The kubelet accepts device IDs of at most 63 characters. */
#define NVS_DP_ID_MAX 64
#define NVS_DP_ID_SEP "__"

enum nvs_dp_policy {
	NVS_DP_SPREAD = 0, /* prefer the GPU with the most free slices */
	NVS_DP_PACK = 1,   /* prefer the GPU with the fewest free slices */
};

/* "spread" / "pack" (also "distributed" / "packed", NVIDIA's words).
 * Returns 0, or -1 leaving *out untouched. */
int nvs_dp_policy_parse(const char *s, enum nvs_dp_policy *out);
const char *nvs_dp_policy_name(enum nvs_dp_policy p);

/* Writes "<uuid>__<slice>" into buf. Returns -1 if it does not fit in cap or
 * in NVS_DP_ID_MAX - 1 characters. */
int nvs_dp_format_id(char *buf, size_t cap, const char *uuid, unsigned slice);

/* Splits a virtual device ID at its last "__" into the GPU UUID (copied into
 * uuid, cap >= NVS_DP_ID_MAX) and the slice number (1..99999). Returns 0, or
 * -1 for an ID that is not of that form. */
int nvs_dp_parse_id(const char *id, char *uuid, size_t cap, unsigned *slice);

/*
 * GetPreferredAllocation for one container. Chooses `size` IDs: first every
 * ID of must_include (once each), then one slice per GPU not yet chosen,
 * GPU by GPU as the policy says (spread: most free slices in `avail` first;
 * pack: fewest first; ties by UUID, then lowest slice number). When there
 * are fewer distinct GPUs than `size`, it tops up with further slices in the
 * same order (Allocate will then refuse the request with a clear message,
 * but the answer stays well-formed). IDs that do not parse are never chosen
 * unless listed in must_include.
 *
 * out receives pointers into avail / must_include (no copies); its capacity
 * must be >= size. Returns how many were written (< size only when avail has
 * too few IDs), or -1 on bad input (NULL arrays with non-zero counts).
 */
int nvs_dp_prefer(enum nvs_dp_policy policy, const char *const *avail, size_t n_avail,
		  const char *const *must_include, size_t n_must, size_t size, const char **out);

/*
 * Allocate's check of one container request: every ID must parse, and no
 * two may name the same GPU. On success writes the distinct GPU UUIDs, in
 * request order, into uuids[0..ret) (cap_uuids entries of NVS_DP_ID_MAX
 * bytes) and returns their count. On failure writes a message for the user
 * into err and returns -1.
 */
int nvs_dp_check_request(const char *const *ids, size_t n_ids, char (*uuids)[NVS_DP_ID_MAX],
			 size_t cap_uuids, char *err, size_t errcap);

/*
 * GetPreferredAllocation for memory units: `size` IDs on ONE GPU. The GPU
 * is the one holding most of must_include (whose IDs come first), else the
 * one the policy picks among the GPUs with at least `size` units in avail
 * (spread: the most free units; pack: the fewest, i.e. the best fit; ties
 * by UUID), lowest unit numbers first. When no GPU has enough units, the
 * GPU with the most is filled and the rest taken from the next ones in the
 * same order (Allocate then resolves the split, see nvs_dp_units_gpu).
 * Same conventions as nvs_dp_prefer.
 */
int nvs_dp_prefer_units(enum nvs_dp_policy policy, const char *const *avail, size_t n_avail,
			const char *const *must_include, size_t n_must, size_t size,
			const char **out);

/*
 * Allocate's check of a memory-unit request: every ID must parse. Writes the
 * UUID of the GPU holding most of the units (ties: the one named first) into
 * uuid and how many of the units it holds into *on_gpu; returns the number
 * of distinct GPUs named (> 1: the request spans GPUs and the container is
 * given the majority GPU: docs/kubernetes.md), or -1 with a message in err.
 */
int nvs_dp_units_gpu(const char *const *ids, size_t n_ids, char uuid[NVS_DP_ID_MAX], size_t *on_gpu,
		     char *err, size_t errcap);

#endif
