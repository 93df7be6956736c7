/*
 * The name -> wrapper map generated from client/entry_points.def, with the
 * compile-time type checks, and the helpers the substitution paths use.
 */
#include "client/internal.h"

#include <stdlib.h>
#include <string.h>

/* Every wrapper has exactly its table typedef's type. */
#define NVS_WRAP(n, t, f)                                                                          \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&nvs_wrap_##n), t),                 \
		       "wrapper nvs_wrap_" #n " does not match " #t);
#define NVS_WRAP_R NVS_WRAP
#include "client/entry_points.def"
#undef NVS_WRAP
#undef NVS_WRAP_R

/* A plain NVS_WRAP name must not be a cuda.h macro (it would expand where
 * used bare, e.g. as a struct member); those belong in NVS_WRAP_R. */
#define NVS_XSTR_(x) #x
#define NVS_XSTR(x) NVS_XSTR_(x)
#define NVS_WRAP(n, t, f)                                                                          \
	_Static_assert(sizeof(NVS_XSTR(n)) == sizeof(#n), #n " is a cuda.h macro: use "            \
							     "NVS_WRAP_R");
#define NVS_USE(n, t) _Static_assert(sizeof(NVS_XSTR(n)) == sizeof(#n), #n " is a cuda.h macro");
#include "client/entry_points.def"
#undef NVS_WRAP
#undef NVS_USE

struct nvs_real_table nvs_real;

const struct nvs_entry nvs_entries[] = {
#define NVS_WRAP(n, t, f) {#n, (void *)&nvs_wrap_##n, (void **)&nvs_real.n, NVS_FAM_##f},
#define NVS_WRAP_R(n, t, f) {#n, (void *)&nvs_wrap_##n, (void **)&nvs_real.abi_##n, NVS_FAM_##f},
#define NVS_USE(n, t) {#n, NULL, (void **)&nvs_real.n, NVS_FAM_USE},
#define NVS_USE_NVML(n, t) {#n, NULL, (void **)&nvs_real.n, NVS_FAM_USE_NVML},
#include "client/entry_points.def"
#undef NVS_WRAP
#undef NVS_WRAP_R
#undef NVS_USE
#undef NVS_USE_NVML
};
const unsigned nvs_entries_count = sizeof nvs_entries / sizeof nvs_entries[0];

/* Sorted index of the wrapped entries, built by a constructor. Until it
 * exists (a dlsym from an earlier library's constructor) lookups scan. */
static const struct nvs_entry *sorted[sizeof nvs_entries / sizeof nvs_entries[0]];
static unsigned sorted_n;
static atomic_int sorted_ready;

static int cmp_entry(const void *a, const void *b)
{
	return strcmp((*(const struct nvs_entry *const *)a)->name,
		      (*(const struct nvs_entry *const *)b)->name);
}

__attribute__((constructor(101))) static void build_index(void)
{
	unsigned n = 0;
	for (unsigned i = 0; i < nvs_entries_count; i++)
		if (nvs_entries[i].wrapper)
			sorted[n++] = &nvs_entries[i];
	qsort(sorted, n, sizeof sorted[0], cmp_entry);
	sorted_n = n;
	atomic_store_explicit(&sorted_ready, 1, memory_order_release);
}

NVS_NO_SANITIZE const struct nvs_entry *nvs_table_find(const char *name)
{
	if (!name || (name[0] != 'c' && name[0] != 'n'))
		return NULL;
	if (atomic_load_explicit(&sorted_ready, memory_order_acquire)) {
		unsigned lo = 0, hi = sorted_n;
		while (lo < hi) {
			unsigned mid = (lo + hi) / 2;
			int c = strcmp(name, sorted[mid]->name);
			if (!c)
				return sorted[mid];
			if (c < 0)
				hi = mid;
			else
				lo = mid + 1;
		}
		return NULL;
	}
	for (unsigned i = 0; i < nvs_entries_count; i++)
		if (nvs_entries[i].wrapper && !strcmp(name, nvs_entries[i].name))
			return &nvs_entries[i];
	return NULL;
}

/* Length of the base name: without _ptsz/_ptds, then without _v<digits>. */
static size_t base_len(const char *s)
{
	size_t n = strlen(s);
	if (n > 5 && (!strcmp(s + n - 5, "_ptsz") || !strcmp(s + n - 5, "_ptds")))
		n -= 5;
	size_t i = n;
	while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9')
		i--;
	if (i < n && i >= 2 && s[i - 1] == 'v' && s[i - 2] == '_')
		n = i - 2;
	return n;
}

static int guarded(unsigned char fam)
{
	switch (fam) {
	case NVS_FAM_ALLOC:
	case NVS_FAM_POOL:
	case NVS_FAM_VMM:
	case NVS_FAM_ARRAY:
	case NVS_FAM_INFO:
	case NVS_FAM_LAUNCH:
	case NVS_FAM_COPY:
	case NVS_FAM_LEGACY:
		return 1;
	default:
		return 0;
	}
}

int nvs_table_is_unknown_variant_of_guarded(const char *name)
{
	if (!name || nvs_table_find(name))
		return 0;
	size_t bl = base_len(name);
	for (unsigned i = 0; i < nvs_entries_count; i++) {
		const struct nvs_entry *e = &nvs_entries[i];
		if (!e->wrapper || !guarded(e->family))
			continue;
		if (base_len(e->name) == bl && !strncmp(e->name, name, bl))
			return 1;
	}
	return 0;
}
