/*
 * Simulated GPU: cuGetExportTable, the driver's private interfaces.
 *
 * libcudart does not bootstrap on the public API alone: after cuInit it asks
 * the driver for private function tables by UUID and fails (every runtime
 * call then returns the error) when one it needs is missing. Observed with
 * libcudart.so.13 (see README.md "What libcudart needs"; NVSHARE_SIM_LOG
 * shows every request and every call into these tables):
 *
 *  f8cff951-2146-8b4e-b9e2-fb469e7c0dd9  asked first, before cuInit. The
 *      runtime treats CUDA_ERROR_NOT_FOUND as "absent, carry on" and any
 *      other error as fatal, so unknown UUIDs answer NOT_FOUND.
 *  6bd5fb6c-5bf4-e74a-8987-d93912fd9df9  the runtime's interface: primary
 *      context retain and module loading from the fatbinaries it registers.
 *  a094798c-2e74-2e74-93f2-0800200c0a66  tool callback hooks (no tool here:
 *      no-ops, plus two scratch buffers the runtime writes into).
 *  42d85a81-23f6-cb47-8298-f6e78a3aecdc  tools TLS (no-op).
 *  c693336e-1121-df11-a8c3-68f355d89593  context-local storage: the runtime
 *      keeps its per-context state here (put/get/delete by context and key).
 *  263e8860-7cd2-6143-92f6-bbd5006dfa7e  context checks (always "fine").
 *  d4082055-bde6-704b-8d34-ba123c66e1f2  NOT PROVIDED, deliberately. The
 *      runtime calls its function with (13000..13002, unix time, out[2]) and
 *      verifies the 128-bit answer, a proprietary integrity/authenticity
 *      check; without a valid answer every runtime call fails with
 *      cudaErrorSoftwareValidityNotEstablished (103), and without the table
 *      with cudaErrorSymbolNotFound (500). The simulator does not
 *      imitate that check, so libcudart stops here: tests drive the fake
 *      driver API directly (t_cudart.sh records what the runtime does up to
 *      this point, including its ~440 cuGetProcAddress lookups).
 *
 * Layouts (slot meanings) are the de-facto ones that earlier public
 * reimplementations documented; the code is ours. Tables whose first word
 * is their size in bytes have it; the context-local storage table does not.
 * Slots we do not know are NULL, as the real layouts have holes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

static int trace(const char *what, int r)
{
	sim_log("export %s -> %d", what, r);
	return r;
}

/* ---- runtime interface ---- */

struct fatbin_wrapper {
	unsigned magic; /* 0x466243b1 */
	unsigned version;
	const void *data;
	const void *filename_or_fatbins;
};

static CUresult rt_module_from_wrapper(CUmodule *module, const struct fatbin_wrapper *w)
{
	if (!module || !w)
		return (CUresult)trace("rt.module_from_cubin", CUDA_ERROR_INVALID_VALUE);
	return (CUresult)trace("rt.module_from_cubin",
			       cuModuleLoadData(module, w->data ? w->data : w));
}

static CUresult rt_primary_ctx(CUcontext *pctx, CUdevice dev)
{
	return (CUresult)trace("rt.primary_ctx", cuDevicePrimaryCtxRetain(pctx, dev));
}

static CUresult rt_module_from_wrapper_ext1(CUmodule *module, const struct fatbin_wrapper *w,
					    void *a3, void *a4, unsigned a5)
{
	return rt_module_from_wrapper(module, w);
}

static void rt_slot7(void *arg)
{
	trace("rt.slot7", 0);
}

static CUresult rt_module_from_fatbin_ext2(const void *fatbin, CUmodule *module, void *a3, void *a4,
					   unsigned a5)
{
	if (!module || !fatbin)
		return (CUresult)trace("rt.module_from_fatbin", CUDA_ERROR_INVALID_VALUE);
	return (CUresult)trace("rt.module_from_fatbin", cuModuleLoadData(module, fatbin));
}

static CUresult rt_load_compilers(void)
{
	return (CUresult)trace("rt.load_compilers", CUDA_SUCCESS);
}

static const void *rt_table[13] = {
    (const void *)(uintptr_t)(13 * sizeof(void *)),
    (const void *)rt_module_from_wrapper,
    (const void *)rt_primary_ctx,
    NULL,
    NULL,
    NULL,
    (const void *)rt_module_from_wrapper_ext1,
    (const void *)rt_slot7,
    (const void *)rt_module_from_fatbin_ext2,
    NULL,
    NULL,
    NULL,
    (const void *)rt_load_compilers,
};

/* ---- tool hooks ---- */

static unsigned char hook_buf1[1024], hook_buf2[16];

static void hook_event(unsigned ev, void *data)
{
}

static void hook_buffer1(void **p, size_t *size)
{
	if (p)
		*p = hook_buf1;
	if (size)
		*size = sizeof(hook_buf1);
}

static void hook_span(void *a, void *b)
{
}

static void hook_buffer2(void **p, size_t *size)
{
	if (p)
		*p = hook_buf2;
	if (size)
		*size = 14; /* the size the runtime expects */
}

static const void *hooks_table[7] = {
    (const void *)(uintptr_t)(7 * sizeof(void *)),
    (const void *)hook_event,
    (const void *)hook_buffer1,
    NULL,
    (const void *)hook_span,
    NULL,
    (const void *)hook_buffer2,
};

static void tls_callback(void *record)
{
}

static const void *tools_tls_table[4] = {
    (const void *)(uintptr_t)(4 * sizeof(void *)),
    NULL,
    (const void *)tls_callback,
    NULL,
};

/* ---- context-local storage ---- */

struct cls_entry {
	void *ctx, *key, *value;
	struct cls_entry *next;
};
static struct cls_entry *cls_head;
static pthread_mutex_t cls_mu = PTHREAD_MUTEX_INITIALIZER;

static void *cls_ctx(void *ctx)
{
	return ctx ? ctx : (void *)sim_ctx_current();
}

static CUresult cls_put(void *ctx, void *key, void *value, void *dtor)
{
	ctx = cls_ctx(ctx);
	if (!ctx)
		return (CUresult)trace("cls.put", CUDA_ERROR_INVALID_CONTEXT);
	pthread_mutex_lock(&cls_mu);
	struct cls_entry *e;
	for (e = cls_head; e; e = e->next)
		if (e->ctx == ctx && e->key == key)
			break;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e) {
			pthread_mutex_unlock(&cls_mu);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		e->ctx = ctx;
		e->key = key;
		e->next = cls_head;
		cls_head = e;
	}
	e->value = value;
	pthread_mutex_unlock(&cls_mu);
	return (CUresult)trace("cls.put", CUDA_SUCCESS);
}

static CUresult cls_delete(void *ctx, void *key)
{
	ctx = cls_ctx(ctx);
	pthread_mutex_lock(&cls_mu);
	for (struct cls_entry **pe = &cls_head; *pe; pe = &(*pe)->next)
		if ((*pe)->ctx == ctx && (*pe)->key == key) {
			struct cls_entry *e = *pe;
			*pe = e->next;
			free(e);
			break;
		}
	pthread_mutex_unlock(&cls_mu);
	return (CUresult)trace("cls.delete", CUDA_SUCCESS);
}

static CUresult cls_get(void **value, void *ctx, void *key)
{
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	ctx = cls_ctx(ctx);
	if (!ctx)
		return (CUresult)trace("cls.get", CUDA_ERROR_INVALID_CONTEXT);
	CUresult r = CUDA_ERROR_NOT_FOUND;
	*value = NULL;
	pthread_mutex_lock(&cls_mu);
	for (struct cls_entry *e = cls_head; e; e = e->next)
		if (e->ctx == ctx && e->key == key) {
			*value = e->value;
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&cls_mu);
	return (CUresult)trace("cls.get", r);
}

static const void *cls_table[4] = {
    (const void *)cls_put,
    (const void *)cls_delete,
    (const void *)cls_get,
    NULL,
};

/* ---- context checks ---- */

static CUresult ctx_check(void *ctx, unsigned *result, const void **detail)
{
	if (result)
		*result = 0;
	return (CUresult)trace("ctxcheck.check", CUDA_SUCCESS);
}

static unsigned ctx_check_flags(void)
{
	return 0;
}

static const void *ctx_checks_table[4] = {
    (const void *)(uintptr_t)(4 * sizeof(void *)),
    NULL,
    (const void *)ctx_check,
    (const void *)ctx_check_flags,
};

/* ---- lookup ---- */

struct export_table {
	const char *name;
	unsigned char uuid[16];
	const void *table;
};

static const struct export_table tables[] = {
    {"cudart_interface",
     {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d,
      0xf9},
     rt_table},
    {"tools_callback_hooks",
     {0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a,
      0x66},
     hooks_table},
    {"tools_tls",
     {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec,
      0xdc},
     tools_tls_table},
    {"context_local_storage",
     {0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95,
      0x93},
     cls_table},
    {"context_checks",
     {0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa,
      0x7e},
     ctx_checks_table},
};

CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	if (!ppExportTable || !pExportTableId)
		return CUDA_ERROR_INVALID_VALUE;
	sim_state_init();
	char hex[33];
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char)pExportTableId->bytes[i]);
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		if (memcmp(tables[i].uuid, pExportTableId->bytes, 16) == 0) {
			*ppExportTable = tables[i].table;
			sim_log("call cuGetExportTable %s (%s) -> 0", hex, tables[i].name);
			return CUDA_SUCCESS;
		}
	*ppExportTable = NULL;
	sim_log("call cuGetExportTable %s -> %d", hex, CUDA_ERROR_NOT_FOUND);
	return CUDA_ERROR_NOT_FOUND;
}
